import java.lang.reflect.Method;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Virtual threads that switch as often as they can: THREADS virtual threads
 * each call Thread.yield() YIELDS times (one unmount and one mount each),
 * ROUNDS times; prints the best round's wall ns per yield. For
 * vthread-switch.sh; JDK 21+ (the API is reached by reflection so that JDK 17's
 * javac compiles it).
 */
public class VirtualYield {
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int threads = Integer.parseInt(args[0]);
        int yields = Integer.parseInt(args[1]);
        int rounds = Integer.parseInt(args[2]);
        Method perTask = java.util.concurrent.Executors.class.getMethod("newVirtualThreadPerTaskExecutor");
        long best = Long.MAX_VALUE;
        for (int r = 0; r < rounds; r++) {
            ExecutorService pool = (ExecutorService) perTask.invoke(null);
            long t0 = System.nanoTime();
            for (int t = 0; t < threads; t++) {
                pool.execute(() -> spin(yields));
            }
            pool.shutdown();
            pool.awaitTermination(10, TimeUnit.MINUTES);
            best = Math.min(best, System.nanoTime() - t0);
        }
        System.out.printf("%.1f%n", (double) best / ((long) threads * yields));
    }

    static void spin(int yields) {
        long s = 0;
        for (int i = 0; i < yields; i++) {
            Thread.yield();
            s += i;
        }
        sink = s;
    }
}
