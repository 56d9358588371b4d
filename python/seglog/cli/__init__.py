"""The ``seglog`` command-line tool, in the spirit of Kafka's own tools.

``seglog topics``    create / list / describe / delete / alter-config (kafka-topics, kafka-configs)
``seglog produce``   lines from stdin or a file become records (kafka-console-producer)
``seglog consume``   print records, following the log (kafka-console-consumer)
``seglog dump-log``  decode ``.log`` / ``.index`` / ``.timeindex`` files (kafka-dump-log)
``seglog verify``    walk a whole store, checking every batch, offset and index entry

Commands that only read open the store with ``read_only=True``, so they work while a
writer process holds it. Expected failures print one ``seglog: error: ...`` line on
stderr and exit with 1; usage errors exit with 2.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from .. import ConsumerRecord, PartitionDescription, SeglogError, __version__
from . import clean, consume, produce, topics
from ._common import MAX_REPORTED, PROG, STORE_ENV, CliError, open_reader, store_option
from .segments import (
    INDEX_KINDS,
    INT32_MAX,
    SEGMENT_FILE,
    Batch,
    SegmentScan,
    Stop,
    check_index,
    iter_log,
    read_index,
    scan_log,
)

__all__ = ["main"]


# --------------------------------------------------------------------------------------
# dump-log
# --------------------------------------------------------------------------------------


def _show(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", "backslashreplace")


def _batch_line(b: Batch) -> str:
    fields = [
        f"baseOffset: {b.base_offset}",
        f"lastOffset: {b.last_offset}",
        f"count: {b.records_count}",
        f"baseSequence: {b.base_sequence}",
        f"lastSequence: {b.last_sequence}",
        f"producerId: {b.producer_id}",
        f"producerEpoch: {b.producer_epoch}",
        f"partitionLeaderEpoch: {b.partition_leader_epoch}",
        f"isTransactional: {str(b.is_transactional).lower()}",
        f"isControl: {str(b.is_control).lower()}",
    ]
    if b.has_delete_horizon:
        fields.append(f"deleteHorizonMs: {b.base_timestamp}")
    fields += [
        f"position: {b.position}",
        f"{b.timestamp_type}: {b.max_timestamp}",
        f"size: {b.size}",
        f"magic: {b.magic}",
        f"compresscodec: {b.codec}",
        f"crc: {b.crc}",
        f"isvalid: {str(b.error is None).lower()}",
    ]
    return " ".join(fields)


def _record_line(b: Batch, r: ConsumerRecord) -> str:
    sequence = -1 if b.base_sequence < 0 else (b.base_sequence + r.offset - b.base_offset) % (INT32_MAX + 1)
    headers = ", ".join(f"{k}={_show(v)}" for k, v in r.headers)
    return (
        f"| offset: {r.offset} {b.timestamp_type}: {r.timestamp}"
        f" keySize: {-1 if r.key is None else len(r.key)}"
        f" valueSize: {-1 if r.value is None else len(r.value)}"
        f" sequence: {sequence} headers: [{headers}] key: {_show(r.key)} payload: {_show(r.value)}"
    )


def _dump_segment_log(path: Path, base: int | None, print_data: bool) -> int:
    invalid = 0
    if base is not None:
        print(f"Log starting offset: {base}")
    with path.open("rb") as f:
        for item in iter_log(f.fileno()):
            if isinstance(item, Stop):
                invalid += 1
                print(f"Found {item.length} invalid bytes at position {item.position}: {item.reason}")
                break
            print(_batch_line(item))
            if item.error is not None:
                invalid += 1
                print(f"Invalid batch at position {item.position}: {item.error}")
            elif print_data:
                for record in item.records:
                    print(_record_line(item, record))
    return invalid


def _print_index_problems(problems: list[str]) -> None:
    for problem in problems[:MAX_REPORTED]:
        print(f"Invalid index entry: {problem}")
    if len(problems) > MAX_REPORTED:
        print(f"... and {len(problems) - MAX_REPORTED} more invalid entries")


def _dump_index(path: Path, base: int, time_index: bool) -> int:
    index = read_index(path, "timeindex" if time_index else "index")
    for a, b in index.entries:
        print(f"timestamp: {a} offset: {base + b}" if time_index else f"offset: {base + a} position: {b}")
    if index.unused:
        print(f"({index.unused} unused preallocated entries)")
    log = scan_log(path.with_name(f"{base:020d}.log"), base)
    problems = check_index(index, log, base)
    _print_index_problems(problems)
    return len(problems)


def cmd_dump_log(args: argparse.Namespace) -> int:
    failed = []
    for name in args.files:
        path = Path(name)
        match = SEGMENT_FILE.match(path.name)
        kind = path.suffix.lstrip(".")
        if kind not in ("log", "index", "timeindex"):
            raise CliError(f"{name}: not a segment file (expected .log, .index or .timeindex)")
        if not path.is_file():
            raise CliError(f"{name}: no such file")
        base = int(match[1]) if match else None
        print(f"Dumping {name}")
        if kind == "log":
            invalid = _dump_segment_log(path, base, args.print_data)
        else:
            invalid = _dump_index(path, base or 0, kind == "timeindex")
        if invalid:
            failed.append(f"{name} ({invalid} invalid)")
    sys.stdout.flush()
    if failed:
        raise CliError(f"invalid data in {', '.join(failed)}")
    return 0


# --------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------


class _Progress:
    """A percentage on a terminal's stderr, redrawn at most a few times a second."""

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.label = ""
        self.drawn = 0.0

    def advance(self, nbytes: int, label: str | None = None) -> None:
        self.done += nbytes
        if label is not None:
            self.label = label
        now = time.monotonic()
        if now - self.drawn >= 0.2:
            self.drawn = now
            pct = min(100, self.done * 100 // self.total)
            sys.stderr.write(f"\r\033[Kverifying {self.label} {pct}%")
            sys.stderr.flush()

    def clear(self) -> None:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()


@dataclass
class _PartitionTally:
    segments: int = 0
    batches: int = 0
    records: int = 0
    size: int = 0
    first_offset: int | None = None
    #: The offset the next valid batch should start at; None after an invalid batch.
    next_offset: int | None = None


class _Verifier:
    def __init__(self, root: Path, progress: _Progress | None) -> None:
        self.root = root
        self.progress = progress
        self.errors = 0
        self.warnings = 0
        self.segments = 0
        self.batches = 0
        self.records = 0

    def error(self, where: str, message: str) -> None:
        self.errors += 1
        self._say(f"ERROR {where}: {message}")

    def warn(self, where: str, message: str) -> None:
        self.warnings += 1
        self._say(f"WARNING {where}: {message}")

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress.clear()
            self.progress.drawn = 0.0
        print(line, flush=True)

    def partition(self, topic: str, p: int, desc: PartitionDescription) -> None:
        name = f"{topic}-{p}"
        directory = self.root / name
        errors_before, warnings_before = self.errors, self.warnings
        if not directory.is_dir():
            self.error(name, "partition directory is missing")
            return
        files: dict[int, set[str]] = {}
        for path in directory.iterdir():
            if m := SEGMENT_FILE.match(path.name):
                files.setdefault(int(m[1]), set()).add(m[2])
        for base in sorted(files):
            if "log" not in files[base]:
                self.warn(f"{name}/{base:020d}", "index file(s) without a .log file")
        logs = [base for base in sorted(files) if "log" in files[base]]
        tally = _PartitionTally()
        for i, base in enumerate(logs):
            self.segment(directory / f"{base:020d}", base, files[base], tally, active=i == len(logs) - 1)
        end = tally.next_offset
        if self.errors == errors_before and desc.log_end_offset > desc.log_start_offset:
            if end is None or end < desc.log_end_offset:
                self.error(
                    name, f"the store reports log end offset {desc.log_end_offset}, the files end at {end}"
                )
        self.segments += tally.segments
        self.batches += tally.batches
        self.records += tally.records
        offsets = ""
        if tally.first_offset is not None and end is not None:
            offsets = f", offsets {tally.first_offset}..{end - 1}"
        errors, warnings = self.errors - errors_before, self.warnings - warnings_before
        verdict = f"{errors} error(s)" if errors else "OK"
        if warnings:
            verdict += f", {warnings} warning(s)"
        self._say(
            f"{name}: {tally.segments} segments, {tally.batches} batches, {tally.records} records"
            f"{offsets}, {tally.size} bytes: {verdict}"
        )

    def segment(self, stem: Path, base: int, kinds: set[str], tally: _PartitionTally, active: bool) -> None:
        where = f"{stem.parent.name}/{stem.name}"
        # Indexes first: a live writer indexes only what is already in its log.
        indexes = {}
        for kind in INDEX_KINDS:
            if kind in kinds:
                try:
                    indexes[kind] = read_index(stem.with_suffix(f".{kind}"), kind)
                except FileNotFoundError:
                    pass
        try:
            f = stem.with_suffix(".log").open("rb")
        except FileNotFoundError:
            self.warn(f"{where}.log", "deleted while it was checked (retention by the writer?)")
            return
        tally.segments += 1
        scan = SegmentScan(base)
        with f:
            fd = f.fileno()
            tally.size += os.fstat(fd).st_size
            position, retried = 0, False
            while True:
                stop = None
                for item in iter_log(fd, position):
                    if isinstance(item, Stop):
                        stop = item
                        break
                    self.batch(item, f"{where}.log position {item.position}", base, scan, tally)
                    scan.add(item)
                if stop is None:
                    break
                # The active segment of a live writer may end in a batch being written:
                # look again once it has had a moment to grow.
                if active and not retried:
                    retried = True
                    size_then = stop.position + stop.length
                    if os.fstat(fd).st_size == size_then:
                        time.sleep(0.2)
                    if os.fstat(fd).st_size != size_then:
                        position = stop.position
                        continue
                self.error(f"{where}.log position {stop.position}", stop.reason)
                break
        for kind in INDEX_KINDS:
            if kind not in indexes:
                self.warn(f"{where}.{kind}", "missing (rebuilt when the store is next opened for writing)")
                continue
            problems = check_index(indexes[kind], scan, base)
            for problem in problems[:MAX_REPORTED]:
                self.error(f"{where}.{kind}", problem)
            if len(problems) > MAX_REPORTED:
                self.error(f"{where}.{kind}", f"... and {len(problems) - MAX_REPORTED} more invalid entries")

    def batch(self, b: Batch, where: str, base: int, scan: SegmentScan, tally: _PartitionTally) -> None:
        tally.batches += 1
        if self.progress is not None:
            self.progress.advance(b.size, where.split("/", 1)[0])
        if b.error is not None:
            self.error(where, f"invalid batch (offsets {b.base_offset}..{b.last_offset}): {b.error}")
            tally.next_offset = None  # its offsets cannot be trusted: resynchronise after it
            return
        tally.records += len(b.records)
        if tally.first_offset is None:
            tally.first_offset = b.base_offset
        if not scan.batch_starts and b.base_offset < base:
            self.error(where, f"batch offset {b.base_offset} is below the segment's base offset {base}")
        if b.last_offset - base > INT32_MAX:
            self.error(where, f"offset {b.last_offset} does not fit a relative offset from {base}")
        expected = tally.next_offset
        if expected is not None and b.base_offset < expected:
            self.error(where, f"offsets go back: a batch at {b.base_offset} after offset {expected - 1}")
        elif expected is not None and b.base_offset > expected:
            self.warn(where, f"gap: offsets {expected}..{b.base_offset - 1} are missing")
        if not b.is_control and len(b.records) != b.records_count:
            self.error(where, f"recordsCount {b.records_count} but {len(b.records)} records")
        tally.next_offset = b.last_offset + 1


def cmd_verify(args: argparse.Namespace) -> int:
    with open_reader(args) as store:
        root = store.path
        topics = [args.topic] if args.topic else store.topics()
        descriptions = [store.describe(topic) for topic in topics]
    progress = None
    if sys.stderr.isatty():
        total = sum(
            f.stat().st_size
            for d in descriptions
            for p in d.partitions
            if (root / f"{d.name}-{p.partition}").is_dir()
            for f in (root / f"{d.name}-{p.partition}").glob("*.log")
        )
        progress = _Progress(total)
    verifier = _Verifier(root, progress)
    for d in descriptions:
        for p in d.partitions:
            verifier.partition(d.name, p.partition, p)
    if progress is not None:
        progress.clear()
    v = verifier
    verdict = "OK" if not v.errors else f"{v.errors} error(s)"
    if v.warnings:
        verdict += f", {v.warnings} warning(s)"
    print(f"{v.segments} segments, {v.batches} batches, {v.records} records: {verdict}", flush=True)
    if v.errors:
        raise CliError(f"verification failed: {v.errors} error(s) in store {root}")
    return 0


# --------------------------------------------------------------------------------------
# Argument parsing and main
# --------------------------------------------------------------------------------------


VERIFY_EPILOG = """\
Every segment of every partition is walked batch by batch (sizes, magic, CRC-32C and
records), offsets must increase across batches and segments (a gap is a warning),
and every .index/.timeindex entry must point at a batch start / a record in the
log. Exit status 1 if anything is corrupt. Works while a writer runs.
"""


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
    for module in (topics, produce, consume):
        module.add_parser(commands, store_opt)

    p = commands.add_parser(
        "dump-log",
        help="decode segment files: .log batches (and records), .index and .timeindex entries",
        description="Print a segment file's batches (with CRC check) or index entries, like kafka-dump-log. "
        "Index entries are checked against the .log next to them. Exit status 1 if anything is invalid.",
    )
    p.add_argument("files", nargs="+", metavar="SEGMENT_FILE")
    p.add_argument("--print-data", "--print-data-log", action="store_true", help="also print every record")
    p.set_defaults(func=cmd_dump_log, parser=p)

    clean.add_parser(commands, store_opt)

    p = commands.add_parser(
        "verify",
        parents=[store_opt],
        help="check every batch, offset and index entry of a store",
        epilog=VERIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--topic", metavar="TOPIC", help="check only this topic")
    p.set_defaults(func=cmd_verify, parser=p)
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
