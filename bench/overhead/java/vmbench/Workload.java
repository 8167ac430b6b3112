package vmbench;

import java.util.Random;

/**
 * The overhead benchmark's bundled workload: a day of a small shop, repeated.
 *
 * It is method-heavy on purpose, with the mix of real application code:
 * small objects (products, orders, line items), collections (ArrayList,
 * HashMap, sorting with comparators), string building (SKUs, receipts, a
 * JSON-like report) and recursion (a category tree, the report writer).
 * Traced methods do a little work each, a few hundred nanoseconds on average.
 * Random numbers come from java.util.Random, whose algorithm the JDK
 * specifies, so the result is deterministic: stdout is one checksum line that must be the
 * same under every tracer; the time of the work itself goes to stderr.
 */
public final class Workload {
    public static void main(String[] args) {
        int days = args.length > 0 ? Integer.parseInt(args[0]) : 60;
        long t0 = System.nanoTime();
        Catalog catalog = Catalog.build(new Random(42), 400);
        long checksum = 0;
        for (int day = 0; day < days; day++) {
            checksum = checksum * 31 + Shop.runDay(catalog, new Random(day), day);
        }
        long t1 = System.nanoTime();
        System.out.println("checksum=" + Long.toHexString(checksum));
        System.err.println("vmbench: work_ns=" + (t1 - t0));
    }
}
