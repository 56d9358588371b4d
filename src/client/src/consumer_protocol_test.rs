use super::*;

#[test]
fn subscriptions_and_assignments_round_trip() {
    let topics = vec!["a".to_string(), "b".to_string()];
    assert_eq!(decode_subscription(&encode_subscription(&topics).unwrap()).unwrap(), topics);
    let parts: Vec<(String, i32)> = vec![("a".into(), 0), ("a".into(), 2), ("b".into(), 1)];
    assert_eq!(decode_assignment(&encode_assignment(&parts).unwrap()).unwrap(), parts);
    assert_eq!(decode_assignment(&Bytes::new()).unwrap(), Vec::<(String, i32)>::new());
}

#[test]
fn a_newer_subscription_version_is_read_and_garbage_is_refused() {
    // Version 1 adds user data and owned partitions after the topics.
    let mut v1 = BytesMut::new();
    v1.put_i16(1);
    ConsumerProtocolSubscription::default().with_topics(vec![str_bytes("t")]).encode(&mut v1, 1).unwrap();
    assert_eq!(decode_subscription(&v1.freeze()).unwrap(), vec!["t".to_string()]);
    assert!(decode_subscription(&Bytes::from_static(&[0, 0, 0, 0, 0, 9, 0, 50])).is_err());
    assert!(decode_subscription(&Bytes::from_static(&[0])).is_err());
}
