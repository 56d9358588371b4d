"""seglog.Admin, the public group-admin API: on an embedded store (its __consumer_offsets
read and written in place, refused while the group is in use) and against an in-process
seglog.Broker with a confluent-kafka group."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer as KafkaConsumer

import seglog
from seglog import (
    Admin,
    GroupDescription,
    GroupIdNotFoundError,
    GroupListing,
    GroupNotEmptyError,
    MemberDescription,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    TopicPartition,
)

GROUP_KEYS: dict[str, Any] = {"group_min_session_timeout_ms": 500, "group_initial_rebalance_delay_ms": 0}
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def _wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _python(code: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, **kwargs)


def _fill(store: seglog.Store) -> None:
    """Topic t: 2 partitions of 10 records each, at timestamps 0, 1000, ... 9000."""
    store.create_topic("t", partitions=2)
    for p in (0, 1):
        store.append("t", p, [(b"k", b"v%d" % i, None, 1000 * i) for i in range(10)])


@pytest.fixture
def consumed(store_path: Path) -> str:
    """A store with topic t (see _fill) and other, group g (t-0 at 7, t-1 at 4) and
    group h (other-0 at 0), committed by embedded consumers that have closed."""
    with seglog.open(store_path) as s:
        _fill(s)
        s.create_topic("other")
        with seglog.Consumer(s, "t", group_id="g", enable_auto_commit=False) as c:
            c.commit({("t", 0): 7, ("t", 1): 4})
        with seglog.Consumer(s, "other", group_id="h", enable_auto_commit=False) as c:
            c.commit({("other", 0): 0})
    return str(store_path)


@pytest.fixture
def admin(consumed: str) -> Iterator[Admin]:
    with Admin(consumed) as a:
        yield a


# -- an embedded store -----------------------------------------------------------------------


def test_list_and_describe_a_store(admin: Admin, consumed: str) -> None:
    assert admin.list_consumer_groups() == [
        GroupListing("g", "Empty", "consumer"),
        GroupListing("h", "Empty", "consumer"),
    ]
    assert admin.describe_consumer_groups(["g", "h"]) == {
        "g": GroupDescription("g", "Empty", "", "", "embedded", []),
        "h": GroupDescription("h", "Empty", "", "", "embedded", []),
    }
    assert admin.list_consumer_group_offsets("g") == {
        T0: OffsetAndMetadata(7, ""),
        T1: OffsetAndMetadata(4, ""),
    }
    assert admin.list_consumer_group_offsets("g", [("t", 1), ("other", 0)]) == {T1: OffsetAndMetadata(4)}
    # A group that does not exist: describing it fails, it has no offsets.
    with pytest.raises(GroupIdNotFoundError, match="'nobody' does not exist") as e:
        admin.describe_consumer_groups(["g", "nobody"])
    assert e.value.group_id == "nobody" and e.value.code == 69
    assert isinstance(e.value, LookupError) and isinstance(e.value, seglog.KafkaError)
    assert admin.list_consumer_group_offsets("nobody") == {}
    assert admin.describe_consumer_groups([]) == {}
    # A Store open in this process serves as well as its path.
    with seglog.open(consumed, read_only=True) as store:
        with Admin(store) as on_store:
            assert on_store.list_consumer_groups() == admin.list_consumer_groups()
            assert repr(on_store) == f"<seglog.Admin {str(store.path)!r}>"
        assert not store.closed  # an Admin never closes a store it was given


def test_the_log_offsets_a_reset_is_planned_from(admin: Admin) -> None:
    assert admin.partitions_for_topic("t") == {0, 1}
    assert admin.partitions_for_topic("nope") is None
    assert admin.beginning_offsets([T0, ("t", 1)]) == {T0: 0, T1: 0}
    assert admin.end_offsets([T0, T1]) == {T0: 10, T1: 10}
    assert admin.offsets_for_times({T0: 3500, ("t", 1): 0}) == {
        T0: OffsetAndTimestamp(4, 4000),
        T1: OffsetAndTimestamp(0, 0),
    }
    assert admin.offsets_for_times({T0: 10**13}) == {T0: None}
    with pytest.raises(seglog.UnknownTopicOrPartitionError):
        admin.end_offsets([("t", 2)])
    with pytest.raises(seglog.UnknownTopicOrPartitionError):
        admin.beginning_offsets([("nope", 0)])


def test_alter_and_delete_on_a_store(admin: Admin, consumed: str) -> None:
    mixed: dict[tuple[str, int], int | OffsetAndMetadata] = {
        ("t", 1): 2,
        T0: OffsetAndMetadata(8, "by admin"),
    }
    admin.alter_consumer_group_offsets("g", mixed)
    assert admin.list_consumer_group_offsets("g") == {
        T0: OffsetAndMetadata(8, "by admin"),
        T1: OffsetAndMetadata(2),
    }
    # A group that does not exist yet is made by its first offsets.
    admin.alter_consumer_group_offsets("fresh", {T0: 10})
    assert [g.group_id for g in admin.list_consumer_groups()] == ["fresh", "g", "h"]
    # A partition that does not exist commits nothing.
    with pytest.raises(seglog.UnknownTopicOrPartitionError):
        admin.alter_consumer_group_offsets("g", {T0: 1, ("t", 7): 1})
    with pytest.raises(seglog.UnknownTopicOrPartitionError):
        admin.alter_consumer_group_offsets("g", {("nope", 0): 1})
    assert admin.list_consumer_group_offsets("g")[T0].offset == 8
    # The Admin took the store for the write only: another process can write it now.
    r = _python(f"import seglog; seglog.open({consumed!r}).close()")
    assert r.returncode == 0, r.stderr
    # What the Admin committed is where an embedded consumer of the group resumes.
    with seglog.open(consumed) as store, seglog.Consumer(store, group_id="g", consumer_timeout_ms=0) as c:
        c.assign([T0])
        assert [r.offset for r in c] == [8, 9]

    admin.delete_consumer_groups(["g"])
    assert [g.group_id for g in admin.list_consumer_groups()] == ["fresh", "h"]
    assert admin.list_consumer_group_offsets("g") == {}
    with pytest.raises(GroupIdNotFoundError, match="'g' does not exist"):
        admin.delete_consumer_groups(["g"])
    # Every group is tried; the first failure raises after.
    with pytest.raises(GroupIdNotFoundError, match="'nobody'"):
        admin.delete_consumer_groups(["nobody", "fresh"])
    assert [g.group_id for g in admin.list_consumer_groups()] == ["h"]


def test_a_writable_store_given_or_open_stays_open(consumed: str) -> None:
    with seglog.open(consumed) as store:
        with Admin(store) as a:
            a.alter_consumer_group_offsets("g", {T0: 1})
        # By path, the Admin writes through the store this process has open.
        with Admin(consumed) as a:
            a.alter_consumer_group_offsets("g", {T0: 2})
            assert a.list_consumer_group_offsets("g")[T0].offset == 2
        assert not store.closed
        store.append("t", 0, [b"more"])
    with seglog.open(consumed, read_only=True) as ro, Admin(ro) as a:
        with pytest.raises(seglog.ReadOnlyStoreError, match="read-only"):
            a.alter_consumer_group_offsets("g", {T0: 3})
        assert a.list_consumer_group_offsets("g")[T0].offset == 2


def test_changes_are_refused_while_a_consumer_of_this_process_holds_the_group(consumed: str) -> None:
    with (
        seglog.open(consumed) as store,
        seglog.Consumer(store, "t", group_id="g", consumer_timeout_ms=0),
        Admin(consumed) as admin,
    ):
        me = f"embedded-pid-{os.getpid()}"
        (g,) = admin.describe_consumer_groups(["g"]).values()
        assert (g.state, g.protocol_type) == ("Stable", "consumer")
        assert g.members == [MemberDescription(me, "-", "localhost", None, [T0, T1])]
        assert GroupListing("g", "Stable", "consumer") in admin.list_consumer_groups()
        with pytest.raises(GroupNotEmptyError, match=f"pid {os.getpid()}") as e:
            admin.alter_consumer_group_offsets("g", {T0: 0})
        assert (e.value.group_id, e.value.state, e.value.member_pid) == ("g", "Stable", str(os.getpid()))
        assert isinstance(e.value, seglog.GroupInUseError) and e.value.code == 68
        with pytest.raises(GroupNotEmptyError):
            admin.alter_consumer_group_offsets("g", {})  # nothing to commit, refused all the same
        with pytest.raises(GroupNotEmptyError):
            admin.delete_consumer_groups(["g"])
        # Looking did not drop the consumer's lock: another process still sees the member.
        r = _python(
            f"import seglog; print(seglog.Admin({consumed!r}).describe_consumer_groups(['g'])['g'].state)"
        )
        assert r.stdout.strip() == "Stable", r.stderr
        # Another group of the store is free.
        admin.alter_consumer_group_offsets("h", {("other", 0): 0})
    with Admin(consumed) as admin:
        assert admin.list_consumer_group_offsets("g") == {T0: OffsetAndMetadata(7), T1: OffsetAndMetadata(4)}
        assert admin.describe_consumer_groups(["g"])["g"].state == "Empty"
        admin.alter_consumer_group_offsets("g", {T0: 0})


def test_changes_are_refused_while_another_process_holds_the_group(consumed: str) -> None:
    code = (
        "import seglog, sys\n"
        f"c = seglog.Consumer({consumed!r}, 't', group_id='g', consumer_timeout_ms=0)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with Admin(consumed) as admin:
            g = admin.describe_consumer_groups(["g"])["g"]
            assert g.state == "Stable" and g.members[0].member_id == f"embedded-pid-{holder.pid}"
            with pytest.raises(GroupNotEmptyError) as e:
                admin.delete_consumer_groups(["g"])
            assert e.value.member_pid == str(holder.pid)
            # Group h is free, but the store is the other process's to write.
            with pytest.raises(seglog.StoreLockedError):
                admin.delete_consumer_groups(["h"])
        holder.communicate("", timeout=30)  # the consumer's process ends once its stdin closes


def test_a_served_store_refuses_changes(consumed: str) -> None:
    with seglog.Broker(consumed) as broker, Admin(consumed) as admin:
        with pytest.raises(seglog.BrokerServesStoreError) as e:
            admin.alter_consumer_group_offsets("g", {T0: 0})
        assert isinstance(e.value, seglog.GroupsThroughBrokerError)
        assert (e.value.bootstrap_servers, e.value.node_id, e.value.pid) == (
            broker.bootstrap_servers,
            broker.node_id,
            os.getpid(),
        )
        assert broker.bootstrap_servers in str(e.value)
        with pytest.raises(seglog.BrokerServesStoreError):
            admin.delete_consumer_groups(["g"])
        # Reading beside the broker works, and so does asking it.
        assert [g.group_id for g in admin.list_consumer_groups()] == ["g", "h"]
        with Admin(bootstrap_servers=broker.bootstrap_servers) as remote:
            assert remote.list_consumer_group_offsets("g") == admin.list_consumer_group_offsets("g")
            remote.alter_consumer_group_offsets("g", {T0: 3})
        assert admin.list_consumer_group_offsets("g")[T0].offset == 3
    with Admin(consumed) as admin:
        admin.delete_consumer_groups(["g"])


def test_bad_arguments(admin: Admin, consumed: str, tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="needs a store"):
        Admin()
    with pytest.raises(ValueError, match="not both"):
        Admin(consumed, bootstrap_servers="127.0.0.1:9092")
    with pytest.raises(TypeError, match=r"seglog\.Store or a path"):
        Admin(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bootstrap_servers"):
        Admin(bootstrap_servers=9092)  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        Admin(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()  # never created
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        Admin(tmp_path / "file")
    with pytest.raises(ValueError, match="request_timeout_ms"):
        Admin(consumed, request_timeout_ms=0)
    with pytest.raises(TypeError, match="client_id"):
        Admin(consumed, client_id=None)  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="list of group ids"):
        admin.describe_consumer_groups("g")
    with pytest.raises(TypeError, match="group_id must be a str"):
        admin.describe_consumer_groups([1])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="empty"):
        admin.delete_consumer_groups([""])
    with pytest.raises(TypeError, match="group_id"):
        admin.list_consumer_group_offsets(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="partition"):
        admin.list_consumer_group_offsets("g", [("t", "0")])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="partition"):
        admin.list_consumer_group_offsets("g", "t")  # type: ignore[arg-type]
    bad_offsets: list[tuple[Any, type[Exception]]] = [
        ({("t", -1): 1}, ValueError),
        ({("", 0): 1}, ValueError),
        ({("t", 0): -1}, ValueError),
        ({("t", 0): "1"}, TypeError),
        ({("t", 0): True}, TypeError),
        ({("t", True): 1}, TypeError),
        ({("t", 0): OffsetAndMetadata(1, None)}, TypeError),  # type: ignore[arg-type]
        ({"t": 1}, TypeError),
        ([(("t", 0), 1)], TypeError),
    ]
    for offsets, error in bad_offsets:
        with pytest.raises(error):
            admin.alter_consumer_group_offsets("g", offsets)
    with pytest.raises(ValueError, match=">= 0"):
        admin.offsets_for_times({T0: -5})
    with pytest.raises(TypeError):
        admin.offsets_for_times({T0: 1.5})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="topic"):
        admin.partitions_for_topic(0)  # type: ignore[arg-type]
    # Nothing above changed the group.
    assert admin.list_consumer_group_offsets("g") == {T0: OffsetAndMetadata(7), T1: OffsetAndMetadata(4)}

    admin.close()
    admin.close()
    assert admin.closed and repr(admin).endswith("closed>")
    with pytest.raises(seglog.ClientClosedError):
        admin.list_consumer_groups()


# -- a broker ----------------------------------------------------------------------------------


def test_a_broker_s_groups(tmp_path: Path) -> None:
    with seglog.Broker(tmp_path / "store", **GROUP_KEYS) as broker:
        _fill(broker.store)
        servers = broker.bootstrap_servers
        admin = Admin(bootstrap_servers=servers, client_id="admin-test", request_timeout_ms=10000)
        with admin:
            assert admin.list_consumer_groups() == []
            assert admin.partitions_for_topic("t") == {0, 1}
            assert admin.partitions_for_topic("nope") is None
            assert admin.beginning_offsets([T0]) == {T0: 0}
            assert admin.end_offsets([T0, T1]) == {T0: 10, T1: 10}
            assert admin.offsets_for_times({T0: 3500, T1: 10**13}) == {
                T0: OffsetAndTimestamp(4, 4000),
                T1: None,
            }
            with pytest.raises(seglog.UnknownTopicOrPartitionError):
                admin.end_offsets([("t", 5)])
            with pytest.raises(GroupIdNotFoundError):
                admin.describe_consumer_groups(["nobody"])
            with pytest.raises(GroupIdNotFoundError, match="GROUP_ID_NOT_FOUND") as nf:
                admin.delete_consumer_groups(["nobody"])
            assert nf.value.code == 69
            assert admin.list_consumer_group_offsets("nobody") == {}

            # A group that only has offsets, made by the admin's commit.
            stored: dict[tuple[str, int], int | OffsetAndMetadata] = {
                T0: OffsetAndMetadata(3, "m"),
                ("t", 1): 5,
            }
            admin.alter_consumer_group_offsets("stored", stored)
            assert admin.list_consumer_group_offsets("stored") == {
                T0: OffsetAndMetadata(3, "m"),
                T1: OffsetAndMetadata(5),
            }
            assert admin.list_consumer_group_offsets("stored", [T1]) == {T1: OffsetAndMetadata(5)}
            (listed,) = admin.list_consumer_groups()
            assert (listed.group_id, listed.state) == ("stored", "Empty")
            d = admin.describe_consumer_groups(["stored"])["stored"]
            assert (d.state, d.coordinator, d.members) == ("Empty", servers, [])
            with pytest.raises(seglog.UnknownTopicOrPartitionError):
                admin.alter_consumer_group_offsets("stored", {("nope", 0): 1})

            c = KafkaConsumer(
                {
                    "bootstrap.servers": servers,
                    "group.id": "live",
                    "client.id": "kafka-member",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 300,
                }
            )
            try:
                c.subscribe(["t"])
                _wait(lambda: c.poll(0.1) is not None and bool(c.assignment()), 60, "an assignment")
                _wait(
                    lambda: admin.describe_consumer_groups(["live"])["live"].state == "Stable", 30, "Stable"
                )
                live = admin.describe_consumer_groups(["live"])["live"]
                assert (live.protocol_type, live.protocol, live.coordinator) == ("consumer", "range", servers)
                (member,) = live.members
                assert member.client_id == "kafka-member" and member.group_instance_id is None
                assert sorted(member.assignment) == [T0, T1]
                assert GroupListing("live", "Stable", "consumer") in admin.list_consumer_groups()

                with pytest.raises(GroupNotEmptyError, match="Stable") as e:
                    admin.alter_consumer_group_offsets("live", {T0: 0})
                assert (e.value.group_id, e.value.state, e.value.member_count) == ("live", "Stable", 1)
                with pytest.raises(GroupNotEmptyError, match="NON_EMPTY_GROUP") as e:
                    admin.delete_consumer_groups(["live"])
                assert e.value.code == 68
            finally:
                c.close()  # leaves the group: it is Empty now
            _wait(lambda: admin.describe_consumer_groups(["live"])["live"].state == "Empty", 30, "Empty")
            admin.alter_consumer_group_offsets("live", {T0: 2, T1: 9})
            assert admin.list_consumer_group_offsets("live") == {
                T0: OffsetAndMetadata(2),
                T1: OffsetAndMetadata(9),
            }
            admin.delete_consumer_groups(["live", "stored"])
            assert admin.list_consumer_groups() == []
            with pytest.raises(GroupIdNotFoundError):
                admin.describe_consumer_groups(["live"])
        assert admin.closed
