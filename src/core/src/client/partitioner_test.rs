//! Tests of `partitioner`.

use super::*;

/// Vectors from Kafka's own unit tests of `Utils.murmur2`.
#[test]
fn matches_kafka_vectors() {
    assert_eq!(murmur2(b"21"), -973932308);
    assert_eq!(murmur2(b"foobar"), -790332482);
    assert_eq!(murmur2(b"a-little-bit-long-string"), -985981536);
    assert_eq!(murmur2(b"a-little-bit-longer-string"), -1486304829);
    assert_eq!(murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971);
    assert_eq!(murmur2(b"abc"), 479470107);
}

#[test]
fn partition_is_in_range() {
    for i in 0..1000u32 {
        let p = partition_for_key(&i.to_be_bytes(), 7);
        assert!((0..7).contains(&p));
    }
}
