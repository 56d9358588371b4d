"""``seglog groups``, run as a separate process, on an embedded store whose groups
``seglog.Consumer`` made, and against a ``seglog.Broker`` with a confluent-kafka group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer

import seglog

GROUP_KEYS: dict[str, Any] = {"group_min_session_timeout_ms": 500, "group_initial_rebalance_delay_ms": 0}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SEGLOG_STORE"}
    return subprocess.run(
        [sys.executable, "-m", "seglog", "groups", *args], capture_output=True, text=True, env=env, timeout=60
    )


def ok(*args: str) -> str:
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def error(*args: str) -> str:
    """An expected failure: exit 1 and one ``seglog: error:`` line."""
    r = cli(*args)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("seglog: error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


def table(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]


def described(*target: str, group: str) -> dict[str, Any]:
    return dict(json.loads(ok("describe", group, *target, "--format", "json")))


def positions(*target: str, group: str) -> dict[tuple[str, int], int | None]:
    return {
        (r["topic"], r["partition"]): r["current_offset"]
        for r in described(*target, group=group)["partitions"]
    }


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# -- an embedded store ---------------------------------------------------------------------


@pytest.fixture
def consumed(store_path: Path) -> str:
    """A store with topic t (2 partitions, 10 records each at timestamps 0, 1000, ...
    9000) and group g, whose consumer committed t-0 at 7 and t-1 at 4."""
    with seglog.open(store_path) as s:
        s.create_topic("t", partitions=2)
        s.create_topic("other")
        for p in (0, 1):
            s.append("t", p, [(b"k", b"v%d" % i, None, 1000 * i) for i in range(10)])
        with seglog.Consumer(s, "t", group_id="g", enable_auto_commit=False) as c:
            c.commit({("t", 0): 7, ("t", 1): 4})
        with seglog.Consumer(s, "other", group_id="h", enable_auto_commit=False) as c:
            c.commit({("other", 0): 0})
    return str(store_path)


def test_list_and_describe_show_offsets_and_lag(consumed: str) -> None:
    assert ok("list", "--store", consumed) == "g\nh\n"
    assert table(ok("list", "--state", "--store", consumed)) == [
        {"GROUP": "g", "STATE": "Empty"},
        {"GROUP": "h", "STATE": "Empty"},
    ]
    r = cli("describe", "g", "--store", consumed)
    assert r.returncode == 0, r.stderr
    assert "Consumer group 'g' has no active members." in r.stderr
    rows = table(r.stdout)
    assert r.stdout.split("\n")[0].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    assert [(x["PARTITION"], x["CURRENT-OFFSET"], x["LOG-END-OFFSET"], x["LAG"]) for x in rows] == [
        ("0", "7", "10", "3"),
        ("1", "4", "10", "6"),
    ]
    assert all(x["CONSUMER-ID"] == "-" for x in rows)
    d = described("--store", consumed, group="g")
    assert (d["state"], d["members"]) == ("Empty", [])
    assert [p["lag"] for p in d["partitions"]] == [3, 6]
    state = table(ok("describe", "g", "--state", "--store", consumed))
    assert state[0]["STATE"] == "Empty" and state[0]["#MEMBERS"] == "0"
    assert "does not exist" in error("describe", "nobody", "--store", consumed)
    # $SEGLOG_STORE names the store too.
    env = {**os.environ, "SEGLOG_STORE": consumed}
    r2 = subprocess.run(
        [sys.executable, "-m", "seglog", "groups", "list"], capture_output=True, text=True, env=env
    )
    assert r2.stdout == "g\nh\n"


def test_reset_offsets_plans_and_executes(consumed: str) -> None:
    s = ("--store", consumed)

    def plan(*how: str) -> dict[int, int]:
        out = json.loads(ok("reset-offsets", "g", *s, "--topic", "t", *how, "--dry-run", "--format", "json"))
        return {r["partition"]: r["new_offset"] for r in out}

    assert plan("--to-earliest") == {0: 0, 1: 0}
    assert plan("--to-latest") == {0: 10, 1: 10}
    assert plan("--to-offset", "5") == {0: 5, 1: 5}
    assert plan("--to-offset", "50") == {0: 10, 1: 10}  # kept within the log
    assert plan("--shift-by", "-2") == {0: 5, 1: 2}
    assert plan("--shift-by", "-20") == {0: 0, 1: 0}
    assert plan("--to-datetime", "1970-01-01T00:00:03.500Z") == {0: 4, 1: 4}
    assert plan("--to-datetime", "1970-01-01T01:00:03+01:00") == {0: 3, 1: 3}
    assert plan("--to-datetime", "2100-01-01T00:00:00Z") == {0: 10, 1: 10}
    # Nothing was committed by those; without --execute the plan comes with a note.
    assert positions(*s, group="g") == {("t", 0): 7, ("t", 1): 4}
    r = cli("reset-offsets", "g", *s, "--topic", "t:1", "--to-earliest")
    assert r.returncode == 0 and "nothing is committed" in r.stderr
    assert table(r.stdout) == [{"GROUP": "g", "TOPIC": "t", "PARTITION": "1", "NEW-OFFSET": "0"}]
    assert positions(*s, group="g") == {("t", 0): 7, ("t", 1): 4}

    out = ok("reset-offsets", "g", *s, "--topic", "t:1", "--to-offset", "2", "--execute")
    assert table(out) == [{"GROUP": "g", "TOPIC": "t", "PARTITION": "1", "NEW-OFFSET": "2"}]
    assert positions(*s, group="g") == {("t", 0): 7, ("t", 1): 2}
    ok("reset-offsets", "g", *s, "--all-topics", "--shift-by", "1", "--execute")
    assert positions(*s, group="g") == {("t", 0): 8, ("t", 1): 3}
    # A new group gets offsets too; what it commits, an embedded consumer resumes from.
    ok("reset-offsets", "fresh", *s, "--topic", "t", "--to-latest", "--execute")
    with seglog.open(consumed) as store, seglog.Consumer(store, group_id="g", consumer_timeout_ms=0) as c:
        c.assign([("t", 0), ("t", 1)])
        assert sorted((r.partition, r.offset) for r in c) == [(0, 8), (0, 9)] + [(1, i) for i in range(3, 10)]
    assert positions(*s, group="fresh") == {("t", 0): 10, ("t", 1): 10}

    # Bad requests: usage errors (2) or one error line (1).
    assert cli("reset-offsets", "g", *s, "--topic", "t").returncode == 2  # no --to-*
    assert cli("reset-offsets", "g", *s, "--to-earliest").returncode == 2  # no topic
    assert (
        cli("reset-offsets", "g", *s, "--topic", "t", "--to-earliest", "--dry-run", "--execute").returncode
        == 2
    )
    assert cli("reset-offsets", "g", *s, "--topic", "t:x", "--to-earliest").returncode == 2
    assert cli("reset-offsets", "g", *s, "--topic", "t", "--to-datetime", "yesterday").returncode == 2
    assert "unknown topic 'nope'" in error("reset-offsets", "g", *s, "--topic", "nope", "--to-earliest")
    assert "has no partition 5" in error("reset-offsets", "g", *s, "--topic", "t:5", "--to-earliest")
    assert "needs a committed offset" in error("reset-offsets", "h", *s, "--topic", "t", "--shift-by", "1")


def test_delete_writes_tombstones(consumed: str) -> None:
    out = ok("delete", "g", "--store", consumed)
    assert out == "Deletion of requested consumer groups ('g') was successful.\n"
    assert ok("list", "--store", consumed) == "h\n"
    assert "consumer group 'g' does not exist" in error("delete", "g", "--store", consumed)
    with seglog.open(consumed) as store:
        assert seglog._groups.load_committed(store._native, "g") == {}
        assert seglog._groups.load_committed(store._native, "h") == {("other", 0): (0, "")}


def test_writes_are_refused_while_the_group_is_in_use(consumed: str) -> None:
    s = ("--store", consumed)
    with seglog.open(consumed) as store, seglog.Consumer(store, "t", group_id="g", consumer_timeout_ms=0):
        # Readers still work (the store is open read-only) and see the member.
        d = described(*s, group="g")
        assert d["state"] == "Stable"
        assert [m["consumer_id"] for m in d["members"]] == [f"embedded-pid-{os.getpid()}"]
        assert {p["consumer_id"] for p in d["partitions"]} == {f"embedded-pid-{os.getpid()}"}
        for args in (
            ("reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute"),
            ("reset-offsets", "g", "--topic", "t", "--to-earliest", "--dry-run"),
            ("delete", "g"),
        ):
            line = error(*args, *s)
            assert "'g'" in line and "Stable" in line, line
            assert f"pid {os.getpid()}" in line or args[-1] == "--dry-run", line
        # Another group of the same store is free, but the store itself is held by this process.
        assert "locked" in error("delete", "h", *s)
    assert positions(*s, group="g") == {("t", 0): 7, ("t", 1): 4}
    ok("delete", "g", *s)


def test_a_served_store_points_to_the_broker(consumed: str) -> None:
    with seglog.Broker(consumed) as broker:
        line = error("reset-offsets", "g", "--store", consumed, "--topic", "t", "--to-earliest", "--execute")
        assert f"--bootstrap-server {broker.bootstrap_servers}" in line, line
        assert f"--bootstrap-server {broker.bootstrap_servers}" in error("delete", "g", "--store", consumed)
        # Reading the store still works beside it, and so does asking the broker.
        assert ok("list", "--store", consumed) == "g\nh\n"
        assert ok("list", "--bootstrap-server", broker.bootstrap_servers) == "g\nh\n"
        assert (
            cli("list", "--store", consumed, "--bootstrap-server", broker.bootstrap_servers).returncode == 2
        )
    ok("delete", "g", "--store", consumed)


# -- a broker ------------------------------------------------------------------------------


def test_a_live_group_through_the_broker(tmp_path: Path) -> None:
    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        b = ("--bootstrap-server", broker.bootstrap_servers)
        broker.store.create_topic("t", 2)
        for p in (0, 1):
            broker.store.append("t", p, [b"v%d" % i for i in range(10)])
        assert ok("list", *b) == ""
        c = KafkaConsumer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "group.id": "live",
                "client.id": "cli-test",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 300,
            }
        )
        try:
            c.subscribe(["t"])
            seen = 0
            deadline = time.monotonic() + 60
            while seen < 5 and time.monotonic() < deadline:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    seen += 1
                    c.commit(message=m, asynchronous=False)
            assert seen == 5

            assert ok("list", *b) == "live\n"
            assert table(ok("list", "--state", *b)) == [{"GROUP": "live", "STATE": "Stable"}]
            d = described(*b, group="live")
            assert d["state"] == "Stable" and d["protocol_type"] == "consumer"
            (member,) = d["members"]
            assert member["client_id"] == "cli-test"
            rows = d["partitions"]
            assert [(r["partition"], r["consumer_id"], r["client_id"]) for r in rows] == [
                (0, member["consumer_id"], "cli-test"),
                (1, member["consumer_id"], "cli-test"),
            ]
            assert sum(r["current_offset"] or 0 for r in rows) == 5
            assert all(r["log_end_offset"] == 10 for r in rows)
            assert sum(r["lag"] for r in rows if r["lag"] is not None) == 20 - 5 - sum(
                10 for r in rows if r["current_offset"] is None
            )
            text = table(ok("describe", "live", *b))
            assert {r["HOST"] for r in text} == {member["host"]}
            members = table(ok("describe", "live", "--members", *b))
            assert members[0]["#PARTITIONS"] == "2"

            line = error("reset-offsets", "live", *b, "--topic", "t", "--to-earliest", "--execute")
            assert "inactive" in line and "Stable" in line, line
            assert "NON_EMPTY_GROUP" in error("delete", "live", *b)
        finally:
            c.close()  # leaves the group: it is Empty now
        _wait(lambda: described(*b, group="live")["state"] == "Empty", 30, "an empty group")

        plan = json.loads(
            ok("reset-offsets", "live", *b, "--topic", "t", "--to-offset", "3", "--format", "json")
        )
        assert [r["new_offset"] for r in plan] == [3, 3]
        before = positions(*b, group="live")
        assert before != {("t", 0): 3, ("t", 1): 3}
        ok("reset-offsets", "live", *b, "--topic", "t", "--to-offset", "3", "--execute")
        assert positions(*b, group="live") == {("t", 0): 3, ("t", 1): 3}
        ok("reset-offsets", "live", *b, "--topic", "t:1", "--shift-by", "4", "--execute")
        assert positions(*b, group="live") == {("t", 0): 3, ("t", 1): 7}
        # The store holds the commits in Kafka's records.
        assert seglog._groups.load_committed(broker.store._native, "live")[("t", 1)][0] == 7

        assert "does not exist" in error("describe", "nobody", *b)
        assert "GROUP_ID_NOT_FOUND" in error("delete", "nobody", *b)
        assert ok("delete", "live", *b).startswith("Deletion of requested consumer groups ('live')")
        assert ok("list", *b) == ""


def test_members_a_stopped_broker_recorded_keep_the_group_from_store_writes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    broker = seglog.Broker(path, **GROUP_KEYS)
    broker.store.create_topic("t", 1)
    c = KafkaConsumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "kept",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    try:
        c.subscribe(["t"])
        _wait(lambda: c.poll(0.1) is None and bool(c.assignment()), 60, "an assignment")
        broker.close()  # the member is still in the group's last metadata record
        d = described("--store", str(path), group="kept")
        assert d["state"] == "Stable" and len(d["members"]) == 1
        assert d["members"][0]["assignment"] == [["t", 0]]
        line = error("delete", "kept", "--store", str(path))
        assert "1 member(s)" in line and "--bootstrap-server" in line, line
        line = error(
            "reset-offsets", "kept", "--store", str(path), "--topic", "t", "--to-earliest", "--execute"
        )
        assert "1 member(s)" in line, line
    finally:
        broker.close()
        c.close()
