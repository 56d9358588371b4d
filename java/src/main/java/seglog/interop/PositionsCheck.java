package seglog.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * KafkaConsumer without a group, on partition 0 of {@code topic}: its
 * beginning and end offsets, offsetsForTimes at {@code time}, then the
 * records from a {@code seek} to {@code from} (up to {@code count}), and the
 * positions after seekToBeginning and seekToEnd.
 */
final class PositionsCheck {
    static void run(Options o) {
        TopicPartition tp = new TopicPartition(o.get("topic"), 0);
        long time = Long.parseLong(o.get("time"));
        int count = o.integer("count", 1);
        Properties p = o.client();
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.putIfAbsent("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            consumer.assign(List.of(tp));
            Map<TopicPartition, OffsetAndTimestamp> found = consumer.offsetsForTimes(Map.of(tp, time));
            OffsetAndTimestamp at = found.get(tp);
            Json.of("beginning", consumer.beginningOffsets(List.of(tp)).get(tp))
                    .put("end", consumer.endOffsets(List.of(tp)).get(tp))
                    .put("forTime", at == null ? null : Json.of("offset", at.offset()).put("timestamp", at.timestamp()))
                    .print();
            consumer.seek(tp, Long.parseLong(o.get("from")));
            List<Long> offsets = new ArrayList<>();
            long deadline = System.currentTimeMillis() + o.integer("timeout.ms", 30_000);
            while (offsets.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) offsets.add(r.offset());
            }
            consumer.seekToBeginning(List.of(tp));
            long first = consumer.position(tp);
            consumer.seekToEnd(List.of(tp));
            Map<String, Object> positions = new HashMap<>();
            positions.put("afterSeekToBeginning", first);
            positions.put("afterSeekToEnd", consumer.position(tp));
            Json.of("read", offsets).put("positions", positions).put("done", true).print();
        }
    }
}
