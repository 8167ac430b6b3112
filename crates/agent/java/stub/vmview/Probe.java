package vmview;

/** Compile-time stand-in for the probe class the agent generates. */
final class Probe {
    static native void enter(int id);

    static native void exit(int id);
}
