"""Admin: consumer groups managed as Kafka's AdminClient manages them (list, describe,
their committed offsets, alter them, delete groups), on a store in place or through a
broker, with the log offsets a reset of a group's offsets is planned from."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ._admin_backends import BrokerGroups, GroupBackend, StoreGroups
from ._admin_types import (
    BrokerServesStoreError,
    GroupDescription,
    GroupIdNotFoundError,
    GroupListing,
    GroupNotEmptyError,
    MemberDescription,
)
from ._consumer import OffsetAndMetadata, OffsetAndTimestamp, TopicPartition
from ._store import Store
from .errors import ClientClosedError

__all__ = [
    "Admin",
    "GroupListing",
    "GroupDescription",
    "MemberDescription",
    "GroupNotEmptyError",
    "GroupIdNotFoundError",
    "BrokerServesStoreError",
]

PartitionArg = TopicPartition | tuple[str, int]
#: Offsets to commit, keyed by TopicPartition or by (topic, partition).
OffsetsArg = (
    Mapping[TopicPartition, int | OffsetAndMetadata] | Mapping[tuple[str, int], int | OffsetAndMetadata]
)
TimestampsArg = Mapping[TopicPartition, int] | Mapping[tuple[str, int], int]


def _int(x: Any, what: str) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise TypeError(f"{what} must be an int, got {type(x).__name__}")
    if x < 0:
        raise ValueError(f"{what} must be >= 0, got {x}")
    return x


def _group_id(x: Any) -> str:
    if not isinstance(x, str):
        raise TypeError(f"group_id must be a str, got {type(x).__name__}")
    if not x:
        raise ValueError("group_id must not be empty")
    return x


def _group_ids(xs: Any) -> list[str]:
    if isinstance(xs, (str, bytes)) or not isinstance(xs, Iterable):
        raise TypeError(f"group_ids must be a list of group ids, got {type(xs).__name__}")
    return list(dict.fromkeys(_group_id(x) for x in xs))


def _tp(x: Any) -> TopicPartition:
    if not (
        isinstance(x, tuple)
        and len(x) == 2
        and isinstance(x[0], str)
        and isinstance(x[1], int)
        and not isinstance(x[1], bool)
    ):
        raise TypeError(f"expected a TopicPartition or a (topic, partition) pair, got {x!r}")
    if x[1] < 0 or not x[0]:
        raise ValueError(f"expected a topic name and a partition >= 0, got {x!r}")
    return x if isinstance(x, TopicPartition) else TopicPartition(x[0], x[1])


def _tps(xs: Any) -> list[TopicPartition]:
    if isinstance(xs, (str, bytes)) or not isinstance(xs, Iterable):
        raise TypeError(
            f"partitions must be an iterable of (topic, partition) pairs, got {type(xs).__name__}"
        )
    return list(dict.fromkeys(_tp(x) for x in xs))


def _offset_and_metadata(x: Any) -> OffsetAndMetadata:
    if isinstance(x, OffsetAndMetadata):
        if not isinstance(x.metadata, str):
            raise TypeError(f"OffsetAndMetadata.metadata must be a str, got {type(x.metadata).__name__}")
        return OffsetAndMetadata(_int(x.offset, "offset"), x.metadata)
    if isinstance(x, int) and not isinstance(x, bool):
        return OffsetAndMetadata(_int(x, "offset"))
    raise TypeError(f"an offset must be an int or an OffsetAndMetadata, got {type(x).__name__}")


def _mapping(x: Any, what: str) -> Mapping[Any, Any]:
    if not isinstance(x, Mapping):
        raise TypeError(f"{what} must be a dict keyed by (topic, partition), got {type(x).__name__}")
    return x


class Admin:
    """Consumer groups administered as Kafka's ``AdminClient`` (kafka-python's
    ``KafkaAdminClient``) does, and as ``seglog groups`` does from the command line.

    ``Admin(store)`` manages the groups of a store in place, in its
    ``__consumer_offsets``: ``store`` is a :class:`seglog.Store` (writable, for a change:
    else :class:`~seglog.ReadOnlyStoreError`) or the path of an existing store. A path is
    opened read-only for what only reads (so it works beside a writer in another
    process), and for writing only for the duration of a change (sharing a store this
    process has open; :class:`~seglog.StoreLockedError` while another process writes the
    store). A change
    needs the group inactive, as in Kafka: it is refused with
    :class:`GroupNotEmptyError` while an embedded :class:`seglog.Consumer` holds the
    group (in this process or another) or the group's last metadata record, written by
    a broker that served the store, has members; and with
    :class:`BrokerServesStoreError` while a :class:`seglog.Broker` serves the store,
    whose coordinator owns its groups.

    ``Admin(bootstrap_servers="HOST:PORT")`` asks a broker's group coordinator
    (seglog's or Kafka's), as ``client_id``, waiting up to ``request_timeout_ms`` for
    each answer.

    Unreadable records of a store's ``__consumer_offsets`` are skipped and reported on
    the ``seglog.admin`` logger. Like a Consumer, an Admin is for one thread at a time.

    >>> import tempfile, seglog
    >>> with seglog.open(tempfile.mkdtemp()) as store, seglog.Admin(store) as admin:
    ...     store.create_topic("events")
    ...     admin.alter_consumer_group_offsets("billing", {("events", 0): 0})
    ...     admin.list_consumer_group_offsets("billing")
    {TopicPartition(topic='events', partition=0): OffsetAndMetadata(offset=0, metadata='')}
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        bootstrap_servers: str | None = None,
        client_id: str = "seglog",
        request_timeout_ms: int = 30000,
    ) -> None:
        self._closed = True  # until a backend is there to close
        if not isinstance(client_id, str):
            raise TypeError(f"client_id must be a str, got {type(client_id).__name__}")
        if _int(request_timeout_ms, "request_timeout_ms") == 0:
            raise ValueError("request_timeout_ms must be positive, got 0")
        self._backend: GroupBackend
        if bootstrap_servers is not None:
            if store is not None:
                raise ValueError("give seglog.Admin a store or bootstrap_servers, not both")
            if not isinstance(bootstrap_servers, str):
                raise TypeError(
                    f"bootstrap_servers must be a 'HOST:PORT' str, got {type(bootstrap_servers).__name__}"
                )
            self._target = f"bootstrap_servers={bootstrap_servers!r}"
            self._backend = BrokerGroups(bootstrap_servers, client_id, request_timeout_ms)
        elif isinstance(store, Store):
            self._target = repr(str(store.path))
            self._backend = StoreGroups(store, str(store.path))
        elif isinstance(store, (str, os.PathLike)):
            path = os.fspath(store)
            if not isinstance(path, str):
                raise TypeError(f"store path must be a str, got {type(path).__name__}")
            # Never creates a store: an Admin manages the groups of one that exists.
            if not os.path.exists(path):
                raise FileNotFoundError(errno.ENOENT, "no store at this path", path)
            if not os.path.isdir(path):
                raise NotADirectoryError(errno.ENOTDIR, "not a store directory", path)
            self._target = repr(path)
            self._backend = StoreGroups(None, path)
        elif store is None:
            raise TypeError("seglog.Admin needs a store (a seglog.Store or a path) or bootstrap_servers=")
        else:
            raise TypeError(f"store must be a seglog.Store or a path, got {type(store).__name__}")
        self._closed = False

    def __repr__(self) -> str:
        return f"<seglog.Admin {self._target}{' closed' if self._closed else ''}>"

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _check(self) -> GroupBackend:
        if self._closed:
            raise ClientClosedError("admin client is closed")
        return self._backend

    # -- groups -----------------------------------------------------------------------------

    def list_consumer_groups(self) -> list[GroupListing]:
        """Every group, by group id. A store lists those its ``__consumer_offsets``
        records (with offsets or members), a group an embedded consumer holds as
        Stable; a broker, those its coordinators know."""
        return self._check().list_groups()

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        """Each group's state, protocol and members with their assignments, by group id.
        A group an embedded consumer holds on a store is Stable with one member,
        ``embedded-pid-<PID>``, assigned every partition the group has committed.
        :class:`GroupIdNotFoundError` for a group that does not exist (neither members
        nor committed offsets; a broker describes such a group as Dead)."""
        ids = _group_ids(group_ids)
        return self._check().describe_groups(ids) if ids else {}

    def list_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[PartitionArg] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets: of ``partitions``, or of every partition it
        committed (sorted). A partition without a committed offset is left out, so a
        group that does not exist has none."""
        group_id = _group_id(group_id)
        wanted = None if partitions is None else _tps(partitions)
        return self._check().committed(group_id, wanted)

    def alter_consumer_group_offsets(self, group_id: str, offsets: OffsetsArg) -> None:
        """Commit ``offsets`` for the group, as an admin (no member): a group that does
        not exist yet is created with them. Refused, with :class:`GroupNotEmptyError`,
        unless the group is inactive (Empty or Dead); on a store also as the class
        documentation says. A partition that does not exist raises
        :class:`~seglog.UnknownTopicOrPartitionError`: a store then commits nothing, a
        broker the other partitions (it answers each partition apart). An empty
        mapping commits nothing but is refused as a change would be, so it tells
        whether the group can be changed now."""
        group_id = _group_id(group_id)
        checked: dict[TopicPartition, OffsetAndMetadata] = {}
        for key, value in _mapping(offsets, "offsets").items():
            checked[_tp(key)] = _offset_and_metadata(value)
        self._check().alter(group_id, checked)

    def delete_consumer_groups(self, group_ids: Iterable[str]) -> None:
        """Delete the groups with their committed offsets (tombstones in
        ``__consumer_offsets``). Each must be inactive: every group is tried, then the
        first that could not be deleted raises (:class:`GroupNotEmptyError`,
        :class:`GroupIdNotFoundError`, ...)."""
        ids = _group_ids(group_ids)
        if ids:
            self._check().delete(ids)

    # -- the logs, for planning a reset -----------------------------------------------------

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The topic's partition ids, or ``None`` if there is no such topic (as
        kafka-python's consumer answers)."""
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        n = self._check().partitions(topic)
        return None if n is None else set(range(n))

    def beginning_offsets(self, partitions: Iterable[PartitionArg]) -> dict[TopicPartition, int]:
        """Each partition's log start offset, the first offset a reader can have
        (:class:`~seglog.UnknownTopicOrPartitionError` for one that does not exist)."""
        tps = _tps(partitions)
        backend = self._check()
        return {tp: backend.beginning_offset(tp) for tp in tps}

    def end_offsets(self, partitions: Iterable[PartitionArg]) -> dict[TopicPartition, int]:
        """Each partition's log end offset (a broker's high watermark): the offset the
        next record gets, so a group committed there has read everything."""
        tps = _tps(partitions)
        backend = self._check()
        return {tp: backend.end_offset(tp) for tp in tps}

    def offsets_for_times(self, timestamps: TimestampsArg) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """Per partition, the first record whose timestamp is at or after the given one
        (ms since the epoch, >= 0): its offset and timestamp, or ``None`` if no record
        is that late."""
        wanted = {_tp(k): _int(v, "timestamp (ms)") for k, v in _mapping(timestamps, "timestamps").items()}
        backend = self._check()
        return {tp: backend.offset_for_time(tp, ts) for tp, ts in wanted.items()}

    def close(self) -> None:
        """Close the connections, or the store the Admin opened (never a store it was
        given). Calling it again does nothing."""
        if not self._closed:
            self._closed = True
            self._backend.close()
