package vmbench;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/** Products by index and by SKU. */
final class Catalog {
    final List<Product> products = new ArrayList<>();
    final Map<String, Product> bySku = new HashMap<>();
    final Category root;

    private Catalog(Category root) {
        this.root = root;
    }

    static Catalog build(Random rng, int size) {
        Catalog c = new Catalog(Category.tree("all", 3, 4));
        for (int i = 0; i < size; i++) {
            Product p = new Product(sku(i), 99 + rng.nextInt(9900), c.root.leaf(i));
            c.products.add(p);
            c.bySku.put(p.sku, p);
        }
        return c;
    }

    static String sku(int i) {
        StringBuilder sb = new StringBuilder("SKU-");
        String digits = Integer.toString(i, 36).toUpperCase();
        for (int k = digits.length(); k < 5; k++) {
            sb.append('0');
        }
        return sb.append(digits).toString();
    }

    Product find(String sku) {
        return bySku.get(sku);
    }
}
