package vmview;

import java.io.FileOutputStream;
import java.io.IOException;
import java.lang.reflect.Array;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The probe used by vmview-classfile's tests: implements the calling
 * protocol documented in the crate's `probe` module and logs one line per
 * hook call, "thread TAB kind TAB id TAB details", to the file named by the system
 * property vmview.probe.log (written at shutdown), or to stderr.
 *
 * It never calls methods of the values it is given (no toString on user
 * objects), so logging cannot re-enter instrumented code.
 */
public final class Probe {
    private static final StringBuilder LOG = new StringBuilder();
    private static final ThreadLocal<List<String>> PENDING = ThreadLocal.withInitial(ArrayList::new);
    private static final String FILE = System.getProperty("vmview.probe.log");

    static {
        if (FILE != null) {
            Runtime.getRuntime().addShutdownHook(new Thread(Probe::flush));
        }
    }

    private Probe() {}

    private static void flush() {
        synchronized (LOG) {
            try (FileOutputStream out = new FileOutputStream(FILE)) {
                out.write(LOG.toString().getBytes(StandardCharsets.UTF_8));
            } catch (IOException e) {
                System.err.println("probe: cannot write " + FILE + ": " + e);
            }
        }
    }

    private static void log(String kind, int id, String details) {
        String line = Thread.currentThread().getName() + "\t" + kind + "\t" + id + "\t" + details + "\n";
        if (FILE == null) {
            System.err.print(line);
            return;
        }
        synchronized (LOG) {
            LOG.append(line);
        }
    }

    private static String show(Object o) {
        if (o == null) return "null";
        if (o instanceof String) return "\"" + escape((String) o) + "\"";
        if (o instanceof Character) return "'" + escape(o.toString()) + "'";
        Class<?> c = o.getClass();
        if (c == Integer.class || c == Long.class || c == Short.class || c == Byte.class
                || c == Double.class || c == Float.class || c == Boolean.class) {
            return String.valueOf(o);
        }
        if (c.isArray()) return c.getComponentType().getName() + "[" + Array.getLength(o) + "]";
        return c.getName();
    }

    /** Keeps each log entry on one line. */
    private static String escape(String s) {
        return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t");
    }

    private static void arg(String shown) {
        PENDING.get().add(shown);
    }

    public static void argBoolean(boolean v) { arg(String.valueOf(v)); }
    public static void argByte(byte v) { arg(v + "b"); }
    public static void argChar(char v) { arg("'" + escape(String.valueOf(v)) + "'"); }
    public static void argShort(short v) { arg(v + "s"); }
    public static void argInt(int v) { arg(String.valueOf(v)); }
    public static void argLong(long v) { arg(v + "L"); }
    public static void argFloat(float v) { arg(v + "f"); }
    public static void argDouble(double v) { arg(v + "d"); }
    public static void argObject(Object v) { arg(show(v)); }

    public static void enter(int id) {
        List<String> args = PENDING.get();
        log("ENTER", id, args.toString());
        args.clear();
    }

    /** A value of enter1/enter2, shown as the arg* hook of its kind shows it. */
    private static String prim(long v, int kind) {
        switch (kind) {
            case 1: return String.valueOf(v != 0);
            case 2: return v + "b";
            case 3: return "'" + escape(String.valueOf((char) v)) + "'";
            case 4: return v + "s";
            case 5: return String.valueOf(v);
            case 6: return v + "L";
            default: return "?" + kind + ":" + v;
        }
    }

    public static void enter1(long a, int kinds, int id) {
        arg(prim(a, kinds & 0xff));
        enter(id);
    }

    public static void enter2(long a, long b, int kinds, int id) {
        arg(prim(a, kinds & 0xff));
        arg(prim(b, (kinds >> 8) & 0xff));
        enter(id);
    }

    public static void exit(int id) { log("EXIT", id, ""); }
    public static void exitBoolean(boolean v, int id) { log("EXIT", id, String.valueOf(v)); }
    public static void exitByte(byte v, int id) { log("EXIT", id, v + "b"); }
    public static void exitChar(char v, int id) { log("EXIT", id, "'" + escape(String.valueOf(v)) + "'"); }
    public static void exitShort(short v, int id) { log("EXIT", id, v + "s"); }
    public static void exitInt(int v, int id) { log("EXIT", id, String.valueOf(v)); }
    public static void exitLong(long v, int id) { log("EXIT", id, v + "L"); }
    public static void exitFloat(float v, int id) { log("EXIT", id, v + "f"); }
    public static void exitDouble(double v, int id) { log("EXIT", id, v + "d"); }
    public static void exitObject(Object v, int id) { log("EXIT", id, show(v)); }

    public static void exitThrow(Throwable t, int id) { log("THROW", id, t.getClass().getName()); }

    private static String monitor(Object o) {
        return o instanceof Class ? "class " + ((Class<?>) o).getName() : o.getClass().getName();
    }

    public static void monitorEnter(Object o) { log("MONITOR_ENTER", -1, monitor(o)); }
    public static void monitorExit(Object o) { log("MONITOR_EXIT", -1, monitor(o)); }
    public static void methodMonitorEnter(Object o) { log("METHOD_MONITOR_ENTER", -1, monitor(o)); }
    public static void methodMonitorExit() { log("METHOD_MONITOR_EXIT", -1, ""); }
}
