//! Tests of `configs`.

use super::*;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn op(key: &str, op: i8, value: Option<&str>) -> (String, i8, Option<String>) {
    (key.to_string(), op, value.map(str::to_string))
}

#[test]
fn every_topic_key_has_a_synonym_and_a_type() {
    for key in TOPIC_KEYS {
        assert!(topic_key(key).is_some(), "{key}");
    }
    let key = |k: &str| topic_key(k).map(|t| (t.synonym, t.config_type));
    assert_eq!(key("retention.ms"), Some((Some("log.retention.ms"), TYPE_LONG)));
    assert_eq!(key("max.message.bytes"), Some((Some("message.max.bytes"), TYPE_INT)));
    assert_eq!(key("leader.replication.throttled.replicas"), Some((None, TYPE_LIST)));
    assert_eq!(topic_key("nope"), None);
}

#[test]
fn set_and_delete_change_overrides() {
    let overrides = map(&[("retention.ms", "1000"), ("segment.bytes", "2048")]);
    let changes = incremental_changes(
        &overrides,
        &BTreeMap::new(),
        &[op("retention.ms", 0, Some("5")), op("segment.bytes", 1, None), op("flush.ms", 0, Some("9"))],
    )
    .unwrap();
    assert_eq!(applied(&overrides, &changes), map(&[("retention.ms", "5"), ("flush.ms", "9")]));
}

#[test]
fn append_and_subtract_work_on_lists_from_the_default() {
    let defaults = map(&[("cleanup.policy", "delete")]);
    let none = BTreeMap::new();
    let c = incremental_changes(&none, &defaults, &[op("cleanup.policy", 2, Some("compact"))]).unwrap();
    assert_eq!(c["cleanup.policy"].as_deref(), Some("delete,compact"), "append to the default");
    let c = incremental_changes(&none, &defaults, &[op("cleanup.policy", 2, Some("delete"))]).unwrap();
    assert_eq!(c["cleanup.policy"].as_deref(), Some("delete"), "no duplicates");
    let overrides = map(&[("cleanup.policy", "compact,delete")]);
    let c = incremental_changes(&overrides, &defaults, &[op("cleanup.policy", 3, Some("delete"))]).unwrap();
    assert_eq!(c["cleanup.policy"].as_deref(), Some("compact"), "subtract from the override");
    // Ops on one key in one request build on each other.
    let c = incremental_changes(
        &none,
        &defaults,
        &[op("cleanup.policy", 2, Some("compact")), op("cleanup.policy", 3, Some("delete"))],
    )
    .unwrap();
    assert_eq!(c["cleanup.policy"].as_deref(), Some("compact"));
}

#[test]
fn append_to_a_non_list_key_or_an_unknown_op_is_refused() {
    let none = BTreeMap::new();
    let (code, msg) = incremental_changes(&none, &none, &[op("retention.ms", 2, Some("1"))]).unwrap_err();
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert!(msg.contains("retention.ms") && msg.contains("LIST"), "{msg}");
    let (code, _) = incremental_changes(&none, &none, &[op("nope", 3, Some("1"))]).unwrap_err();
    assert_eq!(code, ResponseError::InvalidConfig.code());
    let (code, _) = incremental_changes(&none, &none, &[op("retention.ms", 7, Some("1"))]).unwrap_err();
    assert_eq!(code, ResponseError::InvalidRequest.code());
}

#[test]
fn legacy_alter_replaces_the_whole_override_set() {
    let overrides = map(&[("retention.ms", "1000"), ("segment.bytes", "2048")]);
    let wanted = map(&[("retention.ms", "7"), ("flush.ms", "1")]);
    let changes = replacement_changes(&overrides, &wanted);
    assert_eq!(changes["segment.bytes"], None);
    assert_eq!(applied(&overrides, &changes), wanted);
    assert_eq!(applied(&overrides, &replacement_changes(&overrides, &BTreeMap::new())), BTreeMap::new());
}

#[test]
fn topic_sources_follow_kafkas_precedence() {
    let mut store = StoreConfig::default();
    store.topic_defaults.set("segment.bytes", "4096").unwrap();
    let overrides = map(&[("retention.ms", "1000")]);
    let effective = store.topic_defaults.with_overrides(&overrides).unwrap();
    let rows = describe_topic(&effective, &overrides, &store);
    assert_eq!(rows.len(), TOPIC_KEYS.len());
    let row = |k: &str| rows.iter().find(|r| r.name == k).unwrap().clone();
    let r = row("retention.ms");
    assert_eq!((r.value.as_deref(), r.source), (Some("1000"), SOURCE_TOPIC_CONFIG));
    assert_eq!(r.synonyms[0], ("retention.ms".into(), Some("1000".into()), SOURCE_TOPIC_CONFIG));
    // log.retention.ms defaults to null in Kafka's broker config: no DEFAULT_CONFIG synonym.
    assert_eq!(r.synonyms.len(), 1);
    let m = row("max.message.bytes");
    assert_eq!(m.synonyms, [("message.max.bytes".into(), Some("1048588".into()), SOURCE_DEFAULT_CONFIG)]);
    let s = row("segment.bytes");
    assert_eq!((s.value.as_deref(), s.source), (Some("4096"), SOURCE_STATIC_BROKER_CONFIG));
    assert_eq!(s.synonyms.len(), 2);
    let f = row("flush.messages");
    assert_eq!((f.source, f.read_only, f.synonyms.len()), (SOURCE_DEFAULT_CONFIG, false, 1));
}

#[test]
fn broker_rows_are_read_only_and_name_the_node() {
    let broker = BrokerConfig { node_id: 3, ..BrokerConfig::default() };
    let store = StoreConfig { num_partitions: 4, ..StoreConfig::default() };
    let rows = describe_broker(&broker, &store);
    let row = |k: &str| rows.iter().find(|r| r.name == k).unwrap().clone();
    assert!(rows.iter().all(|r| r.read_only));
    assert_eq!(
        (row("node.id").value.as_deref(), row("node.id").source),
        (Some("3"), SOURCE_STATIC_BROKER_CONFIG)
    );
    assert_eq!((row("num.partitions").value.as_deref(), row("num.partitions").source), (Some("4"), 4));
    assert_eq!(row("log.retention.ms").source, SOURCE_DEFAULT_CONFIG);
    assert_eq!(row("advertised.listeners").value, None);
    assert_eq!(broker_resource("3", 3), Ok(true));
    assert_eq!(broker_resource("", 3), Ok(false));
    assert_eq!(broker_resource("4", 3).unwrap_err().0, ResponseError::InvalidRequest.code());
    assert_eq!(broker_resource("x", 3).unwrap_err().0, ResponseError::InvalidRequest.code());
}
