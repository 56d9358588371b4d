//! Tests of `producer_state::snapshot`.

use proptest::prelude::*;

use super::*;

fn entry(pid: i64, epoch: i16, last: Option<(i32, i64, i32, i64)>) -> ProducerStateEntry {
    let last = last.map(|(last_seq, last_offset, delta, ts)| BatchMetadata {
        first_seq: decrement_sequence(last_seq, delta),
        last_seq,
        first_offset: last_offset - i64::from(delta),
        last_offset,
        timestamp: ts,
    });
    ProducerStateEntry::with_last_batch(pid, epoch, -1, last.map_or(-1, |b| b.timestamp), None, last)
}

#[test]
fn the_layout_is_kafkas_producer_snapshot_v1() {
    let e = entry(0x0102030405060708, 3, Some((9, 100, 4, 1234)));
    let buf = encode([e].iter());
    assert_eq!(buf.len(), 10 + ENTRY_LEN);
    assert_eq!(&buf[0..2], &[0, 1], "version 1");
    assert_eq!(&buf[6..10], &[0, 0, 0, 1], "one entry");
    let crc = u32::from_be_bytes(buf[2..6].try_into().unwrap());
    assert_eq!(crc, crc32c::crc32c(&buf[6..]), "CRC-32C of what follows it");
    let p = 10;
    assert_eq!(&buf[p..p + 8], &0x0102030405060708i64.to_be_bytes());
    assert_eq!(&buf[p + 8..p + 10], &3i16.to_be_bytes());
    assert_eq!(&buf[p + 10..p + 14], &9i32.to_be_bytes(), "last sequence");
    assert_eq!(&buf[p + 14..p + 22], &100i64.to_be_bytes(), "last offset");
    assert_eq!(&buf[p + 22..p + 26], &4i32.to_be_bytes(), "offset delta");
    assert_eq!(&buf[p + 26..p + 34], &1234i64.to_be_bytes(), "timestamp");
    assert_eq!(&buf[p + 34..p + 38], &(-1i32).to_be_bytes(), "coordinator epoch");
    assert_eq!(&buf[p + 38..p + 46], &(-1i64).to_be_bytes(), "no open transaction");
}

#[test]
fn a_producer_without_a_batch_has_last_offset_minus_one() {
    let e = entry(5, 0, None);
    let back = decode(&encode([e.clone()].iter())).unwrap();
    assert_eq!(back, vec![e]);
    assert_eq!(back[0].last_data_offset(), -1);
}

#[test]
fn damage_is_refused_with_a_reason() {
    let good = encode([entry(1, 0, Some((4, 10, 4, 7)))].iter());
    assert!(decode(&good[..5]).unwrap_err().contains("shorter"));
    let mut v = good.clone();
    v[1] = 2;
    assert!(decode(&v).unwrap_err().contains("version"));
    let mut v = good.clone();
    v[20] ^= 1;
    assert!(decode(&v).unwrap_err().contains("CRC"));
    let mut v = good.clone();
    v.push(0);
    assert!(decode(&v).is_err(), "trailing bytes");
    assert!(decode(&[]).is_err());
}

#[test]
fn a_damaged_file_is_a_corrupt_file_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = path(dir.path(), 42);
    assert!(p.ends_with("00000000000000000042.snapshot"));
    write(&p, b"\x00\x01garbage", true).unwrap();
    match read(&p) {
        Err(Error::CorruptFile { path, .. }) => assert_eq!(path, p),
        other => panic!("{other:?}"),
    }
    assert_eq!(list(dir.path()).unwrap(), vec![42]);
}

fn arb_entry() -> impl Strategy<Value = ProducerStateEntry> {
    (
        0..i64::MAX,
        any::<i16>(),
        prop::option::of((0..i32::MAX, 1000..i64::MAX / 2, 0..1000i32, any::<i64>())),
        any::<i32>(),
        prop::option::of(0..i64::MAX),
    )
        .prop_map(|(pid, epoch, last, coord, txn)| {
            let mut e = entry(pid, epoch, last);
            e.coordinator_epoch = coord;
            e.current_txn_first_offset = txn;
            e
        })
}

proptest! {
    #[test]
    fn encode_then_decode_gives_the_entries_back(entries in prop::collection::vec(arb_entry(), 0..20)) {
        let back = decode(&encode(entries.iter())).unwrap();
        prop_assert_eq!(back, entries);
    }

    /// Any change to a snapshot's bytes, or any cut, is refused, never misread.
    #[test]
    fn damaged_snapshots_are_refused(
        entries in prop::collection::vec(arb_entry(), 1..5),
        at in any::<prop::sample::Index>(),
        flip in 1u8..=255,
        cut in any::<bool>(),
    ) {
        let mut buf = encode(entries.iter());
        let i = at.index(buf.len());
        if cut {
            buf.truncate(i);
        } else {
            buf[i] ^= flip;
        }
        // A flipped version byte pair could read as version 1 only by
        // leaving it unchanged, which `flip` >= 1 rules out.
        prop_assert!(decode(&buf).is_err());
    }
}
