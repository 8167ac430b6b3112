package java.lang;

/**
 * The probe for the test that instruments java.base itself. It lives in
 * java.base (patched in with --patch-module) so that every JDK class can
 * see it, and does nothing but count: it runs while the VM is still
 * bootstrapping, before anything it could log to exists.
 */
public final class VmviewProbe {
    public static long calls;
    public static long monitors;

    private VmviewProbe() {}

    public static void enter(int id) { calls++; }
    public static void argBoolean(boolean v) {}
    public static void argByte(byte v) {}
    public static void argChar(char v) {}
    public static void argShort(short v) {}
    public static void argInt(int v) {}
    public static void argLong(long v) {}
    public static void argFloat(float v) {}
    public static void argDouble(double v) {}
    public static void argObject(Object v) {}
    public static void exit(int id) {}
    public static void exitBoolean(boolean v, int id) {}
    public static void exitByte(byte v, int id) {}
    public static void exitChar(char v, int id) {}
    public static void exitShort(short v, int id) {}
    public static void exitInt(int v, int id) {}
    public static void exitLong(long v, int id) {}
    public static void exitFloat(float v, int id) {}
    public static void exitDouble(double v, int id) {}
    public static void exitObject(Object v, int id) {}
    public static void exitThrow(Throwable t, int id) {}
    public static void monitorEnter(Object o) { monitors++; }
    public static void monitorExit(Object o) { monitors--; }
    public static void methodMonitorEnter(Object o) { monitors++; }
    public static void methodMonitorExit() { monitors--; }
}
