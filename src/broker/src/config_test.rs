use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn broker_keys_apply_and_the_rest_go_to_the_store() {
    let c = BrokerConfig::from_map(&map(&[
        ("node.id", "3"),
        ("socket.request.max.bytes", "2048"),
        ("advertised.listeners", "PLAINTEXT://example:9093"),
        ("flush.messages", "1"),
    ]))
    .unwrap();
    assert_eq!(c.node_id, 3);
    assert_eq!(c.socket_request_max_bytes, 2048);
    assert_eq!(c.advertised_listener.as_deref(), Some("example:9093"));
    assert_eq!(c.store.get("flush.messages").map(String::as_str), Some("1"));
}

#[test]
fn bad_values_name_the_key() {
    let e = BrokerConfig::from_map(&map(&[("node.id", "-1")])).unwrap_err().to_string();
    assert!(e.contains("node.id"), "{e}");
    let e = BrokerConfig::from_map(&map(&[("advertised.listeners", "nohost")])).unwrap_err().to_string();
    assert!(e.contains("HOST:PORT"), "{e}");
    let e = BrokerConfig::from_map(&map(&[("replica.selector.class", "com.example.Mine")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("replica.selector.class") && e.contains("RackAwareReplicaSelector"), "{e}");
    let rack_aware = map(&[("replica.selector.class", crate::config::RACK_AWARE_SELECTOR)]);
    assert!(BrokerConfig::from_map(&rack_aware).unwrap().rack_aware_reads);
    let leader = map(&[("replica.selector.class", crate::config::LEADER_SELECTOR)]);
    assert!(!BrokerConfig::from_map(&leader).unwrap().rack_aware_reads);
}

#[test]
fn group_keys_apply_and_session_bounds_must_be_ordered() {
    let c = BrokerConfig::from_map(&map(&[
        ("group.min.session.timeout.ms", "500"),
        ("group.initial.rebalance.delay.ms", "0"),
        ("offsets.topic.num.partitions", "3"),
        ("offsets.retention.minutes", "1"),
    ]))
    .unwrap();
    assert_eq!(
        (c.group_min_session_timeout_ms, c.group_initial_rebalance_delay_ms, c.offsets_topic_num_partitions),
        (500, 0, 3)
    );
    assert_eq!(c.offsets_retention_minutes, 1);
    let e = BrokerConfig::from_map(&map(&[
        ("group.min.session.timeout.ms", "9000"),
        ("group.max.session.timeout.ms", "8000"),
    ]))
    .unwrap_err()
    .to_string();
    assert!(e.contains("group.min.session.timeout.ms"), "{e}");
}

#[test]
fn memory_bounds_take_bytes_or_minus_one_for_none() {
    let c = BrokerConfig::from_map(&map(&[
        ("queued.max.request.bytes", "-1"),
        ("queued.max.response.bytes", "1048576"),
    ]))
    .unwrap();
    assert_eq!((c.queued_max_request_bytes, c.queued_max_response_bytes), (None, Some(1 << 20)));
    let c = BrokerConfig::from_map(&map(&[("queued.max.response.bytes", "-1")])).unwrap();
    assert_eq!(c.queued_max_response_bytes, None);
    for bad in ["0", "-2", "lots"] {
        let e = BrokerConfig::from_map(&map(&[("queued.max.response.bytes", bad)])).unwrap_err().to_string();
        assert!(e.contains("queued.max.response.bytes"), "{e}");
    }
}

#[test]
fn connection_limits_take_kafkas_keys() {
    let c = BrokerConfig::from_map(&map(&[
        ("max.connections", "100"),
        ("max.connections.per.ip", "0"),
        ("max.connections.per.ip.overrides", "127.0.0.1:5, [::1]:6,broker-host:7"),
    ]))
    .unwrap();
    assert_eq!((c.max_connections, c.max_connections_per_ip), (Some(100), 0));
    assert_eq!(
        c.max_connections_per_ip_overrides,
        vec![("127.0.0.1".to_string(), 5), ("::1".to_string(), 6), ("broker-host".to_string(), 7)]
    );
    let d = BrokerConfig::default();
    assert_eq!((d.max_connections, d.max_connections_per_ip), (None, i32::MAX as usize));
    let e = BrokerConfig::from_map(&map(&[("max.connections.per.ip", "0")])).unwrap_err().to_string();
    assert!(e.contains("max.connections.per.ip.overrides"), "{e}");
    for (key, bad) in [
        ("max.connections", "-1"),
        ("max.connections.per.ip.overrides", "host"),
        ("max.connections.per.ip.overrides", "h:x"),
    ] {
        let e = BrokerConfig::from_map(&map(&[(key, bad)])).unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    }
}
