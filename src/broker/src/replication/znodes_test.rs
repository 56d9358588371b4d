//! Tests of `znodes`.

use super::*;

#[test]
fn kafka_json_round_trips() {
    let ep = |listener: &str, host: &str, port: i32, protocol: &str| Endpoint {
        listener: listener.into(),
        host: host.into(),
        port,
        protocol: protocol.into(),
    };
    let r = BrokerRegistration {
        id: 2,
        endpoints: vec![
            ep("INTERNAL", "127.0.0.1", 9093, "SASL_SSL"),
            ep("PLAINTEXT", "::1", 9094, "PLAINTEXT"),
        ],
        rack: Some("r2".into()),
        epoch: 7,
        seglog: true,
    };
    let json: Value = serde_json::from_slice(&r.to_json(1)).unwrap();
    assert_eq!(json["endpoints"], json!(["INTERNAL://127.0.0.1:9093", "PLAINTEXT://[::1]:9094"]));
    assert_eq!(
        json["listener_security_protocol_map"],
        json!({"INTERNAL": "SASL_SSL", "PLAINTEXT": "PLAINTEXT"})
    );
    assert_eq!((json["host"].as_str(), json["port"].as_i64()), (Some("::1"), Some(9094)));
    let back = BrokerRegistration::from_json(2, &r.to_json(1), 7).unwrap();
    assert_eq!(back, r);
    assert_eq!(back.address("PLAINTEXT").as_deref(), Some("[::1]:9094"));
    assert_eq!(back.address("SSL"), None);
    let kafka = br#"{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://k1:9092"],"jmx_port":-1,"features":{},"host":null,"timestamp":"1","port":-1,"version":5}"#;
    let k = BrokerRegistration::from_json(1, kafka, 3).unwrap();
    assert_eq!((k.address("PLAINTEXT").as_deref(), k.rack, k.seglog), (Some("k1:9092"), None, false));
    // Kafka 3.9 at inter.broker.protocol.version 2.6: version 4, no features.
    let kafka4 = br#"{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://127.0.0.1:40001"],"jmx_port":-1,"port":40001,"host":"127.0.0.1","version":4,"timestamp":"1"}"#;
    let k = BrokerRegistration::from_json(3, kafka4, 9).unwrap();
    assert_eq!((k.address("PLAINTEXT").as_deref(), k.seglog), (Some("127.0.0.1:40001"), false));
    let legacy = br#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,4]}]}"#;
    assert_eq!(legacy_reassignment_from_json(legacy), Some(vec![(("t".to_string(), 0), vec![1, 2, 4])]));
    assert_eq!(legacy_reassignment_from_json(br#"{"partitions":[{"topic":"t"}]}"#), None);
    let note: Value = serde_json::from_slice(&isr_change_to_json(&[("t".into(), 2)])).unwrap();
    assert_eq!(note, json!({"version": 1, "partitions": [{"topic": "t", "partition": 2}]}));

    let state = PartitionState::new(3, 1, 4, vec![1, 2]);
    let text = String::from_utf8(state.to_json()).unwrap();
    assert_eq!(text, r#"{"controller_epoch":3,"leader":1,"version":1,"leader_epoch":4,"isr":[1,2]}"#);
    assert_eq!(PartitionState::from_json(text.as_bytes()), Some(state));

    let a = vec![vec![1, 2, 3], vec![2, 3, 1]];
    assert_eq!(assignment_from_json(&assignment_to_json(&a)), Some(a.clone()));
    assert_eq!(assignment_from_json(br#"{"partitions":{"1":[1]}}"#), None, "partition 0 missing");
    let first = assignment_to_json(&a);
    let grown = vec![vec![1, 2, 3], vec![2, 3, 1], vec![3, 1, 2]];
    let replaced = assignment_replaced(&first, &grown).unwrap();
    assert_eq!(assignment_from_json(&replaced), Some(grown));
    let id = |d: &[u8]| serde_json::from_slice::<Value>(d).unwrap()["topic_id"].clone();
    assert_eq!(id(&replaced), id(&first), "the topic id is kept");
    // Kafka's Uuid.fromString form: 16 bytes in URL-safe base64, no padding.
    use base64::Engine;
    let text = id(&first).as_str().unwrap().to_string();
    assert_eq!(text.len(), 22, "{text}");
    assert_eq!(base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&text).unwrap().len(), 16);

    let mut c = BTreeMap::new();
    c.insert("min.insync.replicas".to_string(), "2".to_string());
    assert_eq!(config_from_json(&config_to_json(&c)), c);
    assert_eq!(controller_from_json(&controller_to_json(5, 1)), Some(5));
    assert_eq!(cluster_id_from_json(&cluster_id_to_json("abc")), Some("abc".into()));
    assert_eq!(producer_id_block_end(&producer_id_block_to_json(1, 1000, 1999)), Some(1999));
}

#[test]
fn reassignments_in_kafkas_topic_json() {
    // As Kafka's controller writes a topic moving partition 0 from [1,2,3] to [1,2,4].
    let kafka = br#"{"partitions":{"0":[1,2,4,3],"1":[2,3,1]},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA","adding_replicas":{"0":[4]},"removing_replicas":{"0":[3]},"version":3}"#;
    let (adding, removing) = reassignment_from_json(kafka);
    assert_eq!(adding, BTreeMap::from([(0, vec![4])]));
    assert_eq!(removing, BTreeMap::from([(0, vec![3])]));
    assert_eq!(reassignment_from_json(&assignment_to_json(&[vec![1]])), Default::default());
    assert_eq!(reassignment_from_json(br#"{"version":1,"partitions":{"0":[1]}}"#), Default::default());
    // Completed: the target alone, the sets emptied, the topic id kept.
    let done =
        reassignment_replaced(kafka, &[vec![1, 2, 4], vec![2, 3, 1]], &BTreeMap::new(), &BTreeMap::new())
            .unwrap();
    assert_eq!(assignment_from_json(&done), Some(vec![vec![1, 2, 4], vec![2, 3, 1]]));
    assert_eq!(reassignment_from_json(&done), Default::default());
    assert_eq!(topic_id_from_json(&done).as_deref(), Some("AAAAAAAAAAAAAAAAAAAAAA"));
}
