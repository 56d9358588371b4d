use super::*;

fn quotas(config: BrokerConfig) -> Arc<ConnectionQuotas> {
    ConnectionQuotas::new(&config, 1000).unwrap()
}

#[test]
fn max_connections_defaults_to_three_quarters_of_the_descriptors() {
    assert_eq!(quotas(BrokerConfig::default()).max("PLAINTEXT"), 750);
    let set = BrokerConfig { max_connections: Some(5), ..BrokerConfig::default() };
    assert_eq!(quotas(set).max("PLAINTEXT"), 5);
    assert_eq!(default_max_connections(1), 1);
}

#[test]
fn slots_run_out_at_max_connections_and_come_back_on_close() {
    let q = quotas(BrokerConfig { max_connections: Some(2), ..BrokerConfig::default() });
    let ip: IpAddr = "10.0.0.1".parse().unwrap();
    let a = q.admit(ip, q.try_slot("PLAINTEXT").unwrap()).unwrap();
    let _b = q.admit(ip, q.try_slot("PLAINTEXT").unwrap()).unwrap();
    assert!(q.try_slot("PLAINTEXT").is_none());
    drop(a);
    assert!(q.try_slot("PLAINTEXT").is_some());
}

#[test]
fn an_address_over_its_limit_is_refused_and_overrides_win() {
    let config = BrokerConfig {
        max_connections_per_ip: 1,
        max_connections_per_ip_overrides: vec![("10.0.0.2".into(), 3), ("10.0.0.3".into(), 0)],
        ..BrokerConfig::default()
    };
    let q = quotas(config);
    let one: IpAddr = "10.0.0.1".parse().unwrap();
    let two: IpAddr = "10.0.0.2".parse().unwrap();
    let three: IpAddr = "10.0.0.3".parse().unwrap();
    let first = q.admit(one, q.try_slot("PLAINTEXT").unwrap()).unwrap();
    assert_eq!(q.admit(one, q.try_slot("PLAINTEXT").unwrap()).err(), Some(OverIpLimit(1)));
    let held: Vec<_> = (0..3).map(|_| q.admit(two, q.try_slot("PLAINTEXT").unwrap()).unwrap()).collect();
    assert_eq!(q.admit(two, q.try_slot("PLAINTEXT").unwrap()).err(), Some(OverIpLimit(3)));
    assert_eq!(q.admit(three, q.try_slot("PLAINTEXT").unwrap()).err(), Some(OverIpLimit(0)));
    let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
    assert_eq!(
        q.admit(mapped, q.try_slot("PLAINTEXT").unwrap()).err(),
        Some(OverIpLimit(1)),
        "one address, however written"
    );
    drop(first);
    let _again = q.admit(one, q.try_slot("PLAINTEXT").unwrap()).unwrap();
    drop(held);
    assert!(q.open.lock().get(&two).is_none(), "a closed address leaves no count behind");
}

#[test]
fn an_override_host_that_does_not_resolve_is_a_config_error() {
    let config = BrokerConfig {
        max_connections_per_ip_overrides: vec![("no-such-host.invalid".into(), 3)],
        ..BrokerConfig::default()
    };
    let e = ConnectionQuotas::new(&config, 1000).err().unwrap().to_string();
    assert!(e.contains("max.connections.per.ip.overrides") && e.contains("no-such-host.invalid"), "{e}");
}

#[test]
fn a_listener_with_its_own_bound_stops_alone() {
    let mut config = BrokerConfig::default();
    let mut map = crate::security::listeners::default_protocol_map();
    map.insert("INTERNAL".into(), crate::security::listeners::SecurityProtocol::Plaintext);
    config.listeners = crate::security::listeners::parse_endpoints(
        "listeners",
        "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
        &map,
    )
    .unwrap();
    config.max_connections = Some(10);
    config.security.insert("listener.name.internal.max.connections".into(), "1".into());
    let q = quotas(config.clone());
    let ip: IpAddr = "10.0.0.1".parse().unwrap();
    assert_eq!((q.max("INTERNAL"), q.max("PLAINTEXT")), (1, 10));
    let held = q.admit(ip, q.try_slot("INTERNAL").unwrap()).unwrap();
    assert!(q.try_slot("INTERNAL").is_none(), "the listener's one slot is taken");
    assert!(q.try_slot("PLAINTEXT").is_some(), "the other listener accepts on");
    drop(held);
    assert!(q.try_slot("internal").is_some());
    config.security.insert("listener.name.nowhere.max.connections".into(), "1".into());
    assert!(ConnectionQuotas::new(&config, 1000).is_err(), "a bound for a listener that is not there");
}
