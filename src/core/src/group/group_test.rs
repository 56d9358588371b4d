//! Tests of `group`.

use super::*;

#[test]
fn java_string_hash_matches_java() {
    // Values of "...".hashCode() in Java.
    assert_eq!(java_string_hash(""), 0);
    assert_eq!(java_string_hash("a"), 97);
    assert_eq!(java_string_hash("hello"), 99162322);
    assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    assert_eq!(offsets_partition("polygenelubricants", 50), 0);
    // Non-BMP characters count as two UTF-16 units.
    assert_eq!(java_string_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
}

#[test]
fn key_and_value_round_trip_in_kafkas_layout() {
    let k = OffsetCommitKey { group: "g".into(), topic: "t".into(), partition: 3 };
    let bytes = k.encode().unwrap();
    assert_eq!(bytes, [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]);
    assert_eq!(OffsetCommitKey::decode(&bytes).unwrap(), Some(k));
    let v = OffsetCommitValue { offset: 42, leader_epoch: -1, metadata: "m".into(), commit_timestamp: 7 };
    let bytes = v.encode().unwrap();
    assert_eq!(&bytes[..2], &[0, 3]);
    assert_eq!(OffsetCommitValue::decode(&bytes).unwrap(), v);
}

#[test]
fn junk_is_an_error_not_a_panic() {
    for junk in
        [&b""[..], b"\x00", b"\x00\x01\x00\x05ab", b"\x00\x01\xff\xff", b"\x00\x01\x00\x01\xff\x00\x00"]
    {
        assert!(OffsetCommitKey::decode(junk).is_err(), "{junk:?}");
    }
    assert_eq!(OffsetCommitKey::decode(b"\x00\x02anything").unwrap(), None);
    for junk in [&b""[..], b"\x00\x03\x00", b"\x00\x09\x00\x00\x00\x00\x00\x00\x00\x01"] {
        assert!(OffsetCommitValue::decode(junk).is_err(), "{junk:?}");
    }
}
