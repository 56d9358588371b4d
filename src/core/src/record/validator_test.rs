//! Tests of `validator`: each of Kafka's rules, and the error code it answers with.

use super::*;
use crate::record::batch::{ATTRIBUTES, CRC, HEADER_LEN, LAST_OFFSET_DELTA, RECORDS_COUNT};
use crate::record::varint::put_varlong;
use crate::record::{BatchBuilder, NewRecord};

const NOW: i64 = 1_700_000_000_000;

fn rules() -> BatchRules<'static> {
    BatchRules { topic: "t", ..BatchRules::default() }
}

fn build(c: Compression, keys: &[Option<&[u8]>]) -> Vec<u8> {
    let mut b = BatchBuilder::new(c);
    for (i, k) in keys.iter().enumerate() {
        let v = format!("value-{i}");
        let h: &[(&[u8], Option<&[u8]>)] = &[(b"h\xc3\xa9", Some(b"x"))];
        b.append(&NewRecord { timestamp: NOW + i as i64, key: *k, value: Some(v.as_bytes()), headers: h });
    }
    b.build().unwrap()
}

fn three(c: Compression) -> Vec<u8> {
    build(c, &[Some(b"a"), Some(b"b"), Some(b"c")])
}

/// Hand-made records (uncompressed): (offsetDelta, header key) per record.
fn raw_batch(records: &[(i32, &[u8])], count: i32, last_delta: i32) -> Vec<u8> {
    let mut body = Vec::new();
    for &(delta, hkey) in records {
        let mut r = vec![0u8]; // attributes
        put_varlong(&mut r, 0); // timestampDelta
        put_varlong(&mut r, i64::from(delta));
        put_varlong(&mut r, 1);
        r.push(b'k');
        put_varlong(&mut r, 1);
        r.push(b'v');
        put_varlong(&mut r, 1);
        put_varlong(&mut r, hkey.len() as i64);
        r.extend_from_slice(hkey);
        put_varlong(&mut r, -1);
        put_varlong(&mut body, r.len() as i64);
        body.extend_from_slice(&r);
    }
    let mut b = build(Compression::None, &[Some(b"k")]);
    b.truncate(HEADER_LEN);
    b.extend_from_slice(&body);
    let len = (b.len() - 12) as i32;
    b[8..12].copy_from_slice(&len.to_be_bytes());
    patch(&mut b, LAST_OFFSET_DELTA, &last_delta.to_be_bytes());
    patch(&mut b, RECORDS_COUNT, &count.to_be_bytes());
    b
}

/// Overwrites header bytes and recomputes the CRC, as a careless client would.
fn patch(b: &mut [u8], at: usize, bytes: &[u8]) {
    b[at..at + bytes.len()].copy_from_slice(bytes);
    let crc = crc32c::crc32c(&b[ATTRIBUTES..]);
    b[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
}

fn code(buf: &[u8]) -> i16 {
    code_with(&rules(), buf)
}

fn code_with(r: &BatchRules<'_>, buf: &[u8]) -> i16 {
    match r.validate_client_batch(buf, NOW) {
        Ok(_) => 0,
        Err(e) => e.kafka_code(),
    }
}

#[test]
fn good_batches_pass_in_every_codec() {
    for c in [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd]
    {
        let b = three(c);
        let (batch, valid) = rules().validate_client_batch(&b, NOW).unwrap();
        assert_eq!(valid, ValidBatch { records: 3, max_timestamp: NOW + 2 }, "{c:?}");
        assert_eq!(batch.size(), b.len());
    }
}

#[test]
fn count_and_offset_deltas_must_agree() {
    assert_eq!(code(&raw_batch(&[(0, b"h"), (1, b"h")], 2, 1)), 0);
    // recordsCount 2 with lastOffsetDelta 5 would take six offsets.
    assert_eq!(code(&raw_batch(&[(0, b"h"), (5, b"h")], 2, 5)), 87);
    // Duplicate and out-of-order deltas.
    assert_eq!(code(&raw_batch(&[(0, b"h"), (0, b"h")], 2, 1)), 87);
    assert_eq!(code(&raw_batch(&[(1, b"h"), (0, b"h")], 2, 1)), 87);
    // Fewer or more records than declared, and none at all.
    assert_eq!(code(&raw_batch(&[(0, b"h")], 2, 1)), 87);
    assert_eq!(code(&raw_batch(&[(0, b"h"), (1, b"h")], 1, 0)), 87);
    assert_eq!(code(&raw_batch(&[], 0, -1)), 87);
    // A header key that is not UTF-8.
    assert_eq!(code(&raw_batch(&[(0, b"\xff")], 1, 0)), 87);
}

#[test]
fn each_refusal_has_its_kafka_code() {
    let good = three(Compression::None);
    let mut crc = good.clone();
    crc[CRC] ^= 1;
    assert_eq!(code(&crc), 2, "CORRUPT_MESSAGE");
    assert_eq!(code(&good[..good.len() - 1]), 2, "a torn batch is CORRUPT_MESSAGE");
    let mut magic = good.clone();
    magic[16] = 1;
    assert_eq!(code(&magic), 87, "only magic 2 is accepted: INVALID_RECORD");
    let small = BatchRules { max_batch_bytes: 50, ..rules() };
    assert_eq!(code_with(&small, &good), 10, "MESSAGE_TOO_LARGE");
    let tiny_segments = BatchRules { segment_bytes: 50, ..rules() };
    assert_eq!(code_with(&tiny_segments, &good), 18, "RECORD_LIST_TOO_LARGE");
    let mut codec = good.clone();
    patch(&mut codec, ATTRIBUTES + 1, &[5]);
    assert_eq!(code(&codec), 76, "UNSUPPORTED_COMPRESSION_TYPE");
    let mut control = good.clone();
    patch(&mut control, ATTRIBUTES + 1, &[0x20]);
    assert_eq!(code(&control), 87, "clients write no control batches");
    let mut horizon = good.clone();
    patch(&mut horizon, ATTRIBUTES + 1, &[0x40]);
    assert_eq!(code(&horizon), 87, "the delete horizon is the cleaner's");
    let keyless = build(Compression::Lz4, &[Some(b"a"), None]);
    assert_eq!(code(&keyless), 0);
    assert_eq!(code_with(&BatchRules { compacted: true, ..rules() }, &keyless), 87);
    let mut garbage = three(Compression::Gzip);
    let n = garbage.len();
    patch(&mut garbage, n - 8, &[0xff; 4]); // the gzip trailer's CRC
    assert_eq!(code(&garbage), 2, "a payload that does not decode is CORRUPT_MESSAGE");
}

#[test]
fn timestamps_are_checked_for_create_time_topics() {
    let bounded = BatchRules { timestamp_before_max_ms: 1_000, timestamp_after_max_ms: 1_000, ..rules() };
    let at = |ts: i64| {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(&NewRecord { timestamp: ts, key: None, value: Some(b"v"), headers: &[] });
        b.build().unwrap()
    };
    assert_eq!(code_with(&bounded, &at(NOW - 1_000)), 0);
    assert_eq!(code_with(&bounded, &at(NOW + 1_000)), 0);
    assert_eq!(code_with(&bounded, &at(NOW - 1_001)), 32, "INVALID_TIMESTAMP");
    assert_eq!(code_with(&bounded, &at(NOW + 1_001)), 32);
    assert_eq!(code(&at(-2)), 32, "negative timestamps other than -1");
    assert_eq!(code(&at(-1)), 0, "-1 means none");
    let lat = BatchRules { timestamp_type: TimestampType::LogAppendTime, ..bounded };
    assert_eq!(code_with(&lat, &at(NOW - 1_000_000)), 0, "the log's time replaces it");
}

#[test]
fn decompression_is_bounded() {
    let mut b = BatchBuilder::new(Compression::Zstd);
    let big = vec![0u8; 1 << 20];
    b.append(&NewRecord { timestamp: NOW, key: None, value: Some(&big), headers: &[] });
    let bomb = b.build().unwrap();
    assert!(bomb.len() < 1024, "a small batch ({} bytes)", bomb.len());
    assert_eq!(code(&bomb), 0);
    let bounded = BatchRules { max_uncompressed_bytes: 64 << 10, ..rules() };
    let err = bounded.validate_client_batch(&bomb, NOW).map(|_| ()).unwrap_err();
    assert_eq!(err.kafka_code(), 18, "{err}");
    assert!(err.to_string().contains("expand past"), "{err}");
}

#[test]
fn header_keys_split_across_the_stream_buffer_are_checked_whole() {
    // Multi-byte characters straddling the 8 KiB buffer boundary (at one parity
    // or the other) are fine...
    let even: Vec<u8> = "é".repeat(6000).into_bytes();
    let odd: Vec<u8> = format!("a{}", "é".repeat(6000)).into_bytes();
    for c in [Compression::Gzip, Compression::None] {
        let mut b = BatchBuilder::new(c);
        let h: &[(&[u8], Option<&[u8]>)] = &[(&even, None), (&odd, None)];
        b.append(&NewRecord { timestamp: NOW, key: None, value: Some(b"v"), headers: h });
        assert_eq!(code(&b.build().unwrap()), 0, "{c:?}");
        // ...and one cut in half is not.
        for cut in [&even[1..], &even[..even.len() - 1]] {
            let mut b = BatchBuilder::new(c);
            let h: &[(&[u8], Option<&[u8]>)] = &[(cut, None)];
            b.append(&NewRecord { timestamp: NOW, key: None, value: Some(b"v"), headers: h });
            assert_eq!(code(&b.build().unwrap()), 87, "{c:?}");
        }
    }
}

#[test]
fn errors_become_the_cores_errors() {
    let e: Error = InvalidBatch::InvalidTimestamp("x".into()).into();
    assert_eq!(e.kafka_code(), Some(32));
    let e: Error = InvalidBatch::UnsupportedCompression(6).into();
    assert_eq!(e.kafka_code(), Some(76));
    assert!(e.to_string().contains("codec id 6"), "{e}");
    let e: Error = InvalidBatch::RecordListTooLarge("x".into()).into();
    assert_eq!(e.kafka_code(), Some(18));
    let e: Error = InvalidBatch::MessageTooLarge { size: 2, max: 1 }.into();
    assert_eq!(e.kafka_code(), Some(10));
}

#[test]
fn every_bad_record_of_a_batch_is_named() {
    // KIP-467: the keyless records of a batch for a compacted topic, each by index.
    let keys: Vec<Option<&[u8]>> = (0..8).map(|i| if i % 3 == 1 { None } else { Some(&b"k"[..]) }).collect();
    for codec in [Compression::None, Compression::Zstd] {
        let batch = build(codec, &keys);
        let rules = BatchRules { compacted: true, partition: 4, ..rules() };
        match rules.validate_client_batch(&batch, NOW).map(|_| ()).unwrap_err() {
            InvalidBatch::Records { timestamp: false, errors } => {
                assert_eq!(errors.iter().map(|e| e.0).collect::<Vec<_>>(), [1, 4, 7]);
                assert_eq!(
                    errors[0].1,
                    "Compacted topic cannot accept message without key in topic partition t-4"
                );
            }
            other => panic!("{other:?}"),
        }
    }
    let message =
        record_errors_message(false, &[(1, "a".into()), (4, "b".into()), (7, "c".into()), (9, "d".into())]);
    assert_eq!(
        message,
        "One or more records have been rejected due to 4 record errors in total, and only showing the first \
         three errors at most: [RecordError(batchIndex=1, message='a'), RecordError(batchIndex=4, message='b'), \
         RecordError(batchIndex=7, message='c')]"
    );
}
