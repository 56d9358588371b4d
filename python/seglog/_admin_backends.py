"""The two places :class:`seglog.Admin` manages consumer groups: a store in this process,
whose ``__consumer_offsets`` it reads and writes in place (:class:`StoreGroups`), or a
broker's group coordinator over Kafka's protocol (:class:`BrokerGroups`). Both take
arguments already checked and present the same methods."""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from . import _groups
from ._admin_types import (
    BrokerServesStoreError,
    GroupDescription,
    GroupIdNotFoundError,
    GroupListing,
    GroupNotEmptyError,
    MemberDescription,
)
from ._consumer import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from ._groups import OFFSETS_TOPIC, GroupInUseError, GroupLock, _lock_file_name
from ._native import RemoteClient
from ._store import Store, open_for_client
from .errors import KafkaError, ReadOnlyStoreError, UnknownTopicOrPartitionError

__all__ = ["GroupBackend", "StoreGroups", "BrokerGroups", "INACTIVE"]

#: Where a store's unreadable ``__consumer_offsets`` records are reported.
log = logging.getLogger("seglog.admin")

#: Written by a broker while it serves the store: {"node_id", "listener", "pid"}.
BROKER_FILE = ".broker.json"
#: The states in which a group's offsets may be changed or the group deleted.
INACTIVE = ("Empty", "Dead")

Committed = dict[TopicPartition, OffsetAndMetadata]


class GroupBackend(Protocol):
    coordinator: str

    def list_groups(self) -> list[GroupListing]: ...
    def describe_groups(self, group_ids: list[str]) -> dict[str, GroupDescription]: ...
    def committed(self, group_id: str, partitions: list[TopicPartition] | None) -> Committed: ...
    def alter(self, group_id: str, offsets: Committed) -> None: ...
    def delete(self, group_ids: list[str]) -> None: ...
    def partitions(self, topic: str) -> int | None: ...
    def beginning_offset(self, tp: TopicPartition) -> int: ...
    def end_offset(self, tp: TopicPartition) -> int: ...
    def offset_for_time(self, tp: TopicPartition, timestamp_ms: int) -> OffsetAndTimestamp | None: ...
    def close(self) -> None: ...


def _members(raw: list[dict[str, Any]]) -> list[MemberDescription]:
    return [
        MemberDescription(
            m["member_id"],
            m["client_id"],
            m["client_host"],
            m["group_instance_id"],
            [TopicPartition(t, p) for t, p in m["assignment"]],
        )
        for m in raw
    ]


def _not_found(group_id: str, message: str | None = None) -> GroupIdNotFoundError:
    e = GroupIdNotFoundError(message or f"consumer group {group_id!r} does not exist")
    e.group_id = group_id
    return e


def _not_empty(message: str, group_id: str, state: str | None, members: int | None) -> GroupNotEmptyError:
    e = GroupNotEmptyError(message)
    e.group_id, e.state, e.member_count = group_id, state, members
    return e


# -- a store in this process ----------------------------------------------------------------


def _lock_holder(lock: str) -> str | None:
    """The PID holding a group's embedded-consumer lock file, or None. Tests the lock
    without taking or creating anything (a shared lock fails while a member holds it).
    Closing the file drops this process's own record lock on it, so the caller holds
    ``_groups._members_lock`` and has checked that no member of this process holds it."""
    try:
        f = open(lock)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with f:
        try:
            fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            return f.read().strip() or "unknown"
    return None


def _serving_broker(path: str) -> dict[str, Any] | None:
    """What ``.broker.json`` says, if the broker that wrote it still runs (in this
    process or another)."""
    try:
        with open(os.path.join(path, BROKER_FILE)) as f:
            info = json.load(f)
        pid = int(info["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None  # a crashed broker's leftover
    except PermissionError:
        pass
    return dict(info)


class StoreGroups:
    """A store's groups, read from and written to its ``__consumer_offsets`` in place.

    Reads go through ``store`` when one was given, else through the path opened
    read-only (so they work beside a writer in another process). A write needs the
    group inactive and takes what an embedded consumer of the group would: the
    group's lock file (refused while a consumer holds it) and the store for writing
    (the given store, which must be writable, or the path opened for the write and
    closed after it: ``StoreLockedError`` while another process writes)."""

    coordinator = "embedded"

    def __init__(self, store: Store | None, path: str) -> None:
        self._given = store
        self._path = path
        self._reader = store
        self._owns_reader = False
        self._reported = 0

    def _store(self) -> Store:
        if self._reader is None:
            self._reader, self._owns_reader = open_for_client(self._path, read_only=True)
        return self._reader

    def _load(self, group: str | None, store: Store | None = None) -> dict[str, dict[str, Any]]:
        groups, skipped = (store or self._store())._native.load_groups(group)
        if skipped and skipped != self._reported:
            # Once per count, not once per call: one question reads the topic several times.
            log.warning("skipped %d unreadable records of %s", skipped, OFFSETS_TOPIC)
            self._reported = skipped
        return groups

    def _lock_path(self, group: str) -> str:
        return os.path.join(self._path, ".groups", _lock_file_name(group))

    def _holder(self, group: str) -> str | None:
        """The PID of the embedded consumer holding the group, if one does."""
        lock = self._lock_path(group)
        with _groups._members_lock:
            if os.path.realpath(lock) in _groups._members:
                return str(os.getpid())
            return _lock_holder(lock)

    def _describe(self, group_id: str, raw: dict[str, Any]) -> GroupDescription:
        meta = raw["metadata"]
        state, protocol_type, protocol, members = "Empty", "", "", []
        if meta is not None:
            protocol_type = meta["protocol_type"]
            protocol = meta["protocol"] or ""
            members = _members(meta["members"])
            if members:
                state = "Stable"
        holder = self._holder(group_id)
        if holder is not None:
            # One embedded member consumes every partition the group has.
            state = "Stable"
            protocol_type = protocol_type or "consumer"
            assigned = sorted(TopicPartition(t, p) for t, p in raw["offsets"])
            members = [MemberDescription(f"embedded-pid-{holder}", "-", "localhost", None, assigned)]
        return GroupDescription(group_id, state, protocol_type, protocol, self.coordinator, members)

    def list_groups(self) -> list[GroupListing]:
        out = []
        for group_id, raw in self._load(None).items():
            g = self._describe(group_id, raw)
            out.append(GroupListing(group_id, g.state, g.protocol_type or "consumer"))
        return sorted(out, key=lambda g: g.group_id)

    def describe_groups(self, group_ids: list[str]) -> dict[str, GroupDescription]:
        found = self._load(group_ids[0] if len(group_ids) == 1 else None)
        out = {}
        for group_id in group_ids:
            raw = found.get(group_id)
            if raw is None:
                raise _not_found(group_id)
            out[group_id] = self._describe(group_id, raw)
        return out

    def committed(self, group_id: str, partitions: list[TopicPartition] | None) -> Committed:
        raw = self._load(group_id).get(group_id)
        offsets = {
            TopicPartition(t, p): OffsetAndMetadata(v[0], v[1])
            for (t, p), v in (raw or {}).get("offsets", {}).items()
        }
        wanted = sorted(offsets) if partitions is None else [tp for tp in partitions if tp in offsets]
        return {tp: offsets[tp] for tp in wanted}

    @contextmanager
    def _writing(self, group: str) -> Iterator[Store]:
        """The store for writing the group's records, refused while the group is in use:
        a broker serves the store (its coordinator owns the groups), an embedded consumer
        holds the group's lock (held here until the write is done), or the group's last
        metadata record has members."""
        if self._given is not None and self._given.read_only:
            raise ReadOnlyStoreError(
                f"consumer group {group!r} cannot be changed through a read-only store: "
                "give seglog.Admin a writable store, or the store's path"
            )
        if not os.path.isdir(self._path):
            raise FileNotFoundError(errno.ENOENT, "no store at this path", self._path)
        broker = _serving_broker(self._path)
        if broker is not None:
            e = BrokerServesStoreError(
                f"consumer group {group!r} cannot be changed on the store {self._path!r}: broker "
                f"{broker.get('node_id', '?')} (pid {broker['pid']}) serves it and coordinates its "
                f"groups; change it through the broker, seglog.Admin(bootstrap_servers="
                f"{broker.get('listener', '?')!r})"
            )
            node_id, listener = broker.get("node_id"), broker.get("listener")
            e.node_id = node_id if isinstance(node_id, int) else None
            e.bootstrap_servers = listener if isinstance(listener, str) else None
            e.pid = int(broker["pid"])
            raise e
        try:
            lock = GroupLock(self._path, group)
        except GroupInUseError:
            holder = self._holder(group) or "unknown"
            e2 = _not_empty(
                f"consumer group {group!r} has an embedded member (pid {holder}) on this store, so its "
                "state is Stable: only an inactive (Empty) group can be changed; close the consumer first",
                group,
                "Stable",
                1,
            )
            e2.member_pid = holder
            raise e2 from None
        try:
            store, owned = (self._given, False) if self._given is not None else open_for_client(self._path)
            try:
                raw = self._load(group, store).get(group)
                meta = raw["metadata"] if raw is not None else None
                if meta is not None and meta["members"]:
                    # A broker that served the store recorded members: it would bring them back.
                    n = len(meta["members"])
                    raise _not_empty(
                        f"consumer group {group!r} has {n} member(s) (state Stable) in its last "
                        "metadata record, written by a broker that served the store: serve the store "
                        "and change the group through the broker once they have left or expired",
                        group,
                        "Stable",
                        n,
                    )
                yield store
            finally:
                if owned:
                    store.close()
        finally:
            lock.release()

    def alter(self, group_id: str, offsets: Committed) -> None:
        with self._writing(group_id) as store:
            for tp in offsets:
                store.offsets(tp.topic, tp.partition)  # UnknownTopicOrPartitionError, as a coordinator says
            if offsets:
                commits = {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in offsets.items()}
                store._native.commit_offsets(group_id, commits)

    def delete(self, group_ids: list[str]) -> None:
        # Every group is tried; the first that could not be deleted raises, as a broker answers.
        first: GroupNotEmptyError | GroupIdNotFoundError | None = None
        for group_id in group_ids:
            try:
                with self._writing(group_id) as store:
                    if store._native.delete_group(group_id) == 0:
                        raise _not_found(group_id)
            except (GroupNotEmptyError, GroupIdNotFoundError) as e:
                first = first or e
        if first is not None:
            raise first

    def partitions(self, topic: str) -> int | None:
        try:
            return self._store().partition_count(topic)
        except UnknownTopicOrPartitionError:
            return None

    def beginning_offset(self, tp: TopicPartition) -> int:
        return self._store().offsets(tp.topic, tp.partition)[0]

    def end_offset(self, tp: TopicPartition) -> int:
        return self._store().offsets(tp.topic, tp.partition)[1]

    def offset_for_time(self, tp: TopicPartition, timestamp_ms: int) -> OffsetAndTimestamp | None:
        found = self._store().offset_for_time(tp.topic, tp.partition, timestamp_ms)
        return None if found is None else OffsetAndTimestamp(*found)

    def close(self) -> None:
        if self._owns_reader and self._reader is not None and not self._reader.closed:
            self._reader.close()
        self._reader = self._given
        self._owns_reader = False


# -- a broker --------------------------------------------------------------------------------


def _group_error(e: KafkaError, group_ids: list[str]) -> KafkaError | None:
    """The broker's refusal as the class that stands for it (same message and code), or
    None if none does."""
    out: GroupIdNotFoundError | GroupNotEmptyError
    if e.code == 69:
        out = GroupIdNotFoundError(str(e))
    elif e.code in (68, 25):  # NON_EMPTY_GROUP; UNKNOWN_MEMBER_ID to an admin commit
        out = GroupNotEmptyError(str(e))
    else:
        return None
    out.code = e.code
    out.group_id = group_ids[0] if len(group_ids) == 1 else None
    return out


class BrokerGroups:
    """A broker's groups through its coordinator: ListGroups, DescribeGroups,
    OffsetFetch, OffsetCommit (generation -1, no member id: taken only while the group
    has no members), DeleteGroups, with Metadata and ListOffsets for the logs."""

    def __init__(self, bootstrap_servers: str, client_id: str, timeout_ms: int) -> None:
        self._client = RemoteClient(bootstrap_servers, client_id, timeout_ms)
        self.coordinator = bootstrap_servers

    def list_groups(self) -> list[GroupListing]:
        listed = self._client.list_groups()
        unknown = [g["group_id"] for g in listed if g["state"] is None]
        states = {d["group_id"]: d["state"] for d in self._client.describe_groups(unknown)} if unknown else {}
        out = [
            GroupListing(
                g["group_id"], g["state"] or states.get(g["group_id"], "Unknown"), g["protocol_type"]
            )
            for g in listed
        ]
        return sorted(out, key=lambda g: g.group_id)

    def describe_groups(self, group_ids: list[str]) -> dict[str, GroupDescription]:
        out = {}
        for d in self._client.describe_groups(group_ids):
            group_id = d["group_id"]
            # A coordinator describes a group it does not know as Dead, but one that
            # only has offsets exists.
            if d["state"] == "Dead" and not self._client.fetch_offsets(group_id):
                raise _not_found(group_id)
            out[group_id] = GroupDescription(
                group_id,
                d["state"],
                d["protocol_type"],
                d["protocol"],
                self.coordinator,
                _members(d["members"]),
            )
        return {g: out[g] for g in group_ids}

    def committed(self, group_id: str, partitions: list[TopicPartition] | None) -> Committed:
        wanted = None if partitions is None else [(tp.topic, tp.partition) for tp in partitions]
        got = self._client.fetch_offsets(group_id, wanted)
        offsets = {TopicPartition(t, p): OffsetAndMetadata(o, m) for (t, p), (o, m) in got.items()}
        order = sorted(offsets) if partitions is None else [tp for tp in partitions if tp in offsets]
        return {tp: offsets[tp] for tp in order}

    def alter(self, group_id: str, offsets: Committed) -> None:
        (d,) = self._client.describe_groups([group_id])
        if d["state"] not in INACTIVE:
            n = len(d["members"])
            raise _not_empty(
                f"consumer group {group_id!r} is {d['state']} with {n} member(s): only an inactive "
                "(Empty) group's offsets can be altered; stop its consumers first",
                group_id,
                d["state"],
                n,
            )
        if not offsets:
            return
        try:
            self._client.commit_offsets(
                group_id, {(tp.topic, tp.partition): (o.offset, o.metadata) for tp, o in offsets.items()}
            )
        except KafkaError as e:
            refusal = _group_error(e, [group_id])
            if refusal is None:
                raise
            raise refusal from e

    def delete(self, group_ids: list[str]) -> None:
        try:
            self._client.delete_groups(group_ids)
        except KafkaError as e:
            refusal = _group_error(e, group_ids)
            if refusal is None:
                raise
            raise refusal from e

    def partitions(self, topic: str) -> int | None:
        t = self._client.metadata([topic])["topics"].get(topic)
        if t is None or t["error_code"] != 0 or not t["partitions"]:
            return None
        return len(t["partitions"])

    def beginning_offset(self, tp: TopicPartition) -> int:
        return self._client.list_offsets(tp.topic, tp.partition, -2) or 0

    def end_offset(self, tp: TopicPartition) -> int:
        return self._client.list_offsets(tp.topic, tp.partition, -1) or 0

    def offset_for_time(self, tp: TopicPartition, timestamp_ms: int) -> OffsetAndTimestamp | None:
        offset = self._client.list_offsets(tp.topic, tp.partition, timestamp_ms)
        if offset is None:
            return None
        # ListOffsets answers the offset; the record there has the timestamp.
        records = self._client.fetch(tp.topic, tp.partition, offset, max_wait_ms=0, max_records=1)
        return OffsetAndTimestamp(offset, records[0].timestamp if records else timestamp_ms)

    def close(self) -> None:
        self._client.close()
