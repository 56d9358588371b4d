"""``seglog groups``: list, describe, delete consumer groups and reset their offsets, as
kafka-consumer-groups does; on an embedded store (``__consumer_offsets`` read and written
directly) or, with ``--bootstrap-server``, through a broker's group coordinator."""

from __future__ import annotations

import argparse
import errno
import fcntl
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from .. import GroupInUseError, Store, UnknownTopicOrPartitionError
from .._groups import OFFSETS_TOPIC, GroupLock, _lock_file_name
from .._native import RemoteClient
from ._common import CliError, open_reader, open_writer, store_path

TP = tuple[str, int]
BROKER_FILE = ".broker.json"  # written by a broker while it serves the store
INACTIVE = ("Empty", "Dead")


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None = None
    assignment: list[TP] = field(default_factory=list)


@dataclass
class Group:
    group_id: str
    state: str
    protocol_type: str = ""
    protocol: str = ""
    coordinator: str = "-"
    members: list[Member] = field(default_factory=list)
    offsets: dict[TP, int] = field(default_factory=dict)


class Backend(Protocol):
    def list(self) -> list[tuple[str, str, str]]:
        """(group id, state, protocol type) of every group, sorted."""

    def describe(self, group: str) -> Group | None:
        """The group with its members and committed offsets; None if it does not exist."""

    def partitions(self, topic: str) -> int: ...

    def offsets(self, tp: TP) -> tuple[int, int]:
        """(log start offset, log end offset)."""

    def offset_for_time(self, tp: TP, timestamp_ms: int) -> int | None: ...


def _members(raw: list[dict[str, Any]]) -> list[Member]:
    return [
        Member(
            m["member_id"],
            m["client_id"],
            m["client_host"],
            m["group_instance_id"],
            [(t, p) for t, p in m["assignment"]],
        )
        for m in raw
    ]


# -- an embedded store -------------------------------------------------------------------


def _lock_holder(path: str, group: str) -> str | None:
    """The PID holding the group's embedded-consumer lock, or None. Tests the lock
    without taking or creating anything (a shared lock fails while a member holds it).
    Must not run in a process that holds the lock itself: closing drops it."""
    lock = os.path.join(path, ".groups", _lock_file_name(group))
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
    """What ``.broker.json`` says, if the broker that wrote it still runs."""
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


class Embedded:
    def __init__(self, store: Store, path: str) -> None:
        self.store = store
        self.path = path
        self.check_locks = True

    def _load(self, group: str | None) -> dict[str, dict[str, Any]]:
        groups, skipped = self.store._native.load_groups(group)
        if skipped:
            warning = f"seglog: warning: skipped {skipped} unreadable records of {OFFSETS_TOPIC}"
            print(warning, file=sys.stderr)
        return groups

    def _group(self, group_id: str, raw: dict[str, Any]) -> Group:
        meta = raw["metadata"]
        g = Group(group_id, "Empty", coordinator="embedded")
        if meta is not None:
            g.protocol_type = meta["protocol_type"]
            g.protocol = meta["protocol"] or ""
            g.members = _members(meta["members"])
            if g.members:
                g.state = "Stable"
        g.offsets = {tp: v[0] for tp, v in raw["offsets"].items()}
        holder = _lock_holder(self.path, group_id) if self.check_locks else None
        if holder is not None:
            # One embedded member consumes every partition the group has.
            g.state = "Stable"
            g.protocol_type = g.protocol_type or "consumer"
            g.members = [Member(f"embedded-pid-{holder}", "-", "localhost", None, sorted(g.offsets))]
        return g

    def list(self) -> list[tuple[str, str, str]]:
        out = []
        for group_id, raw in self._load(None).items():
            g = self._group(group_id, raw)
            out.append((group_id, g.state, g.protocol_type or "consumer"))
        return out

    def describe(self, group: str) -> Group | None:
        raw = self._load(group).get(group)
        return None if raw is None else self._group(group, raw)

    def partitions(self, topic: str) -> int:
        return self.store.partition_count(topic)

    def offsets(self, tp: TP) -> tuple[int, int]:
        return self.store.offsets(*tp)

    def offset_for_time(self, tp: TP, timestamp_ms: int) -> int | None:
        found = self.store.offset_for_time(tp[0], tp[1], timestamp_ms)
        return None if found is None else found[0]


@contextmanager
def _embedded_writer(args: argparse.Namespace, group: str, doing: str) -> Iterator[Embedded]:
    """The store for writing a group's records, refused while the group is in use: a
    broker serves the store (its coordinator owns the groups) or an embedded consumer
    holds the group's lock (held here until the write is done)."""
    path = store_path(args)
    if not os.path.isdir(path):
        raise CliError(f"no store at {path}")
    broker = _serving_broker(path)
    if broker is not None:
        listener = broker.get("listener", "?")
        raise CliError(
            f"cannot {doing} group {group!r} on the store: broker {broker.get('node_id', '?')} "
            f"(pid {broker['pid']}) serves it and coordinates its groups; "
            f"use --bootstrap-server {listener}"
        )
    try:
        lock = GroupLock(path, group)
    except GroupInUseError:
        holder = _lock_holder(path, group) or "unknown"
        raise CliError(
            f"cannot {doing} group {group!r}: it is in use by an embedded consumer (pid {holder}); "
            "its state is Stable, and only an inactive (Empty) group can be changed: close the consumer first"
        ) from None
    try:
        with open_writer(args) as store:
            backend = Embedded(store, path)
            backend.check_locks = False  # this process holds the lock: testing it would drop it
            g = backend.describe(group)
            if g is not None and g.members:
                # A broker that served the store recorded members: it would bring them back.
                raise CliError(
                    f"cannot {doing} group {group!r}: its last metadata record, written by a broker "
                    f"that served the store, has {len(g.members)} member(s) (state Stable); serve the "
                    "store and use --bootstrap-server once they have left or expired"
                )
            yield backend
    finally:
        lock.release()


# -- a broker ------------------------------------------------------------------------------


class Remote:
    def __init__(self, bootstrap: str) -> None:
        self.client = RemoteClient(bootstrap, client_id="seglog-groups", timeout_ms=15000)
        self.bootstrap = bootstrap

    def list(self) -> list[tuple[str, str, str]]:
        listed = self.client.list_groups()
        unknown = [g["group_id"] for g in listed if g["state"] is None]
        states = {d["group_id"]: d["state"] for d in self.client.describe_groups(unknown)} if unknown else {}
        return [
            (g["group_id"], g["state"] or states.get(g["group_id"], "Unknown"), g["protocol_type"])
            for g in listed
        ]

    def describe(self, group: str) -> Group | None:
        (d,) = self.client.describe_groups([group])
        offsets = self.client.fetch_offsets(group)
        if d["state"] == "Dead" and not offsets:
            return None
        g = Group(group, d["state"], d["protocol_type"], d["protocol"], self.bootstrap)
        g.members = _members(d["members"])
        g.offsets = {tp: v[0] for tp, v in offsets.items()}
        return g

    def partitions(self, topic: str) -> int:
        t = self.client.metadata([topic])["topics"].get(topic)
        if t is None or t["error_code"] != 0 or not t["partitions"]:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
        return len(t["partitions"])

    def offsets(self, tp: TP) -> tuple[int, int]:
        start = self.client.list_offsets(tp[0], tp[1], -2)
        end = self.client.list_offsets(tp[0], tp[1], -1)
        return (start or 0, end or 0)

    def offset_for_time(self, tp: TP, timestamp_ms: int) -> int | None:
        return self.client.list_offsets(tp[0], tp[1], timestamp_ms)

    def close(self) -> None:
        self.client.close()


@contextmanager
def _reader(args: argparse.Namespace) -> Iterator[Backend]:
    if _bootstrap(args):
        remote = Remote(str(_bootstrap(args)))
        try:
            yield remote
        finally:
            remote.close()
    else:
        with open_reader(args) as store:
            yield Embedded(store, store_path(args))


def _bootstrap(args: argparse.Namespace) -> str | None:
    return getattr(args, "bootstrap_server", None)


def _check_target(args: argparse.Namespace) -> None:
    if _bootstrap(args) and getattr(args, "store", None):
        args.parser.error("give --store or --bootstrap-server, not both")


# -- output --------------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[Any]]) -> None:
    cells = [header, *[["-" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        print(" ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _json(value: Any) -> None:
    print(json.dumps(value))


def _exists(backend: Backend, group: str) -> Group:
    g = backend.describe(group)
    if g is None:
        raise CliError(f"consumer group {group!r} does not exist")
    return g


def _partition_rows(backend: Backend, g: Group) -> list[dict[str, Any]]:
    """Kafka's describe rows: every committed partition and every assigned one."""
    owner = {tp: m for m in g.members for tp in m.assignment}
    rows = []
    for tp in sorted(set(g.offsets) | set(owner)):
        current = g.offsets.get(tp)
        try:
            end: int | None = backend.offsets(tp)[1]
        except UnknownTopicOrPartitionError:
            end = None  # committed for a topic since deleted
        m = owner.get(tp)
        rows.append(
            {
                "group": g.group_id,
                "topic": tp[0],
                "partition": tp[1],
                "current_offset": current,
                "log_end_offset": end,
                "lag": None if current is None or end is None else max(0, end - current),
                "consumer_id": m.member_id if m else None,
                "host": m.host if m else None,
                "client_id": m.client_id if m else None,
            }
        )
    return rows


# -- commands ------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    _check_target(args)
    with _reader(args) as backend:
        groups = backend.list()
    if args.format == "json":
        _json([{"group": g, "state": s, "protocol_type": t} for g, s, t in groups])
    elif args.state:
        _table(["GROUP", "STATE"], [[g, s] for g, s, _ in groups])
    else:
        for g, _, _ in groups:
            print(g)
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    _check_target(args)
    with _reader(args) as backend:
        g = _exists(backend, args.group)
        rows = _partition_rows(backend, g) if not (args.members or args.state) else []
    if args.format == "json":
        _json(
            {
                "group": g.group_id,
                "state": g.state,
                "protocol_type": g.protocol_type,
                "assignment_strategy": g.protocol,
                "coordinator": g.coordinator,
                "members": [
                    {
                        "consumer_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "host": m.host,
                        "client_id": m.client_id,
                        "assignment": [list(tp) for tp in m.assignment],
                    }
                    for m in g.members
                ],
                **({"partitions": rows} if rows or not (args.members or args.state) else {}),
            }
        )
        return 0
    if not g.members and not args.state:
        print(f"Consumer group '{g.group_id}' has no active members.", file=sys.stderr)
    if args.state:
        _table(
            ["GROUP", "COORDINATOR", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            [[g.group_id, g.coordinator, g.protocol or None, g.state, len(g.members)]],
        )
    elif args.members:
        _table(
            ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
            [[g.group_id, m.member_id, m.host, m.client_id, len(m.assignment)] for m in g.members],
        )
    else:
        keys = [
            "group",
            "topic",
            "partition",
            "current_offset",
            "log_end_offset",
            "lag",
            "consumer_id",
            "host",
            "client_id",
        ]
        _table([k.upper().replace("_", "-") for k in keys], [[r[k] for k in keys] for r in rows])
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    _check_target(args)
    if _bootstrap(args):
        remote = Remote(str(_bootstrap(args)))
        try:
            remote.client.delete_groups([args.group])
        finally:
            remote.close()
    else:
        with _embedded_writer(args, args.group, "delete") as backend:
            if backend.store._native.delete_group(args.group) == 0:
                raise CliError(f"consumer group {args.group!r} does not exist")
    print(f"Deletion of requested consumer groups ('{args.group}') was successful.")
    return 0


def _topic_partitions(text: str) -> tuple[str, list[int] | None]:
    """``orders`` (every partition) or ``orders:0,2``."""
    topic, sep, parts = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P[,P...], got {text!r}")
    if not sep:
        return topic, None
    try:
        partitions = [int(p) for p in parts.split(",") if p.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected TOPIC:P[,P...] with integer partitions, got {text!r}"
        ) from None
    if not partitions or any(p < 0 for p in partitions):
        raise argparse.ArgumentTypeError(f"expected TOPIC:P[,P...] with partitions >= 0, got {text!r}")
    return topic, partitions


def _timestamp_ms(text: str) -> int:
    """An ISO 8601 date-time (local time unless it has an offset or ``Z``), to ms."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 date-time like 2024-01-31T12:00:00[.000][+01:00], got {text!r}"
        ) from None
    return int(when.timestamp() * 1000)


def _plan(args: argparse.Namespace, backend: Backend, g: Group) -> dict[TP, int]:
    wanted: list[TP] = []
    if args.all_topics:
        wanted = sorted(g.offsets)
        if not wanted:
            raise CliError(f"group {g.group_id!r} has no committed offsets: name topics with --topic")
    for topic, parts in args.topic or []:
        try:
            n = backend.partitions(topic)
        except UnknownTopicOrPartitionError:
            raise CliError(f"unknown topic {topic!r}") from None
        for p in parts if parts is not None else range(n):
            if p >= n:
                raise CliError(f"topic {topic!r} has no partition {p} (it has {n})")
            if (topic, p) not in wanted:
                wanted.append((topic, p))
    if args.shift_by is not None:
        missing = [tp for tp in wanted if tp not in g.offsets]
        if missing:
            names = ", ".join(f"{t}-{p}" for t, p in missing)
            raise CliError(f"--shift-by needs a committed offset; group {g.group_id!r} has none for {names}")
    plan = {}
    for tp in wanted:
        start, end = backend.offsets(tp)
        if args.to_earliest:
            target = start
        elif args.to_latest:
            target = end
        elif args.to_offset is not None:
            target = args.to_offset
        elif args.to_datetime is not None:
            found = backend.offset_for_time(tp, args.to_datetime)
            target = end if found is None else found
        else:
            target = g.offsets[tp] + args.shift_by
        # Clamped to the log's range, as Kafka's tool does.
        plan[tp] = min(max(target, start), end)
    return plan


def _print_plan(args: argparse.Namespace, g: Group, plan: dict[TP, int]) -> None:
    rows = [(tp, g.offsets.get(tp), new) for tp, new in sorted(plan.items())]
    if args.format == "json":
        _json(
            [
                {"group": g.group_id, "topic": t, "partition": p, "current_offset": cur, "new_offset": new}
                for (t, p), cur, new in rows
            ]
        )
    else:
        _table(
            ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
            [[g.group_id, t, p, new] for (t, p), _, new in rows],
        )


def _refuse_active(g: Group) -> None:
    if g.state not in INACTIVE:
        raise CliError(
            f"assignments can only be reset if the group {g.group_id!r} is inactive, but its state is "
            f"{g.state} ({len(g.members)} member(s)): stop its consumers first"
        )


def cmd_reset_offsets(args: argparse.Namespace) -> int:
    _check_target(args)
    if not args.topic and not args.all_topics:
        args.parser.error("give --topic TOPIC[:P,...] (repeatable) or --all-topics")
    if not args.execute and not args.dry_run:
        print(
            "seglog: no --execute: showing the plan only, nothing is committed (--dry-run says so quietly)",
            file=sys.stderr,
        )
    group = args.group
    if _bootstrap(args):
        remote = Remote(str(_bootstrap(args)))
        try:
            g = remote.describe(group) or Group(group, "Dead")
            _refuse_active(g)
            plan = _plan(args, remote, g)
            if args.execute:
                remote.client.commit_offsets(group, {tp: (o, "") for tp, o in plan.items()})
        finally:
            remote.close()
    elif args.execute:
        with _embedded_writer(args, group, "reset offsets of") as backend:
            g = backend.describe(group) or Group(group, "Dead")
            plan = _plan(args, backend, g)
            backend.store._native.commit_offsets(group, {tp: (o, "") for tp, o in plan.items()})
    else:
        with _reader(args) as reader:
            g = reader.describe(group) or Group(group, "Dead")
            _refuse_active(g)
            plan = _plan(args, reader, g)
    _print_plan(args, g, plan)
    return 0


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], store_opt: argparse.ArgumentParser
) -> None:
    target = argparse.ArgumentParser(add_help=False, parents=[store_opt])
    target.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT",
        default=argparse.SUPPRESS,
        help="manage the groups of a broker (any Kafka broker) instead of a store",
    )
    groups = commands.add_parser(
        "groups",
        parents=[target],
        help="list, describe, delete consumer groups, reset their offsets (kafka-consumer-groups)",
        description=(
            "Consumer groups as kafka-consumer-groups shows them: on a store (its __consumer_offsets) "
            "or, with --bootstrap-server, through a broker's group coordinator. Deleting a group and "
            "resetting its offsets need it inactive (no members)."
        ),
    )
    group_commands = groups.add_subparsers(title="group commands", metavar="ACTION", required=True)
    fmt = argparse.ArgumentParser(add_help=False)
    fmt.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )

    p = group_commands.add_parser("list", parents=[target, fmt], help="the groups")
    p.add_argument("--state", action="store_true", help="with each group's state")
    p.set_defaults(func=cmd_list, parser=p)

    p = group_commands.add_parser(
        "describe",
        parents=[target, fmt],
        help="a group's partitions: committed offset, log end offset, lag and member",
    )
    p.add_argument("group", metavar="GROUP")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="the members instead of the partitions")
    view.add_argument("--state", action="store_true", help="the group's state instead of the partitions")
    p.set_defaults(func=cmd_describe, parser=p)

    p = group_commands.add_parser(
        "delete", parents=[target], help="delete a group and its offsets (it must be inactive)"
    )
    p.add_argument("group", metavar="GROUP")
    p.set_defaults(func=cmd_delete, parser=p)

    p = group_commands.add_parser(
        "reset-offsets",
        parents=[target, fmt],
        help="set an inactive group's committed offsets (prints the plan; --execute commits it)",
        epilog="Example: seglog groups reset-offsets billing --topic orders:0,1 --to-earliest --execute",
    )
    p.add_argument("group", metavar="GROUP")
    p.add_argument(
        "--topic",
        type=_topic_partitions,
        action="append",
        metavar="TOPIC[:P,...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    p.add_argument("--all-topics", action="store_true", help="every partition the group has committed")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=int, metavar="N", help="offset N (kept within the log)")
    to.add_argument(
        "--to-datetime",
        type=_timestamp_ms,
        metavar="ISO",
        help="the first offset at or after this time, e.g. 2024-01-31T12:00:00 (local) or ...Z",
    )
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")
    run.add_argument("--execute", action="store_true", help="commit the new offsets")
    p.set_defaults(func=cmd_reset_offsets, parser=p)
