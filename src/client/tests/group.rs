//! Group members against a real seglog broker in-process: partitions split
//! by the leader's assignor, rebalances on leave and on a missed session,
//! commits read back, and a static member that comes back keeping its
//! generation. Each member polls from its own thread, as a consumer's poll
//! loop would (a rebalance waits for every member to rejoin).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use seglog_broker::{Broker, BrokerConfig};
use seglog_client::{Assignment, ClientConfig, Cluster, GroupMember, MemberConfig};
use seglog_core::store::Store;
use tempfile::TempDir;

struct Setup {
    _store: Arc<Store>,
    broker: Broker,
    _dir: TempDir,
}

fn start(topics: &[(&str, i32)]) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), &BTreeMap::new(), false).expect("store");
    for (t, n) in topics {
        store.create_topic(t, *n, &BTreeMap::new()).expect("topic");
    }
    let config = BrokerConfig {
        group_initial_rebalance_delay_ms: 0,
        group_min_session_timeout_ms: 500,
        ..BrokerConfig::listening_on("127.0.0.1:0").expect("config")
    };
    let broker = Broker::start(store.clone(), config, None).expect("broker");
    Setup { _store: store, broker, _dir: dir }
}

fn cluster(s: &Setup) -> Arc<Cluster> {
    let config = ClientConfig {
        request_timeout: Duration::from_secs(10),
        retry_backoff: Duration::from_millis(20),
        ..ClientConfig::default()
    };
    Arc::new(Cluster::connect(&s.broker.local_addr().to_string(), config).expect("cluster"))
}

fn config(group: &str, topics: &[&str], assignor: &str, instance: Option<&str>) -> MemberConfig {
    MemberConfig {
        group_id: group.into(),
        topics: topics.iter().map(|t| t.to_string()).collect(),
        instance_id: instance.map(str::to_string),
        session_timeout_ms: 1_000,
        rebalance_timeout_ms: 3_000,
        heartbeat_interval_ms: 100,
        assignors: vec![assignor.into()],
    }
}

/// A member polling its assignment every 20 ms from its own thread. The
/// latest assignment keeps `changed` for its whole generation: the poll that
/// saw the change may be followed by others before the test looks.
struct Polled {
    member: Arc<GroupMember>,
    latest: Arc<Mutex<Option<Assignment>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Polled {
    fn new(s: &Setup, config: MemberConfig) -> Polled {
        let member = Arc::new(GroupMember::new(cluster(s), config).expect("member"));
        let latest = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, l, st) = (member.clone(), latest.clone(), stop.clone());
        let thread = thread::spawn(move || {
            while !st.load(Ordering::Acquire) {
                if let Ok(mut a) = m.poll_assignment() {
                    let mut latest = l.lock().unwrap();
                    if latest.as_ref().is_some_and(|p: &Assignment| p.generation == a.generation && p.changed)
                    {
                        a.changed = true;
                    }
                    *latest = Some(a);
                }
                thread::sleep(Duration::from_millis(20));
            }
        });
        Polled { member, latest, stop, thread: Some(thread) }
    }

    fn assignment(&self) -> Option<Assignment> {
        self.latest.lock().unwrap().clone()
    }

    /// Stops polling (the member stays in the group while it heart-beats).
    fn stop_polling(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.join().expect("poller");
        }
    }
}

impl Drop for Polled {
    fn drop(&mut self) {
        self.stop_polling();
    }
}

/// Waits until the members' latest assignments are of one generation and
/// `check` holds for them.
fn settle(members: &[&Polled], check: impl Fn(&[Assignment]) -> bool) -> Vec<Assignment> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now: Option<Vec<Assignment>> = members.iter().map(|m| m.assignment()).collect();
        if let Some(now) = now {
            let generations: BTreeSet<i32> = now.iter().map(|a| a.generation).collect();
            if generations.len() == 1 && check(&now) {
                return now;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the group did not settle: {:?}",
            members.iter().map(|m| m.assignment()).collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(20));
    }
}

fn all(topic: &str, n: i32) -> Vec<(String, i32)> {
    (0..n).map(|p| (topic.to_string(), p)).collect()
}

/// Every partition of `expected` assigned exactly once.
fn covers(assignments: &[Assignment], expected: &[(String, i32)]) -> bool {
    let mut got: Vec<(String, i32)> = assignments.iter().flat_map(|a| a.partitions.clone()).collect();
    got.sort();
    got == expected
}

#[test]
fn two_range_members_split_a_topic_and_the_one_left_gets_all_after_a_leave() {
    let s = start(&[("t", 4)]);
    let a = Polled::new(&s, config("g", &["t"], "range", None));
    settle(&[&a], |x| x[0].partitions == all("t", 4));
    let b = Polled::new(&s, config("g", &["t"], "range", None));
    let split = settle(&[&a, &b], |x| x.iter().all(|y| y.partitions.len() == 2) && covers(x, &all("t", 4)));
    // Range hands out consecutive partitions.
    for x in &split {
        assert_eq!(x.partitions[1].1, x.partitions[0].1 + 1, "{split:?}");
    }
    assert_eq!(a.member.protocol().as_deref(), Some("range"));
    assert_eq!(usize::from(a.member.is_leader()) + usize::from(b.member.is_leader()), 1);

    let mut b = b;
    b.stop_polling();
    b.member.leave().expect("leave");
    let started = Instant::now();
    let after = settle(&[&a], |x| x[0].partitions == all("t", 4));
    assert!(after[0].generation > split[0].generation);
    assert!(after[0].changed);
    // A leave rebalances at once, not after the session timeout.
    assert!(started.elapsed() < Duration::from_millis(900), "{:?}", started.elapsed());
}

#[test]
fn roundrobin_deals_partitions_of_several_topics_in_turn() {
    let s = start(&[("t", 3), ("u", 2)]);
    let a = Polled::new(&s, config("rr", &["t", "u"], "roundrobin", None));
    let b = Polled::new(&s, config("rr", &["t", "u"], "roundrobin", None));
    let mut expected = all("t", 3);
    expected.extend(all("u", 2));
    let split = settle(&[&a, &b], |x| x.iter().all(|y| !y.partitions.is_empty()) && covers(x, &expected));
    let sizes: BTreeSet<usize> = split.iter().map(|x| x.partitions.len()).collect();
    assert_eq!(sizes, BTreeSet::from([2, 3]));
    assert_eq!(b.member.protocol().as_deref(), Some("roundrobin"));
    // The member sorted first gets t-0, t-2 and u-1; the other t-1 and u-0.
    let first = split.iter().find(|x| x.partitions.len() == 3).unwrap();
    assert_eq!(first.partitions, vec![("t".into(), 0), ("t".into(), 2), ("u".into(), 1)]);
}

#[test]
fn a_member_that_stops_heart_beating_is_dropped_after_its_session() {
    let s = start(&[("t", 4)]);
    let a = Polled::new(&s, config("hb", &["t"], "range", None));
    let mut b = Polled::new(&s, config("hb", &["t"], "range", None));
    let split = settle(&[&a, &b], |x| x.iter().all(|y| y.partitions.len() == 2));
    b.stop_polling();
    b.member.close(); // no LeaveGroup: only the session timeout tells the coordinator
    let started = Instant::now();
    let after = settle(&[&a], |x| x[0].partitions == all("t", 4));
    assert!(after[0].generation > split[0].generation);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(500), "rebalanced after {waited:?}, before the session timeout");
}

#[test]
fn commits_are_fetched_back_and_stale_generations_refused() {
    let s = start(&[("t", 2)]);
    let c = cluster(&s);
    let member = GroupMember::join(c, config("commits", &["t"], "range", None)).expect("join");
    let a = member.poll_assignment().expect("poll");
    assert_eq!(a.partitions, all("t", 2));
    assert!(!a.changed, "the join already answered it? {a:?}");
    member.commit(&[("t".into(), 0, 5, "meta".into()), ("t".into(), 1, 7, String::new())]).expect("commit");
    let got = member.committed(None).expect("committed");
    assert_eq!(got.len(), 2);
    assert_eq!(got[&("t".to_string(), 0)], (5, "meta".to_string()));
    assert_eq!(got[&("t".to_string(), 1)].0, 7);
    let one = member.committed(Some(&[("t".into(), 1)])).expect("committed");
    assert_eq!(one.len(), 1);
    assert_eq!(one[&("t".to_string(), 1)].0, 7);
    member.leave().expect("leave");
    // A left member cannot commit; a plain offset store (no member) can read.
    assert!(member.commit(&[("t".into(), 0, 6, String::new())]).is_err());
}

#[test]
fn a_static_member_that_comes_back_keeps_its_generation_and_partitions() {
    let s = start(&[("t", 4)]);
    let mut a = Polled::new(&s, config("static", &["t"], "range", Some("instance-a")));
    let b = Polled::new(&s, config("static", &["t"], "range", None));
    let split = settle(&[&a, &b], |x| x.iter().all(|y| y.partitions.len() == 2));
    let a_parts = a.assignment().unwrap().partitions;
    a.stop_polling();
    a.member.close(); // a restart: no LeaveGroup
    drop(a);
    let a2 = Polled::new(&s, config("static", &["t"], "range", Some("instance-a")));
    let back = settle(&[&a2, &b], |x| x.iter().all(|y| y.partitions.len() == 2));
    assert_eq!(back[0].generation, split[0].generation, "a static rejoin rebalanced");
    assert_eq!(a2.assignment().unwrap().partitions, a_parts);
}
