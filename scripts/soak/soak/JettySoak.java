package soak;

import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.AbstractHandler;

/**
 * Jetty serving a small handler on loopback while client threads send it
 * requests. Prints totals that do not depend on timing: the number of
 * requests, a checksum of the answers, and how many the handler counted.
 * The request rate, which does depend on timing, goes to stderr (the
 * overhead runs of scripts/soak.sh read it; the soak compares stdout).
 * Usage: JettySoak REQUESTS CLIENTS
 */
public class JettySoak {
    static final Object LOCK = new Object();
    static long handled;
    static long badNumbers;

    /** The application: answers n*n for /sq?n=N; every 10th n is not a number. */
    static final class Squares extends AbstractHandler {
        @Override
        public void handle(String target, Request base, HttpServletRequest req, HttpServletResponse resp)
                throws IOException {
            String raw = req.getParameter("n");
            long answer;
            try {
                long n = Long.parseLong(raw);
                answer = n * n;
            } catch (NumberFormatException e) {
                answer = -1;
                synchronized (LOCK) {
                    badNumbers++;
                }
            }
            synchronized (LOCK) {
                handled++;
            }
            resp.setContentType("text/plain");
            resp.getWriter().print(answer);
            base.setHandled(true);
        }
    }

    public static void main(String[] args) throws Exception {
        int requests = Integer.parseInt(args[0]);
        int clients = Integer.parseInt(args[1]);
        Server server = new Server(0);
        server.setHandler(new Squares());
        server.start();
        int port = ((ServerConnector) server.getConnectors()[0]).getLocalPort();
        AtomicLong checksum = new AtomicLong();
        AtomicLong failures = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        long start = System.nanoTime();
        for (int c = 0; c < clients; c++) {
            final int client = c;
            Thread t = new Thread(() -> {
                for (int i = client; i < requests; i += clients) {
                    String n = i % 10 == 9 ? "x" + i : Integer.toString(i);
                    try {
                        checksum.addAndGet(get("http://127.0.0.1:" + port + "/sq?n=" + n));
                    } catch (IOException e) {
                        failures.incrementAndGet();
                    }
                }
            }, "client-" + c);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        long elapsedNs = System.nanoTime() - start;
        server.stop();
        System.err.printf("jetty: %d requests in %d ms, %.0f requests/s%n",
                requests, elapsedNs / 1_000_000, requests * 1e9 / Math.max(1, elapsedNs));
        System.out.println("requests=" + requests + " failures=" + failures.get() + " checksum=" + checksum.get());
        synchronized (LOCK) {
            System.out.println("handled=" + handled + " bad=" + badNumbers);
        }
        System.gc();
    }

    static long get(String url) throws IOException {
        HttpURLConnection c = (HttpURLConnection) new URL(url).openConnection();
        try (InputStream in = c.getInputStream()) {
            return Long.parseLong(new String(in.readAllBytes(), StandardCharsets.US_ASCII).trim());
        } finally {
            c.disconnect();
        }
    }
}
