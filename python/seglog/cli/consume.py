"""``seglog consume``: print a topic's records and follow the log, as kafka-console-consumer
does, alone or as a member of a consumer group."""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from .. import ConsumerRecord, CorruptRecordError, OffsetOutOfRangeError, SeglogError, Store
from ._common import PROG, CliError, non_negative, open_reader, open_writer, partition_count, positive


def _timestamp_text(record: ConsumerRecord) -> str:
    if record.timestamp < 0:
        return "NO_TIMESTAMP"
    kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
    return f"{kind}:{record.timestamp}"


def _text_formatter(args: argparse.Namespace, raw: bool) -> Callable[[ConsumerRecord], bytes]:
    separator: bytes = args.key_separator.encode()

    def show(data: bytes | None) -> bytes:
        if data is None:
            return b"" if raw else b"null"
        return data if raw else data.decode("utf-8", "backslashreplace").encode()

    def fmt(record: ConsumerRecord) -> bytes:
        fields: list[bytes] = []
        if args.print_timestamp:
            fields.append(_timestamp_text(record).encode())
        if args.print_partition:
            fields.append(b"Partition:%d" % record.partition)
        if args.print_offset:
            fields.append(b"Offset:%d" % record.offset)
        if args.print_headers:
            headers = b",".join(k.encode() + b":" + show(v) for k, v in record.headers)
            fields.append(headers or b"NO_HEADERS")
        if args.print_key:
            fields.append(show(record.key))
        fields.append(show(record.value))
        return separator.join(fields) + b"\n"

    return fmt


def _put_bytes(obj: dict[str, Any], name: str, data: bytes | None) -> None:
    """UTF-8 text as a JSON string; anything else as base64 with ``<name>_encoding``."""
    if data is None:
        obj[name] = None
        return
    try:
        obj[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        obj[name] = base64.b64encode(data).decode("ascii")
        obj[f"{name}_encoding"] = "base64"


def _json_line(record: ConsumerRecord) -> bytes:
    obj: dict[str, Any] = {
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestamp_type": "LogAppendTime" if record.timestamp_type == 1 else "CreateTime",
    }
    _put_bytes(obj, "key", record.key)
    _put_bytes(obj, "value", record.value)
    headers = []
    for key, value in record.headers:
        header: dict[str, Any] = {"key": key}
        _put_bytes(header, "value", value)
        headers.append(header)
    obj["headers"] = headers
    return json.dumps(obj, ensure_ascii=False).encode() + b"\n"


def _parse_offset(text: str) -> int | str:
    if text in ("earliest", "latest"):
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an offset, 'earliest' or 'latest', got {text!r}"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"offset must be >= 0, got {value}")
    return value


def _start_positions(store: Store, args: argparse.Namespace, partitions: list[int]) -> dict[int, int]:
    positions: dict[int, int] = {}
    for p in partitions:
        start, end = store.offsets(args.topic, p)
        if args.from_beginning or args.offset == "earliest":
            positions[p] = start
        elif isinstance(args.offset, int):
            if not start <= args.offset <= end:
                raise CliError(
                    f"offset {args.offset} is out of range for {args.topic}-{p}"
                    f" (log start {start}, log end {end})"
                )
            positions[p] = args.offset
        elif args.timestamp is not None:
            found = store.offset_for_time(args.topic, p, args.timestamp)
            positions[p] = end if found is None else found[0]
        else:  # --offset latest, or nothing: from the end, as kafka-console-consumer
            positions[p] = end
    return positions


def _read_valid_prefix(
    store: Store, topic: str, partition: int, offset: int, max_bytes: int
) -> list[ConsumerRecord]:
    try:
        return store.read(topic, partition, offset, max_bytes)
    except CorruptRecordError:
        # A read fails as a whole if any batch in it is corrupt: take the valid batches
        # before that one, one at a time; the read of the corrupt batch itself raises.
        return store.read(topic, partition, offset, 1)


def cmd_consume_group(args: argparse.Namespace, fmt: Callable[[ConsumerRecord], bytes]) -> int:
    """Consume as a member of a consumer group: resume from its committed offsets
    (else --from-beginning / the log end), commit as records are printed and on exit.
    Commits are writes, so this needs the store's write lock."""
    from .._consumer import Consumer

    out = sys.stdout.buffer
    count = 0
    store = open_writer(args)
    timeout = float("inf") if args.timeout_ms is None else args.timeout_ms
    try:
        consumer = Consumer(
            store,
            group_id=args.group,
            auto_offset_reset="earliest" if args.from_beginning or args.offset == "earliest" else "latest",
            consumer_timeout_ms=timeout,
            auto_commit_interval_ms=1000,
        )
    except SeglogError:
        store.close()
        raise
    try:
        with consumer:
            n = partition_count(store, args.topic)
            if args.partition is not None:
                if args.partition >= n:
                    raise CliError(f'topic "{args.topic}" has no partition {args.partition} (it has {n})')
                consumer.assign([(args.topic, args.partition)])
            else:
                consumer.subscribe([args.topic])
            if isinstance(args.offset, int) or args.timestamp is not None or args.offset == "latest":
                for tp, pos in _start_positions(
                    store, args, [tp.partition for tp in consumer.assignment()]
                ).items():
                    consumer.seek((args.topic, tp), pos)
            try:
                for record in consumer:
                    out.write(fmt(record))
                    count += 1
                    if args.max_messages is not None and count >= args.max_messages:
                        break
            except KeyboardInterrupt:
                pass
            out.flush()
    finally:
        store.close()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def cmd_consume(args: argparse.Namespace) -> int:
    raw = args.format == "raw"
    fmt = _json_line if args.format == "json" else _text_formatter(args, raw)
    if args.group is not None:
        return cmd_consume_group(args, fmt)
    out = sys.stdout.buffer
    count = 0
    with open_reader(args) as store:
        n = partition_count(store, args.topic)
        if args.partition is not None:
            if args.partition >= n:
                raise CliError(f'topic "{args.topic}" has no partition {args.partition} (it has {n})')
            partitions = [args.partition]
        else:
            partitions = list(range(n))
        if isinstance(args.offset, int) and len(partitions) > 1:
            args.parser.error(f"--offset needs --partition: topic {args.topic} has {n} partitions")
        positions = _start_positions(store, args, partitions)
        timeout = None if args.timeout_ms is None else args.timeout_ms / 1000
        last_data = time.monotonic()
        try:
            while args.max_messages is None or count < args.max_messages:
                got_data = False
                for p in partitions:
                    try:
                        records = _read_valid_prefix(store, args.topic, p, positions[p], args.max_bytes)
                    except OffsetOutOfRangeError:
                        start, _ = store.offsets(args.topic, p)
                        if positions[p] >= start:
                            raise
                        # Retention removed what we were about to read: go on from the start.
                        print(
                            f"{PROG}: warning: {args.topic}-{p}: offsets {positions[p]}..{start - 1}"
                            " were deleted; continuing from the log start",
                            file=sys.stderr,
                        )
                        positions[p] = start
                        continue
                    except CorruptRecordError as e:
                        where = f"{args.topic}-{p} at offset {positions[p]}"
                        raise CliError(f"{where}: {e} (see '{PROG} verify')") from None
                    lines = []
                    for record in records:
                        if record.offset < positions[p]:
                            continue
                        lines.append(fmt(record))
                        positions[p] = record.offset + 1
                        count += 1
                        if args.max_messages is not None and count >= args.max_messages:
                            break
                    if lines:
                        out.write(b"".join(lines))
                        got_data = True
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                if got_data:
                    out.flush()
                    last_data = time.monotonic()
                    continue
                if args.max_messages is not None and count >= args.max_messages:
                    break
                if timeout is not None:
                    left = timeout - (time.monotonic() - last_data)
                    if left <= 0:
                        break
                    time.sleep(min(left, 0.05))
                else:
                    time.sleep(0.05)
        except KeyboardInterrupt:
            out.flush()
            print(f"Processed a total of {count} messages", file=sys.stderr)
            raise
    out.flush()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


CONSUME_EPILOG = """\
where it starts (per partition):
  default             the end of the log: only records produced from now on, as
                      kafka-console-consumer
  --from-beginning    the log start
  --offset N          offset N (needs --partition if the topic has several partitions)
  --timestamp MS      the first record with timestamp >= MS (the end if there is none)

when it stops:
  Like kafka-console-consumer it keeps following the log for new records until
  interrupted (Ctrl-C), until --max-messages records were printed, or until
  --timeout-ms passes with no new record; --timeout-ms 0 stops at the end of the log.
  "Processed a total of N messages" goes to stderr at the end.

formats:
  text  the value as UTF-8 (bytes that are not UTF-8 as \\xNN escapes), "null" for a
        null value; --print-* prefix fields joined by --key-separator (default TAB)
  json  one object per line: topic, partition, offset, timestamp, timestamp_type,
        key, value, headers [{key, value}]. A key or value that is valid UTF-8 is a
        JSON string; otherwise it is base64 and "key_encoding"/"value_encoding" is
        "base64". null stays null. The --print-* options do not apply.
  raw   the value bytes unchanged (nothing for null) and a newline

examples:
  seglog consume orders --from-beginning --timeout-ms 0 --format json
  seglog consume orders --partition 2 --offset 1000 --max-messages 10 --print-offset
"""


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], store_opt: argparse.ArgumentParser
) -> None:
    p = commands.add_parser(
        "consume",
        parents=[store_opt],
        help="print a topic's records, following the log",
        epilog=CONSUME_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--partition", type=non_negative, metavar="N", help="read only partition N (default: all)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start")
    start.add_argument(
        "--offset", type=_parse_offset, metavar="N", help="start at offset N ('earliest' and 'latest' too)"
    )
    start.add_argument("--timestamp", type=int, metavar="MS", help="start at the first record at or after MS")
    p.add_argument("--max-messages", type=positive, metavar="N", help="exit after printing N records")
    p.add_argument(
        "--timeout-ms",
        type=non_negative,
        metavar="MS",
        help="exit after MS with no new record (0: at the end of the log; default: follow forever)",
    )
    p.add_argument(
        "--format", choices=("text", "json", "raw"), default="text", help="output format (default text)"
    )
    p.add_argument("--print-key", action="store_true", help="print the key before the value")
    p.add_argument("--print-offset", action="store_true", help="print Offset:N")
    p.add_argument("--print-partition", action="store_true", help="print Partition:N")
    p.add_argument("--print-timestamp", action="store_true", help="print CreateTime:MS or LogAppendTime:MS")
    p.add_argument("--print-headers", action="store_true", help="print the headers as k:v,k:v")
    p.add_argument(
        "--key-separator", default="\t", metavar="SEP", help="separator between printed fields (default TAB)"
    )
    p.add_argument(
        "--group",
        metavar="GROUP",
        help="consume as this consumer group: resume from its committed offsets and commit what is "
        "printed (needs the store's write lock; a group has one member at a time)",
    )
    p.add_argument("--max-bytes", type=positive, default=1 << 20, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_consume, parser=p)
