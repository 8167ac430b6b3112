package vmbench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/** One day: customers place orders, the shop prices and reports them. */
final class Shop {
    private static final String[] REGIONS = {"north", "south", "east", "west"};

    private Shop() {}

    static long runDay(Catalog catalog, Random rng, int day) {
        Report report = new Report();
        long sum = 0;
        for (int i = 0; i < 1500; i++) {
            Order o = placeOrder(catalog, rng, day * 10_000 + i);
            int total = o.total();
            sum += total + Money.tax(total, REGIONS[rng.nextInt(REGIONS.length)]);
            if (i % 10 == 0) {
                sum += o.receipt().length();
            }
            report.record(o);
        }
        Map<String, Object> doc = new LinkedHashMap<>();
        doc.put("day", day);
        List<Object> best = new ArrayList<>();
        for (String sku : report.best(20)) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("sku", sku);
            row.put("revenue", Money.format(report.revenueBySku.get(sku)));
            best.add(row);
        }
        doc.put("best", best);
        doc.put("customers", report.ordersByCustomer.size());
        doc.put("sold", catalog.root.totalSold());
        doc.put("depth", catalog.root.depth());
        StringBuilder json = new StringBuilder();
        Report.write(doc, json);
        return sum * 7 + json.toString().hashCode();
    }

    static Order placeOrder(Catalog catalog, Random rng, int id) {
        Order o = new Order(id, customer(rng.nextInt(300)));
        int lines = 1 + rng.nextInt(5);
        for (int k = 0; k < lines; k++) {
            String sku = Catalog.sku(rng.nextInt(catalog.products.size()));
            o.add(catalog.find(sku), 1 + rng.nextInt(12));
        }
        return o;
    }

    static String customer(int n) {
        return "customer-" + n;
    }
}
