"""Consumer-group offsets in the internal topic ``__consumer_offsets``, with
Kafka's record formats (OffsetCommitKey v1, OffsetCommitValue v3), and the
lock that keeps a group to one member at a time on an embedded store."""

from __future__ import annotations

import fcntl
import os
import struct
import time
from typing import IO

from . import _native
from .errors import SeglogError

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's offsets.topic.segment.bytes; compacted, as Kafka keeps it.
OFFSETS_TOPIC_CONFIG: dict[str, str | int] = {"cleanup.policy": "compact", "segment.bytes": 104857600}


class GroupInUseError(SeglogError):
    """Another consumer (in this or another process) is the group's member."""


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition(group: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitionCount``."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def encode_key(group: str, topic: str, partition: int) -> bytes:
    return struct.pack(">h", 1) + _string(group) + _string(topic) + struct.pack(">i", partition)


def encode_value(offset: int, metadata: str = "", leader_epoch: int = -1) -> bytes:
    now = int(time.time() * 1000)
    return struct.pack(">hqi", 3, offset, leader_epoch) + _string(metadata) + struct.pack(">q", now)


def decode_key(key: bytes) -> tuple[str, str, int] | None:
    """(group, topic, partition) of an offset-commit key; None for other kinds."""
    (version,) = struct.unpack_from(">h", key, 0)
    if version not in (0, 1):
        return None
    pos = 2
    out: list[str] = []
    for _ in range(2):
        (n,) = struct.unpack_from(">h", key, pos)
        out.append(key[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    (partition,) = struct.unpack_from(">i", key, pos)
    return out[0], out[1], partition


def decode_value(value: bytes) -> tuple[int, str]:
    """(offset, metadata) of an offset-commit value, versions 1 to 3."""
    version, offset = struct.unpack_from(">hq", value, 0)
    pos = 10
    if version >= 3:
        pos += 4  # leader epoch
    (n,) = struct.unpack_from(">h", value, pos)
    return offset, value[pos + 2 : pos + 2 + n].decode()


def load_committed(store: _native.Store, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The latest committed (offset, metadata) per (topic, partition) of a group."""
    if OFFSETS_TOPIC not in store.topics():
        return {}
    p = offsets_partition(group, store.partition_count(OFFSETS_TOPIC))
    out: dict[tuple[str, int], tuple[int, str]] = {}
    offset, end = store.offsets(OFFSETS_TOPIC, p)
    while offset < end:
        records = store.read(OFFSETS_TOPIC, p, offset, 1 << 20)
        if not records:
            break
        for r in records:
            k = decode_key(r.key) if r.key else None
            if k is None or k[0] != group:
                continue
            if r.value is None:
                out.pop((k[1], k[2]), None)
            else:
                out[(k[1], k[2])] = decode_value(r.value)
        offset = records[-1].offset + 1
    return out


def commit(store: _native.Store, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
    """Append the commits durably (acknowledged only once fsynced)."""
    if OFFSETS_TOPIC not in store.topics():
        try:
            store.create_topic(OFFSETS_TOPIC, 1, OFFSETS_TOPIC_CONFIG)
        except SeglogError:
            if OFFSETS_TOPIC not in store.topics():
                raise
    p = offsets_partition(group, store.partition_count(OFFSETS_TOPIC))
    records = [
        (encode_key(group, topic, partition), encode_value(offset, metadata))
        for (topic, partition), (offset, metadata) in offsets.items()
    ]
    if records:
        store.append(OFFSETS_TOPIC, p, records, "none", True)


class GroupLock:
    """An exclusive lock on ``<store>/.groups/<group>.lock`` naming the member's PID."""

    def __init__(self, store_path: str, group: str) -> None:
        safe = group.encode().hex()
        directory = os.path.join(store_path, ".groups")
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f"{safe}.lock")
        self._file: IO[str] | None = open(self.path, "a+")
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "unknown"
            self._file.close()
            self._file = None
            raise GroupInUseError(
                f"consumer group {group!r} already has a member (pid {holder}) on this store: "
                "on an embedded store a group has one member at a time; close it first, "
                "or use another group_id"
            ) from None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(str(os.getpid()))
        self._file.flush()

    def release(self) -> None:
        if self._file is not None:
            self._file.close()  # closing drops the flock
            self._file = None
