"""Consumer groups on an embedded store: the internal topic ``__consumer_offsets`` is
seglog's to write, its reader survives junk, and a group's lock is not inherited by a fork."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import pytest

import seglog
from seglog import TopicPartition

OFFSETS = "__consumer_offsets"
TP0 = TopicPartition("t", 0)


def committed_store(store: seglog.Store) -> None:
    store.create_topic("t")
    store.append("t", 0, [b"x"] * 10)
    with seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False) as c:
        c.commit({TP0: 4})


def test_users_cannot_write_or_delete_the_internal_topic(store: seglog.Store) -> None:
    committed_store(store)
    before = store.offsets(OFFSETS, 0)
    with pytest.raises(seglog.InvalidTopicError, match="internal topic"):
        store.append(OFFSETS, 0, [(b"\x00\x01junk", b"v")])
    batch = store.read_raw("t", 0, 0)
    with pytest.raises(seglog.InvalidTopicError, match="internal topic"):
        store.append_raw(OFFSETS, 0, batch)
    with seglog.Producer(store) as p, pytest.raises(seglog.InvalidTopicError, match="internal topic"):
        p.send(OFFSETS, b"v", key=b"k")
    with pytest.raises(seglog.InvalidTopicError, match="internal topic"):
        store.delete_records(OFFSETS, 0, 1)
    with pytest.raises(seglog.InvalidTopicError, match="internal topic"):
        store.delete_topic(OFFSETS)
    assert store.offsets(OFFSETS, 0) == before, "nothing was appended or deleted"
    with seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False) as c:
        assert c.committed(TP0) == 4
        c.commit({TP0: 6})  # seglog's own commits still go in
    with seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False) as c:
        assert c.committed(TP0) == 6


def test_a_junk_record_in_the_offsets_topic_is_skipped(
    store_path: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with seglog.open(store_path) as store:
        committed_store(store)
        end = store.offsets(OFFSETS, 0)[1]
    # A keyed record that is no offset commit, put into the log from outside.
    with seglog.open(tmp_path / "scratch") as scratch:
        scratch.create_topic("x")
        scratch.append("x", 0, [(b"\x00\x01\xff", b"\x00\x03junk")])
        junk = bytearray(scratch.read_raw("x", 0, 0))
    junk[0:8] = end.to_bytes(8, "big")  # baseOffset lies outside the CRC
    segments = sorted((store_path / f"{OFFSETS}-0").glob("*.log"))
    with open(segments[-1], "ab") as f:
        f.write(junk)
    (store_path / ".kafka_cleanshutdown").unlink()  # recovery validates the new tail
    with seglog.open(store_path) as store:
        assert store.offsets(OFFSETS, 0)[1] == end + 1, "the junk is in the log"
        with caplog.at_level(logging.WARNING, logger="seglog._groups"):
            with seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False) as c:
                assert c.committed(TP0) == 4
                c.commit({TP0: 5})
        assert "skipped 1 unreadable" in caplog.text
        with seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False) as c:
            assert c.committed(TP0) == 5


def test_a_forked_child_does_not_keep_the_group_lock(store: seglog.Store) -> None:
    store.create_topic("t")
    first = seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False)
    go, done = os.pipe()
    with warnings.catch_warnings():
        # The store's maintenance thread makes CPython warn about fork.
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child lives on, holding whatever it inherited, until told to go
        try:
            os.read(go, 1)
        finally:
            os._exit(0)
    try:
        first.close()
        # Before the fix the child's copy of the lock's file kept the flock.
        second = seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False)
        with pytest.raises(seglog.GroupInUseError, match=f"pid {os.getpid()}"):
            seglog.Consumer(store, "t", group_id="g", enable_auto_commit=False)
        second.close()
    finally:
        os.write(done, b"x")
        os.waitpid(pid, 0)
