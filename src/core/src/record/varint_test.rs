//! Tests of `varint`.

use super::*;

#[test]
fn zigzag_matches_protobuf() {
    for (v, z) in [(0i64, 0u64), (-1, 1), (1, 2), (-2, 3), (i64::MAX, u64::MAX - 1), (i64::MIN, u64::MAX)] {
        assert_eq!(zigzag64(v), z);
        assert_eq!(unzigzag64(z), v);
    }
}

#[test]
fn varlong_round_trip_and_size() {
    for v in [0i64, 1, -1, 63, -64, 64, 300, -300, i32::MAX as i64, i64::MIN, i64::MAX] {
        let mut out = Vec::new();
        put_varlong(&mut out, v);
        assert_eq!(out.len(), size_of_varlong(v));
        let mut r = Reader::new(&out);
        assert_eq!(r.varlong().unwrap(), v);
        assert_eq!(r.remaining(), 0);
    }
}

#[test]
fn golden_bytes() {
    // 300 zig-zags to 600 = 0b100_1011000 -> [0xd8, 0x04]
    let mut out = Vec::new();
    put_varlong(&mut out, 300);
    assert_eq!(out, [0xd8, 0x04]);
    out.clear();
    put_varlong(&mut out, -1);
    assert_eq!(out, [0x01]);
}

#[test]
fn truncated_and_overlong_are_errors() {
    assert!(Reader::new(&[0x80]).varlong().is_err());
    assert!(Reader::new(&[0xff; 11]).varlong().is_err());
    let mut out = Vec::new();
    put_varlong(&mut out, i64::from(i32::MAX) + 1);
    assert!(Reader::new(&out).varint().is_err());
}
