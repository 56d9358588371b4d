//! Tests of `compression`.

use super::*;

const ALL: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

#[test]
fn every_codec_round_trips() {
    let data: Vec<u8> = (0..200_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
    for c in ALL {
        let packed = c.compress(&data);
        assert_eq!(c.decompress(&packed).unwrap(), data, "{c:?}");
        assert_eq!(Compression::from_id(c.id()).unwrap(), c);
        assert_eq!(Compression::from_name(c.name()), Some(c));
    }
}

#[test]
fn snappy_uses_xerial_framing_and_reads_raw_blocks() {
    let packed = Compression::Snappy.compress(b"hello hello hello");
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
