//! Consumer-group admin against a real seglog broker started in-process: a
//! group that only stores offsets is listed, described, committed to,
//! fetched and deleted as kafka-consumer-groups does it.

use std::collections::BTreeMap;
use std::time::Duration;

use seglog_broker::{Broker, BrokerConfig};
use seglog_client::admin::{
    commit_offsets, delete_groups, describe_groups, fetch_offsets, list_groups, GroupOffsets,
};
use seglog_client::{ClientConfig, Cluster};
use seglog_core::error::Error;
use seglog_core::store::Store;

fn offsets(items: &[(&str, i32, i64)]) -> GroupOffsets {
    items.iter().map(|(t, p, o)| ((t.to_string(), *p), (*o, format!("m{o}")))).collect()
}

fn code(e: &Error) -> Option<i16> {
    match e {
        Error::Kafka { code, .. } => Some(*code),
        _ => None,
    }
}

#[test]
fn a_group_that_only_stores_offsets_through_its_life() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), &BTreeMap::new(), false).expect("store");
    store.create_topic("t", 2, &BTreeMap::new()).expect("topic");
    let config = BrokerConfig::listening_on("127.0.0.1:0").expect("config");
    let mut broker = Broker::start(store.clone(), config, None).expect("broker");
    let client = ClientConfig {
        request_timeout: Duration::from_secs(10),
        retry_backoff: Duration::from_millis(20),
        ..ClientConfig::default()
    };
    let c = Cluster::connect(&broker.local_addr().to_string(), client).expect("cluster");

    assert!(list_groups(&c).expect("list").is_empty());
    // An unknown group is Dead, with no error (as Kafka answers).
    let d = describe_groups(&c, &["nobody".into()]).remove(0).expect("describe");
    assert_eq!((d.state.as_str(), d.members.len()), ("Dead", 0));
    assert!(fetch_offsets(&c, "nobody", None).expect("fetch").is_empty());

    commit_offsets(&c, "g", &offsets(&[("t", 0, 5), ("t", 1, 7)])).expect("commit");
    assert_eq!(fetch_offsets(&c, "g", None).expect("fetch"), offsets(&[("t", 0, 5), ("t", 1, 7)]));
    let one = fetch_offsets(&c, "g", Some(&[("t".into(), 1), ("t".into(), 0), ("u".into(), 0)]));
    // A partition the group never committed is absent; an unknown topic too (Kafka answers -1).
    match one {
        Ok(o) => assert_eq!(o, offsets(&[("t", 0, 5), ("t", 1, 7)])),
        Err(e) => panic!("fetch: {e}"),
    }
    let listed = list_groups(&c).expect("list");
    assert_eq!(listed.iter().map(|g| g.group_id.as_str()).collect::<Vec<_>>(), ["g"]);
    let d = describe_groups(&c, &["g".into()]).remove(0).expect("describe");
    assert_eq!(d.state, "Empty");
    assert!(d.members.is_empty());

    // A commit to a partition that does not exist names it.
    let e = commit_offsets(&c, "g", &offsets(&[("t", 9, 1)])).expect_err("no such partition");
    assert!(matches!(e, Error::UnknownTopic(ref t) if t == "t"), "{e}");

    // The commits are Kafka's records in the store: an embedded reader sees them.
    let (seen, _) = seglog_core::group::load_committed(&store, "g").expect("load");
    assert_eq!(seen, offsets(&[("t", 0, 5), ("t", 1, 7)]));

    let mut results = delete_groups(&c, &["g".into(), "nobody".into()]);
    results.remove(0).expect("delete g");
    let e = results.remove(0).expect_err("nobody is not a group");
    assert_eq!(code(&e), Some(69), "{e}"); // GROUP_ID_NOT_FOUND
    assert!(e.to_string().contains("\"nobody\""), "{e}");
    assert!(list_groups(&c).expect("list").is_empty());
    assert!(fetch_offsets(&c, "g", None).expect("fetch").is_empty());
    assert!(seglog_core::group::load_groups(&store, Some("g")).expect("load").0.is_empty());
    broker.shutdown(Duration::from_secs(5));
}
