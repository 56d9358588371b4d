"""Segment files read byte by byte for dump-log and verify: the batches of a ``.log``
(or where its walk had to stop, and why) and the problems of its ``.index``/``.timeindex``.

The commands use only the names in ``__all__``, which hand out plain data, so that the
reader behind them can change without the commands' output changing.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .. import ConsumerRecord, CorruptRecordError, decode_batches
from ._common import CODECS

__all__ = [
    "INDEX_KINDS",
    "INT32_MAX",
    "SEGMENT_FILE",
    "Batch",
    "IndexContents",
    "IndexKind",
    "SegmentScan",
    "Stop",
    "check_index",
    "iter_log",
    "read_index",
    "scan_log",
]

# RecordBatch v2 header, big-endian: baseOffset, batchLength, partitionLeaderEpoch, magic,
# crc, attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
# baseSequence, recordsCount.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = BATCH_HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, position
TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")
INT32_MAX = 2**31 - 1

#: An index file by its suffix: ``index`` (offset index) or ``timeindex`` (time index).
IndexKind = Literal["index", "timeindex"]
INDEX_KINDS: tuple[IndexKind, ...] = ("index", "timeindex")


@dataclass
class Batch:
    """One RecordBatch v2 found in a ``.log`` file."""

    position: int
    size: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    #: Why the batch is invalid (CRC-32C, record layout), or None.
    error: str | None = None
    records: list[ConsumerRecord] = field(default_factory=list)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec(self) -> str:
        code = self.attributes & 0x07
        return CODECS[code] if code < len(CODECS) else f"unknown({code})"

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & 0x08 else "CreateTime"

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & 0x40)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % (INT32_MAX + 1)


@dataclass
class Stop:
    """Where a walk of a ``.log`` file had to stop, and why."""

    position: int
    reason: str
    #: The bytes from ``position`` to the end of the file.
    length: int


def _all_zero(fd: int, position: int, end: int) -> bool:
    while position < end:
        chunk = os.pread(fd, min(end - position, 1 << 20), position)
        if not chunk:  # the file shrank
            break
        if chunk.count(0) != len(chunk):
            return False
        position += len(chunk)
    return True


def iter_log(fd: int, start: int = 0, *, decode: bool = True) -> Iterator[Batch | Stop]:
    """The batches of a ``.log`` file from ``start``, each checked by
    :func:`seglog.decode_batches` (CRC-32C, records) when ``decode``; a :class:`Stop`
    last if the batch boundaries are lost (torn tail, bad length or magic)."""
    size = os.fstat(fd).st_size
    position = start
    while position < size:
        left = size - position
        head = os.pread(fd, min(left, HEADER_SIZE), position)
        if len(head) < LOG_OVERHEAD:
            yield Stop(position, f"incomplete batch header: only {left} bytes left in the file", left)
            return
        base_offset, batch_length = struct.unpack_from(">qi", head)
        if batch_length == 0 and base_offset == 0 and _all_zero(fd, position, size):
            yield Stop(position, f"{left} zero bytes at the end of the file (a torn write?)", left)
            return
        if batch_length < MIN_BATCH_LENGTH:
            yield Stop(
                position,
                f"batchLength {batch_length} is below the minimum of {MIN_BATCH_LENGTH} (corrupt header)",
                left,
            )
            return
        total = batch_length + LOG_OVERHEAD
        if total > left:
            yield Stop(
                position,
                f"batch of {total} bytes (batchLength {batch_length}) runs past the end of the file,"
                f" {left} bytes left (a torn write, or a corrupt length)",
                left,
            )
            return
        if head[16] != 2:
            yield Stop(position, f"magic {head[16]} where 2 was expected (corrupt header)", left)
            return
        data = os.pread(fd, total, position)
        if len(data) < total:
            yield Stop(position, f"the file shrank while it was read (at {position + len(data)})", left)
            return
        batch = Batch(position, total, *BATCH_HEADER.unpack_from(data))
        if decode:
            try:
                batch.records = decode_batches(data)
            except CorruptRecordError as e:
                batch.error = str(e).removeprefix("corrupt record batch: ")
        if batch.error is None and batch.last_offset_delta < 0:
            batch.error = f"lastOffsetDelta {batch.last_offset_delta} is negative"
        yield batch
        position += total


@dataclass(frozen=True)
class IndexContents:
    """The entries of an index file, as stored: ``(relative offset, position)`` for an
    ``index``, ``(timestamp, relative offset)`` for a ``timeindex``."""

    kind: IndexKind
    entries: list[tuple[int, int]]
    #: Preallocated empty slots after the last entry.
    unused: int
    #: Why the file's size is wrong, or None.
    size_problem: str | None


def read_index(path: Path, kind: IndexKind) -> IndexContents:
    """The entries of an index file. The writer preallocates its active indexes; the
    zero entries after the last real one are empty slots (a real entry never has
    relative offset 0 at position 0)."""
    entry = TIME_ENTRY if kind == "timeindex" else OFFSET_ENTRY
    data = path.read_bytes()
    problem = None
    whole = len(data) - len(data) % entry.size
    if whole != len(data):
        problem = f"file size {len(data)} is not a multiple of the {entry.size}-byte entry size"
    used = -(-len(data[:whole].rstrip(b"\0")) // entry.size)
    entries = [(int(a), int(b)) for a, b in entry.iter_unpack(data[: used * entry.size])]
    return IndexContents(kind, entries, whole // entry.size - used, problem)


@dataclass
class SegmentScan:
    """What :func:`check_index` needs of a log."""

    base_offset: int
    batch_starts: dict[int, tuple[int, int]] = field(default_factory=dict)  # position -> (base, last)
    last_offset: int | None = None
    max_timestamp: int = -1

    def add(self, batch: Batch) -> None:
        self.batch_starts[batch.position] = (batch.base_offset, batch.last_offset)
        if batch.error is None:
            self.last_offset = max(batch.last_offset, self.last_offset or batch.last_offset)
            self.max_timestamp = max(self.max_timestamp, batch.max_timestamp)


def scan_log(path: Path, base: int) -> SegmentScan | None:
    """Batch positions and offsets of a ``.log`` (no CRC check), or None if it is missing."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return None
    scan = SegmentScan(base)
    with f:
        for item in iter_log(f.fileno(), decode=False):
            if isinstance(item, Batch):
                scan.add(item)
    return scan


def check_index(index: IndexContents, log: SegmentScan | None, base: int) -> list[str]:
    """What is wrong with an index, one line each, its size first; its entries are also
    checked against the log when there is one."""
    check = _check_time_index if index.kind == "timeindex" else _check_offset_index
    problems = check(index.entries, log, base)
    if index.size_problem:
        problems.insert(0, index.size_problem)
    return problems


def _check_offset_index(entries: list[tuple[int, int]], log: SegmentScan | None, base: int) -> list[str]:
    problems = []
    previous: tuple[int, int] | None = None
    for i, (relative, position) in enumerate(entries):
        offset = base + relative
        where = f"entry {i} (offset {offset}, position {position})"
        if previous is not None and (relative <= previous[0] or position <= previous[1]):
            problems.append(
                f"{where}: not above the previous entry (offset {base + previous[0]}, position {previous[1]})"
            )
        elif relative < 0 or position < 0:
            problems.append(f"{where}: negative")
        elif log is not None:
            batch = log.batch_starts.get(position)
            if batch is None:
                problems.append(f"{where}: no batch starts at position {position} of the log")
            elif offset < batch[0]:
                problems.append(
                    f"{where}: the batch there starts at offset {batch[0]}, after the entry's offset"
                )
            elif log.last_offset is None or offset > log.last_offset:
                problems.append(f"{where}: past the log's last offset {log.last_offset}")
        previous = (relative, position)
    return problems


def _check_time_index(entries: list[tuple[int, int]], log: SegmentScan | None, base: int) -> list[str]:
    problems = []
    previous: tuple[int, int] | None = None
    for i, (timestamp, relative) in enumerate(entries):
        offset = base + relative
        where = f"entry {i} (timestamp {timestamp}, offset {offset})"
        if previous is not None and (timestamp < previous[0] or relative < previous[1]):
            problems.append(
                f"{where}: below the previous entry (timestamp {previous[0]}, offset {base + previous[1]})"
            )
        elif relative < 0:
            problems.append(f"{where}: negative offset")
        elif log is not None:
            if log.last_offset is None or offset > log.last_offset:
                problems.append(f"{where}: past the log's last offset {log.last_offset}")
            elif timestamp > log.max_timestamp:
                problems.append(f"{where}: above the log's max timestamp {log.max_timestamp}")
        previous = (timestamp, relative)
    return problems
