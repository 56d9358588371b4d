"""Consumer-group offsets in the internal topic ``__consumer_offsets`` (the
codec, in Kafka's record formats, is the native core's), and a Consumer's two
kinds of membership: :class:`StoreGroup`, the lock that keeps a group to one
member at a time on an embedded store with no broker, and
:class:`CoordinatedGroup`, a member through a broker's group coordinator
(shared with network consumers, Kafka's or seglog's)."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import threading
from typing import IO, Any

from . import _native
from .errors import KafkaError, ReadOnlyStoreError, SeglogError

OFFSETS_TOPIC = "__consumer_offsets"

log = logging.getLogger(__name__)


class GroupInUseError(SeglogError):
    """Another consumer (in this or another process) is the group's member."""


class GroupsThroughBrokerError(GroupInUseError):
    """A broker in another process serves the store: its group coordinator is where
    members join (``bootstrap_servers=`` on ``seglog.Consumer``, or a Kafka client)."""


class CommitFailedError(KafkaError):
    """The coordinator refused a commit because the group rebalanced since this
    member joined (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS):
    the partitions may be another member's now. The next poll rejoins."""


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


Offsets = dict[tuple[str, int], tuple[int, str]]


class StoreGroup:
    """A group on a store with no broker: one member at a time (a lock file), its
    offsets read from and appended to the store's ``__consumer_offsets``."""

    coordinated = False

    def __init__(self, store: Any, group: str) -> None:
        self._store = store
        self.group = group
        self._lock = GroupLock(str(store.path), group)
        try:
            self._committed = load_committed(store._native, group)
        except BaseException:
            self._lock.release()
            raise

    def committed(self, partitions: list[tuple[str, int]] | None = None) -> Offsets:
        if partitions is None:
            return dict(self._committed)
        return {tp: self._committed[tp] for tp in partitions if tp in self._committed}

    def commit(self, offsets: Offsets) -> None:
        if self._store.read_only:
            raise ReadOnlyStoreError("commit: this consumer's store is read-only")
        commit(self._store._native, self.group, offsets)
        self._committed.update(offsets)

    def close(self, leave: bool = True) -> None:
        self._lock.release()


# Codes with which a coordinator refuses a commit of a generation left behind.
_MOVED_ON = {22: "ILLEGAL_GENERATION", 25: "UNKNOWN_MEMBER_ID", 27: "REBALANCE_IN_PROGRESS"}


class CoordinatedGroup:
    """A member through a broker's group coordinator (Kafka's classic protocol:
    assignments by the leader's assignor, heartbeats from a native thread)."""

    coordinated = True

    def __init__(
        self,
        bootstrap_servers: str,
        group: str,
        topics: list[str],
        *,
        instance_id: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        heartbeat_interval_ms: int,
        assignors: list[str],
        client_id: str,
        timeout_ms: int,
    ) -> None:
        self.group = group
        self.instance_id = instance_id
        self.member = _native.GroupMember(
            bootstrap_servers,
            group,
            topics,
            instance_id,
            session_timeout_ms,
            rebalance_timeout_ms,
            heartbeat_interval_ms,
            assignors,
            client_id,
            timeout_ms,
        )

    def committed(self, partitions: list[tuple[str, int]] | None = None) -> Offsets:
        return self.member.committed(partitions)

    def commit(self, offsets: Offsets) -> None:
        try:
            self.member.commit([(t, p, o, m) for (t, p), (o, m) in offsets.items()])
        except KafkaError as e:
            code = getattr(e, "code", None)
            if code in _MOVED_ON:
                err = CommitFailedError(
                    f"commit of group {self.group!r} failed: {_MOVED_ON[code]}: the group rebalanced "
                    f"since this member joined; its partitions may be another member's now ({e})"
                )
                err.code = code
                raise err from e
            raise

    def close(self, leave: bool = True) -> None:
        """Leave the group (a static member only stops heart-beating, as Kafka's
        consumers do, so that a restart within its session keeps its partitions)."""
        if leave and self.instance_id is None:
            try:
                self.member.leave()
            except (SeglogError, OSError) as e:
                log.warning("leaving group %r: %s", self.group, e)
                self.member.close()
        else:
            self.member.close()
