"""Where a read starts and ends, worked out as Spark plans a query (in its planning
workers and the streaming source runner): the topic-partitions read, starting and
ending offsets by offset or by time, a stream's offset JSON, and lost records."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import SeglogError, UnknownTopicOrPartitionError
from .log import LogAccess
from .options import Offsets, TopicPartition, _ReadOptions

# Kafka's internal topic, which a pattern never matches (as Kafka's consumer).
_INTERNAL_TOPIC = "__consumer_offsets"

log = logging.getLogger(__name__)


class DataLossError(SeglogError):
    """Records a query planned to read are gone (removed from the log start,
    truncated, or the topic deleted) and ``failOnDataLoss`` is true."""


def _data_loss(o: _ReadOptions, message: str) -> None:
    if o.fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost because it is no longer in the store (removed by "
            "retention, truncated, or the topic was deleted). If you want the query to go on and skip it, "
            'set the source option "failOnDataLoss" to "false".'
        )
    log.warning("%s; skipping it (failOnDataLoss=false)", message)


def _topic_partitions(log: LogAccess, o: _ReadOptions) -> list[TopicPartition]:
    if o.assign is not None:
        for t, p in o.assign:
            try:
                count = log.partition_count(t)
            except UnknownTopicOrPartitionError:
                raise UnknownTopicOrPartitionError(
                    f"seglog option assign: topic {t!r} does not exist"
                ) from None
            if p >= count:
                raise UnknownTopicOrPartitionError(
                    f"seglog option assign: topic {t!r} has {count} partition(s), no partition {p}"
                )
        return sorted(o.assign)
    topics = log.topics()
    if o.subscribe is not None:
        wanted = [t for t in sorted(topics) if t in o.subscribe]
    else:
        rx = re.compile(o.pattern or "")
        wanted = [t for t in sorted(topics) if t != _INTERNAL_TOPIC and rx.fullmatch(t)]
    return [(t, p) for t in wanted for p in range(topics[t])]


def _check_named(spec: Offsets, tps: Sequence[TopicPartition], name: str) -> None:
    unknown = sorted(set(spec) - set(tps))
    if unknown:
        names = ", ".join(f"{t}-{p}" for t, p in unknown)
        raise ValueError(f"seglog option {name} names partitions the query does not read: {names}")


def _by_time(log: LogAccess, tp: TopicPartition, ts: int, o: _ReadOptions, name: str) -> int:
    r = log.offset_for_time(tp[0], tp[1], ts)
    if r is not None:
        return r
    if o.timestamp_strategy == "latest" or name.startswith("ending"):
        return log.offsets(*tp)[1]
    raise ValueError(
        f"seglog option {name}: no record in {tp[0]}-{tp[1]} has a timestamp >= {ts}; "
        "set startingOffsetsByTimestampStrategy=latest to start at the end instead"
    )


def _starting_offsets(log: LogAccess, tps: Sequence[TopicPartition], o: _ReadOptions) -> Offsets:
    out: Offsets = {}
    if o.starting_by_timestamp is not None and o.starting_timestamp is None:
        _check_named(o.starting_by_timestamp, tps, "startingOffsetsByTimestamp")
    if isinstance(o.starting, dict) and o.starting_timestamp is None and o.starting_by_timestamp is None:
        _check_named(o.starting, tps, "startingOffsets")
    for tp in tps:
        log_start, log_end = log.offsets(*tp)
        if o.starting_timestamp is not None:
            out[tp] = _by_time(log, tp, o.starting_timestamp, o, "startingTimestamp")
            continue
        if o.starting_by_timestamp is not None and tp in o.starting_by_timestamp:
            out[tp] = _by_time(log, tp, o.starting_by_timestamp[tp], o, "startingOffsetsByTimestamp")
            continue
        spec = o.starting
        off = spec.get(tp, -2) if isinstance(spec, dict) else (-1 if spec == "latest" else -2)
        if off == -2:
            off = log_start
        elif off == -1:
            off = log_end
        elif off > log_end:
            raise ValueError(
                f"seglog option startingOffsets: offset {off} of {tp[0]}-{tp[1]} "
                f"is past its log end {log_end}"
            )
        elif off < log_start:
            _data_loss(
                o, f"startingOffsets {off} of {tp[0]}-{tp[1]} is before its log start offset {log_start}"
            )
            off = log_start
        out[tp] = off
    return out


def _ending_offsets(log: LogAccess, tps: Sequence[TopicPartition], o: _ReadOptions) -> Offsets:
    out: Offsets = {}
    if o.ending_by_timestamp is not None and o.ending_timestamp is None:
        _check_named(o.ending_by_timestamp, tps, "endingOffsetsByTimestamp")
    if isinstance(o.ending, dict) and o.ending_timestamp is None and o.ending_by_timestamp is None:
        _check_named(o.ending, tps, "endingOffsets")
    for tp in tps:
        log_end = log.offsets(*tp)[1]
        if o.ending_timestamp is not None:
            out[tp] = _by_time(log, tp, o.ending_timestamp, o, "endingTimestamp")
        elif o.ending_by_timestamp is not None and tp in o.ending_by_timestamp:
            out[tp] = _by_time(log, tp, o.ending_by_timestamp[tp], o, "endingOffsetsByTimestamp")
        else:
            off = o.ending.get(tp, -1) if isinstance(o.ending, dict) else -1
            if off > log_end:
                raise ValueError(
                    f"seglog option endingOffsets: offset {off} of {tp[0]}-{tp[1]} "
                    f"is past its log end {log_end}"
                )
            out[tp] = log_end if off == -1 else off
    return out


def _to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Kafka's offset JSON, with topics and partitions in a fixed order (Spark
    compares offsets as JSON text)."""
    out: dict[str, dict[str, int]] = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = off
    return out


def _from_json(d: Mapping[str, Any]) -> Offsets:
    return {(t, int(p)): int(off) for t, parts in d.items() for p, off in parts.items()}
