"""Kafka's command-line tools (kafka_2.13 and kafka-tools, each version in java/versions,
run from their classes as Kafka's bin/ scripts run them) against a seglog broker and on
the files of a seglog store: topics, configs, the console producer and consumer, consumer
groups with every offset reset, offsets, record deletion, log directories, the perf tests
and end-to-end latency, and kafka-dump-log on every kind of file seglog writes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import seglog
from cluster_helpers import (
    BackgroundProducer,
    Zk,
    check_acknowledged,
    consume_all,
    next_offsets,
    replica_logs,
    wait_for,
)
from java_helpers import VERSIONS, tool
from seglog.testing import LocalCluster
from test_replication import BROKERS, FAST, TOPIC, MakeCluster, topic_with_full_isr, up

pytestmark = pytest.mark.java


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[seglog.Store, seglog.Broker]]:
    store = seglog.open(tmp_path / "store")
    config = {"group.initial.rebalance.delay.ms": "0"}
    with store, seglog.Broker(store, config=config) as b:
        yield store, b


def lines(out: str) -> list[str]:
    """A tool's output lines, less blank ones and 4.x's notes on deprecated options
    (``--property`` gave way to ``--formatter-property``, which 3.9 does not know)."""
    return [line for line in out.splitlines() if line.strip() and not line.startswith("Option --")]


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_topics_and_kafka_configs(
    served: tuple[seglog.Store, seglog.Broker], version: str, tmp_path: Path
) -> None:
    _, broker = served
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    create = ["--create", "--topic", "t", "--partitions", "3", "--replication-factor", "1"]
    out = tool(version, "kafka-topics", *bs, *create, "--config", "retention.ms=1000000").stdout
    assert "Created topic t." in out
    assert "t" in lines(tool(version, "kafka-topics", *bs, "--list").stdout)
    described = tool(version, "kafka-topics", *bs, "--describe", "--topic", "t").stdout
    assert re.search(
        r"Topic: t\s.*PartitionCount: 3\s+ReplicationFactor: 1\s+Configs: retention.ms=1000000", described
    )
    for p in range(3):
        assert re.search(rf"Partition: {p}\s+Leader: 0\s+Replicas: 0\s+Isr: 0", described), described
    # The broker is its own controller: no move is ever under way, and one onto itself
    # is done at once.
    reassign = ["kafka-reassign-partitions", *bs]
    assert "No partition reassignments found" in tool(version, *reassign, "--list").stdout
    plan = {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [0]}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    moves = [*reassign, "--reassignment-json-file", str(tmp_path / "plan.json")]
    assert "Successfully started partition reassignment for t-0" in tool(version, *moves, "--execute").stdout
    assert "No partition reassignments found" in tool(version, *reassign, "--list").stdout
    # --verify finds it done and clears the throttles (broker rates and topic lists).
    verified = tool(version, *moves, "--verify").stdout
    assert "Reassignment of partition t-0 is completed" in verified, verified
    assert "Clearing topic-level throttles on topic t" in verified, verified
    tool(version, "kafka-topics", *bs, "--alter", "--topic", "t", "--partitions", "4")
    assert "PartitionCount: 4" in tool(version, "kafka-topics", *bs, "--describe", "--topic", "t").stdout

    entity = ["--entity-type", "topics", "--entity-name", "t"]
    dynamic = tool(version, "kafka-configs", *bs, *entity, "--describe").stdout
    assert "Dynamic configs for topic t are:" in dynamic
    assert (
        "retention.ms=1000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000000" in dynamic
    )
    out = tool(version, "kafka-configs", *bs, *entity, "--alter", "--add-config", "retention.ms=5000").stdout
    assert "Completed updating config for topic t." in out
    every = tool(version, "kafka-configs", *bs, *entity, "--describe", "--all").stdout
    assert "  retention.ms=5000 sensitive=false" in every
    assert (
        "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:log.segment.bytes=1073741824}"
        in every
    )
    tool(version, "kafka-configs", *bs, *entity, "--alter", "--delete-config", "retention.ms")
    assert "retention.ms" not in tool(version, "kafka-configs", *bs, *entity, "--describe").stdout

    tool(version, "kafka-topics", *bs, "--delete", "--topic", "t")
    assert "t" not in lines(tool(version, "kafka-topics", *bs, "--list").stdout)


@pytest.mark.parametrize("version", VERSIONS)
def test_console_producer_and_consumer_with_keys_headers_and_a_group(
    served: tuple[seglog.Store, seglog.Broker], version: str
) -> None:
    store, broker = served
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    tool(version, "kafka-topics", *bs, "--create", "--topic", "c", "--partitions", "1")
    parse = [
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
        "--property",
        "parse.headers=true",
    ]
    typed = "h1:v1\tk1:one\nh1:v1,h2:v2\tk2:two\nh3:\tk3:three\n"
    tool(version, "kafka-console-producer", *bs, "--topic", "c", *parse, stdin=typed)
    stored = [(r.key, r.value, r.headers) for r in store.read("c", 0, 0)]
    assert stored == [
        (b"k1", b"one", (("h1", b"v1"),)),
        (b"k2", b"two", (("h1", b"v1"), ("h2", b"v2"))),
        (b"k3", b"three", (("h3", b""),)),
    ]
    show = [
        "--property",
        "print.key=true",
        "--property",
        "print.headers=true",
        "--property",
        "print.offset=true",
    ]
    read = ["--topic", "c", "--from-beginning", "--max-messages", "3", "--group", "console"]
    out = tool(version, "kafka-console-consumer", *bs, *read, *show).stdout
    assert lines(out) == [
        "Offset:0\th1:v1\tk1\tone",
        "Offset:1\th1:v1,h2:v2\tk2\ttwo",
        "Offset:2\th3:\tk3\tthree",
    ]
    # The group committed what it read: a second run from its offsets reads nothing old.
    tool(version, "kafka-console-producer", *bs, "--topic", "c", *parse, stdin="h4:x\tk4:four\n")
    out = tool(
        version, "kafka-console-consumer", *bs, "--topic", "c", "--max-messages", "1", "--group", "console"
    ).stdout
    assert lines(out) == ["four"]


def group_offsets(version: str, bootstrap: str, group: str) -> dict[int, tuple[int, int, int]]:
    """kafka-consumer-groups --describe: {partition: (current offset, log end, lag)}."""
    out = tool(
        version, "kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    rows = {}
    for line in lines(out.stdout):
        cols = line.split()
        if cols[0] == group and cols[2].isdigit():
            rows[int(cols[2])] = (int(cols[3]), int(cols[4]), int(cols[5]))
    return rows


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_consumer_groups_describe_lag_reset_every_way_and_delete(
    served: tuple[seglog.Store, seglog.Broker], version: str, tmp_path: Path
) -> None:
    store, broker = served
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    tool(version, "kafka-topics", *bs, "--create", "--topic", "g", "--partitions", "2")
    for i in range(10):
        store.append("g", i % 2, [(None, f"v{i}".encode(), [], 1_000_000 + i)])
    read_all = ("--topic", "g", "--from-beginning", "--max-messages", "10", "--group", "grp")
    tool(version, "kafka-console-consumer", *bs, *read_all)
    assert "grp" in lines(tool(version, "kafka-consumer-groups", *bs, "--list").stdout)
    assert group_offsets(version, broker.bootstrap_servers, "grp") == {0: (5, 5, 0), 1: (5, 5, 0)}

    def reset(*how: str) -> dict[int, int]:
        group = ("--reset-offsets", "--group", "grp")
        tool(version, "kafka-consumer-groups", *bs, *group, *how, "--execute")
        return {p: row[0] for p, row in group_offsets(version, broker.bootstrap_servers, "grp").items()}

    topic = ("--topic", "g")
    assert reset(*topic, "--to-earliest") == {0: 0, 1: 0}
    assert reset(*topic, "--to-latest") == {0: 5, 1: 5}
    assert reset(*topic, "--to-offset", "2") == {0: 2, 1: 2}
    assert reset(*topic, "--shift-by", "1") == {0: 3, 1: 3}
    assert reset(*topic, "--to-current") == {0: 3, 1: 3}
    # Partition 0 holds timestamps 1,000,000 + 0, 2, 4, 6, 8 (ms): 1,000,004 is offset 2.
    assert reset(*topic, "--to-datetime", "1970-01-01T00:16:40.004")[0] == 2
    assert reset(*topic, "--by-duration", "PT0S") == {0: 5, 1: 5}
    plan = tmp_path / "plan.csv"
    plan.write_text("g,0,1\ng,1,4\n")
    assert reset("--from-file", str(plan)) == {0: 1, 1: 4}
    assert group_offsets(version, broker.bootstrap_servers, "grp")[0] == (1, 5, 4), (
        "lag is the log end less the offset"
    )
    out = tool(version, "kafka-consumer-groups", *bs, "--delete", "--group", "grp").stdout
    assert "Deletion of requested consumer groups ('grp') was successful." in out
    assert "grp" not in lines(tool(version, "kafka-consumer-groups", *bs, "--list").stdout)


@pytest.mark.parametrize("version", VERSIONS)
def test_get_offsets_delete_records_and_log_dirs(
    served: tuple[seglog.Store, seglog.Broker], version: str, tmp_path: Path
) -> None:
    store, broker = served
    bs = ["--bootstrap-server", broker.bootstrap_servers]
    store.create_topic("o", partitions=2)
    for i in range(6):
        store.append("o", 0, [(None, f"v{i}".encode(), [], 1_000 + i)])
    store.append("o", 1, [(None, b"only", [], 5_000)])
    assert lines(tool(version, "kafka-get-offsets", *bs, "--topic", "o").stdout) == ["o:0:6", "o:1:1"]
    earliest = tool(version, "kafka-get-offsets", *bs, "--topic", "o", "--time", "-2").stdout
    assert lines(earliest) == ["o:0:0", "o:1:0"]
    assert lines(tool(version, "kafka-get-offsets", *bs, "--topic", "o", "--time", "1003").stdout) == [
        "o:0:3",
        "o:1:0",
    ]
    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "o", "partition": 0, "offset": 4}], "version": 1}))
    out = tool(version, "kafka-delete-records", *bs, "--offset-json-file", str(plan)).stdout
    assert "partition: o-0\tlow_watermark: 4" in out
    assert store.offsets("o", 0) == (4, 6)
    assert lines(tool(version, "kafka-get-offsets", *bs, "--topic", "o", "--time", "-2").stdout)[0] == "o:0:4"
    described = tool(version, "kafka-log-dirs", *bs, "--describe", "--broker-list", "0", "--topic-list", "o")
    [doc] = [json.loads(line) for line in lines(described.stdout) if line.startswith("{")]
    [b] = doc["brokers"]
    [d] = b["logDirs"]
    assert b["broker"] == 0 and d["error"] is None and Path(d["logDir"]) == Path(store.path).resolve()
    sizes = {p["partition"]: p["size"] for p in d["partitions"]}
    assert sizes == {
        f"o-{p}": sum(f.stat().st_size for f in (Path(store.path) / f"o-{p}").glob("*.log")) for p in (0, 1)
    }


@pytest.mark.parametrize("version", VERSIONS)
def test_perf_tests_and_end_to_end_latency(served: tuple[seglog.Store, seglog.Broker], version: str) -> None:
    store, broker = served
    bs = broker.bootstrap_servers
    store.create_topic("perf", partitions=2)
    sent = tool(
        version,
        "kafka-producer-perf-test",
        *("--topic", "perf", "--num-records", "20000", "--record-size", "100", "--throughput", "-1"),
        *("--producer-props", f"bootstrap.servers={bs}", "acks=all"),
    ).stdout
    assert re.search(r"^20000 records sent, [\d.]+ records/sec", sent, re.MULTILINE), sent
    assert sum(store.offsets("perf", p)[1] for p in range(2)) == 20_000
    read = tool(
        version,
        "kafka-consumer-perf-test",
        "--bootstrap-server",
        bs,
        "--topic",
        "perf",
        "--messages",
        "20000",
    )
    header, row = lines(read.stdout)[-2:]
    columns = dict(
        zip([c.strip() for c in header.split(",")], [c.strip() for c in row.split(",")], strict=True)
    )
    assert int(columns["data.consumed.in.nMsg"]) == 20_000, columns
    latency = tool(version, "kafka-e2e-latency", bs, "e2e", "300", "all", "100").stdout
    assert re.search(r"^Avg latency: [\d.]+ ms$", latency, re.MULTILINE), latency
    assert store.offsets("e2e", 0)[1] == 300


def records_printed(out: str) -> list[str]:
    """The batch and record lines of a dump-log output, whole: ``seglog dump-log`` prints
    them as Kafka's does, field for field."""
    return [line for line in out.splitlines() if line.startswith(("baseOffset: ", "| offset: "))]


def dumps_agree(version: str, log: Path) -> None:
    """Kafka's ``kafka-dump-log --deep-iteration`` prints every batch and record line of
    a segment as ``seglog dump-log`` does, and finds every batch valid."""
    kafka = tool(version, "kafka-dump-log", "--files", str(log), "--deep-iteration", "--print-data-log")
    ours = subprocess.run(
        [sys.executable, "-m", "seglog", "dump-log", "--print-data-log", str(log)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert records_printed(kafka.stdout) == records_printed(ours.stdout), log
    assert "isvalid: false" not in kafka.stdout, log


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_dump_log_reads_every_kind_of_file_seglog_writes(tmp_path: Path, version: str) -> None:
    path = tmp_path / "store"
    small = {"segment.bytes": 4096, "index.interval.bytes": 100}
    with seglog.open(path, **small) as store:
        store.create_topic("d", partitions=1)
        store.create_topic("k", partitions=1, config={"cleanup.policy": "compact"})
        with seglog.Broker(store) as broker:
            # Through the broker: idempotent batches, with producer ids and sequences.
            producer = seglog.Producer(bootstrap_servers=broker.bootstrap_servers, compression_type="lz4")
            for i in range(300):
                producer.send("d", f"value-{i}".encode(), key=f"k{i % 7}".encode(), partition=0)
            producer.flush()
            producer.close()
        # A record a batch, over several segments, then compacted.
        for i in range(300):
            store.append("k", 0, [(f"k{i % 7}".encode(), f"value-{i}".encode())])
        assert store.clean_topic("k")["records_removed"] > 0
    files = sorted(path.glob("[dk]-0/*"))
    kinds = {f.suffix for f in files}
    assert {".log", ".index", ".timeindex", ".snapshot"} <= kinds, kinds
    verified = 0
    for f in files:
        if f.suffix == ".log":
            dumps_agree(version, f)
        elif f.suffix in (".index", ".timeindex"):
            checked = tool(version, "kafka-dump-log", "--files", str(f), "--verify-index-only")
            # Kafka prints mismatches and corrupt entries after this line; a sound index, nothing.
            said = lines(checked.stdout)
            assert said in ([f"Dumping {f}"], [f"Dumping {f}", f"{f} is empty."]), checked.stdout
            verified += said == [f"Dumping {f}"]
        elif f.suffix == ".snapshot":
            dumped = tool(version, "kafka-dump-log", "--files", str(f))
            assert f"Dumping {f}" in dumped.stdout
    assert verified >= 4, "indexes with entries were verified"
    compacted = [f for f in files if f.parent.name == "k-0" and f.suffix == ".log"]
    printed = tool(
        version,
        "kafka-dump-log",
        "--files",
        ",".join(map(str, compacted)),
        "--deep-iteration",
        "--print-data-log",
    )
    values = re.findall(r"payload: value-(\d+)", printed.stdout)
    assert len(values) < 300, "compaction left every record"
    assert {int(v) for v in values} >= set(range(293, 300)), "each key's last value is kept"


@pytest.mark.cluster
@pytest.mark.parametrize("version", VERSIONS)
def test_leader_election_gives_leadership_back_to_preferred_replicas(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk], version: str
) -> None:
    # No automatic rebalance: only the tool moves leadership back.
    cluster, zk = up(local_cluster, zk_of, config={**FAST, "auto.leader.rebalance.enable": "false"})
    parts = topic_with_full_isr(cluster, zk)
    bs = ["--bootstrap-server", cluster.bootstrap_servers]
    preferred = {p: zk.assignment(TOPIC)[p][0] for p in parts}
    victim = preferred[0]
    moved = [p for p in parts if preferred[p] == victim]
    cluster.kill(victim)
    for p in moved:
        zk.wait_until_new_leader(TOPIC, p, victim)
    cluster.start(victim)
    zk.wait_until_isr(TOPIC, parts, BROKERS)
    assert all(zk.leader(TOPIC, p) != victim for p in moved)

    def elect(*args: str) -> list[str]:
        return lines(tool(version, "kafka-leader-election", *bs, *args).stdout)

    first = moved[0]
    out = elect("--election-type", "preferred", "--topic", TOPIC, "--partition", str(first))
    assert out == [f"Successfully completed leader election (PREFERRED) for partitions {TOPIC}-{first}"]
    assert zk.leader(TOPIC, first) == victim
    # The rest of them: those that need it, of every partition.
    rest = ", ".join(f"{TOPIC}-{p}" for p in moved[1:])
    out = elect("--election-type", "preferred", "--all-topic-partitions")
    if rest:
        assert out == [f"Successfully completed leader election (PREFERRED) for partitions {rest}"]
    else:  # every partition named none: those needing no election are left out
        assert out == [], out
    assert {p: zk.leader(TOPIC, p) for p in parts} == preferred
    # Now none needs one; an unclean election neither, every leader being alive.
    for kind in ("preferred", "unclean"):
        out = elect("--election-type", kind, "--topic", TOPIC, "--partition", "0")
        assert out == [f"Valid replica already elected for partitions {TOPIC}-0"], out
    # The metadata every broker hands out shows the preferred leaders.
    described = lines(tool(version, "kafka-topics", *bs, "--describe", "--topic", TOPIC).stdout)
    leaders = {
        int(m[1]): int(m[2])
        for m in (re.search(r"Partition: (\d+)\s+Leader: (\d+)", x) for x in described)
        if m
    }
    assert leaders == preferred


@pytest.mark.cluster
@pytest.mark.parametrize("version", VERSIONS)
def test_tools_on_a_three_broker_cluster(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk], version: str, tmp_path: Path
) -> None:
    cluster, zk = up(local_cluster, zk_of, config=FAST)
    servers = cluster.bootstrap_servers
    bs = ["--bootstrap-server", servers]
    create = ["--create", "--topic", "c", "--partitions", "2", "--replication-factor", "3"]
    assert (
        "Created topic c."
        in tool(version, "kafka-topics", *bs, *create, "--config", "min.insync.replicas=2").stdout
    )
    zk.wait_until_isr("c", [0, 1], BROKERS)
    described = tool(version, "kafka-topics", *bs, "--describe", "--topic", "c").stdout
    assert re.search(r"PartitionCount: 2\s+ReplicationFactor: 3\s+Configs: min.insync.replicas=2", described)
    for p in (0, 1):
        m = re.search(rf"Partition: {p}\s+Leader: (\d)\s+Replicas: ([\d,]+)\s+Isr: ([\d,]+)", described)
        assert m is not None, described
        assert int(m[1]) == zk.leader("c", p) and sorted(m[2].split(",")) == ["1", "2", "3"], described
        assert sorted(m[3].split(",")) == ["1", "2", "3"], described
    entity = ["--entity-type", "topics", "--entity-name", "c"]
    tool(version, "kafka-configs", *bs, *entity, "--alter", "--add-config", "retention.ms=86400000")
    assert zk.topic_config("c")["retention.ms"] == "86400000"
    assert "retention.ms=86400000" in tool(version, "kafka-configs", *bs, *entity, "--describe").stdout

    typed = "".join(f"k{i}:v{i}\n" for i in range(40))
    keyed = ["--property", "parse.key=true", "--property", "key.separator=:"]
    tool(version, "kafka-console-producer", *bs, "--topic", "c", *keyed, stdin=typed)
    read = ["--topic", "c", "--from-beginning", "--max-messages", "40", "--group", "cg"]
    out = tool(version, "kafka-console-consumer", *bs, *read, "--property", "print.key=true").stdout
    assert sorted(lines(out)) == sorted(f"k{i}\tv{i}" for i in range(40))
    ends = {
        int(m[1]): int(m[2])
        for m in (
            re.match(r"c:(\d+):(\d+)$", x)
            for x in lines(tool(version, "kafka-get-offsets", *bs, "--topic", "c").stdout)
        )
        if m
    }
    assert sum(ends.values()) == 40 and set(ends) == {0, 1}
    assert group_offsets(version, servers, "cg") == {p: (ends[p], ends[p], 0) for p in (0, 1)}
    group = ["--reset-offsets", "--group", "cg", "--topic", "c", "--execute"]
    tool(version, "kafka-consumer-groups", *bs, *group, "--to-earliest")
    assert group_offsets(version, servers, "cg") == {p: (0, ends[p], ends[p]) for p in (0, 1)}
    assert "successful" in tool(version, "kafka-consumer-groups", *bs, "--delete", "--group", "cg").stdout

    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "c", "partition": 0, "offset": 1}], "version": 1}))
    assert (
        "partition: c-0\tlow_watermark: 1"
        in tool(version, "kafka-delete-records", *bs, "--offset-json-file", str(plan)).stdout
    )
    described = tool(
        version, "kafka-log-dirs", *bs, "--describe", "--broker-list", "1,2,3", "--topic-list", "c"
    )
    [doc] = [json.loads(x) for x in lines(described.stdout) if x.startswith("{")]
    assert sorted(b["broker"] for b in doc["brokers"]) == [1, 2, 3]
    for b in doc["brokers"]:
        [d] = b["logDirs"]
        assert d["error"] is None and {p["partition"] for p in d["partitions"]} == {"c-0", "c-1"}, b

    sent = tool(
        version,
        "kafka-producer-perf-test",
        *("--topic", "c", "--num-records", "5000", "--record-size", "100", "--throughput", "-1"),
        *("--producer-props", f"bootstrap.servers={servers}", "acks=all"),
    ).stdout
    assert re.search(r"^5000 records sent, [\d.]+ records/sec", sent, re.MULTILINE), sent
    consumed = tool(version, "kafka-consumer-perf-test", *bs, "--topic", "c", "--messages", "5039")
    header, row = lines(consumed.stdout)[-2:]
    columns = dict(
        zip([c.strip() for c in header.split(",")], [c.strip() for c in row.split(",")], strict=True)
    )
    assert int(columns["data.consumed.in.nMsg"]) == 5039, columns  # 40 + 5000, less the deleted one

    tool(version, "kafka-topics", *bs, "--alter", "--topic", "c", "--partitions", "3")
    assert "PartitionCount: 3" in tool(version, "kafka-topics", *bs, "--describe", "--topic", "c").stdout
    tool(version, "kafka-topics", *bs, "--delete", "--topic", "c")
    assert "c" not in lines(tool(version, "kafka-topics", *bs, "--list").stdout)


@pytest.mark.cluster
@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_reassign_partitions_moves_a_partition_under_load(
    local_cluster: MakeCluster, zk_of: Callable[[LocalCluster], Zk], version: str, tmp_path: Path
) -> None:
    """kafka-reassign-partitions moves t-0 from brokers {1,2,3} to {1,2,4} while an
    idempotent acks=all producer writes: --execute starts it, --list and --verify follow
    it, broker 4 catches up and joins the ISR, broker 3 leaves it and empties its copy;
    no send fails and every acknowledged record is read back. A target naming a broker
    that is not alive is refused, and a move can be cancelled."""
    # A paused broker stays registered through the cancel below.
    cluster = local_cluster(brokers=4, config={**FAST, "zookeeper.session.timeout.ms": 30000})
    zk = zk_of(cluster)
    zk.wait_until_registered({1, 2, 3, 4})
    wait_for("a controller in /controller", lambda: zk.exists("/controller"), 30)
    bs = ["--bootstrap-server", cluster.bootstrap_servers]
    create = ["--create", "--topic", TOPIC, "--replica-assignment", "1:2:3,2:3:1"]
    tool(version, "kafka-topics", *bs, *create, "--config", "min.insync.replicas=2")
    zk.wait_until_isr(TOPIC, [0, 1], {1, 2, 3})
    writer = BackgroundProducer(
        cluster.bootstrap_servers, TOPIC, 2, rate=200, enable_idempotence=True, message_timeout_ms=60000
    )
    try:
        wait_for("first writes acknowledged", lambda: writer.acked_since(0.0), 30)
        # Records broker 4 must copy before it can join the ISR.
        wait_for("a few thousand records", lambda: len(writer.acked) >= 2000, 60)

        def plan(name: str, replicas: list[int]) -> str:
            path = tmp_path / name
            move = {"topic": TOPIC, "partition": 0, "replicas": replicas}
            path.write_text(json.dumps({"version": 1, "partitions": [move]}))
            return str(path)

        refused = tool(
            version,
            "kafka-reassign-partitions",
            *bs,
            "--reassignment-json-file",
            plan("dead.json", [1, 2, 9]),
            "--execute",
            check=False,
        )
        assert refused.returncode != 0 and "9" in refused.stdout + refused.stderr, refused
        assert zk.assignment(TOPIC)[0] == [1, 2, 3]

        target = plan("move.json", [1, 2, 4])
        out = tool(
            version, "kafka-reassign-partitions", *bs, "--reassignment-json-file", target, "--execute"
        ).stdout
        assert f"Successfully started partition reassignment for {TOPIC}-0" in out, out

        def verified() -> bool:
            out = tool(
                version, "kafka-reassign-partitions", *bs, "--reassignment-json-file", target, "--verify"
            ).stdout
            return f"Reassignment of partition {TOPIC}-0 is completed" in out

        wait_for(f"{TOPIC}-0 moved to [1, 2, 4]", verified, 120, 1.0)
        after = time.monotonic()
        wait_for("writes acknowledged after the move", lambda: writer.acked_since(after), 30)
    finally:
        writer.stop()
    assert not writer.failed, writer.failed[:5]
    assert zk.assignment(TOPIC) == {0: [1, 2, 4], 1: [2, 3, 1]}
    topic = zk.json(f"/brokers/topics/{TOPIC}")
    assert (topic["adding_replicas"], topic["removing_replicas"]) == ({}, {}), topic
    zk.wait_until_isr(TOPIC, [0], {1, 2, 4})
    assert set(zk.isr(TOPIC, 0)) == {1, 2, 4}
    assert (
        "No partition reassignments found" in tool(version, "kafka-reassign-partitions", *bs, "--list").stdout
    )

    consumed = consume_all(
        cluster.bootstrap_servers, TOPIC, [0, 1], timeout=120, settle=next_offsets(writer.acked)
    )
    verdict = check_acknowledged(writer.acked, consumed)
    assert verdict.ok, verdict

    def moved_copies() -> bool:
        logs = replica_logs(cluster, TOPIC, [0])
        kept = [[r[:3] for r in logs[n][0][0]] for n in (1, 2, 4)]
        return kept[0] == kept[1] == kept[2] and len(kept[0]) == len(consumed[0]) and not logs[3][0][0]

    wait_for("brokers 1, 2 and 4 holding t-0 alike and broker 3 none of it", moved_copies, 30, 0.5)

    # A move that cannot complete (its new replica stalled) is listed, and cancelling it
    # goes back to the replicas it started from.
    stalled = plan("stalled.json", [1, 2, 3])
    if zk.controller() == 3:
        # The controller must answer while broker 3 is paused: it moves away first.
        cluster.terminate(3)  # a clean stop: it deregisters and gives up /controller at once
        wait_for("another controller", lambda: zk.exists("/controller") and zk.controller() != 3, 30)
        cluster.start(3)
        zk.wait_until_registered({3})
        cluster.wait_until_ready()
    cluster.pause(3)
    # Not bootstrapped from the paused broker: a client would wait out its request
    # timeout there, longer than the paused broker's ZooKeeper session lasts.
    bs = ["--bootstrap-server", ",".join(str(cluster.address(n)) for n in (1, 2, 4))]
    try:
        tool(version, "kafka-reassign-partitions", *bs, "--reassignment-json-file", stalled, "--execute")
        assert zk.assignment(TOPIC)[0] == [1, 2, 3, 4]
        listed = tool(version, "kafka-reassign-partitions", *bs, "--list").stdout
        assert re.search(rf"{TOPIC}-0: replicas: 1,2,3,4\. adding: 3\. removing: 4", listed), listed
        # The paused broker could not take the throttle clearing that follows a cancel.
        cancel = ["--reassignment-json-file", stalled, "--cancel", "--preserve-throttles"]
        out = tool(version, "kafka-reassign-partitions", *bs, *cancel).stdout
        assert re.search(rf"Successfully cancelled partition reassignment for:? {TOPIC}-0", out), out
        assert zk.assignment(TOPIC)[0] == [1, 2, 4]
        topic = zk.json(f"/brokers/topics/{TOPIC}")
        assert (topic["adding_replicas"], topic["removing_replicas"]) == ({}, {}), topic
    finally:
        cluster.resume(3)
