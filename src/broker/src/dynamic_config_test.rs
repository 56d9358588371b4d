//! Tests of `dynamic_config`.

use super::*;

fn ops(list: &[(&str, i8, Option<&str>)]) -> Vec<(String, i8, Option<String>)> {
    list.iter().map(|(k, op, v)| (k.to_string(), *op, v.map(str::to_string))).collect()
}

#[test]
fn values_are_kafkas_longs_at_least_zero() {
    assert!(validate(LEADER_RATE, "1000").is_ok());
    let (code, m) = validate(LEADER_RATE, "-1").unwrap_err();
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert_eq!(
        m,
        "Invalid value -1 for configuration leader.replication.throttled.rate: Value must be at least 0"
    );
    let (code, m) = validate(FOLLOWER_RATE, "abc").unwrap_err();
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert!(m.ends_with("Not a number of type LONG"), "{m}");
    let (code, m) = validate("num.partitions", "3").unwrap_err();
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert!(m.contains("Cannot update these configs dynamically: num.partitions"), "{m}");
}

#[test]
fn incremental_ops_set_and_delete_and_refuse_lists() {
    let current: BTreeMap<String, String> = [(LEADER_RATE.to_string(), "5".to_string())].into();
    let next = incremental(&current, &ops(&[(FOLLOWER_RATE, 0, Some("7")), (LEADER_RATE, 1, None)])).unwrap();
    assert_eq!(next, [(FOLLOWER_RATE.to_string(), "7".to_string())].into());
    // Deleting what is not set changes nothing (what --verify does on every broker).
    assert_eq!(incremental(&current, &ops(&[(ALTER_LOG_DIRS_RATE, 1, None)])).unwrap(), current);
    assert_eq!(
        incremental(&current, &ops(&[(LEADER_RATE, 2, Some("1"))])).unwrap_err().0,
        ResponseError::InvalidConfig.code()
    );
    // One bad op refuses the whole change.
    assert!(
        incremental(&current, &ops(&[(FOLLOWER_RATE, 0, Some("7")), (LEADER_RATE, 0, Some("x"))])).is_err()
    );
}

#[test]
fn a_brokers_own_value_wins_over_the_default() {
    let mut e = Entities::new();
    e.insert(DEFAULT_ENTITY.into(), [(FOLLOWER_RATE.to_string(), "3000".to_string())].into());
    e.insert(
        "1".into(),
        [(FOLLOWER_RATE.to_string(), "2000".to_string()), (LEADER_RATE.to_string(), "1000".to_string())]
            .into(),
    );
    assert_eq!(value(&e, 1, FOLLOWER_RATE), 2000);
    assert_eq!(value(&e, 2, FOLLOWER_RATE), 3000);
    assert_eq!(value(&e, 2, LEADER_RATE), i64::MAX);
    let rows = describe(&e, Some(1));
    assert_eq!(rows.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), [FOLLOWER_RATE, LEADER_RATE]);
    assert_eq!(rows[0].source, SOURCE_DYNAMIC_BROKER_CONFIG);
    assert_eq!(rows[0].synonyms.len(), 2);
    assert_eq!(rows[0].synonyms[1].2, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG);
    let defaults = describe(&e, None);
    assert_eq!(defaults.len(), 1);
    assert_eq!(
        (defaults[0].value.as_deref(), defaults[0].source),
        (Some("3000"), SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)
    );
}

#[test]
fn a_single_brokers_configs_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let local = LocalConfigs::open(dir.path(), crate::dynamic_config::LOCAL_FILE).unwrap();
    local.update("0", |_| Some([(LEADER_RATE.to_string(), "10".to_string())].into())).unwrap();
    local.update(DEFAULT_ENTITY, |_| Some([(FOLLOWER_RATE.to_string(), "20".to_string())].into())).unwrap();
    local
        .update(DEFAULT_ENTITY, |c| {
            assert_eq!(
                c.get(FOLLOWER_RATE).map(String::as_str),
                Some("20"),
                "the change sees the current configs"
            );
            Some(BTreeMap::new())
        })
        .unwrap();
    let again = LocalConfigs::open(dir.path(), crate::dynamic_config::LOCAL_FILE).unwrap().get();
    assert_eq!(again.len(), 1);
    assert_eq!(value(&again, 0, LEADER_RATE), 10);
    std::fs::write(dir.path().join(LOCAL_FILE), b"{nope").unwrap();
    let e = LocalConfigs::open(dir.path(), crate::dynamic_config::LOCAL_FILE).err().unwrap().to_string();
    assert!(e.contains(LOCAL_FILE), "{e}");
}
