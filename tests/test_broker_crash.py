"""kill -9 a `seglog serve` broker while confluent-kafka produces to it with acks=all:
every record the client was told is written is in the log afterwards, at the partition
and offset it was told. And the checker is shown able to see a loss."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message

import seglog
from broker_helpers import producer, start_serve

TOPIC = "crash"
PARTITIONS = 3

# (partition, offset) -> the value the broker acknowledged there
Acks = dict[tuple[int, int], bytes]


def produce_until_killed(path: Path, round_no: int, run_for: float, kill: bool = True) -> Acks:
    """One broker life: serve with flush.messages=1, produce unique values, kill -9 the
    broker after `run_for` s (or stop it with SIGTERM), return what was acknowledged."""
    served = start_serve(path, "--config", "flush.messages=1")
    acks: Acks = {}
    dup: list[tuple[tuple[int, int], bytes]] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            key = (msg.partition(), msg.offset())
            if key in acks:
                dup.append((key, msg.value()))
            acks[key] = msg.value()

    p = producer(
        served.bootstrap,
        **{"linger.ms": 2, "message.timeout.ms": 3000, "queue.buffering.max.messages": 20000},
    )
    i = 0
    deadline = time.monotonic() + run_for
    try:
        while time.monotonic() < deadline:
            try:
                p.produce(TOPIC, value=b"r%d-%d" % (round_no, i), key=b"%d" % i, on_delivery=on_delivery)
                i += 1
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        if kill:
            served.stop(signal.SIGKILL)
        p.flush(10)  # what was in flight now fails (or was acknowledged before the kill)
    finally:
        if served.proc.stdout is not None and not served.proc.stdout.closed:
            code = served.stop(signal.SIGTERM)
            assert code == 0, "".join(served.stderr)
    assert not dup, f"two acknowledgements for one offset: {dup[:3]}"
    return acks


def missing_acks(path: Path, acks: Acks) -> list[tuple[tuple[int, int], bytes, bytes | None]]:
    """Every acknowledged record not found at its partition and offset, with what is there."""
    found: dict[tuple[int, int], bytes | None] = {}
    with seglog.open(path) as store:
        for p in range(PARTITIONS):
            offset, end = store.offsets(TOPIC, p)
            while offset < end:
                recs = store.read(TOPIC, p, offset, max_bytes=4 << 20)
                for r in recs:
                    found[(p, r.offset)] = r.value
                offset = recs[-1].offset + 1
    return [(k, v, found.get(k)) for k, v in sorted(acks.items()) if found.get(k) != v]


def make_topic(path: Path) -> None:
    with seglog.open(path) as store:
        store.create_topic(TOPIC, partitions=PARTITIONS, config={"segment.bytes": 256 * 1024})


@pytest.mark.crash
def test_kill_9_loses_no_acknowledged_record(tmp_path: Path) -> None:
    path = tmp_path / "store"
    make_topic(path)
    rng = random.Random(20261123)
    acks: Acks = {}
    for round_no in range(6):
        got = produce_until_killed(path, round_no, rng.uniform(0.5, 1.5))
        overlap = set(got) & set(acks)
        assert not overlap, (
            f"round {round_no} was acknowledged at offsets given out before: {sorted(overlap)[:5]}"
        )
        acks.update(got)
        with seglog.open(path, read_only=True) as store:
            assert not store.clean_shutdown, "kill -9 leaves no clean-shutdown marker"
        assert missing_acks(path, acks) == [], f"after round {round_no}"
    assert len(acks) > 500, f"only {len(acks)} records acknowledged: the test proved little"
    assert {p for p, _ in acks} == set(range(PARTITIONS))


def test_the_checker_reports_acknowledged_records_that_are_gone(tmp_path: Path) -> None:
    # kill -9 cannot lose page-cache data, so a real loss cannot be made here; cutting the
    # log after the fact stands in for one, to prove missing_acks can fail.
    path = tmp_path / "store"
    make_topic(path)
    acks = produce_until_killed(path, 0, 0.5, kill=False)
    assert missing_acks(path, acks) == []
    p = max(range(PARTITIONS), key=lambda q: sum(1 for k in acks if k[0] == q))
    offsets = sorted(o for q, o in acks if q == p)
    assert len(offsets) >= 10
    cut = offsets[len(offsets) // 2]
    with seglog.open(path) as store:
        store.truncate_to(TOPIC, p, cut)
        lost = [(p, o) for o in offsets if o >= store.offsets(TOPIC, p)[1]]
    assert lost, "the truncation removed nothing"
    assert [k for k, _, _ in missing_acks(path, acks)] == lost
