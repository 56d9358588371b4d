"""What every command shares: opening the store named by ``--store`` or ``$SEGLOG_STORE``,
the expected-failure exception, and argument types."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .. import Store, StoreLockedError, UnknownTopicOrPartitionError
from .. import open as open_store

PROG = "seglog"
STORE_ENV = "SEGLOG_STORE"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
INT32_MAX = 2**31 - 1  # the greatest offset relative to a segment base
MAX_REPORTED = 10  # problems listed per index file before "... and N more"


class CliError(Exception):
    """An expected failure: printed as one ``seglog: error:`` line, exit status 1."""


def store_path(args: argparse.Namespace) -> str:
    path = getattr(args, "store", None) or os.environ.get(STORE_ENV)
    if not path:
        args.parser.error(f"no store given: pass --store PATH or set {STORE_ENV}")
    return str(path)


def open_reader(args: argparse.Namespace) -> Store:
    """A read-only store: works while another process writes."""
    path = store_path(args)
    try:
        return open_store(path, read_only=True)
    except FileNotFoundError:
        raise CliError(f"no store at {path}") from None
    except NotADirectoryError:
        raise CliError(f"{path} is not a store directory") from None


def open_writer(args: argparse.Namespace, *, create: bool = False) -> Store:
    """The store, for writing; one clear line if another process holds it."""
    path = store_path(args)
    if not create and not os.path.exists(path):
        raise CliError(f"no store at {path} (create one with '{PROG} topics create')")
    try:
        return open_store(path)
    except NotADirectoryError:
        raise CliError(f"{path} is not a store directory") from None
    except StoreLockedError as e:
        raise store_locked(e) from None


def store_locked(e: StoreLockedError) -> CliError:
    """Another process writes the store: what still works."""
    reason = str(e).split("; open it with read_only", 1)[0]
    return CliError(f"{reason}; read-only commands (topics list/describe, consume, verify) still work")


def is_store(path: Path) -> bool:
    """Whether ``path`` is a store directory: it holds the topics file (``.topics.json``, or an
    older store's ``.topics/``) once a topic exists, and the recovery-point checkpoint every
    writer writes when it opens the store, so a store with no topics yet is one too. (A
    read-only open accepts any directory.)"""
    return (
        (path / ".topics.json").is_file()
        or (path / ".topics").is_dir()
        or (path / "recovery-point-offset-checkpoint").is_file()
    )


def partition_count(store: Store, topic: str) -> int:
    try:
        return store.partition_count(topic)
    except UnknownTopicOrPartitionError as e:
        raise CliError(f"{e} (create it with '{PROG} topics create {topic}')") from None


def store_option() -> argparse.ArgumentParser:
    # SUPPRESS: an absent --store after the command must not hide one given before it.
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--store",
        metavar="PATH",
        default=argparse.SUPPRESS,
        help=f"the store directory (default: ${STORE_ENV})",
    )
    return parent


def non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def positive(text: str) -> int:
    value = non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be >= 1, got 0")
    return value
