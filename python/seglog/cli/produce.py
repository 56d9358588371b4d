"""``seglog produce``: lines from stdin or a file become records, as kafka-console-producer
makes them."""

from __future__ import annotations

import argparse
import os
import random
import select
import stat
import sys
from collections.abc import Iterator
from typing import BinaryIO

from .. import RecordInput, RecordTooLargeError, Store
from ._common import CODECS, PROG, CliError, non_negative, open_writer, partition_count, positive


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


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], store_opt: argparse.ArgumentParser
) -> None:
    p = commands.add_parser(
        "produce",
        parents=[store_opt],
        help="append lines from stdin or a file as records",
        epilog=PRODUCE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
