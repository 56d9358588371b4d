"""What :class:`seglog.Admin` answers about consumer groups (listings and descriptions,
after Kafka's AdminClient) and the errors with which it refuses a change."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._consumer import TopicPartition
from ._groups import GroupInUseError, GroupsThroughBrokerError
from .errors import KafkaError

__all__ = [
    "GroupListing",
    "MemberDescription",
    "GroupDescription",
    "GroupNotEmptyError",
    "GroupIdNotFoundError",
    "BrokerServesStoreError",
]


@dataclass(frozen=True)
class GroupListing:
    """One group as :meth:`Admin.list_consumer_groups` lists it."""

    group_id: str
    #: Kafka's group state: ``Empty``, ``PreparingRebalance``, ``CompletingRebalance``,
    #: ``Stable`` or ``Dead`` (``Unknown`` if a broker would not say).
    state: str
    #: ``consumer`` for Kafka's consumer protocol (what a store's own groups are).
    protocol_type: str


@dataclass(frozen=True)
class MemberDescription:
    """A member of a group, with the partitions assigned to it."""

    member_id: str
    client_id: str
    host: str
    #: A static member's ``group.instance.id``; ``None`` for a dynamic member.
    group_instance_id: str | None = None
    assignment: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True)
class GroupDescription:
    """A group as :meth:`Admin.describe_consumer_groups` describes it."""

    group_id: str
    state: str
    #: ``""`` for a group that only has committed offsets.
    protocol_type: str = ""
    #: The assignment strategy the members agreed on (``range``, ``roundrobin``, ...);
    #: ``""`` when the group has no members.
    protocol: str = ""
    #: ``HOST:PORT`` of the broker asked, or ``"embedded"`` for a store's groups read in place.
    coordinator: str = "-"
    members: list[MemberDescription] = field(default_factory=list)


class GroupNotEmptyError(GroupInUseError, KafkaError):
    """The group has members, so its offsets cannot be altered nor the group deleted
    (Kafka's NON_EMPTY_GROUP): only an inactive (Empty) group can be changed.

    On a store: an embedded consumer holds the group (``member_pid`` names its process),
    or the group's last metadata record, written by a broker that served the store, has
    members (``member_pid`` is ``None``). Through a broker: the coordinator's answer
    (``code`` 68 NON_EMPTY_GROUP, or 25 UNKNOWN_MEMBER_ID for a commit). ``group_id``,
    ``state`` and ``member_count`` are set where they are known."""

    code: int | None = 68
    group_id: str | None = None
    state: str | None = None
    member_count: int | None = None
    #: The PID of the embedded consumer holding the group (``"unknown"`` if its lock
    #: file does not say); ``None`` if no embedded consumer holds it.
    member_pid: str | None = None


class GroupIdNotFoundError(KafkaError, LookupError):
    """The group does not exist: it has neither members nor committed offsets (Kafka's
    GROUP_ID_NOT_FOUND, ``code`` 69)."""

    code: int | None = 69
    group_id: str | None = None


class BrokerServesStoreError(GroupsThroughBrokerError):
    """A change to a store's groups while a broker serves the store: its group
    coordinator owns them, so change them through it (``Admin(bootstrap_servers=...)``).
    ``bootstrap_servers``, ``node_id`` and ``pid`` say which broker, as its
    ``.broker.json`` in the store names it (``None`` where the file does not say)."""

    bootstrap_servers: str | None = None
    node_id: int | None = None
    pid: int | None = None
