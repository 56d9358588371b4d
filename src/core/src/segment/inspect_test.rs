//! Tests of `segment::inspect`.

use std::io::Write;

use proptest::prelude::*;

use super::*;
use crate::index::read_index;
use crate::record::{BatchBuilder, NewRecord};

fn batch(base: i64, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None).base_offset(base);
    for i in 0..n {
        let v = format!("v{i}");
        b.append(&NewRecord {
            timestamp: 1000 + i as i64,
            key: None,
            value: Some(v.as_bytes()),
            headers: &[(b"h".as_slice(), Some(b"x".as_slice()))],
        });
    }
    b.build().unwrap()
}

fn file_with(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.log");
    std::fs::File::create(&path).unwrap().write_all(bytes).unwrap();
    (dir, path)
}

fn walk(path: &Path, decode: bool) -> Vec<WalkItem> {
    let f = File::open(path).unwrap();
    walk_log(f, 0, decode).unwrap().collect::<Result<Vec<_>>>().unwrap()
}

fn batches(items: &[WalkItem]) -> Vec<&InspectedBatch> {
    items
        .iter()
        .filter_map(|i| match i {
            WalkItem::Batch(b) => Some(b),
            WalkItem::Stop(_) => None,
        })
        .collect()
}

#[test]
fn walks_a_good_file() {
    let (first, second) = (batch(0, 3), batch(3, 2));
    let (_dir, path) = file_with(&[first.clone(), second].concat());
    let items = walk(&path, true);
    assert_eq!(items.len(), 2, "no stop at a clean end");
    let b = batches(&items);
    assert_eq!(b[0].error, None);
    assert_eq!((b[0].header.position, b[0].header.size), (0, first.len() as u64));
    assert_eq!((b[1].header.base_offset, b[1].header.last_offset()), (3, 4));
    assert_eq!(b[1].header.position, first.len() as u64);
    assert_eq!(b[0].header.codec(), "none");
    assert_eq!(b[0].header.timestamp_type(), "CreateTime");
    assert_eq!(b[0].header.last_sequence(), -1);
    let r = &b[1].records[1];
    assert_eq!((r.offset, r.timestamp, r.value.as_deref()), (4, 1001, Some(b"v1".as_slice())));
    assert_eq!(r.headers, vec![("h".to_string(), Some(b"x".to_vec()))]);
    // Headers only: no records.
    assert!(batches(&walk(&path, false)).iter().all(|b| b.records.is_empty()));
}

#[test]
fn stops_at_a_torn_tail() {
    let (first, second) = (batch(0, 3), batch(3, 2));
    let torn = &second[..second.len() - 7];
    let (_dir, path) = file_with(&[first.clone(), torn.to_vec()].concat());
    let items = walk(&path, true);
    let Some(WalkItem::Stop(stop)) = items.last() else { panic!("no stop: {items:?}") };
    assert_eq!(stop.position, first.len() as u64);
    assert_eq!(stop.length, torn.len() as u64);
    assert_eq!(
        stop.reason,
        format!(
            "batch of {} bytes (batchLength {}) runs past the end of the file, {} bytes left \
             (a torn write, or a corrupt length)",
            second.len(),
            second.len() - 12,
            torn.len()
        )
    );
}

#[test]
fn names_a_zero_filled_tail_and_a_short_header() {
    let first = batch(0, 1);
    let (_dir, path) = file_with(&[first.clone(), vec![0; 100]].concat());
    let Some(WalkItem::Stop(stop)) = walk(&path, true).pop() else { panic!() };
    assert_eq!(stop.reason, "100 zero bytes at the end of the file (a torn write?)");
    let (_dir, path) = file_with(&[first, vec![1; 5]].concat());
    let Some(WalkItem::Stop(stop)) = walk(&path, true).pop() else { panic!() };
    assert_eq!(stop.reason, "incomplete batch header: only 5 bytes left in the file");
}

#[test]
fn a_bad_crc_is_an_invalid_batch_and_the_walk_goes_on() {
    let mut first = batch(0, 3);
    let last = first.len() - 1;
    first[last] ^= 0xff;
    let (_dir, path) = file_with(&[first, batch(3, 1)].concat());
    let items = walk(&path, true);
    let b = batches(&items);
    assert_eq!(b.len(), 2);
    assert!(b[0].error.as_deref().unwrap_or("").starts_with("CRC-32C mismatch"), "{:?}", b[0].error);
    assert!(b[0].records.is_empty());
    assert_eq!(b[1].error, None);
    // Without decoding the CRC is not looked at.
    assert!(batches(&walk(&path, false)).iter().all(|b| b.error.is_none()));
    let scan = scan_log(&path, 0).unwrap().unwrap();
    assert_eq!((scan.batch_starts.len(), scan.last_offset), (2, Some(3)));
}

#[test]
fn a_negative_last_offset_delta_is_invalid() {
    let mut b = batch(0, 0);
    b[23..27].copy_from_slice(&(-2i32).to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    let (_dir, path) = file_with(&b);
    let items = walk(&path, false);
    assert_eq!(batches(&items)[0].error.as_deref(), Some("lastOffsetDelta -2 is negative"));
}

#[test]
fn index_problems_are_named() {
    let (first, second) = (batch(0, 3), batch(3, 2));
    let (dir, log) = file_with(&[first.clone(), second].concat());
    let scan = scan_log(&log, 0).unwrap().unwrap();
    // Entries: offset 3 at the second batch (good), offset 4 at position 5 (no batch),
    // then one empty preallocated slot and a stray byte.
    let mut raw = Vec::new();
    for (rel, pos) in [(3i32, first.len() as i32), (4, 5)] {
        raw.extend_from_slice(&rel.to_be_bytes());
        raw.extend_from_slice(&pos.to_be_bytes());
    }
    raw.extend_from_slice(&[0; 8]);
    let path = dir.path().join("00000000000000000000.index");
    std::fs::write(&path, [raw.clone(), vec![0]].concat()).unwrap();
    let index = read_index(&path, IndexKind::Offset).unwrap();
    assert_eq!(index.entries, vec![(3, first.len() as i64), (4, 5)]);
    assert_eq!(index.unused, 1);
    assert_eq!(
        check_index(&index, Some(&scan), 0),
        vec![
            "file size 25 is not a multiple of the 8-byte entry size".to_string(),
            "entry 1 (offset 4, position 5): not above the previous entry (offset 3, position 70)"
                .replace("70", &first.len().to_string()),
        ]
    );
    std::fs::write(&path, &raw[8..]).unwrap();
    let index = read_index(&path, IndexKind::Offset).unwrap();
    assert_eq!(
        check_index(&index, Some(&scan), 0),
        vec!["entry 0 (offset 4, position 5): no batch starts at position 5 of the log".to_string()]
    );
    assert_eq!(check_index(&index, None, 0), Vec::<String>::new(), "no log: no log checks");
    let empty = SegmentScan::new(0);
    let time = IndexContents::from_bytes(
        IndexKind::Time,
        &[9i64.to_be_bytes().as_slice(), &1i32.to_be_bytes()].concat(),
    );
    assert_eq!(
        check_index(&time, Some(&empty), 0),
        vec!["entry 0 (timestamp 9, offset 1): past the log's last offset None".to_string()]
    );
    assert!(matches!(
        read_index(&dir.path().join("missing.index"), IndexKind::Time),
        Err(Error::IoAt { .. })
    ));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), good in 0usize..3) {
        let mut data = Vec::new();
        for i in 0..good {
            data.extend_from_slice(&batch(i as i64, 2));
        }
        data.extend_from_slice(&bytes);
        let (_dir, path) = file_with(&data);
        for decode in [true, false] {
            let items = walk(&path, decode);
            prop_assert!(items.iter().filter(|i| matches!(i, WalkItem::Stop(_))).count() <= 1);
        }
        let scan = scan_log(&path, 0).unwrap();
        for kind in [IndexKind::Offset, IndexKind::Time] {
            let index = IndexContents::from_bytes(kind, &bytes);
            let _ = check_index(&index, scan.as_ref(), 0);
        }
    }

    #[test]
    fn flipped_bytes_in_a_batch_never_panic(at in 0usize..120, xor in 1u8..=255) {
        let mut data = batch(0, 3);
        let at = at % data.len();
        data[at] ^= xor;
        let (_dir, path) = file_with(&data);
        let _ = walk(&path, true);
    }
}
