package seglog.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.HashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Admin, one call after another on a topic and a group of its own; each
 * step prints {"op": ..., result fields} or {"op": ..., "error": class}.
 * The steps build on each other (records produced with timestamps 1000..1009
 * to partition 0, offsets committed for the group, ...), and a failed step
 * does not stop the ones after it.
 */
final class AdminCheck {
    private final Admin admin;
    private final String topic;
    private final String group;
    private final TopicPartition p0;
    private final TopicPartition p1;

    private AdminCheck(Admin admin, String topic, String group) {
        this.admin = admin;
        this.topic = topic;
        this.group = group;
        this.p0 = new TopicPartition(topic, 0);
        this.p1 = new TopicPartition(topic, 1);
    }

    static void run(Options o) throws Exception {
        Properties p = o.client();
        try (Admin admin = Admin.create(p)) {
            new AdminCheck(admin, o.get("topic"), o.get("group", "interop-admin"))
                    .tour(o, (short) o.integer("replicas", 1));
        }
    }

    private void step(String op, Callable<Json> call) {
        try {
            call.call().put("op", op).print();
        } catch (Exception e) {
            Json.error(op, e).print();
        }
    }

    private void tour(Options o, short replicas) {
        step("createTopics", () -> {
            NewTopic t = new NewTopic(topic, 2, replicas)
                    .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete"));
            admin.createTopics(List.of(t)).all().get();
            return new Json();
        });
        step("listTopics", () -> Json.of("names", new ArrayList<>(admin.listTopics().names().get())));
        step("describeTopics", this::describeTopic);
        step("describeCluster", () -> {
            DescribeClusterResult c = admin.describeCluster();
            List<Integer> ids = new ArrayList<>();
            for (Node n : c.nodes().get()) ids.add(n.id());
            ids.sort(Integer::compare);
            return Json.of("nodes", ids).put("controller", c.controller().get().id())
                    .put("clusterId", c.clusterId().get());
        });
        step("describeConfigs", this::describeConfigs);
        step("incrementalAlterConfigs", () -> {
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                    new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE))))
                    .all().get();
            return describeConfigs();
        });
        step("createPartitions", () -> {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();
            return describeTopic();
        });
        step("produce", () -> {
            Properties pp = o.client();
            pp.put("key.serializer", ByteArraySerializer.class.getName());
            pp.put("value.serializer", ByteArraySerializer.class.getName());
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
                for (int i = 0; i < 10; i++) {
                    byte[] v = ("v" + i).getBytes(StandardCharsets.UTF_8);
                    // Timestamps 1000..1009, but 1007 is the largest by offset 8.
                    long ts = i == 8 ? 1_009 : i == 9 ? 1_007 : 1_000 + i;
                    producer.send(new ProducerRecord<>(topic, 0, ts, null, v)).get();
                }
            }
            return new Json();
        });
        step("listOffsets", () -> listOffsets());
        step("deleteRecords", () -> {
            long low = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(3)))
                    .lowWatermarks().get(p0).get().lowWatermark();
            return Json.of("lowWatermark", low).put("after", listOffsets());
        });
        step("alterConsumerGroupOffsets", () -> {
            admin.alterConsumerGroupOffsets(group, Map.of(
                    p0, new OffsetAndMetadata(5, "five"), p1, new OffsetAndMetadata(0))).all().get();
            return new Json();
        });
        step("listConsumerGroups", () -> Json.of("groups", groups()));
        step("describeConsumerGroups", () -> {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).describedGroups()
                    .get(group).get();
            return Json.of("state", d.state().toString()).put("members", d.members().size())
                    .put("simple", d.isSimpleConsumerGroup()).put("coordinator", d.coordinator().id());
        });
        step("listConsumerGroupOffsets", this::groupOffsets);
        step("deleteConsumerGroupOffsets", () -> {
            admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all().get();
            return groupOffsets();
        });
        step("deleteConsumerGroups", () -> {
            admin.deleteConsumerGroups(List.of(group)).all().get();
            return Json.of("groups", groups());
        });
        step("describeLogDirs", () -> {
            List<Integer> ids = new ArrayList<>();
            for (Node n : admin.describeCluster().nodes().get()) ids.add(n.id());
            Map<Integer, Map<String, LogDirDescription>> all = admin.describeLogDirs(ids).allDescriptions().get();
            List<Json> dirs = new ArrayList<>();
            all.forEach((broker, byDir) -> byDir.forEach((path, d) -> {
                Map<String, Object> sizes = new TreeMap<>();
                for (Map.Entry<TopicPartition, ReplicaInfo> e : d.replicaInfos().entrySet()) {
                    if (e.getKey().topic().equals(topic)) sizes.put(e.getKey().toString(), e.getValue().size());
                }
                dirs.add(Json.of("broker", broker).put("path", path)
                        .put("error", d.error() == null ? null : d.error().getClass().getSimpleName())
                        .put("sizes", sizes));
            }));
            return Json.of("dirs", dirs);
        });
        step("electLeaders", () -> {
            Set<TopicPartition> all = new HashSet<>();
            for (int i = 0; i < 3; i++) all.add(new TopicPartition(topic, i));
            return Json.of("preferred", elect(ElectionType.PREFERRED, all))
                    .put("unclean", elect(ElectionType.UNCLEAN, Set.of(p0)))
                    .put("missing", elect(ElectionType.PREFERRED, Set.of(new TopicPartition(topic, 99))))
                    .put("everyPartition", elect(ElectionType.PREFERRED, null));
        });
        step("deleteTopics", () -> {
            admin.deleteTopics(List.of(topic)).all().get();
            return Json.of("names", new ArrayList<>(admin.listTopics().names().get()));
        });
    }

    /** Each partition's outcome: null for a leader elected, else the exception's class. */
    private Map<String, Object> elect(ElectionType type, Set<TopicPartition> partitions) throws Exception {
        Map<TopicPartition, Optional<Throwable>> results = admin.electLeaders(type, partitions).partitions().get();
        Map<String, Object> out = new TreeMap<>();
        results.forEach((tp, e) -> out.put(tp.toString(), e.map(x -> x.getClass().getSimpleName()).orElse(null)));
        return out;
    }

    private Json describeTopic() throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        List<Json> parts = new ArrayList<>();
        for (TopicPartitionInfo pi : d.partitions()) {
            parts.add(Json.of("partition", pi.partition()).put("leader", pi.leader() == null ? null : pi.leader().id())
                    .put("replicas", ids(pi.replicas())).put("isr", ids(pi.isr())));
        }
        return Json.of("internal", d.isInternal()).put("partitions", parts);
    }

    private static List<Integer> ids(Collection<Node> nodes) {
        List<Integer> ids = new ArrayList<>();
        for (Node n : nodes) ids.add(n.id());
        return ids;
    }

    private Json describeConfigs() throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
        Map<String, Object> entries = new TreeMap<>();
        for (ConfigEntry e : c.entries()) {
            entries.put(e.name(), Json.of("value", e.value()).put("source", e.source().toString())
                    .put("readOnly", e.isReadOnly()).put("sensitive", e.isSensitive()));
        }
        return Json.of("entries", entries);
    }

    private Json listOffsets() throws Exception {
        Json out = new Json();
        Map<String, OffsetSpec> specs = Map.of(
                "earliest", OffsetSpec.earliest(), "latest", OffsetSpec.latest(),
                "forTimestamp1005", OffsetSpec.forTimestamp(1005), "forTimestamp5000", OffsetSpec.forTimestamp(5000),
                "maxTimestamp", OffsetSpec.maxTimestamp());
        for (Map.Entry<String, OffsetSpec> s : new TreeMap<>(specs).entrySet()) {
            try {
                ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(p0, s.getValue()))
                        .partitionResult(p0).get();
                out.put(s.getKey(), Json.of("offset", info.offset()).put("timestamp", info.timestamp()));
            } catch (Exception e) {
                out.put(s.getKey(), Json.error(s.getKey(), e));
            }
        }
        return out;
    }

    @SuppressWarnings("deprecation")
    private List<String> groups() throws Exception {
        List<String> names = new ArrayList<>();
        for (ConsumerGroupListing l : admin.listConsumerGroups().all().get()) names.add(l.groupId());
        return names;
    }

    private Json groupOffsets() throws Exception {
        Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        Map<String, Object> out = new TreeMap<>();
        offsets.forEach((tp, om) -> out.put(tp.toString(),
                om == null ? null : Json.of("offset", om.offset()).put("metadata", om.metadata())));
        return Json.of("offsets", out);
    }
}
