"""``seglog.segments``: a partition's segment files read byte by byte, as Kafka's
``kafka-dump-log`` reads them (and what ``seglog dump-log`` and ``seglog verify``
show): the batches of a ``.log`` with their header fields and records, or where a
walk had to stop and why, and the entries and problems of its ``.index`` and
``.timeindex``. Works on files alone, without opening the store (a damaged or
foreign log directory included).

The reading and checking are the native core's, on the same record codec as the
store."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Literal

from ._native import IndexContents, SegmentScan, check_index, read_index, scan_log, walk_log
from ._native import LogBatch as Batch
from ._native import LogStop as Stop

__all__ = [
    "INDEX_KINDS",
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

SEGMENT_FILE = re.compile(r"^(\d{20})\.(log|index|timeindex)$")

#: An index file by its suffix: ``index`` (offset index) or ``timeindex`` (time index).
IndexKind = Literal["index", "timeindex"]
INDEX_KINDS: tuple[IndexKind, ...] = ("index", "timeindex")


def iter_log(fd: int, start: int = 0, *, decode: bool = True) -> Iterator[Batch | Stop]:
    """The batches of the ``.log`` open as ``fd`` from ``start``, each checked (CRC-32C,
    records) when ``decode``; a :class:`Stop` last if the batch boundaries are lost
    (torn tail, bad length or magic)."""
    return walk_log(fd, start, decode=decode)
