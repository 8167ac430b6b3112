package soak;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * H2 (in memory) running transfer transactions from several threads, each
 * on its own accounts, every 10th one rolled back by a duplicate key. Prints
 * totals that do not depend on timing.
 * Usage: H2Soak TRANSACTIONS_PER_THREAD THREADS
 */
public class H2Soak {
    static final String URL = "jdbc:h2:mem:soak;DB_CLOSE_DELAY=-1;LOCK_TIMEOUT=600000";
    static final int ACCOUNTS = 10;

    public static void main(String[] args) throws Exception {
        int perThread = Integer.parseInt(args[0]);
        int threads = Integer.parseInt(args[1]);
        try (Connection c = DriverManager.getConnection(URL); Statement s = c.createStatement()) {
            s.execute("create table account(id int primary key, owner int, balance bigint)");
            s.execute("create table journal(id bigint primary key, account int, amount bigint)");
            for (int t = 0; t < threads; t++) {
                for (int a = 0; a < ACCOUNTS; a++) {
                    s.execute("insert into account values(" + (t * ACCOUNTS + a) + ", " + t + ", 1000)");
                }
            }
        }
        AtomicLong committed = new AtomicLong();
        AtomicLong rolledBack = new AtomicLong();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int owner = t;
            Thread w = new Thread(() -> {
                try (Connection c = DriverManager.getConnection(URL)) {
                    c.setAutoCommit(false);
                    for (int i = 0; i < perThread; i++) {
                        if (transfer(c, owner, i)) {
                            committed.incrementAndGet();
                        } else {
                            rolledBack.incrementAndGet();
                        }
                    }
                } catch (SQLException e) {
                    throw new RuntimeException(e);
                }
            }, "worker-" + t);
            workers.add(w);
            w.start();
        }
        for (Thread w : workers) {
            w.join();
        }
        try (Connection c = DriverManager.getConnection(URL); Statement s = c.createStatement();
                ResultSet r = s.executeQuery("select sum(balance), count(*) from account")) {
            r.next();
            System.out.println("committed=" + committed.get() + " rolled_back=" + rolledBack.get()
                    + " total=" + r.getLong(1) + " accounts=" + r.getLong(2));
        }
        try (Connection c = DriverManager.getConnection(URL); Statement s = c.createStatement();
                ResultSet r = s.executeQuery("select count(*), sum(amount) from journal")) {
            r.next();
            System.out.println("journal=" + r.getLong(1) + " moved=" + r.getLong(2));
        }
        System.gc();
    }

    /** Moves money between two of the owner's accounts; false if rolled back. */
    static boolean transfer(Connection c, int owner, int i) throws SQLException {
        int from = owner * ACCOUNTS + i % ACCOUNTS;
        int to = owner * ACCOUNTS + (i * 7 + 3) % ACCOUNTS;
        long amount = i % 13 + 1;
        // Every 10th transaction reuses its journal id: a duplicate key.
        long journalId = (long) owner * 1_000_000 + (i % 10 == 9 ? i - 1 : i);
        try (PreparedStatement debit = c.prepareStatement("update account set balance = balance - ? where id = ?");
                PreparedStatement credit = c.prepareStatement("update account set balance = balance + ? where id = ?");
                PreparedStatement log = c.prepareStatement("insert into journal values(?, ?, ?)")) {
            debit.setLong(1, amount);
            debit.setInt(2, from);
            debit.executeUpdate();
            credit.setLong(1, amount);
            credit.setInt(2, to);
            credit.executeUpdate();
            log.setLong(1, journalId);
            log.setInt(2, from);
            log.setLong(3, amount);
            log.executeUpdate();
            c.commit();
            return true;
        } catch (SQLException e) {
            c.rollback();
            return false;
        }
    }
}
