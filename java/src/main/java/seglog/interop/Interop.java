package seglog.interop;

import java.io.IOException;
import java.io.InputStream;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

/**
 * Kafka's Java clients against a broker, one scenario per run:
 * {@code java -cp ... seglog.interop.Interop <produce|consume|admin|positions> key=value...}.
 * Each prints JSON lines (what was sent, read or answered, and errors by their
 * Java exception class) for the caller to check; the exit code is 0 unless the
 * scenario itself could not run.
 */
public final class Interop {
    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: Interop <produce|consume|admin|positions> key=value...");
            System.exit(2);
        }
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq < 0) {
                System.err.println("not key=value: " + args[i]);
                System.exit(2);
            }
            opts.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        Json.of("client", "kafka-clients").put("version", clientVersion()).print();
        switch (args[0]) {
            case "produce" -> ProduceCheck.run(new Options(opts));
            case "consume" -> ConsumeCheck.run(new Options(opts));
            case "admin" -> AdminCheck.run(new Options(opts));
            case "positions" -> PositionsCheck.run(new Options(opts));
            default -> {
                System.err.println("unknown scenario " + args[0]);
                System.exit(2);
            }
        }
    }

    /** The version kafka-clients' jar records of itself. */
    static String clientVersion() throws IOException {
        Properties p = new Properties();
        try (InputStream in = org.apache.kafka.clients.producer.KafkaProducer.class
                .getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) p.load(in);
        }
        return p.getProperty("version", "unknown");
    }
}
