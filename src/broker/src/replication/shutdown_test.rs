//! Tests of `shutdown::wire`.

use bytes::{Bytes, BytesMut};

use super::wire::*;

#[test]
fn requests_and_answers_round_trip_in_every_version() {
    let answer = Answer { error_code: 0, remaining: vec![("orders".into(), 3), ("t".into(), 0)] };
    for version in VERSIONS.0..=VERSIONS.1 {
        let request = Request { broker_id: 2, broker_epoch: if version >= 2 { 4242 } else { -1 } };
        let mut buf = BytesMut::new();
        encode_request(&request, version, &mut buf);
        let mut bytes = buf.freeze();
        assert_eq!(decode_request(&mut bytes, version), Ok(request));
        assert!(bytes.is_empty());
        let mut buf = BytesMut::new();
        encode_response(&answer, version, &mut buf);
        let mut bytes = buf.freeze();
        assert_eq!(decode_response(&mut bytes, version).as_ref(), Ok(&answer));
        assert!(bytes.is_empty());
    }
}

#[test]
fn kafkas_bytes() {
    // v3 (flexible): broker 1, epoch 7, no tagged fields.
    let mut buf = BytesMut::new();
    encode_request(&Request { broker_id: 1, broker_epoch: 7 }, 3, &mut buf);
    assert_eq!(&buf[..], &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0]);
    // v1: an answer with one partition: error 0, [("t", 2)].
    let mut buf = BytesMut::new();
    encode_response(&Answer { error_code: 0, remaining: vec![("t".into(), 2)] }, 1, &mut buf);
    assert_eq!(&buf[..], &[0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2]);
}

#[test]
fn truncated_or_hostile_bytes_are_errors_not_panics() {
    let mut buf = BytesMut::new();
    encode_response(&Answer { error_code: 0, remaining: vec![("orders".into(), 3)] }, 3, &mut buf);
    let whole = buf.freeze();
    for cut in 0..whole.len() {
        let mut b = whole.slice(..cut);
        assert!(decode_response(&mut b, 3).is_err(), "cut at {cut}");
    }
    // A count far beyond the bytes there.
    let mut b = Bytes::from_static(&[0, 0, 0x7f, 0xff, 0xff, 0xff]);
    assert!(decode_response(&mut b, 1).is_err());
    let mut b = Bytes::from_static(&[0, 0, 0, 1, 0, 0]);
    assert!(decode_request(&mut b, 2).is_err());
    let mut b = Bytes::from_static(&[0xff; 12]);
    assert!(decode_request(&mut b, 3).is_err());
}
