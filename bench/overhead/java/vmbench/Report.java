package vmbench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Daily totals, the best sellers, and a JSON-like rendering written recursively. */
final class Report {
    final Map<String, Integer> revenueBySku = new HashMap<>();
    final Map<String, Integer> ordersByCustomer = new HashMap<>();

    void record(Order o) {
        for (Order.Line l : o.lines) {
            Integer before = revenueBySku.get(l.product.sku);
            revenueBySku.put(l.product.sku, before == null ? l.amount : before + l.amount);
            l.product.category.sold += l.quantity;
        }
        Integer n = ordersByCustomer.get(o.customer);
        ordersByCustomer.put(o.customer, n == null ? 1 : n + 1);
    }

    /** The n SKUs with the most revenue, ties by SKU (a sort of packed keys: no comparator calls). */
    List<String> best(int n) {
        List<String> skus = new ArrayList<>(revenueBySku.keySet());
        Collections.sort(skus);
        long[] keys = new long[skus.size()];
        for (int i = 0; i < keys.length; i++) {
            keys[i] = ((long) -revenueBySku.get(skus.get(i)) << 20) | i;
        }
        Arrays.sort(keys);
        List<String> best = new ArrayList<>();
        for (int i = 0; i < Math.min(n, keys.length); i++) {
            best.add(skus.get((int) (keys[i] & 0xFFFFF)));
        }
        return best;
    }

    static void write(Object value, StringBuilder out) {
        if (value instanceof Map<?, ?> m) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                writeString(String.valueOf(e.getKey()), out);
                out.append(':');
                write(e.getValue(), out);
            }
            out.append('}');
        } else if (value instanceof List<?> l) {
            out.append('[');
            for (int i = 0; i < l.size(); i++) {
                if (i > 0) {
                    out.append(',');
                }
                write(l.get(i), out);
            }
            out.append(']');
        } else if (value instanceof String s) {
            writeString(s, out);
        } else {
            out.append(value);
        }
    }

    static void writeString(String s, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\');
            }
            out.append(c);
        }
        out.append('"');
    }
}
