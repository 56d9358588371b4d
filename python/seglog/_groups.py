"""Consumer-group offsets in the internal topic ``__consumer_offsets`` (the
codec, in Kafka's record formats, is the native core's), and the lock that
keeps a group to one member at a time on an embedded store."""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
from typing import IO

from . import _native
from .errors import SeglogError

OFFSETS_TOPIC = "__consumer_offsets"

log = logging.getLogger(__name__)


class GroupInUseError(SeglogError):
    """Another consumer (in this or another process) is the group's member."""


def load_committed(store: _native.Store, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The latest committed (offset, metadata) per (topic, partition) of a group.

    Records of ``__consumer_offsets`` that cannot be parsed are skipped, and
    reported as a warning."""
    committed, skipped = store.load_committed(group)
    if skipped:
        log.warning("skipped %d unreadable records of %s", skipped, OFFSETS_TOPIC)
    return committed


def commit(store: _native.Store, group: str, offsets: dict[tuple[str, int], tuple[int, str]]) -> None:
    """Append the commits durably (acknowledged only once fsynced)."""
    store.commit_offsets(group, offsets)


def _lock_file_name(group: str) -> str:
    """The group id in hex, or (when that would pass the 255-byte file name
    limit) its SHA-256: any legal group id gets a lock file name that fits."""
    raw = group.encode()
    if len(raw) <= 120:
        return f"{raw.hex()}.lock"
    return f"sha256-{hashlib.sha256(raw).hexdigest()}.lock"


class GroupLock:
    """An exclusive lock on ``<store>/.groups/<group>.lock`` naming the member's PID."""

    def __init__(self, store_path: str, group: str) -> None:
        directory = os.path.join(store_path, ".groups")
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, _lock_file_name(group))
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
