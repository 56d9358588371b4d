"""Reads from the writer's memory map of its segments (issue 13): a lookup
copies one record out of the map instead of reading its whole batch. A map
must never serve bytes a truncation cut off (stale data, or SIGBUS on a page
past the new end of the file), nor bytes not yet committed, and must follow a
segment that grows or is replaced by compaction or retention."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import seglog

TOPIC = "map"


def value(generation: int, offset: int) -> bytes:
    # Sizes vary with the generation: a truncated batch is rewritten at the same
    # position with a different length, so a stale read could not parse cleanly
    # by chance.
    return b"g%d-o%d-" % (generation, offset) + b"x" * (50 + 37 * generation % 200)


@pytest.mark.parametrize("per", [1, 25])
def test_reads_racing_truncation_see_only_what_is_at_the_offset(tmp_path: Path, per: int) -> None:
    """Reader threads look up random offsets while the writer cuts the log back
    and writes it again, shorter and longer, many times: each record read is one
    that was at that offset in some generation (never bytes of another offset or
    a torn batch), a read past the end is OffsetOutOfRangeError, and the process
    survives (a page touched past the end of the file would be SIGBUS). With
    ``per`` records a batch, lookups land inside batches, where record marks kept
    from an earlier generation would lead them astray."""
    n = 400

    def write(gen: int, start: int) -> None:
        for base in range(start, n, per):
            store.append(TOPIC, 0, [(b"%d" % o, value(gen, o)) for o in range(base, min(base + per, n))])

    with seglog.open(tmp_path) as store:
        store.create_topic(TOPIC, 1, {"segment.bytes": 1 << 30})
        write(0, 0)
        stop = threading.Event()
        seen: list[int] = []
        errors: list[BaseException] = []

        def reader(seed: int) -> None:
            import random

            rnd = random.Random(seed)
            reads = 0
            try:
                while not stop.is_set():
                    o = rnd.randrange(n)
                    try:
                        got = store.read(TOPIC, 0, o, max_bytes=1, max_records=1)
                    except seglog.OffsetOutOfRangeError:
                        continue
                    if not got:
                        continue
                    r = got[0]
                    assert r.key == b"%d" % r.offset, (o, r)
                    gen = int(r.value.split(b"-")[0][1:])
                    assert r.value == value(gen, r.offset), (o, r)
                    assert r.offset >= o
                    reads += 1
            except BaseException as e:  # reported by the main thread
                errors.append(e)
            seen.append(reads)

        threads = [threading.Thread(target=reader, args=(s,)) for s in range(2)]
        for t in threads:
            t.start()
        try:
            for gen in range(1, 40):
                cut = (gen * 53) % (n - 10) // per * per
                store.truncate_to(TOPIC, 0, cut)
                assert store.offsets(TOPIC, 0)[1] == cut
                write(gen, cut)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert not errors, errors[0]
        assert sum(seen) > 0
        # Once quiet, every offset reads what the last generation left there.
        for o in range(n):
            [r] = store.read(TOPIC, 0, o, max_bytes=1, max_records=1)
            assert r.offset == o and r.key == b"%d" % o
            assert r.value.startswith(b"g") and r.value == value(int(r.value.split(b"-")[0][1:]), o)


def test_lookups_into_batches_rewritten_after_a_truncation_find_the_new_records(tmp_path: Path) -> None:
    """A lookup into the middle of a batch starts walking its records at marks the
    segment keeps from an earlier lookup into it. After a truncation the batches
    written again at the same positions hold records of other sizes: marks kept
    from before would land inside a record, so each lookup here would read the
    wrong record or fail."""
    per, batches = 40, 12
    n = per * batches
    with seglog.open(tmp_path) as store:
        store.create_topic(TOPIC, 1, {"segment.bytes": 1 << 30})

        def write(gen: int, start: int) -> None:
            for base in range(start, n, per):
                store.append(TOPIC, 0, [(b"%d" % o, value(gen, o)) for o in range(base, base + per)])

        def check(gen_of: dict[int, int]) -> None:
            for o in [*range(n - 1, -1, -7), *range(0, n, 5)]:
                [r] = store.read(TOPIC, 0, o, max_bytes=1, max_records=1)
                assert (r.offset, r.key, r.value) == (o, b"%d" % o, value(gen_of[o], o))

        write(0, 0)
        gens = dict.fromkeys(range(n), 0)
        check(gens)
        for gen in range(1, 6):
            cut = per * (gen * 5 % batches)
            store.truncate_to(TOPIC, 0, cut)
            write(gen, cut)
            gens.update(dict.fromkeys(range(cut, n), gen))
            check(gens)


def test_a_lookup_after_the_log_grew_past_the_first_map(tmp_path: Path) -> None:
    """The active segment is mapped as it was; records appended after that
    (past the map's end once it has grown enough) are still read, and the
    uncommitted end of the file never is."""
    big = b"v" * 100_000
    with seglog.open(tmp_path) as store:
        store.create_topic(TOPIC, 1, {"segment.bytes": 1 << 30})
        store.append(TOPIC, 0, [(b"0", b"first")])
        assert store.read(TOPIC, 0, 0, max_records=1)[0].value == b"first"
        # Past 64 MiB (the map's step): the map is remade larger.
        for o in range(1, 700):
            store.append(TOPIC, 0, [(b"%d" % o, big)])
        [last] = store.read(TOPIC, 0, 699, max_bytes=1, max_records=1)
        assert (last.key, last.value) == (b"699", big)
        assert store.read(TOPIC, 0, 700, max_records=1) == []
        with pytest.raises(seglog.OffsetOutOfRangeError):
            store.read(TOPIC, 0, 701, max_records=1)


@pytest.mark.parametrize("read_only", [False, True])
def test_lookups_and_arrow_reads_agree_mapped_or_not(tmp_path: Path, read_only: bool) -> None:
    """The writer reads through its map, a read-only process by pread: the same
    records either way, from lookups, list reads and Arrow."""
    pa = pytest.importorskip("pyarrow")
    with seglog.open(tmp_path) as store:
        store.create_topic(TOPIC, 1, {"segment.bytes": 4000})
        for o in range(300):
            store.append(TOPIC, 0, [(b"%d" % o, b"v%d" % o), (b"%d+" % o, None)])
    with seglog.open(tmp_path, read_only=read_only) as store:
        for o in range(0, 600, 7):
            [r] = store.read(TOPIC, 0, o, max_bytes=1, max_records=1)
            assert r.offset == o
            assert r.key == (b"%d" % (o // 2) if o % 2 == 0 else b"%d+" % (o // 2))
            assert r.value == (b"v%d" % (o // 2) if o % 2 == 0 else None)
        three = store.read(TOPIC, 0, 5, max_records=3)
        assert [r.offset for r in three] == [5, 6, 7]
        everything = store.read(TOPIC, 0, 0, max_bytes=1 << 20)
        assert [r.offset for r in everything][:3] == [0, 1, 2]
        c = seglog.Consumer(store, TOPIC, group_id=None, auto_offset_reset="earliest", consumer_timeout_ms=0)
        table = c.poll_arrow(max_records=10_000)
        c.close()
        assert isinstance(table, pa.RecordBatch | pa.Table)
        assert table.num_rows == 600
        assert table.column("offset").to_pylist() == list(range(600))
        assert table.column("value").to_pylist()[:4] == [b"v0", None, b"v1", None]
