package vmbench;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.AbstractHandler;

/**
 * The server workload of `vmview-overhead --server`: Jetty (Debian's
 * jetty9 jars) on loopback, answering GET /quote?n=N with a small JSON
 * quote for N items that it prices, sorts and formats — some tens of
 * microseconds of work per request, the rest is Jetty's HTTP handling.
 * Prints `port=P` once it listens, serves until its stdin closes, then
 * prints how many requests it handled and exits.
 */
public final class ShopServer {
    static final AtomicLong HANDLED = new AtomicLong();

    record Line(String sku, int qty, long cents) {}

    static final class Quotes extends AbstractHandler {
        @Override
        public void handle(String target, Request base, HttpServletRequest req, HttpServletResponse resp)
                throws IOException {
            int n;
            try {
                n = Integer.parseInt(req.getParameter("n"));
            } catch (NumberFormatException e) {
                n = 0;
            }
            byte[] body = quote(n).getBytes(StandardCharsets.UTF_8);
            resp.setContentType("application/json");
            resp.setContentLength(body.length);
            resp.getOutputStream().write(body);
            base.setHandled(true);
            HANDLED.incrementAndGet();
        }
    }

    /** Prices 40 lines for customer n, sorts them by value and formats them. */
    static String quote(int n) {
        List<Line> lines = new ArrayList<>();
        long seed = n * 0x9E3779B97F4A7C15L;
        for (int i = 0; i < 40; i++) {
            seed = seed * 6364136223846793005L + 1442695040888963407L;
            int qty = 1 + (int) ((seed >>> 33) % 9);
            long cents = 100 + (seed >>> 40) % 9900;
            lines.add(new Line("SKU-" + Long.toHexString(seed >>> 44), qty, cents));
        }
        lines.sort(Comparator.comparingLong((Line l) -> l.qty() * l.cents()).reversed());
        StringBuilder sb = new StringBuilder(2048).append("{\"customer\":").append(n).append(",\"lines\":[");
        long total = 0;
        for (int i = 0; i < lines.size(); i++) {
            Line l = lines.get(i);
            total += l.qty() * l.cents();
            if (i > 0) sb.append(',');
            sb.append("{\"sku\":\"").append(l.sku()).append("\",\"qty\":").append(l.qty())
                    .append(",\"price\":").append(String.format("%d.%02d", l.cents() / 100, l.cents() % 100))
                    .append('}');
        }
        return sb.append("],\"total\":").append(total).append("}\n").toString();
    }

    public static void main(String[] args) throws Exception {
        Server server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(0);
        server.addConnector(connector);
        server.setHandler(new Quotes());
        server.start();
        System.out.println("port=" + connector.getLocalPort());
        System.out.flush();
        InputStream in = System.in;
        while (in.read() >= 0) {
            // Serve until the harness closes our stdin.
        }
        server.stop();
        System.out.println("handled=" + HANDLED.get());
    }
}
