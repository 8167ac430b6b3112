package soak;

/** Called from the Rhino script: a known number of calls to count. */
public class JsHost {
    private static long ticks;

    public static synchronized long tick(long n) {
        ticks += n;
        return ticks;
    }
}
