import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/** Calls one small method N times (K rounds of arithmetic inside it) and
 * prints the calling thread's CPU time and the wall time per call, for
 * call-cost.sh to compare untraced and traced runs. The last of three
 * rounds is reported, after the JIT has compiled the loop. */
public class CallCost {
    static long step(long x, int k) {
        for (int j = 0; j < k; j++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
            x ^= x >>> 29;
        }
        return x;
    }

    static long sink;

    /** The String-argument shape: one String in, nothing out. */
    static void take(String s, int k) {
        long x = s.length();
        for (int j = 0; j < k; j++) {
            x = x * 6364136223846793005L + 1442695040888963407L;
        }
        sink += x;
    }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        int k = Integer.parseInt(args[1]);
        // Third argument "string": call take(String, int) instead of step.
        boolean string = args.length > 2 && args[2].equals("string");
        String[] words = {"alpha", "beta", "gamma", "delta"};
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        long sum = 0;
        for (int round = 0; round < 3; round++) {
            long cpu0 = mx.getCurrentThreadCpuTime();
            long wall0 = System.nanoTime();
            if (string) {
                for (int i = 0; i < n; i++) {
                    take(words[i & 3], k);
                }
            } else {
                for (int i = 0; i < n; i++) {
                    sum = step(sum, k) + i;
                }
            }
            long wall1 = System.nanoTime();
            long cpu1 = mx.getCurrentThreadCpuTime();
            if (round == 2) {
                System.out.printf("%.1f %.1f%n", (cpu1 - cpu0) / (double) n, (wall1 - wall0) / (double) n);
            }
        }
        if (sum == 42) {
            System.out.println("unlikely");
        }
    }
}
