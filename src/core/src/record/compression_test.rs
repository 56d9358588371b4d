//! Tests of `compression`.

use std::cell::Cell;

use super::*;
use crate::record::{BatchBuilder, NewRecord};

thread_local! {
    /// Makes `compress` fail on this thread: no codec fails on demand otherwise.
    pub(super) static FAIL_COMPRESSION: Cell<bool> = const { Cell::new(false) };
}

const ALL: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

#[test]
fn every_codec_round_trips() {
    let data: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
    for c in ALL {
        let packed = c.compress(&data).unwrap();
        assert_eq!(c.decompress(&packed).unwrap(), data, "{c:?}");
        assert_eq!(Compression::from_id(c.id()).unwrap(), c);
        assert_eq!(Compression::from_name(c.name()), Some(c));
    }
}

#[test]
fn snappy_uses_xerial_framing_and_reads_raw_blocks() {
    let packed = Compression::Snappy.compress(b"hello hello hello").unwrap();
    assert_eq!(&packed[..8], &XERIAL_MAGIC);
    let raw = snap::raw::Encoder::new().compress_vec(b"raw block").unwrap();
    assert_eq!(Compression::Snappy.decompress(&raw).unwrap(), b"raw block");
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    for c in &ALL[1..] {
        assert!(
            c.decompress(&[0x82, b'S', b'N', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 99]).is_err(),
            "{c:?}"
        );
    }
    assert!(Compression::from_id(7).is_err());
}

#[test]
fn a_failed_compression_is_an_error_not_an_empty_payload() {
    let mut b = BatchBuilder::new(Compression::Zstd);
    b.append(&NewRecord { timestamp: 1, key: None, value: Some(b"v"), headers: &[] });
    FAIL_COMPRESSION.with(|f| f.set(true));
    let built = b.build();
    FAIL_COMPRESSION.with(|f| f.set(false));
    let err = built.expect_err("a batch was built without its records");
    assert!(err.to_string().contains("zstd compression failed"), "{err}");
}

#[test]
fn decompression_stops_at_its_bound() {
    let data = vec![0u8; 1 << 20];
    for c in &ALL[1..] {
        let packed = c.compress(&data).unwrap();
        assert!(packed.len() < 64 << 10, "{c:?} packs zeros well");
        assert_eq!(c.decompress_limited(&packed, 1 << 20).unwrap().len(), 1 << 20, "{c:?}");
        let err = c.decompress_limited(&packed, (1 << 20) - 1).unwrap_err();
        assert!(err.to_string().contains("expand past"), "{c:?}: {err}");
        let mut r = c.reader(&packed, 4096).unwrap();
        let mut sink = Vec::new();
        let e = r.read_to_end(&mut sink).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge, "{c:?}");
        assert!(sink.len() <= 4096 + 32 * 1024, "{c:?}: the reader stopped early");
    }
}
