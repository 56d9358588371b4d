//! Tests of `config`.

use super::*;

fn m(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn defaults_are_kafkas() {
    let c = LogConfig::default();
    assert_eq!(c.segment_bytes, 1073741824);
    assert_eq!(c.segment_index_bytes, 10485760);
    assert_eq!(c.retention_ms, 604800000);
    assert_eq!(c.max_message_bytes, 1048588);
    assert_eq!(c.to_map()["cleanup.policy"], "delete");
}

#[test]
fn overrides_apply_and_round_trip() {
    let c = LogConfig::default()
        .with_overrides(&m(&[("segment.bytes", "1048576"), ("cleanup.policy", "compact,delete")]))
        .unwrap();
    assert_eq!(c.segment_bytes, 1 << 20);
    assert!(c.cleanup_policy.compact && c.cleanup_policy.delete);
    assert_eq!(LogConfig::default().with_overrides(&c.to_map()).unwrap(), c);
}

#[test]
fn bad_keys_and_values_are_refused_by_name() {
    let e = LogConfig::default().with_overrides(&m(&[("segment.byte", "1")])).unwrap_err();
    assert!(e.to_string().contains("segment.byte"));
    let e = LogConfig::default().with_overrides(&m(&[("segment.bytes", "lots")])).unwrap_err();
    assert!(e.to_string().contains("lots"));
    assert!(LogConfig::default().with_overrides(&m(&[("segment.bytes", "3")])).is_err());
    assert!(LogConfig::default().with_overrides(&m(&[("cleanup.policy", "keep")])).is_err());
    assert!(StoreConfig::from_map(&m(&[("auto.create.topics.enable", "maybe")])).is_err());
    assert!(StoreConfig::from_map(&m(&[("retention.ms", "-1")])).is_ok());
}

#[test]
fn throttled_replicas_take_kafkas_forms() {
    let parse = |v: &str| ThrottledReplicas::parse("leader.replication.throttled.replicas", v);
    let all = parse("*").unwrap();
    assert!(all.covers(7, 9));
    let some = parse(" 0:1 , 2:3,").unwrap();
    assert!(some.covers(0, 1) && some.covers(2, 3) && !some.covers(0, 3));
    assert_eq!(some.value, " 0:1 , 2:3,");
    assert!(parse("").unwrap().is_empty());
    for bad in ["x", "0:a", "*,0:1", "0-0", "-1:2", "0:"] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains("must be the literal '*'"), "{bad}: {e}");
    }
    let c = LogConfig::default()
        .with_overrides(&m(&[("follower.replication.throttled.replicas", "0:4")]))
        .unwrap();
    assert!(c.follower_replication_throttled_replicas.covers(0, 4));
    assert_eq!(c.to_map()["follower.replication.throttled.replicas"], "0:4");
    assert_eq!(c.to_map()["leader.replication.throttled.replicas"], "");
}
