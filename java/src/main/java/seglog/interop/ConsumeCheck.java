package seglog.interop;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * KafkaConsumer in a group (the classic protocol) subscribed to {@code topic}.
 * It polls until {@code count} records arrived, or, with {@code stop=<file>},
 * until that file exists; {@code timeout.ms} bounds either. Every record and
 * every assignment change is printed as it happens. Positions are committed
 * when partitions are revoked and at the end ({@code commit=sync|async|none}),
 * after which what the group has committed and the last assignment are printed.
 */
final class ConsumeCheck {
    static void run(Options o) {
        String topic = o.get("topic");
        int count = o.integer("count", Integer.MAX_VALUE);
        String stop = o.get("stop", null);
        long deadline = System.currentTimeMillis() + o.integer("timeout.ms", 120_000);
        String commit = o.get("commit", "sync");
        Properties p = o.client();
        p.putIfAbsent("group.id", o.get("group", "interop"));
        p.putIfAbsent("auto.offset.reset", "earliest");
        p.putIfAbsent("enable.auto.commit", "false");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    if (!commit.equals("none")) consumer.commitSync(positions(consumer, partitions));
                    Json.of("revoked", numbers(partitions)).print();
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    Json.of("assigned", numbers(partitions)).put("assignment", numbers(consumer.assignment()))
                            .print();
                }
            });
            while (seen < count && System.currentTimeMillis() < deadline
                    && (stop == null || !Files.exists(Path.of(stop)))) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    Map<String, Object> headers = new HashMap<>();
                    for (Header h : r.headers()) headers.put(h.key(), Json.text(h.value()));
                    Json.of("partition", r.partition()).put("offset", r.offset())
                            .put("key", Json.text(r.key())).put("value", Json.text(r.value()))
                            .put("headers", headers).put("timestamp", r.timestamp()).print();
                    seen++;
                }
            }
            Map<TopicPartition, OffsetAndMetadata> positions = positions(consumer, consumer.assignment());
            switch (commit) {
                case "sync" -> consumer.commitSync(positions);
                case "async" -> {
                    final Exception[] failed = {null};
                    final boolean[] done = {false};
                    consumer.commitAsync(positions, (offsets, e) -> {
                        failed[0] = e;
                        done[0] = true;
                    });
                    // An async commit's callback runs within a later call: commitSync
                    // waits for the commits before it.
                    consumer.commitSync(Map.of());
                    if (!done[0]) throw new IllegalStateException("commitAsync's callback did not run");
                    if (failed[0] != null) throw new IllegalStateException(failed[0]);
                }
                default -> { }
            }
            List<Json> committed = new ArrayList<>();
            consumer.committed(consumer.assignment()).forEach((tp, om) -> committed.add(
                    Json.of("partition", tp.partition()).put("offset", om == null ? null : om.offset())));
            Json.of("done", true).put("seen", seen).put("assignment", numbers(consumer.assignment()))
                    .put("committed", committed).print();
        }
    }

    static Map<TopicPartition, OffsetAndMetadata> positions(
            KafkaConsumer<byte[], byte[]> consumer, Collection<TopicPartition> partitions) {
        Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
        for (TopicPartition tp : partitions) out.put(tp, new OffsetAndMetadata(consumer.position(tp)));
        return out;
    }

    static List<Integer> numbers(Collection<TopicPartition> partitions) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : partitions) out.add(tp.partition());
        out.sort(Integer::compare);
        return out;
    }
}
