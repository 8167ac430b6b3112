package vmbench;

import java.util.ArrayList;
import java.util.List;

/** An order and its line items. */
final class Order {
    static final class Line {
        final Product product;
        final int quantity;
        final int amount;

        Line(Product product, int quantity) {
            this.product = product;
            this.quantity = quantity;
            this.amount = product.priceFor(quantity);
        }
    }

    final int id;
    final String customer;
    final List<Line> lines = new ArrayList<>();

    Order(int id, String customer) {
        this.id = id;
        this.customer = customer;
    }

    void add(Product p, int quantity) {
        lines.add(new Line(p, quantity));
    }

    int total() {
        int t = 0;
        for (Line l : lines) {
            t += l.amount;
        }
        return t;
    }

    String receipt() {
        StringBuilder sb = new StringBuilder(64);
        sb.append("order ").append(id).append(" for ").append(customer).append('\n');
        for (Line l : lines) {
            sb.append(l.quantity).append(" x ").append(l.product.sku).append(' ').append(Money.format(l.amount)).append('\n');
        }
        return sb.append("total ").append(Money.format(total())).toString();
    }
}
