//! Tests of `client_quotas`.

use super::*;
use kafka_protocol::messages::alter_client_quotas_request::OpData;

fn op(key: &str, value: f64, remove: bool) -> OpData {
    OpData::default().with_key(StrBytes::from_string(key.into())).with_value(value).with_remove(remove)
}

#[test]
fn alterations_are_checked_and_written_as_kafka_writes_them() {
    let current = BTreeMap::from([("SCRAM-SHA-256".to_string(), "salt=...".to_string())]);
    let next =
        altered(&current, &[op("producer_byte_rate", 1024.0, false), op("request_percentage", 12.5, false)])
            .unwrap();
    assert_eq!(next["producer_byte_rate"], "1024");
    assert_eq!(next["request_percentage"], "12.5");
    assert!(next.contains_key("SCRAM-SHA-256"), "credentials are kept");
    let removed = altered(&next, &[op("producer_byte_rate", 0.0, true)]).unwrap();
    assert!(!removed.contains_key("producer_byte_rate"));
    assert_eq!(
        altered(&current, &[op("producer_byte_rate", 1.5, false)]),
        Err(invalid("Configuration producer_byte_rate must be a LONG value"))
    );
    assert_eq!(
        altered(&current, &[op("retention.ms", 1.0, false)]),
        Err(invalid("Invalid configuration key retention.ms"))
    );
    for bad in [-1.0, 1e19, f64::NAN] {
        assert!(altered(&current, &[op("consumer_byte_rate", bad, false)]).is_err(), "{bad}");
    }
}

fn entity(user: Option<Option<&str>>, client: Option<Option<&str>>) -> QuotaEntity {
    let own = |n: Option<Option<&str>>| n.map(|n| n.map(str::to_string));
    QuotaEntity { user: own(user), client_id: own(client) }
}

#[test]
fn filters_match_as_kafkas_do() {
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
    let all: QuotaConfigs = [
        entity(Some(Some("alice")), None),
        entity(Some(None), None),
        entity(None, Some(Some("app"))),
        entity(Some(Some("alice")), Some(Some("app"))),
    ]
    .into_iter()
    .map(|e| (e, BTreeMap::from([("producer_byte_rate".to_string(), 1.0)])))
    .collect();
    let component = |t: &str, m: i8, name: Option<&str>| {
        ComponentData::default()
            .with_entity_type(StrBytes::from_string(t.into()))
            .with_match_type(m)
            .with_match(name.map(|n| StrBytes::from_string(n.into())))
    };
    let ask = |components: Vec<ComponentData>, strict: bool| {
        let r = DescribeClientQuotasRequest::default().with_components(components).with_strict(strict);
        described(&r, &all).map(|m| m.into_keys().collect::<Vec<_>>())
    };
    assert_eq!(
        ask(vec![component(USER, 0, Some("alice"))], true).unwrap(),
        vec![entity(Some(Some("alice")), None)]
    );
    assert_eq!(ask(vec![component(USER, 0, Some("alice"))], false).unwrap().len(), 2);
    assert_eq!(ask(vec![component(USER, 1, None)], true).unwrap(), vec![entity(Some(None), None)]);
    assert_eq!(ask(vec![component(USER, 2, None)], true).unwrap().len(), 2);
    assert_eq!(ask(vec![], false).unwrap().len(), 4);
    assert_eq!(
        ask(vec![component(CLIENT_ID, 2, None)], true).unwrap(),
        vec![entity(None, Some(Some("app")))]
    );
    assert_eq!(ask(vec![component(USER, 0, Some("a")), component(USER, 2, None)], true).unwrap_err().0, 42);
    assert_eq!(ask(vec![component("topic", 2, None)], true).unwrap_err().0, E::UnsupportedVersion.code());
}
