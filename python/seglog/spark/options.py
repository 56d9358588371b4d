"""The options of a read or a write, by the names of Spark's Kafka connector,
parsed and checked when a query is planned into the frozen objects its tasks carry."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .log import Location

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]


# Options of Spark's Kafka connector that configure its Kafka clients (other than
# kafka.bootstrap.servers, which names the broker); they are accepted and ignored,
# so that a Kafka pipeline moves over by changing the format name.
_IGNORED_PREFIXES = ("kafka.", "fetchoffset.")
_IGNORED = {"groupidprefix", "kafkaconsumer.polltimeoutms", "checkpointlocation"}  # the last: Spark's own

_SERVERS = "kafka.bootstrap.servers"

_READ_KEYS = {
    "path",
    _SERVERS,
    "subscribe",
    "subscribepattern",
    "assign",
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "startingoffsetsbytimestamp",
    "startingoffsetsbytimestampstrategy",
    "endingtimestamp",
    "endingoffsetsbytimestamp",
    "failondataloss",
    "maxoffsetspertrigger",
    "minpartitions",
    "maxrecordsperpartition",
    "includeheaders",
}
_WRITE_KEYS = {"path", _SERVERS, "topic", "includeheaders", "writelocktimeoutms"}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _check_keys(opts: Mapping[str, str], known: set[str], what: str) -> None:
    for key in opts:
        if key in known or key in _IGNORED or key.startswith(_IGNORED_PREFIXES):
            continue
        raise ValueError(
            f"seglog {what}: unknown option {key!r} (options: {', '.join(sorted(known))}; "
            "Kafka-client options kafka.* are accepted and ignored)"
        )


def _bool(opts: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    raw = opts.get(key)
    if raw is None:
        return default
    v = raw.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ValueError(f"seglog option {name} must be true or false, got {raw!r}")


def _int(opts: Mapping[str, str], key: str, name: str, minimum: int) -> int | None:
    raw = opts.get(key)
    if raw is None:
        return None
    try:
        v = int(raw.strip())
    except ValueError:
        raise ValueError(f"seglog option {name} must be an integer, got {raw!r}") from None
    if v < minimum:
        raise ValueError(f"seglog option {name} must be >= {minimum}, got {raw!r}")
    return v


def _location(opts: Mapping[str, str]) -> Location:
    """Exactly one of path (a store directory, opened by every worker) and
    kafka.bootstrap.servers (a broker's host:port list, reached over the network)."""
    path = opts.get("path")
    servers = opts.get(_SERVERS)
    if path is not None and servers is not None:
        raise ValueError(
            f"seglog: options path ({path!r}) and kafka.bootstrap.servers ({servers!r}) are both set; "
            "give exactly one: path for a store directory every worker can open, "
            "kafka.bootstrap.servers for a broker serving the store"
        )
    if servers is not None:
        entries = [e.strip() for e in servers.split(",")]
        for e in entries:
            host, sep, port = e.rpartition(":")
            if not (sep and host and port.isdigit() and 0 < int(port) < 65536):
                raise ValueError(
                    f"seglog option kafka.bootstrap.servers must be a comma-separated list of "
                    f"HOST:PORT, got {servers!r}"
                )
        return Location(bootstrap_servers=",".join(entries))
    if not path:
        raise ValueError(
            "seglog: option path (the store directory) or kafka.bootstrap.servers (a broker) is "
            "required, e.g. .load('/data/store') or .option('kafka.bootstrap.servers', 'host:9092')"
        )
    return Location(path=path)


def _json_object(raw: str, name: str, example: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"seglog option {name}: not valid JSON ({e}); expected e.g. {example}") from None
    if not isinstance(obj, dict) or not obj:
        raise ValueError(
            f"seglog option {name}: expected a non-empty JSON object like {example}, got {raw!r}"
        )
    return obj


def _offsets_json(raw: str, name: str) -> Offsets:
    """Kafka's ``{"topic": {"0": 23, "1": -1}}``."""
    example = '{"topic":{"0":23,"1":-2}}'
    out: Offsets = {}
    for topic, parts in _json_object(raw, name, example).items():
        if not isinstance(parts, dict):
            raise ValueError(
                f"seglog option {name}: topic {topic!r} must map to {{partition: offset}}: {raw}"
            )
        for p, off in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise ValueError(
                    f"seglog option {name}: partition {p!r} of {topic!r} is not a number"
                ) from None
            if not isinstance(off, int) or isinstance(off, bool) or off < -2:
                raise ValueError(
                    f"seglog option {name}: offset of {topic}-{p} must be an integer >= -2 "
                    f"(-2 earliest, -1 latest), got {off!r}"
                )
            out[(topic, partition)] = off
    return out


@dataclass(frozen=True)
class _ReadOptions:
    location: Location
    subscribe: tuple[str, ...] | None = None
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    starting: str | Offsets = "earliest"
    ending: str | Offsets = "latest"
    starting_timestamp: int | None = None
    starting_by_timestamp: Offsets | None = None
    timestamp_strategy: str = "error"
    ending_timestamp: int | None = None
    ending_by_timestamp: Offsets | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False


def _read_options(options: Mapping[str, str], streaming: bool | None) -> _ReadOptions:
    """Parses and validates the options of a read; ``streaming`` None checks only
    what a batch and a streaming read share."""
    o = _lower(options)
    _check_keys(o, _READ_KEYS, "source")
    location = _location(o)
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in o]
    if len(given) != 1:
        raise ValueError(
            "seglog source: exactly one of the options subscribe, subscribePattern or assign is required"
            + (f"; got {len(given)}" if given else "")
        )
    subscribe = pattern = assign = None
    if "subscribe" in o:
        subscribe = tuple(t.strip() for t in o["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise ValueError("seglog option subscribe: no topic given (comma-separated topic names)")
    elif "subscribepattern" in o:
        pattern = o["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(
                f"seglog option subscribePattern: invalid regular expression {pattern!r}: {e}"
            ) from None
    else:
        example = '{"topicA":[0,1],"topicB":[0]}'
        tps: list[TopicPartition] = []
        for topic, parts in _json_object(o["assign"], "assign", example).items():
            if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts
            ):
                raise ValueError(
                    f"seglog option assign: topic {topic!r} must map to a list of partition numbers, "
                    f"e.g. {example}"
                )
            tps.extend((topic, p) for p in parts)
        assign = tuple(dict.fromkeys(tps))

    def offsets_option(key: str, name: str) -> str | Offsets | None:
        raw = o.get(key)
        if raw is None:
            return None
        v = raw.strip()
        if v.lower() in ("earliest", "latest"):
            return v.lower()
        if not v.startswith("{"):
            raise ValueError(
                f"seglog option {name} must be earliest, latest or JSON like "
                f'{{"topic":{{"0":23}}}}, got {raw!r}'
            )
        return _offsets_json(v, name)

    starting = offsets_option("startingoffsets", "startingOffsets")
    ending = offsets_option("endingoffsets", "endingOffsets")
    strategy = o.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise ValueError(
            f"seglog option startingOffsetsByTimestampStrategy must be error or latest, got {strategy!r}"
        )
    starting_ts = _int(o, "startingtimestamp", "startingTimestamp", 0)
    ending_ts = _int(o, "endingtimestamp", "endingTimestamp", 0)
    by_ts = ending_by_ts = None
    if "startingoffsetsbytimestamp" in o:
        by_ts = _offsets_json(o["startingoffsetsbytimestamp"], "startingOffsetsByTimestamp")
    if "endingoffsetsbytimestamp" in o:
        ending_by_ts = _offsets_json(o["endingoffsetsbytimestamp"], "endingOffsetsByTimestamp")
    for name, spec in (("startingOffsetsByTimestamp", by_ts), ("endingOffsetsByTimestamp", ending_by_ts)):
        if spec and min(spec.values()) < 0:
            raise ValueError(f"seglog option {name}: timestamps must be >= 0 (ms since the epoch)")
    max_per_trigger = _int(o, "maxoffsetspertrigger", "maxOffsetsPerTrigger", 1)
    if streaming is True:
        for key, name in (
            ("endingoffsets", "endingOffsets"),
            ("endingtimestamp", "endingTimestamp"),
            ("endingoffsetsbytimestamp", "endingOffsetsByTimestamp"),
        ):
            if key in o:
                raise ValueError(f"seglog source: option {name} is for batch queries; a stream has no end")
    if streaming is False:
        if starting == "latest" or (isinstance(starting, dict) and -1 in starting.values()):
            raise ValueError("seglog source: startingOffsets latest (-1) is not allowed in a batch query")
        if ending == "earliest" or (isinstance(ending, dict) and -2 in ending.values()):
            raise ValueError("seglog source: endingOffsets earliest (-2) is not allowed in a batch query")
        if max_per_trigger is not None:
            raise ValueError("seglog source: option maxOffsetsPerTrigger is for streaming queries")
    default_start = "latest" if streaming else "earliest"
    return _ReadOptions(
        location=location,
        subscribe=subscribe,
        pattern=pattern,
        assign=assign,
        starting=starting if starting is not None else default_start,
        ending=ending if ending is not None else "latest",
        starting_timestamp=starting_ts,
        starting_by_timestamp=by_ts,
        timestamp_strategy=strategy,
        ending_timestamp=ending_ts,
        ending_by_timestamp=ending_by_ts,
        fail_on_data_loss=_bool(o, "failondataloss", "failOnDataLoss", True),
        max_offsets_per_trigger=max_per_trigger,
        min_partitions=_int(o, "minpartitions", "minPartitions", 1),
        max_records_per_partition=_int(o, "maxrecordsperpartition", "maxRecordsPerPartition", 1),
        include_headers=_bool(o, "includeheaders", "includeHeaders", False),
    )


@dataclass(frozen=True)
class _WriteOptions:
    location: Location
    topic: str | None
    lock_timeout_ms: int


def _write_options(options: Mapping[str, str]) -> _WriteOptions:
    o = _lower(options)
    _check_keys(o, _WRITE_KEYS, "sink")
    timeout = _int(o, "writelocktimeoutms", "writeLockTimeoutMs", 0)
    topic = o.get("topic")
    if topic is not None and not topic.strip():
        raise ValueError("seglog option topic must not be empty")
    location = _location(o)
    if timeout is not None and location.path is None:
        raise ValueError(
            "seglog option writeLockTimeoutMs is for path (a store's writer lock); "
            "through kafka.bootstrap.servers the broker is the store's one writer"
        )
    return _WriteOptions(location, topic, 60_000 if timeout is None else timeout)
