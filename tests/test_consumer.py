"""The Consumer: subscriptions, positions, polling and waiting, Arrow batches, group offsets, and
records exchanged with a producer in another process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import seglog
from seglog import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition

WAIT_MS = 30_000  # an upper bound for waits that should end at once (never asserted on)
TP0, TP1, TP2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


def run_python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a fresh interpreter: a separate process, as another program would be."""
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )


def fill(store: seglog.Store, partitions: int = 3, per_partition: int = 10) -> None:
    """Topic "t": record i of partition p has value b"p<p>-<i>"."""
    store.create_topic("t", partitions=partitions)
    for p in range(partitions):
        store.append("t", p, [b"p%d-%d" % (p, i) for i in range(per_partition)])


def as_tuples(records: Any) -> list[tuple[str, int, int, bytes | None]]:
    return [(r.topic, r.partition, r.offset, r.value) for r in records]


def flat(polled: dict[TopicPartition, list[seglog.ConsumerRecord]]) -> list[seglog.ConsumerRecord]:
    return [r for records in polled.values() for r in records]


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[seglog.Store]:
    """One store for the many quick misuse cases, with topic "t" filled."""
    s = seglog.open(tmp_path_factory.mktemp("shared") / "store")
    fill(s)
    yield s
    s.close()


# -- subscribing, iterating, polling ----------------------------------------------------


def test_subscribe_and_iterate_until_consumer_timeout(store: seglog.Store) -> None:
    fill(store)
    consumer = seglog.Consumer(store, "t", auto_offset_reset="earliest", consumer_timeout_ms=100)
    assert consumer.subscription() == {"t"}
    assert consumer.assignment() == {TP0, TP1, TP2}
    records = list(consumer)  # ends once no record came for 100 ms
    assert sorted(as_tuples(records)) == [
        ("t", p, i, b"p%d-%d" % (p, i)) for p in range(3) for i in range(10)
    ]
    for p in range(3):
        assert [r.offset for r in records if r.partition == p] == list(range(10)), "in order per partition"
        assert consumer.position(("t", p)) == 10
    assert list(consumer) == [], "nothing twice"
    store.append("t", 1, [b"late"])
    assert as_tuples(consumer) == [("t", 1, 10, b"late")]
    consumer.close()


def test_default_reset_is_latest(store: seglog.Store) -> None:
    fill(store)
    consumer = seglog.Consumer(store, "t", consumer_timeout_ms=0)
    assert {tp: consumer.position(tp) for tp in consumer.assignment()} == {TP0: 10, TP1: 10, TP2: 10}
    assert consumer.poll() == {}
    store.append("t", 2, [b"new"])
    assert as_tuples(flat(consumer.poll(timeout_ms=WAIT_MS))) == [("t", 2, 10, b"new")]


def test_poll_respects_max_records_without_loss_or_duplicates(store: seglog.Store) -> None:
    fill(store, per_partition=25)
    consumer = seglog.Consumer(store, "t", auto_offset_reset="earliest", max_poll_records=7)
    seen: list[tuple[str, int, int, bytes | None]] = []
    while polled := consumer.poll():
        assert sum(map(len, polled.values())) <= 7
        for tp, records in polled.items():
            assert all(r.partition == tp.partition and r.topic == tp.topic for r in records)
            assert consumer.position(tp) == records[-1].offset + 1
        seen += as_tuples(flat(polled))
    assert sorted(seen) == [("t", p, i, b"p%d-%d" % (p, i)) for p in range(3) for i in range(25)]
    consumer.seek_to_beginning()
    assert sum(map(len, consumer.poll(max_records=60).values())) == 60, "max_records overrides per call"
    assert sum(map(len, consumer.poll(max_records=1000).values())) == 15
    with pytest.raises(ValueError, match="max_records"):
        consumer.poll(max_records=0)


def test_stopping_an_iteration_leaves_an_exact_position(store: seglog.Store) -> None:
    fill(store, partitions=1, per_partition=20)
    consumer = seglog.Consumer(store, "t", auto_offset_reset="earliest", consumer_timeout_ms=0)
    for r in consumer:
        if r.offset == 6:
            break
    assert consumer.position(TP0) == 7
    assert [r.offset for r in flat(consumer.poll(max_records=3))] == [7, 8, 9]
    assert [r.offset for r in consumer] == list(range(10, 20))


def test_max_partition_fetch_bytes(store: seglog.Store) -> None:
    store.create_topic("t", partitions=2)
    for _ in range(3):
        for p in range(2):
            store.append("t", p, [b"x" * 10] * 5)  # three batches of five per partition
    small = seglog.Consumer(store, "t", auto_offset_reset="earliest", max_partition_fetch_bytes=1)
    assert {tp: len(rs) for tp, rs in small.poll().items()} == {TP0: 5, TP1: 5}, "one batch each"
    big = seglog.Consumer(store, "t", auto_offset_reset="earliest")
    assert {tp: len(rs) for tp, rs in big.poll().items()} == {TP0: 15, TP1: 15}


def test_assign(store: seglog.Store) -> None:
    fill(store)
    consumer = seglog.Consumer(store, auto_offset_reset="earliest")
    assert consumer.assignment() == set() and consumer.subscription() is None
    assert consumer.poll() == {}
    consumer.assign([("t", 2), TP0, ("t", 2)])
    assert consumer.assignment() == {TP0, TP2}
    polled = consumer.poll(max_records=100)
    assert set(polled) == {TP0, TP2} and len(polled[TP2]) == 10
    with pytest.raises(seglog.IllegalStateError, match="subscribe"):
        consumer.subscribe(["t"])
    with pytest.raises(seglog.IllegalStateError, match="not assigned"):
        consumer.position(TP1)
    with pytest.raises(seglog.IllegalStateError, match="not assigned"):
        consumer.seek(TP1, 0)
    with pytest.raises(seglog.UnknownTopicOrPartitionError):
        consumer.assign([("t", 3)])
    with pytest.raises(seglog.UnknownTopicOrPartitionError):
        consumer.assign([("missing", 0)])
    assert consumer.assignment() == {TP0, TP2}, "a refused assign changes nothing"
    consumer.assign([TP1])
    assert consumer.assignment() == {TP1}
    assert [r.value for r in flat(consumer.poll())][:2] == [b"p1-0", b"p1-1"]
    subscribed = seglog.Consumer(store, "t")
    with pytest.raises(seglog.IllegalStateError, match="assign"):
        subscribed.assign([TP0])
    subscribed.unsubscribe()
    assert subscribed.assignment() == set() and subscribed.subscription() is None
    subscribed.subscribe(["t"])
    assert subscribed.assignment() == {TP0, TP1, TP2}


def test_unsubscribe_clears_a_manual_assignment(store: seglog.Store) -> None:
    fill(store)
    consumer = seglog.Consumer(store)
    consumer.assign([TP0])
    consumer.unsubscribe()
    assert consumer.assignment() == set()
    consumer.subscribe(["t"])
    assert consumer.assignment() == {TP0, TP1, TP2}


def test_subscribe_arguments(store: seglog.Store) -> None:
    fill(store)
    store.create_topic("u")
    consumer = seglog.Consumer(store)
    consumer.subscribe("u")  # one name
    assert consumer.subscription() == {"u"} and consumer.assignment() == {TopicPartition("u", 0)}
    consumer.subscribe(["t", "missing"])  # replaces; a missing topic has no partitions yet
    assert consumer.subscription() == {"t", "missing"} and consumer.assignment() == {TP0, TP1, TP2}
    with pytest.raises(ValueError, match="topics or a pattern"):
        consumer.subscribe([])


# -- positions ----------------------------------------------------------------------------


def test_seek_and_offsets(store: seglog.Store) -> None:
    store.create_topic("t", partitions=2)
    store.append("t", 0, [(None, b"a%d" % i, None, 1000 + 10 * i) for i in range(10)])
    store.append("t", 1, [(None, b"b%d" % i, None, 5000 + i) for i in range(4)])
    consumer = seglog.Consumer(store, "t", auto_offset_reset="earliest")
    assert consumer.beginning_offsets([TP0, ("t", 1)]) == {TP0: 0, TP1: 0}
    assert consumer.end_offsets([TP0, TP1]) == {TP0: 10, TP1: 4}
    consumer.seek(TP0, 7)
    assert consumer.position(TP0) == 7
    assert [r.value for r in consumer.poll(max_records=100)[TP0]] == [b"a7", b"a8", b"a9"]
    consumer.seek(("t", 0), 2)
    assert consumer.poll(max_records=100)[TP0][0].offset == 2
    consumer.seek_to_beginning(TP0)
    assert consumer.position(TP0) == 0 and consumer.position(TP1) == 4
    consumer.seek_to_end()
    assert (consumer.position(TP0), consumer.position(TP1)) == (10, 4)
    assert consumer.poll() == {}
    consumer.seek_to_beginning()
    assert (consumer.position(TP0), consumer.position(TP1)) == (0, 0)
    consumer.seek_to_end(TP1)
    assert (consumer.position(TP0), consumer.position(TP1)) == (0, 4)
    with pytest.raises(ValueError, match="offset"):
        consumer.seek(TP0, -1)
    assert consumer.offsets_for_times({TP0: 1035, ("t", 1): 0}) == {
        TP0: OffsetAndTimestamp(4, 1040),
        TP1: OffsetAndTimestamp(0, 5000),
    }
    assert consumer.offsets_for_times({TP0: 10**12}) == {TP0: None}
    with pytest.raises(ValueError, match="timestamps"):
        consumer.offsets_for_times({TP0: -5})
    store.truncate_to("t", 0, 5)  # the end moves back
    assert consumer.end_offsets([TP0]) == {TP0: store.offsets("t", 0)[1]}


def test_seek_while_iterating_takes_effect_at_once(store: seglog.Store) -> None:
    fill(store, partitions=1, per_partition=10)
    consumer = seglog.Consumer(store, "t", auto_offset_reset="earliest", consumer_timeout_ms=0)
    offsets = []
    for r in consumer:
        offsets.append(r.offset)
        if len(offsets) == 6:
            consumer.seek(TP0, 2)
    assert offsets == [0, 1, 2, 3, 4, 5, 2, 3, 4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("how", ["seek-past-end", "truncate", "delete-records"])
@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
@pytest.mark.parametrize("api", ["poll", "poll_arrow"])
def test_out_of_range_position_is_reset_per_policy(
    store: seglog.Store, how: str, reset: str, api: str
) -> None:
    store.create_topic("t")
    for i in range(10):
        store.append("t", 0, [b"%d" % i])  # a batch per record: truncate_to is exact
    consumer = seglog.Consumer(store, auto_offset_reset=reset)
    consumer.assign([TP0])
    if how == "seek-past-end":
        consumer.seek(TP0, 1000)
    elif how == "truncate":
        consumer.seek(TP0, 8)
        store.truncate_to("t", 0, 5)  # the log now ends at 5: position 8 is past it
    else:
        consumer.seek(TP0, 1)
        store.delete_records("t", 0, 4)  # the log now starts at 4: position 1 is before it
        assert consumer.beginning_offsets([TP0]) == {TP0: 4}
    start, end = store.offsets("t", 0)
    assert not start <= consumer.position(TP0) <= end

    def fetch() -> list[int]:
        if api == "poll":
            return [r.offset for r in flat(consumer.poll())]
        return consumer.poll_arrow().column("offset").to_pylist()

    if reset == "none":
        with pytest.raises(seglog.OffsetOutOfRangeError):
            fetch()
        return
    got = fetch()
    while not got and consumer.position(TP0) < end and reset == "earliest":
        got = fetch()  # a reset may take one fetch; the records come with the next
    if reset == "earliest":
        assert got == list(range(start, end))
    else:
        assert got == [] and consumer.position(TP0) == end
        store.append("t", 0, [b"after"])
        assert [r.value for r in flat(consumer.poll(timeout_ms=WAIT_MS))] == [b"after"]


def test_auto_offset_reset_none_without_a_committed_offset(store: seglog.Store) -> None:
    fill(store, partitions=2)
    consumer = seglog.Consumer(store, "t", group_id="g", auto_offset_reset="none", enable_auto_commit=False)
    with pytest.raises(seglog.NoOffsetForPartitionError, match="t-"):
        consumer.poll()
    with pytest.raises(seglog.NoOffsetForPartitionError):
        consumer.poll_arrow()
    with pytest.raises(seglog.NoOffsetForPartitionError):
        list(seglog.Consumer(store, "t", auto_offset_reset="none", consumer_timeout_ms=0))
    with pytest.raises(seglog.NoOffsetForPartitionError):
        consumer.position(TP0)
    consumer.commit({TP0: 3, TP1: OffsetAndMetadata(8, "meta")})
    assert (consumer.committed(TP0), consumer.committed(TP1)) == (3, 8)
    assert (consumer.position(TP0), consumer.position(TP1)) == (3, 8)
    assert sorted(as_tuples(flat(consumer.poll(max_records=100)))) == [
        *[("t", 0, i, b"p0-%d" % i) for i in range(3, 10)],
        *[("t", 1, i, b"p1-%d" % i) for i in range(8, 10)],
    ]
    consumer.close()


# -- consumer groups ------------------------------------------------------------------------


def test_committed_offsets_survive_a_restart(store_path: Path) -> None:
    with seglog.open(store_path) as store:
        fill(store, partitions=2)
        consumer = seglog.Consumer(
            store, "t", group_id="g", auto_offset_reset="earliest", enable_auto_commit=False
        )
        assert consumer.committed(TP0) is None
        assert len(flat(consumer.poll(max_records=4))) == 4
        consumer.commit()  # the positions of the partitions consumed
        committed = {tp: consumer.committed(tp) for tp in (TP0, TP1)}
        assert sum(v or 0 for v in committed.values()) == 4
        consumer.commit({TP1: OffsetAndMetadata(6, "checkpoint")})
        committed[TP1] = 6
        consumer.close()
        assert "__consumer_offsets" in store.topics()
        assert store.describe("__consumer_offsets").config["cleanup.policy"] == "compact"
        other = seglog.Consumer(store, "t", group_id="other", auto_offset_reset="earliest")
        assert other.committed(TP0) is None, "groups are separate"
        other.close()
    with seglog.open(store_path) as store:  # a new session
        consumer = seglog.Consumer(store, "t", group_id="g", auto_offset_reset="none")
        assert {tp: consumer.committed(tp) for tp in (TP0, TP1)} == committed
        if committed[TP0] is None:
            consumer.commit({TP0: 0})
            committed[TP0] = 0
        got = sorted(as_tuples(flat(consumer.poll(max_records=100))))
        assert got == [
            ("t", p, i, b"p%d-%d" % (p, i)) for p in range(2) for i in range(committed[("t", p)], 10)
        ]
        consumer.close()  # auto-commit on close
    with seglog.open(store_path) as store:
        consumer = seglog.Consumer(store, "t", group_id="g", auto_offset_reset="none", consumer_timeout_ms=0)
        assert (consumer.committed(TP0), consumer.committed(TP1)) == (10, 10)
        assert list(consumer) == []
        consumer.close()


def test_close_commits_the_exact_position_of_an_iteration(store_path: Path) -> None:
    with seglog.open(store_path) as store:
        fill(store, partitions=1, per_partition=30)
        with seglog.Consumer(
            store, "t", group_id="g", auto_offset_reset="earliest", consumer_timeout_ms=0
        ) as c:
            for r in c:
                if r.offset == 11:
                    break
        assert c.closed
    with seglog.open(store_path) as store:
        consumer = seglog.Consumer(store, "t", group_id="g", consumer_timeout_ms=0)
        assert consumer.committed(TP0) == 12
        assert [r.offset for r in consumer] == list(range(12, 30))
        consumer.close()


def test_auto_commit_interval_and_disabled_auto_commit(store: seglog.Store) -> None:
    fill(store, partitions=1, per_partition=20)
    consumer = seglog.Consumer(
        store, "t", group_id="auto", auto_offset_reset="earliest", auto_commit_interval_ms=1
    )
    assert len(flat(consumer.poll(max_records=5))) == 5
    time.sleep(0.01)  # past the 1 ms interval: the next poll commits first
    assert [r.offset for r in flat(consumer.poll(max_records=3))] == [5, 6, 7]
    assert consumer.committed(TP0) == 5
    consumer.close(autocommit=False)  # as if the process died here
    resumed = seglog.Consumer(store, "t", group_id="auto", auto_offset_reset="none")
    assert resumed.position(TP0) == 5
    resumed.close(autocommit=False)

    manual = seglog.Consumer(
        store, "t", group_id="manual", auto_offset_reset="earliest", enable_auto_commit=False
    )
    assert len(flat(manual.poll(max_records=100))) == 20
    manual.close()  # no auto-commit: nothing committed
    again = seglog.Consumer(store, "t", group_id="manual", auto_offset_reset="earliest")
    assert again.committed(TP0) is None and again.position(TP0) == 0
    again.close()


def test_a_group_has_one_member_at_a_time(store: seglog.Store, store_path: Path) -> None:
    fill(store, partitions=1)
    first = seglog.Consumer(store, "t", group_id="g")
    with pytest.raises(seglog.GroupInUseError, match=f"pid {os.getpid()}"):
        seglog.Consumer(store, "t", group_id="g")
    code = textwrap.dedent(
        """
        import sys, seglog
        try:
            seglog.Consumer(sys.argv[1], "t", group_id="g", read_only=True, enable_auto_commit=False)
        except seglog.GroupInUseError as e:
            print(e)
            sys.exit(3)
        c = seglog.Consumer(sys.argv[1], "t", group_id="h", read_only=True, enable_auto_commit=False)
        c.close()
        """
    )
    r = run_python(code, str(store_path))
    assert r.returncode == 3 and f"pid {os.getpid()}" in r.stdout, r.stderr
    seglog.Consumer(store, "t", group_id="other").close()  # another group is free
    first.close()
    second = seglog.Consumer(store, "t", group_id="g")  # free again once the member leaves
    r = run_python(code, str(store_path))
    assert r.returncode == 3, "held by this process's new member"
    second.close()
    r = run_python(code, str(store_path))
    assert r.returncode == 0, r.stderr + r.stdout


def test_group_consumers_on_a_read_only_store(store: seglog.Store, store_path: Path) -> None:
    fill(store, partitions=1)
    writer_side = seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False)
    writer_side.commit({TP0: 4})
    writer_side.close()
    reader = seglog.open(store_path, read_only=True)
    with pytest.raises(seglog.ReadOnlyStoreError, match="enable_auto_commit=False"):
        seglog.Consumer(reader, "t", group_id="g")
    consumer = seglog.Consumer(reader, "t", group_id="g", enable_auto_commit=False)
    assert consumer.committed(TP0) == 4
    assert [r.offset for r in flat(consumer.poll(max_records=100))] == list(range(4, 10))
    with pytest.raises(seglog.ReadOnlyStoreError):
        consumer.commit()
    consumer.close()
    plain = seglog.Consumer(reader, "t", auto_offset_reset="earliest")  # no group: reading is fine
    assert len(flat(plain.poll(max_records=100))) == 10
    plain.close()
    reader.close()


def test_commit_and_committed_need_a_group(store: seglog.Store) -> None:
    fill(store, partitions=1)
    consumer = seglog.Consumer(store, "t")
    with pytest.raises(seglog.IllegalStateError, match="group_id"):
        consumer.commit()
    with pytest.raises(seglog.IllegalStateError, match="group_id"):
        consumer.committed(TP0)
    grouped = seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False)
    with pytest.raises(ValueError, match="offset"):
        grouped.commit({TP0: -1})
    assert grouped.committed(TP0) is None
    grouped.close()


# -- Arrow -------------------------------------------------------------------------------------


def test_poll_arrow_matches_iteration_across_partitions(store: seglog.Store) -> None:
    store.create_topic("t", partitions=3)
    store.create_topic("lat", config={"message.timestamp.type": "LogAppendTime"})
    with seglog.Producer(store, linger_ms=600_000, batch_size=8192, compression_type="lz4") as producer:
        for i in range(6000):
            key = None if i % 4 == 0 else b"key-%d" % (i % 97)
            value = None if i % 7 == 0 else b"value-%d-" % i + b"x" * (i % 300)
            headers = [] if i % 3 == 0 else [("seq", b"%d" % i), ("none", None), ("ü", b"")][: i % 3 + 1]
            producer.send("t", value, key=key, headers=headers, timestamp=1_600_000_000_000 + i)
        producer.send_batch("t", [b"bulk"] * 500, partition=1)
        producer.send("lat", b"appended", timestamp=5)
    consumer = seglog.Consumer(store, "t", "lat", auto_offset_reset="earliest", consumer_timeout_ms=0)
    records = list(consumer)
    assert len(records) == 6501
    arrow = seglog.Consumer(store, "t", "lat", auto_offset_reset="earliest")
    batches = []
    while (batch := arrow.poll_arrow(max_records=1000)).num_rows:
        assert batch.num_rows <= 1000
        batches.append(batch)
    assert len(batches) > 6
    table = pa.Table.from_batches(batches)
    assert table.schema == pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    )
    micros = table.column("timestamp").cast(pa.int64()).to_pylist()
    rows = [
        (
            row["topic"],
            row["partition"],
            row["offset"],
            row["key"],
            row["value"],
            us,
            row["timestampType"],
            tuple((h["key"], h["value"]) for h in row["headers"]),
        )
        for row, us in zip(table.to_pylist(), micros, strict=True)
    ]
    expected = [
        (r.topic, r.partition, r.offset, r.key, r.value, r.timestamp * 1000, r.timestamp_type, r.headers)
        for r in records
    ]
    assert sorted(rows, key=lambda x: x[:3]) == sorted(expected, key=lambda x: x[:3])
    assert {(topic, p) for topic, p, *_ in rows} == {("t", 0), ("t", 1), ("t", 2), ("lat", 0)}
    (lat,) = [r for r in records if r.topic == "lat"]
    assert lat.timestamp_type == 1 and lat.timestamp != 5, "LogAppendTime in both"
    assert table.column("key").null_count == sum(r.key is None for r in records) > 0
    assert table.column("value").null_count == sum(r.value is None for r in records) > 0
    assert all(arrow.position(tp) == store.offsets(tp.topic, tp.partition)[1] for tp in arrow.assignment())
    empty = arrow.poll_arrow()
    assert empty.num_rows == 0 and empty.schema == table.schema


def test_poll_arrow_continues_where_iteration_and_poll_stopped(store: seglog.Store) -> None:
    fill(store, partitions=2, per_partition=50)
    consumer = seglog.Consumer(store, "t", auto_offset_reset="earliest", consumer_timeout_ms=0)
    taken = []
    for r in consumer:
        taken.append((r.partition, r.offset))
        if len(taken) == 5:
            break
    polled = consumer.poll(max_records=3)
    taken += [(r.partition, r.offset) for r in flat(polled)]
    batch = consumer.poll_arrow()
    taken += list(zip(batch.column("partition").to_pylist(), batch.column("offset").to_pylist(), strict=True))
    assert sorted(taken) == [(p, i) for p in range(2) for i in range(50)], "none lost, none twice"
    assert list(consumer) == [] and consumer.poll() == {}
    consumer.seek(TP1, 45)
    assert consumer.poll_arrow(max_records=2).column("offset").to_pylist() == [45, 46]
    assert [r.offset for r in flat(consumer.poll())] == [47, 48, 49]


def test_a_commit_after_an_early_stop_covers_partitions_not_reached(store: seglog.Store) -> None:
    fill(store, partitions=2, per_partition=5)
    with seglog.Consumer(store, "t", group_id="g", auto_offset_reset="earliest", consumer_timeout_ms=0) as c:
        first = next(iter(c))
    with seglog.Consumer(store, "t", group_id="g", auto_offset_reset="latest", consumer_timeout_ms=0) as c:
        rest = [(r.partition, r.offset) for r in c]
    assert sorted([(first.partition, first.offset), *rest]) == [(p, i) for p in range(2) for i in range(5)]


def test_an_iterator_left_mid_chunk_hands_out_nothing_taken_since(store: seglog.Store) -> None:
    # The iterator keeps its chunk between calls: what poll(), poll_arrow() or a
    # seek() took from under it since must not come out of it again.
    fill(store, partitions=1, per_partition=100)
    consumer = seglog.Consumer(store, "t", auto_offset_reset="earliest", consumer_timeout_ms=0)
    it = iter(consumer)
    seen = [next(it).offset for _ in range(3)]
    seen += [r.offset for r in flat(consumer.poll(max_records=4))]
    seen.append(next(it).offset)
    assert seen == list(range(8))
    assert consumer.poll_arrow(max_records=10).column("offset").to_pylist() == list(range(8, 18))
    assert next(it).offset == 18
    consumer.seek(TP0, 90)
    assert [r.offset for r in it] == list(range(90, 100))
    assert consumer.position(TP0) == 100


# -- waiting for data --------------------------------------------------------------------------


def test_poll_returns_data_produced_by_another_thread(store: seglog.Store) -> None:
    store.create_topic("t", partitions=2)
    consumer = seglog.Consumer(store, "t")  # latest: only what comes next
    assert consumer.position(TP0) == consumer.position(TP1) == 0
    with seglog.Producer(store, linger_ms=0) as producer:

        def produce_soon(value: bytes, partition: int) -> threading.Thread:
            t = threading.Thread(
                target=lambda: (time.sleep(0.2), producer.send("t", value, partition=partition))
            )
            t.start()
            return t

        t = produce_soon(b"one", 1)
        polled = consumer.poll(timeout_ms=WAIT_MS)
        t.join()
        assert as_tuples(flat(polled)) == [("t", 1, 0, b"one")]

        t = produce_soon(b"two", 0)
        batch = consumer.poll_arrow(timeout_ms=WAIT_MS)
        t.join()
        assert batch.column("value").to_pylist() == [b"two"]

        iterating = seglog.Consumer(store, "t", consumer_timeout_ms=WAIT_MS)
        assert iterating.position(TP0) == iterating.position(TP1) == 1
        t = produce_soon(b"three", 1)
        first = next(iter(iterating))
        t.join()
        assert (first.partition, first.offset, first.value) == (1, 1, b"three")


POLLER = textwrap.dedent(
    """
    import json, sys, seglog
    # read_only=None: the writer holds the store, so this falls back to read-only.
    consumer = seglog.Consumer(sys.argv[1], "t")  # latest: only what comes next
    positions = {tp.partition: consumer.position(tp) for tp in consumer.assignment()}
    print(json.dumps(positions), flush=True)
    polled = consumer.poll(timeout_ms=60_000)
    records = [[r.partition, r.offset, r.value.decode()] for rs in polled.values() for r in rs]
    try:
        seglog.Consumer(sys.argv[1], "t", group_id="g")
        read_only = False
    except seglog.ReadOnlyStoreError:
        read_only = True
    print(json.dumps({"records": records, "read_only": read_only}), flush=True)
    """
)


def test_poll_returns_data_produced_by_another_process(store: seglog.Store, store_path: Path) -> None:
    store.create_topic("t", partitions=3)
    store.append("t", 0, [b"old"])
    child = subprocess.Popen(
        [sys.executable, "-c", POLLER, str(store_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready = child.stdout.readline()
        assert json.loads(ready) == {"0": 1, "1": 0, "2": 0}, ready
        with seglog.Producer(store, linger_ms=0) as producer:
            time.sleep(0.2)  # let the child settle into its wait
            producer.send("t", b"fresh", partition=2).get(timeout=WAIT_MS / 1000)
        out, err = child.communicate(timeout=120)
    except BaseException:
        child.kill()
        child.communicate()
        raise
    assert child.returncode == 0, err
    assert json.loads(out) == {"records": [[2, 0, "fresh"]], "read_only": True}


CONSUMER_PROCESS = textwrap.dedent(
    """
    import json, sys, seglog
    path, total = sys.argv[1], int(sys.argv[2])
    consumer = seglog.Consumer(path, "t", auto_offset_reset="earliest", read_only=True,
                               consumer_timeout_ms=30_000)
    seen = bytearray(total)
    last = {}
    count = dupes = bad = disorder = 0
    for r in consumer:
        seq = int(r.value[1:])
        # Each record's value (and key, where it has one) encodes its sequence number.
        if r.value != b"v%d" % seq or (r.key is not None and r.key != b"%d" % seq):
            bad += 1
        if seen[seq]:
            dupes += 1
        seen[seq] = 1
        # The producer is one thread: per partition, sequence numbers only grow.
        if last.get(r.partition, -1) >= seq:
            disorder += 1
        last[r.partition] = seq
        count += 1
        if count == total:
            break
    extra = sum(len(rs) for rs in consumer.poll(timeout_ms=300).values())
    print(json.dumps({"count": count, "distinct": sum(seen), "dupes": dupes, "bad": bad,
                      "disorder": disorder, "extra": extra, "partitions": sorted(last)}))
    """
)


def test_a_million_records_to_a_read_only_consumer_process(store: seglog.Store, store_path: Path) -> None:
    total = 1_000_000
    store.create_topic("t", partitions=4, config={"segment.bytes": 4 << 20})
    child = subprocess.Popen(
        [sys.executable, "-c", CONSUMER_PROCESS, str(store_path), str(total)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seq = 0

        def values(n: int) -> list[bytes]:
            return [b"v%d" % i for i in range(seq, seq + n)]

        def keys(n: int) -> list[bytes]:
            return [b"%d" % i for i in range(seq, seq + n)]

        with seglog.Producer(store) as producer:
            for round_ in range(4):
                producer.send_batch("t", values(150_000), keys=keys(150_000))  # keyed lists
                seq += 150_000
                producer.send_batch("t", pa.array(values(60_000), type=pa.binary()))  # unkeyed arrow
                seq += 60_000
                for _ in range(5000):  # one by one, keyed and unkeyed
                    key = b"%d" % seq if seq % 2 else None
                    producer.send("t", b"v%d" % seq, key=key)
                    seq += 1
                vals = pa.array([v.decode() for v in values(20_000)], type=pa.large_string())
                producer.send_batch(
                    "t", vals, keys=pa.array(keys(20_000), type=pa.large_binary()), partition=round_
                )
                seq += 20_000
            producer.send_batch("t", values(total - seq), keys=keys(total - seq), partition=2)
            seq = total
        out, err = child.communicate(timeout=120)
    except BaseException:
        child.kill()
        child.communicate()
        raise
    assert child.returncode == 0, err
    report = json.loads(out)
    assert report == {
        "count": total,
        "distinct": total,
        "dupes": 0,
        "bad": 0,
        "disorder": 0,
        "extra": 0,
        "partitions": [0, 1, 2, 3],
    }
    assert sum(store.offsets("t", p)[1] for p in range(4)) == total
    assert sum(p.segment_count for p in store.describe("t").partitions) > 4, (
        "the reader crossed segment rolls"
    )


# -- pattern subscription -------------------------------------------------------------------------


def test_pattern_subscription_picks_up_a_topic_created_later(store: seglog.Store) -> None:
    store.create_topic("logs-a")
    store.create_topic("metrics")
    consumer = seglog.Consumer(store, auto_offset_reset="earliest", metadata_max_age_ms=50)
    consumer.subscribe(pattern=r"logs-.*")
    assert consumer.assignment() == {TopicPartition("logs-a", 0)}
    with seglog.Producer(store, linger_ms=0) as producer:
        # Created by the producer (auto-create), from another thread, while the consumer waits.
        t = threading.Thread(target=lambda: (time.sleep(0.2), producer.send("logs-b", b"hello").get()))
        t.start()
        polled = consumer.poll(timeout_ms=WAIT_MS)
        t.join()
        producer.send("metrics", b"not matched").get()
        producer.send("xlogs-c", b"not matched either: the whole name must match").get()
    assert as_tuples(flat(polled)) == [("logs-b", 0, 0, b"hello")]
    time.sleep(0.06)  # past metadata_max_age_ms
    assert consumer.assignment() == {TopicPartition("logs-a", 0), TopicPartition("logs-b", 0)}
    assert consumer.poll() == {}
    # Internal topics are left out of patterns, but may be subscribed by name.
    grouped = seglog.Consumer(store, "metrics", group_id="g", auto_offset_reset="earliest")
    grouped.poll()
    grouped.close()
    everything = seglog.Consumer(store, auto_offset_reset="earliest")
    everything.subscribe(pattern=".*")
    assert {tp.topic for tp in everything.assignment()} == {"logs-a", "logs-b", "metrics", "xlogs-c"}
    internal = seglog.Consumer(store, "__consumer_offsets", auto_offset_reset="earliest")
    assert {tp.topic for tp in internal.assignment()} == {"__consumer_offsets"}
    assert len(flat(internal.poll())) == 1, "the group's commit"


# -- lifecycle and misuse -----------------------------------------------------------------------


def test_closed_consumer_raises(store: seglog.Store) -> None:
    fill(store)
    consumer = seglog.Consumer(store, "t", group_id="g", auto_offset_reset="earliest")
    consumer.poll()
    consumer.close()
    assert consumer.closed
    consumer.close()  # twice is fine
    for call in (
        lambda: consumer.poll(),
        lambda: consumer.poll_arrow(),
        lambda: list(consumer),
        lambda: consumer.position(TP0),
        lambda: consumer.seek(TP0, 0),
        lambda: consumer.seek_to_beginning(TP0),
        lambda: consumer.seek_to_end(TP0),
        lambda: consumer.commit(),
        lambda: consumer.commit({TP0: 1}),
        lambda: consumer.committed(TP0),
        lambda: consumer.subscribe(["t"]),
        lambda: consumer.assign([TP0]),
        lambda: consumer.offsets_for_times({TP0: 0}),
    ):
        with pytest.raises(seglog.ClientClosedError, match="closed"):
            call()
    assert not store.closed, "a Store passed in stays the caller's"
    with seglog.Consumer(store, "t") as c:
        pass
    assert c.closed
    with pytest.raises(seglog.ClientClosedError):
        c.poll()


@pytest.mark.parametrize("method", ["beginning_offsets", "end_offsets"])
def test_closed_consumer_refuses_offset_lookups(store: seglog.Store, method: str) -> None:
    fill(store)
    consumer = seglog.Consumer(store, "t")
    consumer.close()
    with pytest.raises(seglog.ClientClosedError):
        getattr(consumer, method)([TP0])


def test_consumer_on_a_path_opens_and_closes_its_store(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with seglog.open(path) as store:
        fill(store, partitions=1)
    consumer = seglog.Consumer(path, "t", group_id="g", auto_offset_reset="earliest", consumer_timeout_ms=0)
    assert len(list(consumer)) == 10
    consumer.close()
    # Closed with the consumer (lock released): another process may write now.
    r = run_python("import sys, seglog; s = seglog.open(sys.argv[1]); print(s.offsets('t', 0))", str(path))
    assert r.returncode == 0 and r.stdout.strip() == "(0, 10)", r.stderr
    with seglog.Consumer(str(path), "t", group_id="g", read_only=True, enable_auto_commit=False) as again:
        assert again.committed(TP0) == 10, "committed on close"


@pytest.mark.parametrize("when", ["closed", "refused"])
def test_consumer_on_a_path_leaves_the_callers_store_open(
    store: seglog.Store, store_path: Path, when: str
) -> None:
    fill(store, partitions=1)
    member = seglog.Consumer(store, "t", group_id="g", auto_offset_reset="earliest")
    try:
        if when == "closed":
            with seglog.Consumer(store_path, "t", auto_offset_reset="earliest", consumer_timeout_ms=0) as c:
                assert len(list(c)) == 10
        else:
            with pytest.raises(seglog.GroupInUseError):
                seglog.Consumer(store_path, "t", group_id="g")
        assert not store.closed
        assert store.append("t", 0, [b"more"]) == (10, 10)
        assert len(flat(member.poll(max_records=100))) == 11, "the group's member carries on"
    finally:
        member.close(autocommit=False)


def test_consumer_config_errors(store: seglog.Store) -> None:
    with pytest.raises(seglog.InvalidConfigError, match="bootstrap_servers") as e:
        seglog.Consumer(store, "t", bootstrap_servers="localhost:9092")
    assert isinstance(e.value, ValueError)
    with pytest.raises(ValueError, match="auto_offset_reset"):
        seglog.Consumer(store, "t", auto_offset_reset="smallest")
    for key in ("max_poll_records", "auto_commit_interval_ms", "max_partition_fetch_bytes"):
        with pytest.raises(ValueError, match=key):
            seglog.Consumer(store, "t", **{key: 0})
    with pytest.raises(ValueError, match="max_records"):
        seglog.Consumer(store, "t").poll_arrow(max_records=0)


@pytest.mark.parametrize(
    "call",
    [
        lambda s, c: seglog.Consumer(42),
        lambda s, c: seglog.Consumer(None, "t"),
        lambda s, c: seglog.Consumer(s, 42),
        lambda s, c: seglog.Consumer(s, b"t"),
        lambda s, c: seglog.Consumer(s, "t", group_id=5),
        lambda s, c: c.subscribe([1]),
        lambda s, c: c.subscribe(5),
        lambda s, c: c.position("t"),
        lambda s, c: c.position(("t", "0")),
        lambda s, c: c.seek(0, 0),
        lambda s, c: c.seek_to_beginning("t"),
        lambda s, c: c.seek_to_end(("t",)),
        lambda s, c: c.poll(timeout_ms="10"),
        lambda s, c: c.poll_arrow(timeout_ms="10"),
        lambda s, c: c.beginning_offsets([5]),
        lambda s, c: c.end_offsets(["t"]),
        lambda s, c: c.offsets_for_times({"t": 0}),
        lambda s, c: c.committed(0),
        lambda s, c: c.commit({"t": 1}),
    ],
)
def test_wrong_argument_types_raise_type_error(shared_store: seglog.Store, call: Any) -> None:
    store = shared_store
    consumer = seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False)
    with pytest.raises(TypeError):
        call(store, consumer)
    consumer.close()


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.seek(TP0, "5"),
        lambda c: c.seek(TP0, 5.0),
        # equal to an assigned partition as a dict key, but not a (topic, partition) pair
        lambda c: c.seek(("t", 0.0), 5),
        lambda c: c.seek(["t", 0], 5),
        lambda c: c.poll(max_records="5"),
        lambda c: c.poll_arrow(max_records="5"),
        lambda c: c.offsets_for_times({TP0: "5"}),
        lambda c: c.commit({TP0: "5"}),
        lambda c: c.commit(5),
    ],
    ids=[
        "seek-str",
        "seek-float",
        "seek-float-partition",
        "seek-list",
        "poll",
        "poll_arrow",
        "offsets_for_times",
        "commit-offset",
        "commit-int",
    ],
)
def test_wrong_integer_argument_types_raise_type_error(shared_store: seglog.Store, call: Any) -> None:
    store = shared_store
    consumer = seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False)
    try:
        with pytest.raises(TypeError):
            call(consumer)
    finally:
        consumer.close()
