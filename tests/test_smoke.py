import seglog


def test_append_and_read_back(store: seglog.Store) -> None:
    store.create_topic("t")
    assert store.append("t", 0, [b"a", (b"k", b"b", [("h", b"1")], 1234)]) == (0, 1)
    recs = store.read("t", 0, 0)
    assert [(r.offset, r.key, r.value) for r in recs] == [(0, None, b"a"), (1, b"k", b"b")]
    assert recs[1].headers == (("h", b"1"),)
    assert recs[1].timestamp == 1234
    assert recs[1].topic == "t" and recs[1].partition == 0
