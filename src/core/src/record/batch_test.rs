//! Tests of `batch`.

use super::*;
use crate::record::{
    build_batches, parse_records, parse_records_from, BatchBuilder, BatchIter, Compression, HeaderRef,
    NewRecord,
};

fn build(c: Compression, n: usize) -> Vec<u8> {
    let mut b = BatchBuilder::new(c).base_offset(100);
    let hdr: [(&[u8], Option<&[u8]>); 2] = [(b"h1", Some(b"v1")), (b"h2", None)];
    for i in 0..n {
        let key = format!("key-{i}");
        let value = format!("value-{i}");
        b.append(&NewRecord {
            timestamp: 1_700_000_000_000 + i as i64,
            key: if i % 3 == 0 { None } else { Some(key.as_bytes()) },
            value: if i % 5 == 4 { None } else { Some(value.as_bytes()) },
            headers: if i % 2 == 0 { &hdr } else { &[] },
        });
    }
    b.build().unwrap()
}

#[test]
fn round_trip_every_codec() {
    for c in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]
    {
        let bytes = build(c, 50);
        let batch = RecordBatch::parse(&bytes).unwrap();
        assert_eq!(batch.base_offset(), 100);
        assert_eq!(batch.last_offset(), 149);
        assert_eq!(batch.records_count(), 50);
        assert_eq!(batch.compression().unwrap(), c);
        assert_eq!(batch.base_timestamp(), 1_700_000_000_000);
        assert_eq!(batch.max_timestamp(), 1_700_000_000_049);
        let payload = batch.records_payload().unwrap();
        let recs = batch.records(&payload).unwrap();
        assert_eq!(recs.len(), 50);
        assert_eq!(recs[1].key, Some(&b"key-1"[..]));
        assert_eq!(recs[0].key, None);
        assert_eq!(recs[4].value, None);
        assert_eq!(recs[2].headers, vec![(&b"h1"[..], Some(&b"v1"[..])), (&b"h2"[..], None)]);
        assert_eq!(recs[49].offset_delta, 49);
        assert_eq!(recs[49].timestamp_delta, 49);
    }
}

/// The exact bytes of a one-record batch, worked out by hand from the format spec.
#[test]
fn golden_bytes_single_record() {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(&NewRecord { timestamp: 1000, key: Some(b"k"), value: Some(b"v"), headers: &[] });
    let bytes = b.build().unwrap();
    let record = [
        0x10, // body length 8, zig-zag encoded
        0x00, // attributes
        0x00, // timestampDelta 0
        0x00, // offsetDelta 0
        0x02, b'k', // key length 1
        0x02, b'v', // value length 1
        0x00, // no headers
    ];
    let mut expect = Vec::new();
    expect.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
    expect.extend_from_slice(&((HEADER_LEN - LOG_OVERHEAD + record.len()) as i32).to_be_bytes());
    expect.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
    expect.push(2); // magic
    expect.extend_from_slice(&[0, 0, 0, 0]); // crc placeholder
    expect.extend_from_slice(&0i16.to_be_bytes()); // attributes
    expect.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
    expect.extend_from_slice(&1000i64.to_be_bytes()); // baseTimestamp
    expect.extend_from_slice(&1000i64.to_be_bytes()); // maxTimestamp
    expect.extend_from_slice(&(-1i64).to_be_bytes()); // producerId
    expect.extend_from_slice(&(-1i16).to_be_bytes()); // producerEpoch
    expect.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
    expect.extend_from_slice(&1i32.to_be_bytes()); // recordsCount
    expect.extend_from_slice(&record);
    let crc = crc32c::crc32c(&expect[21..]);
    expect[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(bytes, expect);
    // CRC-32C of a known string, to pin the polynomial (Castagnoli, not IEEE).
    assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
}

#[test]
fn validation_errors_are_typed() {
    let bytes = build(Compression::None, 3);
    assert!(matches!(RecordBatch::parse(&bytes[..30]), Err(CorruptBatch::TooShort { .. })));
    assert!(matches!(RecordBatch::parse(&bytes[..bytes.len() - 1]), Err(CorruptBatch::LengthPastEnd { .. })));
    let mut bad = bytes.clone();
    bad[16] = 1;
    assert!(matches!(RecordBatch::parse(&bad), Err(CorruptBatch::BadMagic(1))));
    let mut bad = bytes.clone();
    let n = bad.len();
    bad[n - 2] ^= 0xff;
    assert!(matches!(RecordBatch::parse(&bad), Err(CorruptBatch::CrcMismatch { .. })));
    // Offsets and leader epoch are outside the CRC.
    let mut moved = bytes.clone();
    set_base_offset(&mut moved, 77);
    set_partition_leader_epoch(&mut moved, 5);
    assert_eq!(RecordBatch::parse(&moved).unwrap().base_offset(), 77);
}

#[test]
fn corrupt_records_are_errors_not_panics() {
    let bytes = build(Compression::None, 5);
    // Flip every payload byte in turn and fix up the CRC: decoding must either
    // succeed or return an error, never panic.
    for i in HEADER_LEN..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] = bad[i].wrapping_add(0x41);
        let crc = crc32c::crc32c(&bad[ATTRIBUTES..]);
        bad[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
        let batch = RecordBatch::parse(&bad).unwrap();
        let payload = batch.records_payload().unwrap();
        let _ = batch.records(&payload);
    }
}

#[test]
fn log_append_time_rewrites_crc() {
    let mut bytes = build(Compression::Lz4, 4);
    set_log_append_time(&mut bytes, 42);
    let b = RecordBatch::parse(&bytes).unwrap();
    assert_eq!(b.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(b.max_timestamp(), 42);
    assert_eq!(b.compression().unwrap(), Compression::Lz4);
}

#[test]
fn rewrite_keeps_offsets_times_and_sets_delete_horizon() {
    let bytes = build(Compression::Zstd, 10);
    let orig = RecordBatch::parse(&bytes).unwrap();
    let payload = orig.records_payload().unwrap();
    let recs = orig.records(&payload).unwrap();
    let mut b = BatchBuilder::rewrite_of(&orig, Some(5_000)).unwrap();
    for r in recs.iter().filter(|r| r.offset_delta % 3 == 1) {
        let ts = orig.base_timestamp() + r.timestamp_delta;
        b.append_at(
            r.offset_delta,
            &NewRecord { timestamp: ts, key: r.key, value: r.value, headers: &r.headers },
        );
    }
    let out = b.build().unwrap();
    let c = RecordBatch::parse(&out).unwrap();
    assert_eq!((c.base_offset(), c.last_offset()), (orig.base_offset(), orig.last_offset()));
    assert!(c.has_delete_horizon());
    assert_eq!(c.base_timestamp(), 5_000);
    assert_eq!(c.max_timestamp(), orig.max_timestamp());
    assert_eq!(c.compression().unwrap(), Compression::Zstd);
    let p2 = c.records_payload().unwrap();
    let kept = c.records(&p2).unwrap();
    assert_eq!(kept.iter().map(|r| r.offset_delta).collect::<Vec<_>>(), vec![1, 4, 7]);
    // Record timestamps survive the new base.
    assert_eq!(c.base_timestamp() + kept[1].timestamp_delta, 1_700_000_000_004);
    // An empty rewrite keeps the offsets: the log end does not move.
    let empty = BatchBuilder::rewrite_of(&orig, None).unwrap().build().unwrap();
    let e = RecordBatch::parse(&empty).unwrap();
    assert_eq!((e.records_count(), e.last_offset()), (0, orig.last_offset()));
}

#[test]
fn a_records_span_parses_alone_as_the_records_wanted() {
    use crate::record::records::records_span;
    let bytes = build(Compression::None, 20);
    let b = RecordBatch::parse(&bytes).unwrap();
    let payload = b.records_payload().unwrap();
    let all = b.records(&payload).unwrap();
    for (min_delta, take) in [(0, usize::MAX), (0, 1), (7, 1), (7, 3), (19, 5), (20, 1), (-3, 2), (25, 1)] {
        let (range, n) =
            records_span(&payload, b.records_count(), b.last_offset_delta(), min_delta, take).unwrap();
        let got = parse_records(&payload[range], n, b.last_offset_delta()).unwrap();
        let from = min_delta.clamp(0, 20) as usize;
        let want: Vec<_> = all[from..].iter().take(take).cloned().collect();
        assert_eq!(got, want, "from {min_delta}, take {take}");
    }
    // Offsets with gaps (a compacted batch): each record is read for its delta.
    let (range, n) = records_span(&payload, 20, 40, 7, 2).unwrap();
    assert_eq!(parse_records(&payload[range], n, 40).unwrap(), all[7..9].to_vec());
    assert!(records_span(&payload, -1, 19, 0, 1).is_err());
}

#[test]
fn for_each_record_stops_when_asked_and_checks_the_rest_when_not() {
    use crate::record::for_each_record;
    let bytes = build(Compression::None, 20);
    let b = RecordBatch::parse(&bytes).unwrap();
    let payload = b.records_payload().unwrap();
    let mut seen = Vec::new();
    for_each_record(&payload, 20, 19, |r| {
        seen.push(r.offset_delta);
        seen.len() < 5
    })
    .unwrap();
    assert_eq!(seen, [0, 1, 2, 3, 4]);
    // Claiming fewer records than the payload holds is refused, as parse_records does.
    assert!(for_each_record(&payload, 19, 19, |_| true).is_err());
}

#[test]
fn parse_from_skips_records_by_length() {
    let bytes = build(Compression::Gzip, 20);
    let b = RecordBatch::parse(&bytes).unwrap();
    let payload = b.records_payload().unwrap();
    let all = b.records(&payload).unwrap();
    for skip in [0, 1, 7, 19, 20, 25] {
        let tail = parse_records_from(&payload, b.records_count(), b.last_offset_delta(), skip).unwrap();
        assert_eq!(tail, all[skip.min(20) as usize..].to_vec(), "skip {skip}");
    }
}

#[test]
fn build_batches_splits_by_size() {
    let v = vec![1u8; 1000];
    let recs: Vec<NewRecord<'_>> =
        (0..50).map(|i| NewRecord { timestamp: i, key: None, value: Some(&v), headers: &[] }).collect();
    let buf = build_batches(&recs, Compression::None, TimestampType::CreateTime, 10_000).unwrap();
    let batches: Vec<_> = BatchIter::new(&buf, true).map(|b| b.unwrap()).collect();
    assert!(batches.len() >= 5);
    assert_eq!(batches.iter().map(|b| b.records_count()).sum::<i32>(), 50);
    assert!(batches.iter().all(|b| b.size() <= 10_000 + 1100));
}

#[test]
fn batch_iter_stops_at_partial_tail() {
    let mut log = build(Compression::None, 2);
    log.extend(build(Compression::Gzip, 2));
    let full = log.len();
    log.extend_from_slice(&build(Compression::None, 2)[..20]);
    let mut it = BatchIter::new(&log, true);
    assert!(it.next().unwrap().is_ok());
    assert!(it.next().unwrap().is_ok());
    assert_eq!(it.position(), full);
    assert!(it.next().unwrap().is_err());
    assert!(it.next().is_none());
}

#[test]
fn record_marks_start_a_span_where_the_walk_from_the_first_record_would_arrive() {
    use crate::record::records::{record_marks, records_span, records_span_marked, MARK_STRIDE};
    let bytes = build(Compression::None, 50);
    let b = RecordBatch::parse(&bytes).unwrap();
    let payload = b.records_payload().unwrap();
    let marks = record_marks(&payload, 50).unwrap();
    assert_eq!(marks.len(), 50usize.div_ceil(MARK_STRIDE));
    assert_eq!(marks[0], 0);
    for min_delta in 0..52 {
        for take in [1, 3, 100] {
            let plain = records_span(&payload, 50, 49, min_delta, take).unwrap();
            let marked = records_span_marked(&payload, 50, 49, min_delta, take, Some(&marks)).unwrap();
            assert_eq!(plain, marked, "from {min_delta}, take {take}");
        }
    }
    // Marks that do not fit the payload (never kept for another batch, but
    // checked all the same) are not followed.
    let wild = [0, u32::MAX, u32::MAX];
    assert_eq!(
        records_span_marked(&payload, 50, 49, 20, 1, Some(&wild)).unwrap(),
        records_span(&payload, 50, 49, 20, 1).unwrap()
    );
    // A payload that claims more records than it holds is refused.
    assert!(record_marks(&payload, 51).is_err());
}

type AnyRecord = (i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<(Vec<u8>, Option<Vec<u8>>)>);

fn any_record() -> impl proptest::strategy::Strategy<Value = AnyRecord> {
    use proptest::prelude::*;
    let bytes = || proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300));
    (
        any::<i64>().prop_map(|t| t >> 2), // deltas from the first stay inside i64
        bytes(),
        bytes(),
        // Header keys are UTF-8 (the format's String).
        proptest::collection::vec(("\\PC{0,8}".prop_map(String::into_bytes), bytes()), 0..3),
    )
}

proptest::proptest! {
    /// Whatever records go in (null or empty keys and values, lengths that take
    /// one to three varint bytes, timestamps far apart), the same come out.
    #[test]
    fn records_come_out_of_a_built_batch_as_they_went_in(
        recs in proptest::collection::vec(any_record(), 1..40),
    ) {
        let mut b = BatchBuilder::new(Compression::None).base_offset(7);
        let headers: Vec<Vec<HeaderRef<'_>>> = recs
            .iter()
            .map(|r| r.3.iter().map(|(k, v)| (&k[..], v.as_deref())).collect())
            .collect();
        for (r, h) in recs.iter().zip(&headers) {
            b.append(&NewRecord { timestamp: r.0, key: r.1.as_deref(), value: r.2.as_deref(), headers: h });
        }
        let bytes = b.build().unwrap();
        let batch = RecordBatch::parse(&bytes).unwrap();
        let payload = batch.records_payload().unwrap();
        let out = batch.records(&payload).unwrap();
        proptest::prop_assert_eq!(out.len(), recs.len());
        for (i, (got, want)) in out.iter().zip(&recs).enumerate() {
            proptest::prop_assert_eq!(got.offset_delta as usize, i);
            proptest::prop_assert_eq!(batch.base_timestamp().wrapping_add(got.timestamp_delta), want.0);
            proptest::prop_assert_eq!(got.key, want.1.as_deref());
            proptest::prop_assert_eq!(got.value, want.2.as_deref());
            proptest::prop_assert_eq!(&got.headers, &headers[i]);
        }
    }
    /// A run of records appended at once is the same bytes as the records
    /// appended one by one with the same size rule, whatever the batch held
    /// before (records at another timestamp included), the keys (none, null,
    /// empty, long) and the limit.
    #[test]
    fn a_run_appended_at_once_is_the_records_appended_one_by_one(
        before in proptest::collection::vec(any_record(), 0..5),
        timestamp in proptest::strategy::Strategy::prop_map(proptest::prelude::any::<i64>(), |t| t >> 2),
        keyed in proptest::prelude::any::<bool>(),
        run in proptest::collection::vec(
            (
                proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)),
                proptest::option::of(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300)),
            ),
            0..60,
        ),
        limit in 0usize..8000,
        overhead in 0usize..40,
    ) {
        let start = || {
            let mut b = BatchBuilder::new(Compression::None).base_offset(3);
            for r in &before {
                b.append(&NewRecord { timestamp: r.0, key: r.1.as_deref(), value: r.2.as_deref(), headers: &[] });
            }
            b
        };
        let keys: Vec<Option<&[u8]>> = run.iter().map(|r| r.0.as_deref()).collect();
        let values: Vec<Option<&[u8]>> = run.iter().map(|r| r.1.as_deref()).collect();
        let keys = keyed.then_some(&keys[..]);
        let mut at_once = start();
        let took = at_once.append_run(timestamp, keys, &values, limit, overhead);
        let mut one_by_one = start();
        let mut expected = 0;
        for (i, v) in values.iter().enumerate() {
            let k = keys.and_then(|k| k[i]);
            let size = k.map_or(0, <[u8]>::len) + v.map_or(0, <[u8]>::len) + overhead;
            if !one_by_one.is_empty() && one_by_one.size_in_bytes() + size > limit {
                break;
            }
            one_by_one.append(&NewRecord { timestamp, key: k, value: *v, headers: &[] });
            expected += 1;
        }
        proptest::prop_assert_eq!(took, expected);
        proptest::prop_assert_eq!(at_once.len(), one_by_one.len());
        proptest::prop_assert_eq!(at_once.build().unwrap(), one_by_one.build().unwrap());
    }

    /// A batch's CRC taken over pieces (the header, then the rest cut anywhere)
    /// agrees with the whole-batch check, whether or not a byte was changed.
    #[test]
    fn a_crc_over_pieces_agrees_with_the_whole_batch_check(
        n in 1usize..60,
        cuts in proptest::collection::vec(0usize..4000, 0..6),
        flip in proptest::option::of((0usize..4000, 1u8..=255)),
    ) {
        let mut bytes = build(Compression::None, n);
        if let Some((at, x)) = flip {
            let at = at % bytes.len();
            // Outside the CRC's range the answer would not change; keep the flip in it.
            let at = if at < ATTRIBUTES { ATTRIBUTES + at } else { at };
            bytes[at] ^= x;
        }
        let Ok(head) = RecordBatch::header_only(&bytes) else {
            // A flip in the length or magic: a check by pieces never starts.
            proptest::prop_assert!(RecordBatch::parse(&bytes).is_err());
            return Ok(());
        };
        let mut crc = head.piecewise_crc();
        let mut points: Vec<usize> = cuts.iter().map(|c| HEADER_LEN + c % (bytes.len() - HEADER_LEN + 1)).collect();
        points.sort_unstable();
        let mut from = HEADER_LEN;
        for p in points.into_iter().chain([bytes.len()]) {
            crc.update(&bytes[from..p]);
            from = p;
        }
        proptest::prop_assert_eq!(crc.matches(), RecordBatch::parse(&bytes).is_ok());
        proptest::prop_assert_eq!(crc.matches(), flip.is_none());
    }
}

#[test]
fn whole_batches_len_leaves_a_cut_batch_for_the_next_read() {
    let mut one = vec![0u8; 8];
    one.extend_from_slice(&20i32.to_be_bytes());
    one.extend_from_slice(&[7u8; 20]);
    let two = [one.clone(), one.clone()].concat();
    assert_eq!(whole_batches_len(&two), two.len());
    let cut = [one.clone(), one[..17].to_vec()].concat();
    assert_eq!(whole_batches_len(&cut), one.len());
    assert_eq!(whole_batches_len(&one[..11]), 0);
    let mut negative = one.clone();
    negative[8..12].copy_from_slice(&(-5i32).to_be_bytes());
    assert_eq!(whole_batches_len(&negative), 0);
}
