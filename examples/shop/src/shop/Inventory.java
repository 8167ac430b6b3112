package shop;

import java.util.HashMap;
import java.util.Map;

/** The shop's stock; every change holds the inventory's monitor. */
public class Inventory {
    private final Map<String, Integer> stock = new HashMap<>();
    private final Map<String, Double> prices = new HashMap<>();

    public synchronized void add(String item, int quantity, double price) {
        stock.merge(item, quantity, Integer::sum);
        prices.put(item, price);
    }

    public synchronized int count(String item) {
        return stock.getOrDefault(item, 0);
    }

    public synchronized double price(String item) {
        return prices.getOrDefault(item, 0.0);
    }

    public synchronized void take(String item, int quantity) {
        int have = count(item);
        if (have < quantity) {
            throw new IllegalStateException("only " + have + " " + item + " left, " + quantity + " wanted");
        }
        stock.put(item, have - quantity);
    }

    /** Parses a quantity a user typed; anything that is not a number means 1. */
    public int parseQuantity(String text) {
        try {
            return Integer.parseInt(text);
        } catch (NumberFormatException e) {
            return 1;
        }
    }

    /** Restocks slowly while holding the lock, so other clerks must wait. */
    public synchronized void restock(String item, int quantity) throws InterruptedException {
        Thread.sleep(30);
        stock.merge(item, quantity, Integer::sum);
    }
}
