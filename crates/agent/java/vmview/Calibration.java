package vmview;

/**
 * The calibration loop of {@code mode=bci}: real probe calls from Java, as
 * instrumented code makes them, so that the cost the agent writes into the
 * trace (CALIBRATION) includes the JNI transitions into the probe and back,
 * not only the agent's own work.
 *
 * <p>Compiled by {@code crates/agent/java/build.sh} into
 * {@code crates/agent/src/calibration.class}, which the agent defines in the
 * bootstrap loader next to {@code vmview/Probe} and calls once at start-up.
 * The events of these calls carry a method id no trace method has; the
 * writer drops them.
 */
public final class Calibration {
    private Calibration() {}

    /** {@code n} calls of an empty traced method, inside one traced call. */
    public static void traced(int n, int id) {
        Probe.enter(id);
        for (int i = 0; i < n; i++) {
            Probe.enter(id);
            Probe.exit(id);
        }
        Probe.exit(id);
    }

    /** The same loop with calls of an empty untraced method instead. */
    public static void untraced(int n, int id) {
        nothing(id);
        for (int i = 0; i < n; i++) {
            nothing(id);
            nothing(id);
        }
        nothing(id);
    }

    private static void nothing(int id) {}
}
