package shop;

/** Buying: pay() fails deep down, buy() catches it two frames up. */
public class Checkout {
    private final Inventory inventory;

    public Checkout(Inventory inventory) {
        this.inventory = inventory;
    }

    public boolean buy(String item, int quantity) {
        try {
            pay(item, quantity);
            return true;
        } catch (IllegalStateException e) {
            return false;
        }
    }

    private double pay(String item, int quantity) {
        double total = inventory.price(item) * quantity;
        inventory.take(item, quantity);
        return total;
    }
}
