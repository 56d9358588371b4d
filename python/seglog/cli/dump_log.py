"""``seglog dump-log``: print the batches, records and index entries of segment files, as
kafka-dump-log does; the files are read by :mod:`seglog.segments`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import ConsumerRecord
from ..segments import SEGMENT_FILE, Batch, Stop, check_index, iter_log, read_index, scan_log
from ._common import MAX_REPORTED, CliError


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
    horizon = f"OptionalLong[{b.base_timestamp}]" if b.has_delete_horizon else "OptionalLong.empty"
    fields.append(f"deleteHorizonMs: {horizon}")
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
    # As kafka-dump-log prints it: header keys only, and no key or payload field
    # for a null key or value.
    line = (
        f"| offset: {r.offset} {b.timestamp_type}: {r.timestamp}"
        f" keySize: {-1 if r.key is None else len(r.key)}"
        f" valueSize: {-1 if r.value is None else len(r.value)}"
        f" sequence: {b.sequence_at(r.offset)} headerKeys: [{','.join(k for k, _ in r.headers)}]"
    )
    if r.key is not None:
        line += f" key: {_show(r.key)}"
    if r.value is not None:
        line += f" payload: {_show(r.value)}"
    return line


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


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "dump-log",
        help="decode segment files: .log batches (and records), .index and .timeindex entries",
        description="Print a segment file's batches (with CRC check) or index entries, like kafka-dump-log. "
        "Index entries are checked against the .log next to them. Exit status 1 if anything is invalid.",
    )
    p.add_argument("files", nargs="+", metavar="SEGMENT_FILE")
    p.add_argument("--print-data", "--print-data-log", action="store_true", help="also print every record")
    p.set_defaults(func=cmd_dump_log, parser=p)
