// A log directory as Kafka 4's own storage classes read it at a broker's start: the
// directory's meta.properties (verified against a node id and a cluster id), the
// clean-shutdown marker, the offset checkpoints, and every partition opened as a
// UnifiedLog (segments, indexes, producer snapshots, leader-epoch checkpoint and
// partition.metadata; recovered as after a crash when there is no clean-shutdown
// marker). Prints one JSON object a line: the directory, each checkpoint, each
// partition, and each record. It writes to the directory, as a broker would: run it
// on a copy.
//
//   java -cp <kafka_2.13 4.x classpath> ReadLogDir.java DIR CLUSTER_ID NODE_ID

import java.io.File;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.record.internal.Record;
import org.apache.kafka.common.record.internal.RecordBatch;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.metadata.properties.MetaProperties;
import org.apache.kafka.metadata.properties.MetaPropertiesEnsemble;
import org.apache.kafka.server.storage.log.FetchIsolation;
import org.apache.kafka.server.util.KafkaScheduler;
import org.apache.kafka.storage.internals.checkpoint.CleanShutdownFileHandler;
import org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile;
import org.apache.kafka.storage.internals.checkpoint.PartitionMetadataFile;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.FetchDataInfo;
import org.apache.kafka.storage.internals.log.LogConfig;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;
import org.apache.kafka.storage.internals.log.LogOffsetsListener;
import org.apache.kafka.storage.internals.log.ProducerStateManagerConfig;
import org.apache.kafka.storage.internals.log.UnifiedLog;
import org.apache.kafka.storage.log.metrics.BrokerTopicStats;

public class ReadLogDir {
    static final String[] CHECKPOINTS = {
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
    };

    public static void main(String[] args) throws Exception {
        File dir = new File(args[0]);
        String clusterId = args[1];
        int nodeId = Integer.parseInt(args[2]);

        MetaPropertiesEnsemble ensemble =
                new MetaPropertiesEnsemble.Loader().addLogDirs(List.of(dir.getPath())).load();
        ensemble.verify(
                Optional.of(clusterId),
                OptionalInt.of(nodeId),
                EnumSet.of(MetaPropertiesEnsemble.VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID));
        MetaProperties meta = ensemble.logDirProps().get(dir.getPath());
        System.out.println("{\"meta\":{\"version\":" + meta.version().number()
                + ",\"cluster_id\":" + str(meta.clusterId().orElse(null))
                + ",\"node_id\":" + meta.nodeId().orElse(-1) + "}}");

        CleanShutdownFileHandler marker = new CleanShutdownFileHandler(dir.getPath());
        boolean clean = marker.exists();
        System.out.println("{\"clean_shutdown\":" + clean + "}");

        LogDirFailureChannel failures = new LogDirFailureChannel(1);
        Map<String, Map<TopicPartition, Long>> checkpoints = new TreeMap<>();
        for (String name : CHECKPOINTS) {
            File file = new File(dir, name);
            if (!file.exists()) continue;
            Map<TopicPartition, Long> entries = new OffsetCheckpointFile(file, failures).read();
            checkpoints.put(name, entries);
            List<String> fields = new ArrayList<>();
            for (Map.Entry<TopicPartition, Long> e : entries.entrySet())
                fields.add(str(e.getKey().toString()) + ":" + e.getValue());
            System.out.println("{\"checkpoint\":" + str(name) + ",\"entries\":{" + String.join(",", fields) + "}}");
        }

        KafkaScheduler scheduler = new KafkaScheduler(1);
        scheduler.startup();
        File[] children = dir.listFiles(File::isDirectory);
        java.util.Arrays.sort(children);
        for (File partitionDir : children) {
            String name = partitionDir.getName();
            int dash = name.lastIndexOf('-');
            TopicPartition tp = new TopicPartition(name.substring(0, dash), Integer.parseInt(name.substring(dash + 1)));
            var topicId = new PartitionMetadataFile(new File(partitionDir, "partition.metadata"), failures)
                    .read().topicId();
            long logStart = checkpoints.getOrDefault("log-start-offset-checkpoint", Map.of()).getOrDefault(tp, 0L);
            long recoveryPoint =
                    checkpoints.getOrDefault("recovery-point-offset-checkpoint", Map.of()).getOrDefault(tp, 0L);
            UnifiedLog log = UnifiedLog.create(partitionDir, new LogConfig(Map.of()), logStart, recoveryPoint,
                    scheduler, new BrokerTopicStats(), Time.SYSTEM, 300_000,
                    new ProducerStateManagerConfig(86_400_000, false), 600_000, failures, clean,
                    Optional.of(topicId), new ConcurrentHashMap<>(), false, LogOffsetsListener.NO_OP_OFFSETS_LISTENER);
            readRecords(log, str(tp.toString()));
            List<String> epochs = new ArrayList<>();
            for (EpochEntry e : log.leaderEpochCache().epochEntries())
                epochs.add("[" + e.epoch() + "," + e.startOffset() + "]");
            List<String> producers = new ArrayList<>();
            for (Map.Entry<Long, Integer> e : log.activeProducersWithLastSequence().entrySet())
                producers.add(str(e.getKey().toString()) + ":" + e.getValue());
            System.out.println("{\"partition\":" + str(tp.toString())
                    + ",\"topic_id\":" + str(topicId.toString())
                    + ",\"log_start\":" + log.logStartOffset()
                    + ",\"log_end\":" + log.logEndOffset()
                    + ",\"segments\":" + log.numberOfSegments()
                    + ",\"epochs\":[" + String.join(",", epochs) + "]"
                    + ",\"producers\":{" + String.join(",", producers) + "}}");
            log.close();
        }
        scheduler.shutdown();
    }

    /** Every record from the log start to the log end, a line each. */
    static void readRecords(UnifiedLog log, String partition) throws Exception {
        long next = log.logStartOffset();
        while (next < log.logEndOffset()) {
            FetchDataInfo info = log.read(next, 1 << 20, FetchIsolation.LOG_END, true);
            long reached = next;
            for (RecordBatch batch : info.records.batches()) {
                for (Record r : batch) {
                    if (r.offset() < next) continue;
                    StringBuilder headers = new StringBuilder();
                    for (Header h : r.headers()) {
                        if (headers.length() > 0) headers.append(',');
                        headers.append('[').append(str(h.key())).append(',').append(b64(h.value())).append(']');
                    }
                    System.out.println("{\"record\":" + partition + ",\"offset\":" + r.offset()
                            + ",\"timestamp\":" + r.timestamp()
                            + ",\"key\":" + b64(r.key()) + ",\"value\":" + b64(r.value())
                            + ",\"headers\":[" + headers + "]}");
                }
                reached = Math.max(reached, batch.nextOffset());
            }
            if (reached == next) throw new IllegalStateException(partition + ": nothing readable at " + next);
            next = reached;
        }
    }

    static String b64(ByteBuffer b) {
        if (b == null) return "null";
        byte[] bytes = new byte[b.remaining()];
        b.duplicate().get(bytes);
        return b64(bytes);
    }

    static String b64(byte[] bytes) {
        return bytes == null ? "null" : "\"" + Base64.getEncoder().encodeToString(bytes) + "\"";
    }

    static String str(String s) {
        if (s == null) return "null";
        return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
}
