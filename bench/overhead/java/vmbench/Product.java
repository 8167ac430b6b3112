package vmbench;

/** A product: a small immutable object. */
final class Product {
    final String sku;
    final int priceCents;
    final Category category;

    Product(String sku, int priceCents, Category category) {
        this.sku = sku;
        this.priceCents = priceCents;
        this.category = category;
    }

    int priceFor(int quantity) {
        int price = priceCents * quantity;
        if (quantity >= 10) {
            price -= price / 10;
        }
        return price;
    }
}
