"""``seglog groups``: list, describe, delete consumer groups and reset their offsets, as
kafka-consumer-groups does; on an embedded store (``__consumer_offsets`` read and written
directly) or, with ``--bootstrap-server``, through a broker's group coordinator. Both
through :class:`seglog.Admin`; this module parses, plans resets and prints."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from .. import (
    Admin,
    BrokerServesStoreError,
    GroupDescription,
    GroupIdNotFoundError,
    GroupNotEmptyError,
    StoreLockedError,
    TopicPartition,
    UnknownTopicOrPartitionError,
)
from ._common import PROG, CliError, store_locked, store_path

INACTIVE = ("Empty", "Dead")
Offsets = dict[TopicPartition, int]


def _bootstrap(args: argparse.Namespace) -> str | None:
    return getattr(args, "bootstrap_server", None)


def _check_target(args: argparse.Namespace) -> None:
    if _bootstrap(args) and getattr(args, "store", None):
        args.parser.error("give --store or --bootstrap-server, not both")


def _store_dir(args: argparse.Namespace) -> None:
    """A change to a store's groups needs the store there (it is never created)."""
    path = store_path(args)
    if not os.path.isdir(path):
        raise CliError(f"no store at {path}")


@contextmanager
def _admin(args: argparse.Namespace) -> Iterator[Admin]:
    """The Admin of ``--bootstrap-server`` or the store, with what it reports (unreadable
    records of ``__consumer_offsets``) printed as warnings."""
    logger = logging.getLogger("seglog.admin")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"{PROG}: warning: %(message)s"))
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        bootstrap = _bootstrap(args)
        if bootstrap:
            admin = Admin(bootstrap_servers=bootstrap, client_id="seglog-groups", request_timeout_ms=15000)
        else:
            path = store_path(args)
            try:
                admin = Admin(path)
            except FileNotFoundError:
                raise CliError(f"no store at {path}") from None
            except NotADirectoryError:
                raise CliError(f"{path} is not a store directory") from None
        with admin:
            yield admin
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


@contextmanager
def _refusals(args: argparse.Namespace, group: str, doing: str) -> Iterator[None]:
    """A change to a store's group refused, said in the tool's words (a broker's
    refusals are its own)."""
    if _bootstrap(args):
        yield
        return
    try:
        yield
    except BrokerServesStoreError as e:
        node_id = "?" if e.node_id is None else e.node_id
        listener = "?" if e.bootstrap_servers is None else e.bootstrap_servers
        raise CliError(
            f"cannot {doing} group {group!r} on the store: broker {node_id} (pid {e.pid}) serves it and "
            f"coordinates its groups; use --bootstrap-server {listener}"
        ) from None
    except GroupNotEmptyError as e:
        if e.member_pid is not None:
            raise CliError(
                f"cannot {doing} group {group!r}: it is in use by an embedded consumer "
                f"(pid {e.member_pid}); its state is Stable, and only an inactive (Empty) group can be "
                "changed: close the consumer first"
            ) from None
        raise CliError(
            f"cannot {doing} group {group!r}: its last metadata record, written by a broker "
            f"that served the store, has {e.member_count} member(s) (state Stable); serve the "
            "store and use --bootstrap-server once they have left or expired"
        ) from None
    except GroupIdNotFoundError:
        raise CliError(f"consumer group {group!r} does not exist") from None
    except StoreLockedError as e:
        raise store_locked(e) from None


# -- output --------------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[Any]]) -> None:
    cells = [header, *[["-" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for row in cells:
        print(" ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _json(value: Any) -> None:
    print(json.dumps(value))


def _described(admin: Admin, group: str) -> GroupDescription | None:
    try:
        return admin.describe_consumer_groups([group])[group]
    except GroupIdNotFoundError:
        return None


def _exists(admin: Admin, group: str) -> GroupDescription:
    g = _described(admin, group)
    if g is None:
        raise CliError(f"consumer group {group!r} does not exist")
    return g


def _committed(admin: Admin, group: str) -> Offsets:
    return {tp: o.offset for tp, o in admin.list_consumer_group_offsets(group).items()}


def _partition_rows(admin: Admin, g: GroupDescription, committed: Offsets) -> list[dict[str, Any]]:
    """Kafka's describe rows: every committed partition and every assigned one."""
    owner = {tp: m for m in g.members for tp in m.assignment}
    rows = []
    for tp in sorted(set(committed) | set(owner)):
        current = committed.get(tp)
        try:
            end: int | None = admin.end_offsets([tp])[tp]
        except UnknownTopicOrPartitionError:
            end = None  # committed for a topic since deleted
        m = owner.get(tp)
        rows.append(
            {
                "group": g.group_id,
                "topic": tp.topic,
                "partition": tp.partition,
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
    with _admin(args) as admin:
        groups = admin.list_consumer_groups()
    if args.format == "json":
        _json([{"group": g.group_id, "state": g.state, "protocol_type": g.protocol_type} for g in groups])
    elif args.state:
        _table(["GROUP", "STATE"], [[g.group_id, g.state] for g in groups])
    else:
        for g in groups:
            print(g.group_id)
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    _check_target(args)
    with _admin(args) as admin:
        g = _exists(admin, args.group)
        if not (args.members or args.state):
            rows = _partition_rows(admin, g, _committed(admin, args.group))
        else:
            rows = []
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
    if not _bootstrap(args):
        _store_dir(args)
    with _admin(args) as admin, _refusals(args, args.group, "delete"):
        admin.delete_consumer_groups([args.group])
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


def _plan(args: argparse.Namespace, admin: Admin, group: str, committed: Offsets) -> Offsets:
    wanted: list[TopicPartition] = []
    if args.all_topics:
        wanted = sorted(committed)
        if not wanted:
            raise CliError(f"group {group!r} has no committed offsets: name topics with --topic")
    for topic, parts in args.topic or []:
        found = admin.partitions_for_topic(topic)
        if found is None:
            raise CliError(f"unknown topic {topic!r}")
        n = len(found)
        for p in parts if parts is not None else sorted(found):
            if p not in found:
                raise CliError(f"topic {topic!r} has no partition {p} (it has {n})")
            if (topic, p) not in wanted:
                wanted.append(TopicPartition(topic, p))
    if args.shift_by is not None:
        missing = [tp for tp in wanted if tp not in committed]
        if missing:
            names = ", ".join(f"{t}-{p}" for t, p in missing)
            raise CliError(f"--shift-by needs a committed offset; group {group!r} has none for {names}")
    plan = {}
    for tp in wanted:
        start, end = admin.beginning_offsets([tp])[tp], admin.end_offsets([tp])[tp]
        if args.to_earliest:
            target = start
        elif args.to_latest:
            target = end
        elif args.to_offset is not None:
            target = args.to_offset
        elif args.to_datetime is not None:
            found_at = admin.offsets_for_times({tp: args.to_datetime})[tp]
            target = end if found_at is None else found_at.offset
        else:
            target = committed[tp] + args.shift_by
        # Clamped to the log's range, as Kafka's tool does.
        plan[tp] = min(max(target, start), end)
    return plan


def _print_plan(args: argparse.Namespace, group: str, committed: Offsets, plan: Offsets) -> None:
    rows = [(tp, committed.get(tp), new) for tp, new in sorted(plan.items())]
    if args.format == "json":
        _json(
            [
                {"group": group, "topic": t, "partition": p, "current_offset": cur, "new_offset": new}
                for (t, p), cur, new in rows
            ]
        )
    else:
        _table(
            ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
            [[group, t, p, new] for (t, p), _, new in rows],
        )


def _refuse_active(group: str, g: GroupDescription | None) -> None:
    if g is not None and g.state not in INACTIVE:
        raise CliError(
            f"assignments can only be reset if the group {group!r} is inactive, but its state is "
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
    # On a store, the write's own checks (the group's lock, a serving broker, members a
    # broker recorded) refuse it, before the plan is made.
    in_place = args.execute and not _bootstrap(args)
    if in_place:
        _store_dir(args)
    with _admin(args) as admin:
        if in_place:
            with _refusals(args, group, "reset offsets of"):
                admin.alter_consumer_group_offsets(group, {})
        else:
            _refuse_active(group, _described(admin, group))
        committed = _committed(admin, group)
        plan = _plan(args, admin, group, committed)
        if args.execute:
            with _refusals(args, group, "reset offsets of"):
                admin.alter_consumer_group_offsets(group, plan)
    _print_plan(args, group, committed, plan)
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
