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
import base64
import json
import os
import random
import select
import stat
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from .. import (
    ConsumerRecord,
    CorruptRecordError,
    OffsetOutOfRangeError,
    PartitionDescription,
    RecordInput,
    RecordTooLargeError,
    SeglogError,
    Store,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    __version__,
)
from ._common import (
    CODECS,
    MAX_REPORTED,
    PROG,
    STORE_ENV,
    CliError,
    non_negative,
    open_reader,
    open_writer,
    partition_count,
    positive,
    store_option,
)
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
# topics
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# produce
# --------------------------------------------------------------------------------------


def _read_lines(source: BinaryIO, linger_s: float) -> Iterator[bytes | None]:
    """Lines of ``source`` without their newline (and a CR before it), as Kafka's
    console producer reads them. Yields ``None`` when a pipe or terminal has had no
    new data for ``linger_s``: the moment to send what is pending."""
    fd = source.fileno()
    wait_for_data = not stat.S_ISREG(os.fstat(fd).st_mode)
    pending = bytearray()
    idle_reported = False
    while True:
        if wait_for_data and not idle_reported:
            ready, _, _ = select.select([fd], [], [], linger_s)
            if not ready:
                idle_reported = True
                yield None
                continue
        chunk = os.read(fd, 1 << 20)
        idle_reported = False
        if not chunk:
            break
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if pending:
                pending += chunk[start:end]
                line = bytes(pending)
                pending.clear()
            else:
                line = chunk[start:end]
            yield line[:-1] if line.endswith(b"\r") else line
            start = end + 1
        pending += chunk[start:]
    if pending:
        yield bytes(pending[:-1] if pending.endswith(b"\r") else pending)


class _LineProducer:
    """Buffers records per partition and appends them in chunks, Kafka-producer style:
    keyed records go to Kafka's partition for the key, unkeyed ones stick to one
    partition per chunk, moving round-robin to the next partition after each chunk."""

    MAX_CHUNK_BYTES = 16 << 20

    def __init__(self, store: Store, topic: str, args: argparse.Namespace, partitions: int) -> None:
        self.store = store
        self.topic = topic
        self.partitions = partitions
        self.fixed_partition: int | None = args.partition
        self.batch_size: int = args.batch_size
        self.compression_type: str = args.compression_type
        self.durable: bool = args.durable
        self.sticky = random.randrange(partitions)
        self.buffers: dict[int, list[tuple[int, RecordInput]]] = {}
        self.buffered_bytes: dict[int, int] = {}
        self.produced = 0
        self.failed = 0

    def add(self, lineno: int, key: bytes | None, value: bytes) -> None:
        if self.fixed_partition is not None:
            partition = self.fixed_partition
        elif key is not None:
            partition = self.store.partition_for_key(self.topic, key)
        else:
            partition = self.sticky
        record: RecordInput = value if key is None else (key, value)
        buffer = self.buffers.setdefault(partition, [])
        buffer.append((lineno, record))
        size = self.buffered_bytes.get(partition, 0) + len(value) + len(key or b"")
        self.buffered_bytes[partition] = size
        if len(buffer) >= self.batch_size or size >= self.MAX_CHUNK_BYTES:
            self.flush(partition)

    def flush(self, partition: int) -> None:
        entries = self.buffers.pop(partition, [])
        self.buffered_bytes.pop(partition, None)
        if entries:
            self._append(partition, entries)
        if partition == self.sticky:
            self.sticky = (self.sticky + 1) % self.partitions

    def flush_all(self) -> None:
        for partition in sorted(self.buffers):
            self.flush(partition)

    def _append(self, partition: int, entries: list[tuple[int, RecordInput]]) -> None:
        try:
            self.store.append(
                self.topic,
                partition,
                [record for _, record in entries],
                compression_type=self.compression_type,
                durable=self.durable,
            )
            self.produced += len(entries)
        except RecordTooLargeError as e:
            # Nothing of a failed call is appended: split it to find the line, and send the
            # rest, as Kafka's console producer logs a failed record and goes on.
            if len(entries) == 1:
                self.failed += 1
                print(f"{PROG}: error: line {entries[0][0]}: {e}", file=sys.stderr)
                return
            middle = len(entries) // 2
            self._append(partition, entries[:middle])
            self._append(partition, entries[middle:])


def cmd_produce(args: argparse.Namespace) -> int:
    separator: bytes | None = None
    if args.key_separator is not None:
        if not args.key_separator:
            args.parser.error("--key-separator must not be empty")
        separator = args.key_separator.encode()
    source: BinaryIO
    if args.file in (None, "-"):
        source = sys.stdin.buffer
    else:
        source = open(args.file, "rb")
    try:
        with open_writer(args) as store:
            partitions = partition_count(store, args.topic)
            if args.partition is not None and args.partition >= partitions:
                raise CliError(
                    f'topic "{args.topic}" has no partition {args.partition} (it has {partitions})'
                )
            producer = _LineProducer(store, args.topic, args, partitions)
            lineno = 0
            try:
                for line in _read_lines(source, args.linger_ms / 1000):
                    if line is None:
                        producer.flush_all()
                        continue
                    lineno += 1
                    key: bytes | None = None
                    if separator is not None:
                        key, found, line = line.partition(separator)
                        if not found:
                            producer.flush_all()
                            raise CliError(f"line {lineno}: no key separator {args.key_separator!r} found")
                    producer.add(lineno, key, line)
                producer.flush_all()
            except KeyboardInterrupt:
                producer.flush_all()
                raise
            finally:
                s = "" if producer.produced == 1 else "s"
                print(f"Produced {producer.produced} record{s} to topic {args.topic}.", file=sys.stderr)
    finally:
        if source is not sys.stdin.buffer:
            source.close()
    if producer.failed:
        raise CliError(f"{producer.failed} line(s) could not be produced (see above)")
    return 0


# --------------------------------------------------------------------------------------
# consume
# --------------------------------------------------------------------------------------


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

PRODUCE_EPILOG = """\
Each line is a record value (its newline, and a CR before it, are removed). With
--key-separator the part before the first separator is the key; a line without it is
an error, as in kafka-console-producer. Keyed records go to Kafka's partition for the
key (murmur2); unkeyed ones stick to one partition for a chunk of --batch-size lines,
then move round-robin to the next (Kafka's sticky partitioner, starting at a random
partition); --partition sends everything to one partition. A line too large for the
topic's max.message.bytes is reported and skipped, and the exit status is 1.

example:
  printf 'k1:hello\\nk2:world\\n' | seglog produce orders --key-separator :
"""

VERIFY_EPILOG = """\
Every segment of every partition is walked batch by batch (sizes, magic, CRC-32C and
records), offsets must increase across batches and segments (a gap is a warning),
and every .index/.timeindex entry must point at a batch start / a record in the
log. Exit status 1 if anything is corrupt. Works while a writer runs.
"""


def build_parser() -> argparse.ArgumentParser:
    store_opt = store_option()
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[store_opt],
        description="Kafka's log storage in a directory: topics, produce, consume, dump and verify.",
        epilog=f"The store is the --store directory, given before or after the command, or ${STORE_ENV}.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)

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

    p = commands.add_parser(
        "produce",
        parents=[store_opt],
        help="append lines from stdin or a file as records",
        epilog=PRODUCE_EPILOG,
        formatter_class=raw,
    )
    p.add_argument("topic", metavar="TOPIC")
    p.add_argument("--file", metavar="F", help="read this file instead of stdin ('-' = stdin)")
    p.add_argument("--key-separator", metavar="SEP", help="split each line into key SEP value")
    p.add_argument("--partition", type=non_negative, metavar="N", help="append everything to partition N")
    p.add_argument(
        "--compression-type", choices=CODECS, default="none", help="batch compression (default none)"
    )
    p.add_argument("--durable", action="store_true", help="fsync each chunk before going on")
    p.add_argument(
        "--batch-size",
        type=positive,
        default=10_000,
        metavar="N",
        help="lines per append to one partition (default 10000)",
    )
    p.add_argument(
        "--linger-ms",
        type=non_negative,
        default=100,
        metavar="MS",
        help="append what is pending once a pipe or terminal is idle this long (default 100)",
    )
    p.set_defaults(func=cmd_produce, parser=p)

    p = commands.add_parser(
        "consume",
        parents=[store_opt],
        help="print a topic's records, following the log",
        epilog=CONSUME_EPILOG,
        formatter_class=raw,
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

    p = commands.add_parser(
        "dump-log",
        help="decode segment files: .log batches (and records), .index and .timeindex entries",
        description="Print a segment file's batches (with CRC check) or index entries, like kafka-dump-log. "
        "Index entries are checked against the .log next to them. Exit status 1 if anything is invalid.",
    )
    p.add_argument("files", nargs="+", metavar="SEGMENT_FILE")
    p.add_argument("--print-data", "--print-data-log", action="store_true", help="also print every record")
    p.set_defaults(func=cmd_dump_log, parser=p)

    p = commands.add_parser(
        "clean",
        parents=[store_opt],
        help="compact a topic now (cleanup.policy=compact), whatever its dirty ratio",
    )
    p.add_argument("topic", metavar="TOPIC")
    p.set_defaults(func=cmd_clean, parser=p)

    p = commands.add_parser(
        "verify",
        parents=[store_opt],
        help="check every batch, offset and index entry of a store",
        epilog=VERIFY_EPILOG,
        formatter_class=raw,
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
