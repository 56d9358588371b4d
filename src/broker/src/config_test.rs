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
}
