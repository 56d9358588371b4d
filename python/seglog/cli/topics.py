"""``seglog topics``: create, list, describe and delete topics and alter their config,
as kafka-topics and kafka-configs do."""

from __future__ import annotations

import argparse

from .. import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from ._common import CliError, open_reader, open_writer, positive


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def _split_top_level(text: str) -> list[str]:
    """Kafka's kafka-configs list syntax: commas separate, except inside [...]."""
    items: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item for item in (x.strip() for x in items) if item]


def _config_list(text: str) -> list[tuple[str, str]]:
    """``k1=v1,k2=[a,b]`` -> [(k1, v1), (k2, "a,b")]."""
    pairs = []
    for item in _split_top_level(text):
        key, value = _key_value(item)
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs.append((key, value))
    if not pairs:
        raise argparse.ArgumentTypeError(f"expected k1=v1[,k2=v2...], got {text!r}")
    return pairs


def _name_list(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise argparse.ArgumentTypeError(f"expected k1[,k2...], got {text!r}")
    return names


def cmd_topics_create(args: argparse.Namespace) -> int:
    config = dict(args.config or [])
    with open_writer(args, create=True) as store:
        try:
            store.create_topic(args.topic, args.partitions, config)
        except TopicAlreadyExistsError:
            if args.if_not_exists:
                return 0
            raise
    print(f"Created topic {args.topic}.")
    return 0


def cmd_topics_list(args: argparse.Namespace) -> int:
    with open_reader(args) as store:
        for name in store.topics():
            print(name)
    return 0


def cmd_topics_describe(args: argparse.Namespace) -> int:
    with open_reader(args) as store:
        names = [args.topic] if args.topic else store.topics()
        for name in names:
            d = store.describe(name)
            # A value with commas in [...], as --add-config takes it.
            overrides = ",".join(
                f"{k}=[{v}]" if "," in v else f"{k}={v}" for k, v in sorted(d.overrides.items())
            )
            print(
                f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {len(d.partitions)}"
                f"\tConfigs: {overrides}"
            )
            for p in d.partitions:
                print(
                    f"\tPartition: {p.partition}\tLogStartOffset: {p.log_start_offset}"
                    f"\tLogEndOffset: {p.log_end_offset}\tSize: {p.size_bytes}"
                    f"\tSegments: {p.segment_count}\tRecoveryPoint: {p.recovery_point}"
                )
            if args.all_configs:
                for key, value in sorted(d.config.items()):
                    source = "override" if key in d.overrides else "default"
                    print(f"\tConfig: {key}={value}\t({source})")
    return 0


def cmd_topics_delete(args: argparse.Namespace) -> int:
    with open_writer(args) as store:
        try:
            store.delete_topic(args.topic)
        except UnknownTopicOrPartitionError:
            if args.if_exists:
                return 0
            raise
    print(f"Deleted topic {args.topic}.")
    return 0


def cmd_topics_alter_config(args: argparse.Namespace) -> int:
    added = dict(pair for group in args.add_config or [] for pair in group)
    deleted = [name for group in args.delete_config or [] for name in group]
    if not added and not deleted:
        args.parser.error("give --add-config and/or --delete-config")
    both = sorted(set(added) & set(deleted))
    if both:
        args.parser.error(f"config(s) both added and deleted: {', '.join(both)}")
    with open_writer(args) as store:
        overrides = store.describe(args.topic).overrides
        not_set = [k for k in deleted if k not in overrides]
        if not_set:
            # kafka-configs refuses to delete what is not set, naming it.
            raise CliError(
                f"invalid config(s) to delete, not set on topic {args.topic}: {', '.join(not_set)}"
            )
        changes: dict[str, str | None] = {**added, **dict.fromkeys(deleted)}
        store.alter_topic_config(args.topic, changes)
    print(f"Completed updating config for topic {args.topic}.")
    return 0


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], store_opt: argparse.ArgumentParser
) -> None:
    topics = commands.add_parser(
        "topics", parents=[store_opt], help="create, list, describe, delete topics; alter their config"
    )
    topic_commands = topics.add_subparsers(title="topic commands", metavar="ACTION", required=True)

    p = topic_commands.add_parser(
        "create", parents=[store_opt], help="create a topic (and the store if needed)"
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument(
        "--partitions", type=positive, default=1, metavar="N", help="number of partitions (default 1)"
    )
    p.add_argument(
        "--config",
        type=_key_value,
        action="append",
        metavar="KEY=VALUE",
        help="a topic config override, by Kafka's name (repeatable), e.g. --config segment.bytes=1048576",
    )
    p.add_argument("--if-not-exists", action="store_true", help="do nothing if the topic exists")
    p.set_defaults(func=cmd_topics_create, parser=p)

    p = topic_commands.add_parser("list", parents=[store_opt], help="list the topics")
    p.set_defaults(func=cmd_topics_list, parser=p)

    p = topic_commands.add_parser(
        "describe", parents=[store_opt], help="partitions (offsets, size, segments) and config of topics"
    )
    p.add_argument("topic", metavar="TOPIC", nargs="?", help="the topic (default: all topics)")
    p.add_argument("--all-configs", action="store_true", help="also list every effective config value")
    p.set_defaults(func=cmd_topics_describe, parser=p)

    p = topic_commands.add_parser("delete", parents=[store_opt], help="delete a topic and its data")
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--if-exists", action="store_true", help="do nothing if the topic does not exist")
    p.set_defaults(func=cmd_topics_delete, parser=p)

    p = topic_commands.add_parser(
        "alter-config",
        parents=[store_opt],
        help="set or remove topic config overrides (kafka-configs --alter)",
        epilog="Example: seglog topics alter-config orders --add-config "
        "retention.ms=3600000,cleanup.policy=[compact,delete] --delete-config segment.bytes",
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument(
        "--add-config",
        type=_config_list,
        action="append",
        metavar="K=V[,K=V...]",
        help="overrides to set; a value with commas goes in [...] (repeatable)",
    )
    p.add_argument(
        "--delete-config",
        type=_name_list,
        action="append",
        metavar="K[,K...]",
        help="overrides to remove, back to the default (repeatable)",
    )
    p.set_defaults(func=cmd_topics_alter_config, parser=p)
