package shop;

import java.util.ArrayList;
import java.util.List;

/**
 * vmview's bundled example: a tiny shop whose trace shows parameters and
 * return values, an exception swallowed inside the shop, an exception caught
 * two frames above where it was thrown, and three clerks contending for the
 * inventory's lock.
 */
public class Main {
    public static void main(String[] args) throws Exception {
        Inventory inventory = new Inventory();
        inventory.add("apple", 12, 0.5);
        inventory.add("pear", 3, 0.75);

        // A quantity typed by a user: "lots" is not a number, and
        // Inventory.parseQuantity swallows the NumberFormatException.
        int wanted = inventory.parseQuantity("lots");

        // Checkout.pay throws two frames below where it is caught.
        Checkout checkout = new Checkout(inventory);
        boolean paid = checkout.buy("apple", 20);
        System.out.println("wanted=" + wanted + " paid=" + paid);

        // Three clerks restock at once and wait for the inventory's lock.
        List<Thread> clerks = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            Thread t = new Thread(new Clerk(inventory, i), "clerk-" + i);
            clerks.add(t);
            t.start();
        }
        for (Thread t : clerks) {
            t.join();
        }
        System.out.println("apples in stock: " + inventory.count("apple"));
    }
}
