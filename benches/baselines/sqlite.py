"""The sqlite baseline: a log as a table in WAL mode, the offset its integer
primary key."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness import CHUNK, Bench, Data, rmtree, run_threads

SQL_CREATE = 'CREATE TABLE IF NOT EXISTS log ("offset" INTEGER PRIMARY KEY, key BLOB, value BLOB)'
SQL_INSERT = "INSERT INTO log (key, value) VALUES (?, ?)"  # sqlite assigns the offset (rowid)


def sq_connect(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=600)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(SQL_CREATE)
    return conn


@dataclass
class SqCtx:
    path: Path
    db: Path
    conn: sqlite3.Connection
    pool: list[sqlite3.Connection] = field(default_factory=list)  # one per writer thread


def sq_setup(b: Bench, synchronous: str, threads: int = 1) -> SqCtx:
    path = b.fresh_dir()
    db = path / "log.db"
    ctx = SqCtx(path, db, sq_connect(db, synchronous))
    if threads > 1:
        ctx.pool = [sq_connect(db, synchronous) for _ in range(threads)]
    return ctx


def sq_finish(ctx: SqCtx, n: int | None = None) -> int:
    if n is not None:
        (count,) = ctx.conn.execute("SELECT count(*) FROM log").fetchone()
        if count != n:
            raise AssertionError(f"sqlite table holds {count} rows, expected {n}")
    size = sum(p.stat().st_size for p in ctx.path.iterdir() if p.name.startswith("log.db"))
    for c in ctx.pool:
        c.close()
    ctx.conn.close()
    rmtree(ctx.path)
    return size


def sq_insert_range(conn: sqlite3.Connection, d: Data, lo: int, hi: int) -> None:
    """One INSERT per record, a commit per batch-equivalent (records per 16 KiB batch)."""
    ex, keys, values, per = conn.execute, d.keys, d.values, d.per_batch
    for start in range(lo, hi, per):
        ex("BEGIN IMMEDIATE")
        for i in range(start, min(start + per, hi)):
            ex(SQL_INSERT, (keys[i], values[i]))
        ex("COMMIT")


def sq_bulk(conn: sqlite3.Connection, d: Data, n: int) -> None:
    """executemany, CHUNK records per transaction."""
    for lo in range(0, n, CHUNK):
        hi = min(lo + CHUNK, n)
        conn.execute("BEGIN")
        conn.executemany(SQL_INSERT, zip(d.keys[lo:hi], d.values[lo:hi], strict=True))
        conn.execute("COMMIT")


def sq_body(d: Data, threads: int, bulk: bool) -> Callable[[SqCtx, int], None]:
    def body(ctx: SqCtx, n: int) -> None:
        if bulk:
            sq_bulk(ctx.conn, d, n)
        elif threads == 1:
            sq_insert_range(ctx.conn, d, 0, n)
        else:
            run_threads(d.slices(n, threads), lambda i, lo, hi: sq_insert_range(ctx.pool[i], d, lo, hi))

    return body


def sq_populate(b: Bench) -> SqCtx:
    ctx = sq_setup(b, "NORMAL")
    sq_bulk(ctx.conn, b.data, b.data.n)
    ctx.conn.close()
    ctx.conn = sq_connect(ctx.db, "NORMAL")
    return ctx


def sq_consume(ctx: SqCtx) -> int:
    n = 0
    for _offset, _key, _value in ctx.conn.execute('SELECT "offset", key, value FROM log ORDER BY "offset"'):
        n += 1
    return n


def sq_lookup(ctx: SqCtx, offset: int) -> bytes:
    # rowids start at 1: the record at log offset o is row o + 1
    row = ctx.conn.execute('SELECT key, value FROM log WHERE "offset" = ?', (offset + 1,)).fetchone()
    return row[0]  # type: ignore[no-any-return]
