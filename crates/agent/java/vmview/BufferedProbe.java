package vmview;

/**
 * The probe class of {@code mode=bci,args=off}: records calls and returns
 * in a per-thread {@code long[]} without leaving Java, and hands a full
 * buffer to the agent in one native call.
 *
 * <p>Compiled by {@code crates/agent/java/build.sh} into
 * {@code crates/agent/src/capture/probe-buffered.class}, which the agent
 * defines in the bootstrap loader; the natives are bound with
 * RegisterNatives. The methods and descriptors are those of
 * {@code vmview_classfile::probe::ALL}, which the rewritten classes call (a
 * unit test checks that they agree).
 *
 * <p>Buffer layout: {@code b[0]} the next free index, {@code b[1]} how many
 * traced calls of this thread are open, {@code b[2]} when it was last
 * handed over, then records of two longs: the {@code System.nanoTime()}
 * and {@code kind << 32 | method id}. A buffer is handed over when full
 * and at the first record 10 ms after the last hand-over, so a busy
 * thread's calls reach the trace file as soon as other events do. A thread's
 * outermost traced call and its return go through the agent directly
 * (which then flushes the buffer first): so a thread outside traced code
 * has an empty buffer, and the agent takes the call-stack depth there.
 * The agent flushes a thread's buffer, too, before any event it records
 * for that thread from a JVMTI callback, so the thread's events keep their
 * order.
 */
public final class BufferedProbe {
    private static final ThreadLocal<long[]> BUFFER = new ThreadLocal<>();
    /** Three header slots and 2048 records. */
    private static final int SIZE = 3 + 2 * 2048;
    /** At most this long between hand-overs of a busy thread's buffer. */
    private static final long HAND_OVER_NS = 10_000_000L;
    private static final long CALL = 0L;
    private static final long RETURN_VOID = 1L << 32;
    private static final long RETURN_VALUE = 2L << 32;

    private BufferedProbe() {}

    private static long[] buffer() {
        long[] b = BUFFER.get();
        if (b == null) {
            b = new long[SIZE];
            b[0] = 3;
            b[2] = System.nanoTime();
            BUFFER.set(b);
        }
        return b;
    }

    private static void record(long[] b, long what) {
        int p = (int) b[0];
        long now = System.nanoTime();
        b[p] = now;
        b[p + 1] = what;
        p += 2;
        b[0] = p;
        if (p >= SIZE || now - b[2] > HAND_OVER_NS) {
            b[2] = now;
            flush(b);
        }
    }

    public static void enter(int id) {
        long[] b = BUFFER.get();
        if (b == null || b[1] <= 0) {
            b = buffer();
            enterOutermost(b, id);
            b[1] = 1;
            return;
        }
        b[1]++;
        record(b, CALL | (id & 0xFFFFFFFFL));
    }

    private static void leave(int id, long kind) {
        long[] b = BUFFER.get();
        if (b == null || b[1] <= 1) {
            b = buffer();
            exitOutermost(b, id, kind == RETURN_VALUE);
            b[1] = 0;
            return;
        }
        b[1]--;
        record(b, kind | (id & 0xFFFFFFFFL));
    }

    public static void exit(int id) { leave(id, RETURN_VOID); }
    public static void exitBoolean(boolean v, int id) { leave(id, RETURN_VALUE); }
    public static void exitByte(byte v, int id) { leave(id, RETURN_VALUE); }
    public static void exitChar(char v, int id) { leave(id, RETURN_VALUE); }
    public static void exitShort(short v, int id) { leave(id, RETURN_VALUE); }
    public static void exitInt(int v, int id) { leave(id, RETURN_VALUE); }
    public static void exitLong(long v, int id) { leave(id, RETURN_VALUE); }
    public static void exitFloat(float v, int id) { leave(id, RETURN_VALUE); }
    public static void exitDouble(double v, int id) { leave(id, RETURN_VALUE); }
    public static void exitObject(Object v, int id) { leave(id, RETURN_VALUE); }

    public static void exitThrow(Throwable t, int id) {
        long[] b = buffer();
        exitThrown(b, t, id);
        b[1] = b[1] > 0 ? b[1] - 1 : 0;
    }

    // Argument capture is off: instrumented code never calls these.
    public static void argBoolean(boolean v) {}
    public static void argByte(byte v) {}
    public static void argChar(char v) {}
    public static void argShort(short v) {}
    public static void argInt(int v) {}
    public static void argLong(long v) {}
    public static void argFloat(float v) {}
    public static void argDouble(double v) {}
    public static void argObject(Object v) {}

    /** Records the buffered records, then empties the buffer. */
    private static native void flush(long[] b);
    /** Flushes, takes the depth, records the CALL of {@code id}. */
    private static native void enterOutermost(long[] b, int id);
    /** Flushes, records the RETURN of {@code id}. */
    private static native void exitOutermost(long[] b, int id, boolean value);
    /** Flushes, records the RETURN of {@code id} unwound by {@code t}. */
    private static native void exitThrown(long[] b, Throwable t, int id);
}
