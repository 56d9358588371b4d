"""Consumer-group offsets in the internal topic ``__consumer_offsets`` (the
codec, in Kafka's record formats, is the native core's), and :class:`GroupLock`,
which keeps a group to one member at a time on an embedded store with no broker
(through a broker, the group coordinator keeps its members)."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import threading
from typing import IO

from . import _native
from .errors import SeglogError

OFFSETS_TOPIC = "__consumer_offsets"

log = logging.getLogger(__name__)


class GroupInUseError(SeglogError):
    """Another consumer (in this or another process) is the group's member."""


class GroupsThroughBrokerError(GroupInUseError):
    """A broker in another process serves the store: its group coordinator is where
    members join (``bootstrap_servers=`` on ``seglog.Consumer``, or a Kafka client)."""


def load_committed(store: _native.Store, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The latest committed (offset, metadata) per (topic, partition) of a group.

    Records of ``__consumer_offsets`` that cannot be parsed are skipped, and
    reported as a warning."""
    committed, skipped = store.load_committed(group)
    if skipped:
        log.warning("skipped %d unreadable records of %s", skipped, OFFSETS_TOPIC)
    return committed


def _lock_file_name(group: str) -> str:
    """The group id in hex, or (when that would pass the 255-byte file name
    limit) its SHA-256: any legal group id gets a lock file name that fits."""
    raw = group.encode()
    if len(raw) <= 120:
        return f"{raw.hex()}.lock"
    return f"sha256-{hashlib.sha256(raw).hexdigest()}.lock"


class GroupLock:
    """An exclusive lock on ``<store>/.groups/<group>.lock`` naming the member's PID.

    The lock is a POSIX record lock (``fcntl.lockf``), which belongs to the process:
    a forked child does not inherit it, so the parent's member stays the only one
    and the group is free again the moment the parent releases it. (A ``flock``
    belongs to the open file description a child shares, and the child kept the
    group locked.) Record locks do not exclude another member of the same process,
    so this process's members are also kept in ``_members``; and since closing any
    descriptor of the file drops the process's lock, the file is only opened by a
    member that does not yet exist in this process."""

    def __init__(self, store_path: str, group: str) -> None:
        directory = os.path.join(store_path, ".groups")
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, _lock_file_name(group))
        self._file: IO[str] | None = None
        self._key = os.path.realpath(self.path)
        with _members_lock:
            if self._key in _members:
                raise _in_use(group, str(os.getpid()))
            f = open(self.path, "a+")
            try:
                fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EACCES, errno.EAGAIN):
                    f.close()
                    raise
                f.seek(0)
                holder = f.read().strip() or "unknown"
                f.close()  # this process holds no lock on the file: nothing to drop
                raise _in_use(group, holder) from None
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
            self._file = f
            _members[self._key] = self

    def release(self) -> None:
        with _members_lock:
            if self._file is not None:
                if _members.get(self._key) is self:
                    del _members[self._key]
                self._file.close()  # closing drops the process's lock
                self._file = None


def _in_use(group: str, holder: str) -> GroupInUseError:
    return GroupInUseError(
        f"consumer group {group!r} already has a member (pid {holder}) on this store: "
        "on an embedded store a group has one member at a time; close it first, "
        "or use another group_id"
    )


# This process's members, by lock file: record locks cannot tell them apart.
_members_lock = threading.Lock()
_members: dict[str, GroupLock] = {}


def _forget_parent_members() -> None:
    # A forked child holds none of its parent's locks (the kernel's record locks
    # are per process), so none of its members either; another thread may have
    # held the mutex at the fork.
    global _members_lock, _members
    _members_lock = threading.Lock()
    _members = {}


os.register_at_fork(after_in_child=_forget_parent_members)
