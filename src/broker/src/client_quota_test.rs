//! Tests of `client_quota`.

use super::*;

const SEC: Duration = Duration::from_secs(1);

fn entity(user: Option<Option<&str>>, client: Option<Option<&str>>) -> QuotaEntity {
    let own = |n: Option<Option<&str>>| n.map(|n| n.map(str::to_string));
    QuotaEntity { user: own(user), client_id: own(client) }
}

fn with(entries: &[(QuotaEntity, f64)]) -> QuotaConfigs {
    entries.iter().map(|(e, v)| (e.clone(), BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), *v)]))).collect()
}

#[test]
fn names_are_sanitized_as_kafka_writes_them_in_paths() {
    assert_eq!(sanitize("alice"), "alice");
    assert_eq!(sanitize("my app*"), "my%20app%2A");
    assert_eq!(sanitize("CN=a,O=b"), "CN%3Da%2CO%3Db");
    assert_eq!(desanitize("my%20app%2A").as_deref(), Some("my app*"));
    assert_eq!(desanitize("a+b").as_deref(), Some("a b"));
    assert_eq!(desanitize("%zz"), None);
    for name in ["ü/ß", "x y", "<default>", "%41"] {
        assert_eq!(desanitize(&sanitize(name)).as_deref(), Some(name));
    }
}

#[test]
fn entity_paths_round_trip() {
    let cases = [
        (entity(Some(Some("alice")), None), "users/alice"),
        (entity(Some(None), None), "users/<default>"),
        (entity(None, Some(Some("my app"))), "clients/my%20app"),
        (entity(Some(Some("alice")), Some(None)), "users/alice/clients/<default>"),
        (entity(Some(None), Some(Some("c"))), "users/<default>/clients/c"),
    ];
    for (e, path) in cases {
        assert_eq!(e.path().as_deref(), Some(path));
        assert_eq!(QuotaEntity::from_path(path), Some(e));
    }
    assert_eq!(entity(None, None).path(), None);
    assert_eq!(QuotaEntity::from_path("topics/t"), None);
    assert_eq!(QuotaEntity::from_path("users/a/clients"), None);
}

#[test]
fn the_most_specific_entity_wins_in_kafkas_order() {
    let order = [
        entity(Some(Some("u")), Some(Some("c"))),
        entity(Some(Some("u")), Some(None)),
        entity(Some(Some("u")), None),
        entity(Some(None), Some(Some("c"))),
        entity(Some(None), Some(None)),
        entity(Some(None), None),
        entity(None, Some(Some("c"))),
        entity(None, Some(None)),
    ];
    // With entities i.. configured, entity i applies.
    for i in 0..order.len() {
        let configs = with(
            &order[i..].iter().enumerate().map(|(j, e)| (e.clone(), (i + j) as f64)).collect::<Vec<_>>(),
        );
        let (bound, _) = quota_for(&configs, PRODUCER_BYTE_RATE, "u", "c").unwrap();
        assert_eq!(bound, i as f64, "level {i}");
    }
    assert_eq!(quota_for(&with(&[]), PRODUCER_BYTE_RATE, "u", "c"), None);
    let other = with(&[(order[0].clone(), 1.0)]);
    assert_eq!(quota_for(&other, PRODUCER_BYTE_RATE, "v", "c"), None, "another user's quota");
    assert_eq!(quota_for(&other, CONSUMER_BYTE_RATE, "u", "c"), None, "another key");
}

#[test]
fn a_quota_naming_one_side_is_shared_by_the_other_sides_names() {
    let user_quota = with(&[(entity(Some(Some("u")), None), 100.0)]);
    let (_, a) = quota_for(&user_quota, PRODUCER_BYTE_RATE, "u", "c1").unwrap();
    let (_, b) = quota_for(&user_quota, PRODUCER_BYTE_RATE, "u", "c2").unwrap();
    assert_eq!(a, b, "one user's client ids share its quota");
    let per_user = with(&[(entity(Some(None), None), 100.0)]);
    let (_, a) = quota_for(&per_user, PRODUCER_BYTE_RATE, "u", "c").unwrap();
    let (_, b) = quota_for(&per_user, PRODUCER_BYTE_RATE, "v", "c").unwrap();
    assert_ne!(a, b, "the default user quota is each user's own");
}

#[test]
fn throttle_time_brings_the_rate_back_to_the_quota() {
    let configs = with(&[(entity(Some(Some("u")), None), 1000.0)]);
    let m = ClientQuotaManager::new(PRODUCER_BYTE_RATE, SEC, 11, None);
    let t0 = Instant::now();
    // 5,000 bytes over a span of ten windows: 500 a second, under 1,000.
    assert_eq!(m.record(&configs, "u", "c", 5_000.0, t0), Duration::ZERO);
    // 20,000 in all: 2,000 a second, twice the quota: wait one more span.
    let wait = m.record(&configs, "u", "c", 15_000.0, t0);
    assert_eq!(wait, Duration::from_secs(10));
    // Another user is not measured at all.
    assert_eq!(m.record(&configs, "v", "c", 1e12, t0), Duration::ZERO);
    // Unrecording brings the first user back under.
    m.unrecord(&configs, "u", "c", 15_000.0, t0);
    assert_eq!(m.record(&configs, "u", "c", 0.0, t0), Duration::ZERO);
}

#[test]
fn the_request_time_quota_waits_at_most_one_window() {
    let configs: QuotaConfigs = BTreeMap::from([(
        entity(Some(None), None),
        BTreeMap::from([(REQUEST_PERCENTAGE.to_string(), 10.0)]),
    )]);
    let m = ClientQuotaManager::new(REQUEST_PERCENTAGE, SEC, 11, Some(SEC));
    assert_eq!(m.record(&configs, "u", "c", 1e6, Instant::now()), SEC);
    assert_eq!(m.most_per_request(&configs, "u", "c"), Some(100.0));
}

#[test]
fn the_mutation_bucket_refuses_strictly_only_once_in_debt() {
    let configs: QuotaConfigs = BTreeMap::from([(
        entity(Some(Some("u")), None),
        BTreeMap::from([(CONTROLLER_MUTATION_RATE.to_string(), 10.0)]),
    )]);
    let q = ControllerMutationQuota::new(SEC, 11);
    let t0 = Instant::now();
    // A full bucket holds 10 × 11 × 1 s = 110 permits; a request may overdraw it.
    assert_eq!(q.record(&configs, "u", "c", 100.0, true, t0), Ok(Duration::ZERO));
    assert_eq!(q.record(&configs, "u", "c", 30.0, true, t0), Ok(Duration::from_secs(2)));
    // In debt by 20: refused strictly, told to wait until the bucket is back at zero.
    assert_eq!(q.record(&configs, "u", "c", 1.0, true, t0), Err(Exhausted(Duration::from_secs(2))));
    assert_eq!(
        q.record(&configs, "u", "c", 1.0, true, t0 + SEC),
        Err(Exhausted(Duration::from_secs_f64(1.0)))
    );
    // Permissively (auto-creation, old versions) the permits are taken anyway.
    assert_eq!(q.record(&configs, "u", "c", 10.0, false, t0 + SEC), Ok(Duration::from_secs(2)));
    assert_eq!(q.record(&configs, "u", "c", 1.0, true, t0 + SEC * 3), Ok(Duration::from_secs_f64(0.1)));
    // Other users have no quota.
    assert_eq!(q.record(&configs, "v", "c", 1e9, true, t0), Ok(Duration::ZERO));
}

#[test]
fn a_vanishing_or_unreadable_quota_never_makes_a_wait_that_cannot_be_told() {
    let tiny: QuotaConfigs = BTreeMap::from([(
        entity(Some(None), None),
        BTreeMap::from([
            (REQUEST_PERCENTAGE.to_string(), 1e-300),
            (CONTROLLER_MUTATION_RATE.to_string(), 1e-300),
        ]),
    )]);
    let m = ClientQuotaManager::new(PRODUCER_BYTE_RATE, SEC, 11, None);
    let bytes = with(&[(entity(Some(None), None), 1e-300)]);
    assert_eq!(m.record(&bytes, "u", "c", 1e6, Instant::now()), LONGEST_WAIT);
    let q = ControllerMutationQuota::new(SEC, 11);
    let t0 = Instant::now();
    assert_eq!(q.record(&tiny, "u", "c", 1e6, false, t0), Ok(LONGEST_WAIT));
    assert_eq!(q.record(&tiny, "u", "c", 1.0, true, t0), Err(Exhausted(LONGEST_WAIT)));
    let stored = BTreeMap::from([
        (PRODUCER_BYTE_RATE.to_string(), "NaN".to_string()),
        (CONSUMER_BYTE_RATE.to_string(), "inf".to_string()),
        (REQUEST_PERCENTAGE.to_string(), "25".to_string()),
    ]);
    assert_eq!(quota_values(&stored), BTreeMap::from([(REQUEST_PERCENTAGE.to_string(), 25.0)]));
}
