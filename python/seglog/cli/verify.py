"""``seglog verify``: walk a whole store, checking every batch, offset and index entry; the
files are read by :mod:`seglog.segments`."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import PartitionDescription
from ..segments import (
    INDEX_KINDS,
    SEGMENT_FILE,
    Batch,
    SegmentScan,
    Stop,
    check_index,
    iter_log,
    read_index,
)
from ._common import INT32_MAX, MAX_REPORTED, CliError, is_store, open_reader, store_path


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
        if not scan.batches and b.base_offset < base:
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
        if not is_store(root):
            # Else any directory passes: it has no topics, so nothing to find wrong.
            raise CliError(
                f"{store_path(args)} is not a seglog store"
                " (it has no .topics directory and no recovery-point-offset-checkpoint)"
            )
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


VERIFY_EPILOG = """\
Every segment of every partition is walked batch by batch (sizes, magic, CRC-32C and
records), offsets must increase across batches and segments (a gap is a warning),
and every .index/.timeindex entry must point at a batch start / a record in the
log. Exit status 1 if anything is corrupt. Works while a writer runs.
"""


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], store_opt: argparse.ArgumentParser
) -> None:
    p = commands.add_parser(
        "verify",
        parents=[store_opt],
        help="check every batch, offset and index entry of a store",
        epilog=VERIFY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--topic", metavar="TOPIC", help="check only this topic")
    p.set_defaults(func=cmd_verify, parser=p)
