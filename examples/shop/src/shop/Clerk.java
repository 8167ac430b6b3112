package shop;

/** A clerk restocking apples; three of them contend for the inventory. */
public class Clerk implements Runnable {
    private final Inventory inventory;
    private final int number;

    public Clerk(Inventory inventory, int number) {
        this.inventory = inventory;
        this.number = number;
    }

    @Override
    public void run() {
        try {
            inventory.restock("apple", 10 + number);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
