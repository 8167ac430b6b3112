package vmbench;

import java.util.ArrayList;
import java.util.List;

/** A node of the category tree; most questions about it are recursive. */
final class Category {
    final String name;
    final List<Category> children = new ArrayList<>();
    int sold;

    Category(String name) {
        this.name = name;
    }

    static Category tree(String name, int depth, int fanout) {
        Category c = new Category(name);
        if (depth > 0) {
            for (int i = 0; i < fanout; i++) {
                c.children.add(tree(name + "/" + i, depth - 1, fanout));
            }
        }
        return c;
    }

    Category leaf(int index) {
        if (children.isEmpty()) {
            return this;
        }
        Category child = children.get(index % children.size());
        return child.leaf(index / children.size() + 1);
    }

    int totalSold() {
        int n = sold;
        for (Category c : children) {
            n += c.totalSold();
        }
        return n;
    }

    int depth() {
        int d = 0;
        for (Category c : children) {
            d = Math.max(d, c.depth());
        }
        return d + 1;
    }
}
