"""``seglog clean``: compact a topic now, whatever its dirty ratio, and apply its retention."""

from __future__ import annotations

import argparse

from ._common import open_writer, partition_count


def cmd_clean(args: argparse.Namespace) -> int:
    """Compact a topic now (whatever its dirty ratio) and apply its retention."""
    with open_writer(args) as store:
        partition_count(store, args.topic)
        r = store.clean_topic(args.topic)
    ratio = r["cleaned_bytes_out"] / r["cleaned_bytes_in"] if r["cleaned_bytes_in"] else 1.0
    print(
        f"Cleaned {r['cleaned_partitions']} partition(s) of {args.topic}: "
        f"{r['cleaned_bytes_in']:,} bytes -> {r['cleaned_bytes_out']:,} ({ratio:.0%}), "
        f"{r['records_removed']:,} records removed; retention deleted {r['deleted_segments']} segment(s)."
    )
    return 0


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], store_opt: argparse.ArgumentParser
) -> None:
    p = commands.add_parser(
        "clean",
        parents=[store_opt],
        help="compact a topic now (cleanup.policy=compact), whatever its dirty ratio",
    )
    p.add_argument("topic", metavar="TOPIC")
    p.set_defaults(func=cmd_clean, parser=p)
