package seglog.interop;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * KafkaProducer: {@code count} records to {@code topic}, keyed "key-i" when
 * {@code keyed=true}, values "value-i" padded to {@code size} bytes, a header
 * "i" when {@code headers=true}; every send's callback result printed after
 * {@code flush()}, in send order, then {@code close()}. With {@code stream=true}
 * each result is printed as its callback runs instead, and {@code rate} (records
 * a second) spreads the sends over time: a producer under way while brokers die.
 */
final class ProduceCheck {
    static void run(Options o) {
        String topic = o.get("topic");
        int count = o.integer("count", 100);
        int size = o.integer("size", 0);
        boolean keyed = Boolean.parseBoolean(o.get("keyed", "true"));
        boolean headers = Boolean.parseBoolean(o.get("headers", "true"));
        boolean stream = Boolean.parseBoolean(o.get("stream", "false"));
        int rate = o.integer("rate", 0);
        long started = System.nanoTime();
        Properties p = o.client();
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        AtomicReferenceArray<Json> results = new AtomicReferenceArray<>(count);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                byte[] key = keyed ? ("key-" + i).getBytes(StandardCharsets.UTF_8) : null;
                ProducerRecord<byte[], byte[]> record = new ProducerRecord<>(topic, null, key, value(i, size));
                if (headers) record.headers().add("i", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                final int n = i;
                producer.send(record, (RecordMetadata md, Exception e) -> {
                    Json r = e == null
                            ? Json.of("i", n).put("partition", md.partition()).put("offset", md.offset())
                                    .put("timestamp", md.timestamp())
                            : Json.of("i", n).put("error", e.getClass().getSimpleName()).put("message", e.getMessage());
                    if (stream) r.print();
                    else results.set(n, r);
                });
                if (rate > 0) pace(started, i + 1, rate);
            }
            producer.flush();
            for (int i = 0; i < count && !stream; i++) {
                Json r = results.get(i);
                (r == null ? Json.of("i", i).put("error", "NoCallback") : r).print();
            }
            Json.of("done", true).put("count", count).print();
        }
    }

    /** Sleeps until {@code sent} records at {@code rate} a second are due. */
    static void pace(long started, int sent, int rate) {
        long due = started + sent * 1_000_000_000L / rate;
        long wait = due - System.nanoTime();
        if (wait > 0) {
            try {
                Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    static byte[] value(int i, int size) {
        byte[] head = ("value-" + i).getBytes(StandardCharsets.UTF_8);
        if (size <= head.length) return head;
        byte[] v = Arrays.copyOf(head, size);
        for (int k = head.length; k < size; k++) v[k] = (byte) ('a' + (i + k) % 26);
        return v;
    }
}
