"""The ``seglog`` command-line tool, in the spirit of Kafka's own tools.

``seglog topics``    create / list / describe / delete / alter-config (kafka-topics, kafka-configs)
``seglog produce``   lines from stdin or a file become records (kafka-console-producer)
``seglog consume``   print records, following the log (kafka-console-consumer)
``seglog groups``    list / describe / delete consumer groups, reset their offsets (kafka-consumer-groups)
``seglog dump-log``  decode ``.log`` / ``.index`` / ``.timeindex`` files (kafka-dump-log)
``seglog verify``    walk a whole store, checking every batch, offset and index entry
``seglog serve``     a broker: Kafka's wire protocol over the store (kafka-server-start);
                    with ``--zookeeper`` a member of a replicating cluster
``seglog cluster``   ZooKeeper and three brokers in three racks on this machine

Commands that only read open the store with ``read_only=True``, so they work while a
writer process holds it. Expected failures print one ``seglog: error: ...`` line on
stderr and exit with 1; usage errors exit with 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from .. import SeglogError, __version__
from . import clean, cluster, consume, dump_log, groups, produce, serve, topics, verify
from ._common import PROG, STORE_ENV, CliError, store_option

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    store_opt = store_option()
    parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[store_opt],
        description="Kafka's log storage in a directory: topics, produce, consume, dump and verify.",
        epilog=f"The store is the --store directory, given before or after the command, or ${STORE_ENV}.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    for module in (topics, produce, consume, groups):
        module.add_parser(commands, store_opt)
    dump_log.add_parser(commands)
    for module in (clean, verify, serve):
        module.add_parser(commands, store_opt)
    cluster.add_parser(commands)
    return parser


def _error_text(e: BaseException) -> str:
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        text = f"{e.filename}: {e.strerror}"
    else:
        text = str(e) or type(e).__name__
    return " ".join(text.split("\n"))


def _silence_stdout() -> None:
    # The reader went away (`| head`): drop what is still buffered, quietly.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``seglog`` command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        return 130
    except (CliError, SeglogError, OSError, ValueError) as e:
        try:
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            _silence_stdout()
        err: TextIO = sys.stderr
        print(f"{PROG}: error: {_error_text(e)}", file=err)
        return 1
