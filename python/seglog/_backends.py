"""Where a Consumer's records and offsets come from: the store in this process
(:class:`LocalLog`), or a broker over Kafka's protocol (:class:`RemoteLog`). Both
present the same few methods, so the Consumer's logic (positions, resets,
iteration, commits) is written once."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ._native import ConsumerRecord, RecordChunk, RemoteClient
from .errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError

if TYPE_CHECKING:
    import pyarrow as pa

    from ._store import Store

__all__ = ["LocalLog", "RemoteLog"]


class LocalLog:
    """A store open in this process: the native Store's own methods."""

    def __init__(self, store: Store) -> None:
        native = store._native
        self.store = store
        self.topics = native.topics
        self.partition_count = native.partition_count
        self.offsets = native.offsets
        self.offset_for_time = native.offset_for_time
        self.read_next = native.read_chunk
        self.wait_for_data = native.wait_for_data
        self.read_arrow = store.read_arrow

    @property
    def read_only(self) -> bool:
        return self.store.read_only

    def close(self) -> None:
        pass


class RemoteLog:
    """A broker's topics through ``RemoteClient``: Metadata, ListOffsets and Fetch."""

    read_only = False

    def __init__(self, client: RemoteClient, fetch_max_wait_ms: int) -> None:
        self.client = client
        self._max_wait_ms = fetch_max_wait_ms
        # Records a wait fetched, handed out by the next read at that position.
        self._ready: dict[tuple[str, int], tuple[int, list[ConsumerRecord]]] = {}
        self._turn = 0

    def topics(self) -> list[str]:
        return [t for t, d in self.client.metadata()["topics"].items() if d["error_code"] == 0]

    def partition_count(self, topic: str) -> int:
        d = self.client.metadata([topic])["topics"].get(topic)
        if d is None or d["error_code"] != 0:
            raise UnknownTopicOrPartitionError(f"the broker knows no topic {topic!r}")
        return len(d["partitions"])

    def offsets(self, topic: str, partition: int) -> tuple[int, int]:
        start = self.client.list_offsets(topic, partition, -2)
        end = self.client.list_offsets(topic, partition, -1)
        return (start or 0, end or 0)

    def offset_for_time(self, topic: str, partition: int, timestamp: int) -> tuple[int, int] | None:
        offset = self.client.list_offsets(topic, partition, timestamp)
        if offset is None:
            return None
        # ListOffsets answers the offset; the record there has the timestamp.
        records = self.client.fetch(topic, partition, offset, max_wait_ms=0, max_records=1)
        return (offset, records[0].timestamp if records else timestamp)

    def read_next(
        self, topic: str, partition: int, offset: int, max_bytes: int, limit: int | None
    ) -> tuple[RecordChunk, int]:
        ready = self._ready.pop((topic, partition), None)
        if ready is not None and ready[0] == offset:
            records = ready[1]
        else:
            records = self.client.fetch(topic, partition, offset, max_bytes, 0, limit)
        return RecordChunk(records), (records[-1].offset + 1 if records else offset)

    def wait_for_data(self, requests: list[tuple[str, int, int]], timeout_s: float) -> None:
        """A Fetch that waits on the broker for one of the partitions (in turn);
        what it gets is kept for the next read."""
        if not requests:
            time.sleep(min(timeout_s, 0.1))
            return
        topic, partition, offset = requests[self._turn % len(requests)]
        self._turn += 1
        cap = self._max_wait_ms / 1000 if len(requests) == 1 else 0.1
        wait_ms = max(1, int(min(timeout_s, cap) * 1000))
        try:
            records = self.client.fetch(topic, partition, offset, max_wait_ms=wait_ms)
        except OffsetOutOfRangeError:
            return  # the next read meets it and resets
        if records:
            self._ready[(topic, partition)] = (offset, records)

    def read_arrow(
        self, requests: list[tuple[str, int, int]], max_records: int, max_bytes: int
    ) -> tuple[pa.RecordBatch, list[int | None]]:
        import pyarrow as pa

        from ._arrow import SCHEMA, columns_to_batch

        batches: list[pa.RecordBatch] = []
        nexts: list[int | None] = []
        left = max_records
        for topic, partition, offset in requests:
            if left <= 0:
                nexts.append(None)
                continue
            self._ready.pop((topic, partition), None)
            cols, n = self.client.fetch_arrow(topic, partition, offset, left, max_bytes, 0)
            batch = columns_to_batch(cols)
            batches.append(batch)
            left -= batch.num_rows
            nexts.append(n)
        rows = [b for b in batches if b.num_rows]
        if len(rows) == 1:
            return rows[0], nexts
        if not rows:
            return (batches[0] if batches else pa.RecordBatch.from_pylist([], schema=SCHEMA)), nexts
        return pa.Table.from_batches(rows).combine_chunks().to_batches()[0], nexts

    def close(self) -> None:
        self.client.close()
