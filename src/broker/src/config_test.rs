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
    assert_eq!(c.advertised_listeners[0].address(), "example:9093");
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

#[test]
fn listeners_take_their_protocols_from_the_map_and_are_checked_together() {
    let c = BrokerConfig::from_map(&map(&[
        ("listeners", "INTERNAL://127.0.0.1:0,EXTERNAL://[::1]:9094, PLAINTEXT://:9092"),
        ("listener.security.protocol.map", "INTERNAL:SASL_SSL,EXTERNAL:SSL,PLAINTEXT:PLAINTEXT"),
        ("advertised.listeners", "EXTERNAL://broker.example:9094"),
        ("inter.broker.listener.name", "internal"),
        ("listener.name.internal.ssl.keystore.location", "/k.pem"),
        ("sasl.enabled.mechanisms", "SCRAM-SHA-512"),
    ]))
    .unwrap();
    let names: Vec<_> = c.listeners.iter().map(|l| (l.name.as_str(), l.protocol, l.address())).collect();
    assert_eq!(
        names,
        [
            ("INTERNAL", SecurityProtocol::SaslSsl, "127.0.0.1:0".to_string()),
            ("EXTERNAL", SecurityProtocol::Ssl, "[::1]:9094".to_string()),
            ("PLAINTEXT", SecurityProtocol::Plaintext, ":9092".to_string()),
        ]
    );
    assert_eq!(c.inter_broker_listener, "INTERNAL");
    assert_eq!(c.security.get("sasl.enabled.mechanisms").map(String::as_str), Some("SCRAM-SHA-512"));
    assert!(c.store.is_empty(), "security keys stay the broker's: {:?}", c.store);
    // A bare host:port is a PLAINTEXT listener, as before.
    let c = BrokerConfig::from_map(&map(&[("listeners", "127.0.0.1:0")])).unwrap();
    assert_eq!(c.listeners[0].protocol, SecurityProtocol::Plaintext);

    let refused = |pairs: &[(&str, &str)], needle: &str| {
        let e = BrokerConfig::from_map(&map(pairs)).unwrap_err().to_string();
        assert!(e.contains(needle), "{e}");
    };
    refused(&[("listeners", "SECRET://h:1")], "no security protocol defined for listener SECRET");
    refused(&[("listeners", "SSL://h:1,SSL://h:2")], "different name");
    refused(&[("listeners", "SSL://h:1,PLAINTEXT://h:1")], "both bind h:1");
    refused(&[("listeners", "SSL://h:1"), ("advertised.listeners", "PLAINTEXT://h:1")], "not a listener");
    refused(&[("listeners", "SSL://h:1"), ("advertised.listeners", "SSL://0.0.0.0:1")], "meta-address");
    refused(&[("listener.security.protocol.map", "A:TLS")], "NAME:PROTOCOL");
    // A cluster member needs its inter-broker listener named, as Kafka does.
    refused(
        &[("listeners", "SSL://h:1"), ("zookeeper.connect", "z:2181")],
        "inter.broker.listener.name must be a listener name",
    );
    refused(
        &[("inter.broker.listener.name", "PLAINTEXT"), ("security.inter.broker.protocol", "SSL")],
        "only one of",
    );
    // A single broker's only listener stands in.
    let c = BrokerConfig::from_map(&map(&[("listeners", "SASL_SSL://h:1")])).unwrap();
    assert_eq!(c.inter_broker_listener, "SASL_SSL");
}
