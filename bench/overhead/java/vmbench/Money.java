package vmbench;

/** Formatting and arithmetic on cents. */
final class Money {
    private Money() {}

    static String format(int cents) {
        StringBuilder sb = new StringBuilder();
        if (cents < 0) {
            sb.append('-');
            cents = -cents;
        }
        sb.append(cents / 100).append('.');
        int c = cents % 100;
        if (c < 10) {
            sb.append('0');
        }
        return sb.append(c).toString();
    }

    static int tax(int cents, String region) {
        int rate = switch (region) {
            case "north" -> 19;
            case "south" -> 7;
            default -> 16;
        };
        return (cents * rate + 50) / 100;
    }
}
