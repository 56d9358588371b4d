//! Tests of `store`.

use super::*;
use crate::log::AppendOrigin;
use crate::record::{BatchBuilder, Compression, NewRecord};

fn none() -> BTreeMap<String, String> {
    BTreeMap::new()
}

/// The topics the store's topics file names.
fn names_in_topics_file(path: &Path) -> Vec<String> {
    let Ok(text) = fs::read_to_string(path.join(TOPICS_FILE)) else { return Vec::new() };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["topics"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

fn one(v: &[u8]) -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    b.append(&NewRecord { timestamp: 1, key: None, value: Some(v), headers: &[] });
    b.build().unwrap()
}

#[test]
fn topic_names_follow_kafka() {
    for ok in ["a", "orders.v1", "A_b-C.9", &"x".repeat(249)] {
        validate_topic_name(ok).unwrap();
    }
    for bad in ["", ".", "..", "a/b", "../x", "a b", "é", &"x".repeat(250)] {
        assert!(matches!(validate_topic_name(bad), Err(Error::InvalidTopic { .. })), "{bad:?}");
    }
}

#[test]
fn lifecycle_checkpoints_and_clean_marker() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let t = store.create_topic("orders", 3, &none()).unwrap();
    assert!(matches!(store.create_topic("orders", 1, &none()), Err(Error::TopicExists(_))));
    t.partition(1).unwrap().append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
    assert!(dir.path().join("orders-2").join(PARTITION_METADATA).exists());
    store.close().unwrap();
    assert!(dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
    let rp = fs::read_to_string(dir.path().join(RECOVERY_POINT)).unwrap();
    assert!(rp.contains("orders 1 1\n"), "{rp}");
    drop(store);
    let store = Store::open(dir.path(), &none(), false).unwrap();
    assert!(store.was_clean_shutdown());
    assert!(!dir.path().join(CLEAN_SHUTDOWN_FILE).exists(), "marker removed while running");
    let d = store.describe("orders").unwrap();
    assert_eq!(d.partitions[1].log_end_offset, 1);
    assert_eq!(d.config["segment.bytes"], "1073741824");
    store.delete_topic("orders").unwrap();
    assert!(!dir.path().join("orders-0").exists());
    assert!(store.topics().unwrap().is_empty());
}

/// A log directory Kafka wrote holds partitions no `.topics` file names: opening
/// it must not drop their checkpoint entries (a lost log start offset would bring
/// deleted records back), and Kafka's empty cleaner checkpoint is no error.
#[test]
fn checkpoint_entries_of_partitions_not_opened_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let kafkas = "0\n3\nforeign 0 498\nforeign 1 502\ngone 0 7\n";
    for name in [RECOVERY_POINT, REPLICATION_OFFSET] {
        fs::write(dir.path().join(name), kafkas).unwrap();
    }
    fs::write(dir.path().join(LOG_START_OFFSET), "0\n1\nforeign 0 100\n").unwrap();
    fs::write(dir.path().join(CLEANER_OFFSET), "").unwrap();
    for p in 0..2 {
        fs::create_dir(dir.path().join(format!("foreign-{p}"))).unwrap();
    }
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let t = store.create_topic("mine", 1, &none()).unwrap();
    t.partition(0).unwrap().append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
    store.close().unwrap();
    drop(store);
    let read = |name: &str| checkpoint::read_offsets(&dir.path().join(name)).unwrap();
    let key = |t: &str, p: i32| (t.to_string(), p);
    let rp = read(RECOVERY_POINT);
    assert_eq!((rp[&key("foreign", 0)], rp[&key("foreign", 1)], rp[&key("mine", 0)]), (498, 502, 1));
    assert!(!rp.contains_key(&key("gone", 0)), "no directory, no entry");
    assert_eq!(read(REPLICATION_OFFSET)[&key("foreign", 1)], 502);
    assert_eq!(read(LOG_START_OFFSET)[&key("foreign", 0)], 100);
}

#[test]
fn second_writer_is_refused_with_pid() {
    let dir = tempfile::tempdir().unwrap();
    let _store = Store::open(dir.path(), &none(), false).unwrap();
    match Store::open(dir.path(), &none(), false) {
        Err(Error::StoreLocked { pid, .. }) => assert!(pid.starts_with(&std::process::id().to_string())),
        other => panic!("expected StoreLocked, got {:?}", other.map(|_| ())),
    }
    let ro = Store::open(dir.path(), &none(), true).unwrap();
    assert!(matches!(ro.create_topic("x", 1, &none()), Err(Error::ReadOnly(_))));
}

#[test]
fn auto_create_and_config_errors() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = none();
    cfg.insert("num.partitions".into(), "4".into());
    let store = Store::open(dir.path(), &cfg, false).unwrap();
    assert_eq!(store.topic_or_create("auto").unwrap().partitions.len(), 4);
    let mut bad = none();
    bad.insert("segment.bites".into(), "1".into());
    assert!(matches!(store.create_topic("b", 1, &bad), Err(Error::InvalidConfig(_))));
    assert!(matches!(Store::open(&dir.path().join("z"), &bad, false), Err(Error::InvalidConfig(_))));
    let mut off = none();
    off.insert("auto.create.topics.enable".into(), "false".into());
    let dir2 = tempfile::tempdir().unwrap();
    let store2 = Store::open(dir2.path(), &off, false).unwrap();
    assert!(matches!(store2.topic_or_create("nope"), Err(Error::UnknownTopic(_))));
}

#[test]
fn a_log_that_had_a_failed_write_is_not_marked_clean() {
    let small = crate::small_fs::SmallFs::new(1 << 20).unwrap();
    let path = small.path().join("store");
    let store = Store::open(&path, &none(), false).unwrap();
    let mut cfg = none();
    cfg.insert("segment.index.bytes".into(), "4096".into());
    let p = store.create_topic("t", 1, &cfg).unwrap().partition(0).unwrap().clone();
    p.append_as_leader(one(b"first"), AppendOrigin::Embedded).unwrap();
    small.fill(4096).unwrap();
    // Larger than what is left and what the segment allocated ahead of its end.
    let err = p.append_as_leader(one(&vec![9u8; 256 << 10]), AppendOrigin::Embedded).unwrap_err();
    assert!(
        matches!(&err, Error::IoAt { source, .. } if source.raw_os_error() == Some(libc::ENOSPC)),
        "{err}"
    );
    small.free();
    assert_eq!(p.append_as_leader(one(b"second"), AppendOrigin::Embedded).unwrap().base_offset, 1);
    p.flush().unwrap();
    store.close().unwrap();
    assert!(!path.join(CLEAN_SHUTDOWN_FILE).exists(), "a log with a failed write is not vouched for");
    drop((store, p));
    let store = Store::open(&path, &none(), false).unwrap();
    assert!(!store.was_clean_shutdown());
    let p = store.partition("t", 0).unwrap();
    assert_eq!(p.log_end_offset(), 2);
    assert_eq!(p.size_bytes(), (one(b"first").len() + one(b"second").len()) as u64);
    let bytes = p.read(1, 1 << 20).unwrap().bytes().unwrap();
    let b = crate::record::RecordBatch::parse(&bytes).unwrap();
    assert_eq!(b.base_offset(), 1);
    store.close().unwrap();
}

#[test]
fn checkpoint_writes_from_many_threads_are_serialised() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let t = store.create_topic("t", 2, &none()).unwrap();
    t.partition(0).unwrap().append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
    std::thread::scope(|s| {
        for i in 0..6 {
            let store = &store;
            s.spawn(move || {
                for _ in 0..60 {
                    if i % 2 == 0 {
                        store.flush().unwrap();
                    } else {
                        store.run_maintenance(false, None).unwrap();
                    }
                }
            });
        }
    });
    for name in [RECOVERY_POINT, LOG_START_OFFSET, CLEANER_OFFSET] {
        checkpoint::read_offsets(&dir.path().join(name)).unwrap();
    }
    let rp = checkpoint::read_offsets(&dir.path().join(RECOVERY_POINT)).unwrap();
    assert_eq!(rp[&("t".to_string(), 0)], 1);
    let tmp = fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".tmp"))
        .count();
    assert_eq!(tmp, 0, "no temporaries left");
}

#[test]
fn a_topic_name_of_the_longest_legal_length_works() {
    let dir = tempfile::tempdir().unwrap();
    let name = "x".repeat(MAX_TOPIC_NAME);
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let t = store.create_topic(&name, 2, &none()).unwrap();
    t.partition(1).unwrap().append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
    let mut change = BTreeMap::new();
    change.insert("retention.ms".to_string(), Some("1000".to_string()));
    store.alter_topic_config(&name, &change).unwrap();
    store.close().unwrap();
    drop(store);
    let store = Store::open(dir.path(), &none(), false).unwrap();
    assert_eq!(store.describe(&name).unwrap().partitions[1].log_end_offset, 1);
    store.delete_topic(&name).unwrap();
}

#[test]
fn partitions_are_bounded_and_a_failed_create_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    for bad in [0, -1, MAX_PARTITIONS + 1, 100_000] {
        assert!(matches!(store.create_topic("t", bad, &none()), Err(Error::InvalidArgument(_))), "{bad}");
    }
    let small = crate::small_fs::SmallFs::new(1 << 20).unwrap();
    let path = small.path().join("store");
    let store = Store::open(&path, &none(), false).unwrap();
    let cfg = none();
    small.fill(0).unwrap();
    let err = store.create_topic("t", 20, &cfg).err().unwrap();
    assert!(
        matches!(&err, Error::IoAt { source, .. } if source.raw_os_error() == Some(libc::ENOSPC)),
        "{err}"
    );
    let left: Vec<String> = fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("t-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(!names_in_topics_file(&path).contains(&"t".to_string()));
    assert!(store.topics().unwrap().is_empty());
    small.free();
    store.create_topic("t", 2, &cfg).unwrap();
    store.close().unwrap();
}

#[test]
fn partitions_loaded_at_open_bump_the_append_signal() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    store.create_topic("t", 1, &none()).unwrap();
    store.close().unwrap();
    drop(store);
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let signal = store.append_signal().clone();
    let seen = signal.current();
    let waiter = std::thread::spawn(move || signal.wait_after(seen, std::time::Duration::from_secs(30)));
    store.partition("t", 0).unwrap().append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
    // The waiter returns true only if the signal moved past what it had seen.
    assert!(waiter.join().unwrap(), "an append on a reopened store did not bump the signal");
    assert!(store.append_signal().current() > seen);
}

#[test]
fn internal_topics_refuse_user_writes_but_take_offset_commits() {
    use crate::group::{self, OFFSETS_TOPIC};
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let internal =
        |r: Result<()>| matches!(r, Err(Error::InvalidTopic { ref name, .. }) if name == OFFSETS_TOPIC);
    assert!(internal(store.topic_or_create(OFFSETS_TOPIC).map(|_| ())), "never auto-created by a user");
    let mut commits = group::CommittedOffsets::new();
    commits.insert(("t".to_string(), 0), (7, "m".to_string()));
    group::commit(&store, "g", &commits).unwrap();
    let log = store.partition(OFFSETS_TOPIC, 0).unwrap();
    for origin in [AppendOrigin::Client, AppendOrigin::Embedded] {
        assert!(internal(log.append_as_leader(one(b"junk"), origin).map(|_| ())), "{origin:?}");
    }
    let rec = NewRecord { timestamp: 1, key: Some(b"k"), value: Some(b"v"), headers: &[] };
    assert!(internal(log.append_records(&[rec], Compression::None, false, AppendOrigin::Client).map(|_| ())));
    assert!(internal(store.delete_records(OFFSETS_TOPIC, 0, 1)));
    assert!(internal(store.delete_topic(OFFSETS_TOPIC)));
    assert_eq!(log.log_end_offset(), 1, "only the commit was appended");
    assert_eq!(group::load_committed(&store, "g").unwrap().0, commits);
}

#[test]
fn the_maintenance_thread_keeps_its_last_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg: BTreeMap<String, String> =
        [("log.retention.check.interval.ms", "1"), ("log.cleaner.enable", "true")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let store = Store::open(dir.path(), &cfg, false).unwrap();
    assert_eq!(store.last_maintenance_error(), None);
    let overrides: BTreeMap<String, String> =
        [("cleanup.policy", "compact"), ("segment.bytes", "100"), ("min.cleanable.dirty.ratio", "0")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    // Hold off the cleaner while the log is damaged, so it meets the damage.
    let t = store.create_topic("c", 1, &overrides).unwrap();
    let log = t.partition(0).unwrap().clone();
    let guard = log.lock_maintenance();
    for i in 0..5u8 {
        let mut b = BatchBuilder::new(Compression::None);
        b.append(&NewRecord { timestamp: 1, key: Some(b"k"), value: Some(&[i; 8]), headers: &[] });
        log.append_as_leader(b.build().unwrap(), AppendOrigin::Client).unwrap();
    }
    assert!(log.segment_count() > 1);
    // A flipped bit in a sealed segment's record: only its CRC can tell.
    let seg0 = dir.path().join("c-0").join(crate::segment::file_name(0, ".log"));
    let mut bytes = fs::read(&seg0).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&seg0, &bytes).unwrap();
    drop(guard);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while store.last_maintenance_error().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let err = store.last_maintenance_error().expect("the background thread's failure was dropped");
    assert!(err.contains("retention and cleaning failed"), "{err}");
    // The thread goes on failing (each failure stamped with its time), so the
    // description holds the same failure, if not the same instant.
    let described = store.describe("c").unwrap().last_maintenance_error.expect("described");
    assert!(described.contains("retention and cleaning failed"), "{described}");
}

#[test]
fn a_directory_inotify_cannot_watch_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("not-yet");
    assert!(inotify::DirWatcher::new(&[missing.as_path()]).is_ok(), "a missing directory is no error");
    let file = dir.path().join("file");
    fs::write(&file, b"").unwrap();
    let under_file = file.join("x");
    match inotify::DirWatcher::new(&[dir.path(), under_file.as_path()]) {
        Err(Error::IoAt { path, source }) => {
            assert_eq!(path, under_file);
            assert_eq!(source.raw_os_error(), Some(libc::ENOTDIR));
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a watch that failed was ignored"),
    }
}

#[test]
fn delete_records_and_offset_for_time_speak_kafkas_negative_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    store.create_topic("t", 1, &none()).unwrap();
    let log = store.partition("t", 0).unwrap();
    for _ in 0..3 {
        log.append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
    }
    assert_eq!(log.offset_for_time(-1).unwrap(), Some((3, -1)), "latest");
    assert_eq!(log.offset_for_time(-2).unwrap(), Some((0, -1)), "earliest");
    assert_eq!(log.offset_for_time(-3).unwrap(), Some((0, 1)), "largest timestamp");
    assert!(matches!(log.offset_for_time(-4), Err(Error::InvalidArgument(_))));
    assert_eq!(log.offset_for_time(0).unwrap(), Some((0, 1)), "a time is still a time");
    assert!(matches!(store.delete_records("t", 0, -2), Err(Error::InvalidArgument(_))));
    assert_eq!(log.log_start_offset(), 0);
    store.delete_records("t", 0, -1).unwrap();
    assert_eq!(log.log_start_offset(), 3, "-1 is the high watermark");
    assert_eq!(log.offset_for_time(-2).unwrap(), Some((3, -1)));
}

#[test]
fn producer_ids_are_never_handed_out_twice_across_reopens_and_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let first: Vec<i64> = (0..1500).map(|_| store.allocate_producer_id().unwrap()).collect();
    assert_eq!(first[0], 0);
    assert_eq!(first.last(), Some(&1499), "consecutive across a block boundary");
    let text = fs::read_to_string(dir.path().join(PRODUCER_ID_BLOCK_FILE)).unwrap();
    assert!(text.contains(r#""block_start":"1000""#) && text.contains(r#""block_end":"1999""#), "{text}");
    // A crash (no close: the store is leaked, its thread stopped and its
    // lock released by hand).
    store.stop_maintenance();
    if let Some(f) = store.lock.lock().take() {
        f.unlock().unwrap();
    }
    std::mem::forget(store);
    let store = Store::open(dir.path(), &none(), false).unwrap();
    assert_eq!(store.allocate_producer_id().unwrap(), 2000, "the rest of the claimed block is skipped");
    let reader = Store::open(dir.path(), &none(), true).unwrap();
    assert!(matches!(reader.allocate_producer_id(), Err(Error::ReadOnly(_))));
    store.close().unwrap();
    // A damaged block file is refused rather than risk repeating ids.
    fs::write(dir.path().join(PRODUCER_ID_BLOCK_FILE), b"{").unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    assert!(matches!(store.allocate_producer_id(), Err(Error::CorruptFile { .. })));
}

#[test]
fn producer_id_expiration_is_a_store_key_every_topic_inherits() {
    let dir = tempfile::tempdir().unwrap();
    let config: BTreeMap<String, String> =
        [("producer.id.expiration.ms".to_string(), "5000".to_string())].into_iter().collect();
    let store = Store::open(dir.path(), &config, false).unwrap();
    let t = store.create_topic("t", 1, &none()).unwrap();
    assert_eq!(t.partitions[0].config().producer_id_expiration_ms, 5000);
    assert!(store.create_topic("u", 1, &config).is_err(), "not a topic key, as in Kafka");
}

#[test]
fn create_partitions_grows_a_topic_and_survives_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let overrides: BTreeMap<String, String> = [("retention.ms".to_string(), "1000".to_string())].into();
    let t = store.create_topic("t", 2, &overrides).unwrap();
    t.partition(0).unwrap().append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
    let ro = Store::open(dir.path(), &none(), true).unwrap();
    assert_eq!(ro.topic("t").unwrap().partitions.len(), 2);

    let grown = store.create_partitions("t", 5).unwrap();
    assert_eq!(grown.partitions.len(), 5);
    assert_eq!(grown.id, t.id, "the topic keeps its id");
    assert_eq!(grown.overrides, overrides, "and its overrides");
    assert_eq!(store.topic("t").unwrap().partitions.len(), 5);
    let meta = fs::read_to_string(dir.path().join("t-4").join(PARTITION_METADATA)).unwrap();
    assert!(meta.contains(&t.id), "{meta}");
    // Old partitions are the same logs, data and all; new ones take appends.
    assert!(Arc::ptr_eq(&grown.partitions[0], &t.partitions[0]));
    assert_eq!(store.partition("t", 0).unwrap().log_end_offset(), 1);
    store.partition("t", 4).unwrap().append_as_leader(one(b"y"), AppendOrigin::Embedded).unwrap();
    // A reader sees the partitions the writer added.
    assert_eq!(ro.partition("t", 4).unwrap().partition(), 4);
    assert_eq!(ro.topic("t").unwrap().partitions.len(), 5);

    store.close().unwrap();
    drop(store);
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let d = store.describe("t").unwrap();
    assert_eq!(d.partitions.len(), 5);
    assert_eq!(d.partitions[0].log_end_offset, 1);
    assert_eq!(d.partitions[4].log_end_offset, 1);
    assert_eq!(d.overrides, overrides);
}

#[test]
fn create_partitions_refuses_what_kafka_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    store.create_topic("t", 3, &none()).unwrap();
    for bad in [3, 2, 0, -1, MAX_PARTITIONS + 1] {
        assert!(matches!(store.create_partitions("t", bad), Err(Error::InvalidArgument(_))), "{bad}");
    }
    assert_eq!(store.topic("t").unwrap().partitions.len(), 3);
    assert!(!dir.path().join("t-3").exists());
    assert!(matches!(store.create_partitions("nope", 4), Err(Error::UnknownTopic(_))));
    assert!(matches!(store.create_partitions("__consumer_offsets", 4), Err(Error::InvalidTopic { .. })));
    let ro = Store::open(dir.path(), &none(), true).unwrap();
    assert!(matches!(ro.create_partitions("t", 4), Err(Error::ReadOnly(_))));
}

#[test]
fn a_grow_interrupted_before_the_topic_file_leaves_the_topic_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    store.create_topic("t", 1, &none()).unwrap();
    store.close().unwrap();
    drop(store);
    // What a crash between the new directories and the rename leaves: a
    // partition directory the topic file does not list, with an empty log.
    fs::create_dir_all(dir.path().join("t-1")).unwrap();
    fs::write(dir.path().join("t-1").join("00000000000000000000.log"), b"").unwrap();
    fs::write(dir.path().join("t-1").join(PARTITION_METADATA), b"version: 0\ntopic_id: x\n").unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    assert_eq!(store.topic("t").unwrap().partitions.len(), 1);
    // The next grow sets the stray directory aside for a fresh, empty log.
    store.create_partitions("t", 2).unwrap();
    assert_eq!(store.partition("t", 1).unwrap().log_end_offset(), 0);
    store.partition("t", 1).unwrap().append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
    assert_eq!(store.partition("t", 1).unwrap().log_end_offset(), 1);
}

#[test]
fn a_failed_grow_leaves_nothing_behind() {
    let small = crate::small_fs::SmallFs::new(1 << 20).unwrap();
    let path = small.path().join("store");
    let store = Store::open(&path, &none(), false).unwrap();
    store.create_topic("t", 1, &none()).unwrap();
    small.fill(0).unwrap();
    let err = store.create_partitions("t", 20).err().unwrap();
    assert!(
        matches!(&err, Error::IoAt { source, .. } if source.raw_os_error() == Some(libc::ENOSPC)),
        "{err}"
    );
    let left: Vec<String> = fs::read_dir(&path)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("t-") && n != "t-0")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert_eq!(store.topic("t").unwrap().partitions.len(), 1);
    small.free();
    store.create_partitions("t", 3).unwrap();
    store.close().unwrap();
}

#[test]
fn replicated_high_watermarks_are_checkpointed_and_embedded_ones_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let t = store.create_topic("orders", 2, &none()).unwrap();
    for p in 0..2 {
        for _ in 0..3 {
            t.partition(p).unwrap().append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
        }
    }
    // Partition 1 follows: its high watermark is its leader's.
    let follower = t.partition(1).unwrap();
    follower.truncate_to(0).unwrap();
    follower.append_as_follower(one_at(0, 3)).unwrap();
    follower.append_as_follower(one_at(1, 3)).unwrap();
    assert_eq!(follower.high_watermark(), 0);
    follower.set_high_watermark(1).unwrap();
    store.flush().unwrap();
    let hws = checkpoint::read_offsets(&dir.path().join(REPLICATION_OFFSET)).unwrap();
    assert_eq!(hws.into_iter().collect::<Vec<_>>(), [(("orders".to_string(), 1), 1)]);
    // A crash: the follower's log end is past its checkpointed high watermark.
    drop(t);
    drop(store);
    let store = Store::open(dir.path(), &none(), false).unwrap();
    assert_eq!(store.partition("orders", 0).unwrap().high_watermark(), 3, "embedded: the log end");
    let follower = store.partition("orders", 1).unwrap();
    assert_eq!(follower.log_end_offset(), 2);
    assert_eq!(follower.high_watermark(), 1, "min(checkpointed, log end)");
    assert_eq!(follower.leader_epoch_entries().len(), 1);
    assert_eq!(follower.offset_for_leader_epoch(3), (3, 2));
}

/// One record at `offset`, stamped with leader epoch `epoch`.
fn one_at(offset: i64, epoch: i32) -> Vec<u8> {
    let mut b = one(b"y");
    crate::record::batch::set_base_offset(&mut b, offset);
    crate::record::batch::set_partition_leader_epoch(&mut b, epoch);
    b
}

/// A directory holding data in the way of a new partition is refused, never
/// removed; an empty one is kept aside. A delete renames first, and a store
/// finishes an interrupted one when it opens.
#[test]
fn directories_in_the_way_are_kept_and_deletes_are_finished() {
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("t-0");
    fs::create_dir(&theirs).unwrap();
    fs::write(theirs.join("00000000000000000000.log"), b"someone else's").unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let refused = store.create_topic("t", 1, &none()).err().unwrap().to_string();
    assert!(refused.contains("t-0") && refused.contains("already holds records"), "{refused}");
    assert_eq!(fs::read(theirs.join("00000000000000000000.log")).unwrap(), b"someone else's");
    assert!(store.topic("t").is_err() && !names_in_topics_file(dir.path()).contains(&"t".to_string()));
    let names = || -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    };
    // An empty one (an empty index file is no data) is set aside.
    fs::create_dir(dir.path().join("e-0")).unwrap();
    fs::write(dir.path().join("e-0").join("00000000000000000000.index"), b"").unwrap();
    store.create_topic("e", 1, &none()).unwrap();
    let stray: Vec<String> =
        names().into_iter().filter(|n| n.starts_with("e-0.") && n.ends_with("-stray")).collect();
    assert_eq!(stray.len(), 1, "{:?}", names());
    store.delete_topic("e").unwrap();
    assert!(!names().iter().any(|n| n.starts_with("e-0") && !n.ends_with("-stray")), "{:?}", names());
    store.close().unwrap();
    drop(store);
    // A delete cut short after its rename: finished at the next open.
    let doomed = dir.path().join(format!("u-0.{}-delete", "0123456789abcdef0123456789abcdef"));
    fs::create_dir(&doomed).unwrap();
    fs::create_dir(dir.path().join("v-delete-0")).unwrap(); // a partition of topic "v-delete"
    let store = Store::open(dir.path(), &none(), false).unwrap();
    assert!(!doomed.exists());
    assert!(dir.path().join("v-delete-0").exists() && dir.path().join(&stray[0]).exists() && theirs.exists());
    store.close().unwrap();
}

/// A log directory whose topics this store does not know (Kafka's, whose
/// topics live in ZooKeeper): a create naming the same topic id adopts each
/// partition as it is, with its checkpoint entries; another id, or none, is
/// refused and the directory left alone.
/// A cluster topic without a topic id (a Kafka controller below
/// inter.broker.protocol.version 2.8 gives none, its brokers write no
/// `partition.metadata`): a directory with records and no
/// `partition.metadata` is adopted and given one; one naming an id is not.
#[test]
fn a_cluster_topic_without_an_id_adopts_directories_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let t = store.create_topic("t", 2, &none()).unwrap();
    for v in [b"a", b"b", b"c"] {
        t.partition(1).unwrap().append_as_leader(one(v), AppendOrigin::Embedded).unwrap();
    }
    t.partition(0).unwrap().append_as_leader(one(b"x"), AppendOrigin::Embedded).unwrap();
    store.close().unwrap();
    drop((t, store));
    fs::remove_file(dir.path().join(TOPICS_FILE)).unwrap();
    fs::remove_file(dir.path().join("t-1").join("partition.metadata")).unwrap();

    let store = Store::open(dir.path(), &none(), false).unwrap();
    // Partition 0 still names its old id: refused, and nothing is made.
    let refused = store.create_cluster_topic("t", 2, &none(), None).err().unwrap().to_string();
    assert!(refused.contains("already holds records of topic id"), "{refused}");
    assert!(store.topics().unwrap().is_empty());
    fs::remove_dir_all(dir.path().join("t-0")).unwrap();
    // A plain create of a new id does not take a directory it cannot tell is its own.
    let refused = store.create_topic("t", 2, &none()).err().unwrap().to_string();
    assert!(refused.contains("without a partition.metadata"), "{refused}");
    let t = store.create_cluster_topic("t", 2, &none(), None).unwrap();
    let p1 = t.partition(1).unwrap();
    assert_eq!(p1.log_end_offset(), 3);
    let meta = fs::read_to_string(dir.path().join("t-1").join("partition.metadata")).unwrap();
    assert_eq!(meta, format!("version: 0\ntopic_id: {}\n", t.id));
    assert_eq!(t.partition(0).unwrap().log_end_offset(), 0);
    store.close().unwrap();
}

#[test]
fn partitions_of_the_same_topic_id_are_adopted() {
    let dir = tempfile::tempdir().unwrap();
    let id = "j-GCAYM2RXuWLkjhF-cUlg";
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let t = store.create_topic_with_id("t", 2, &none(), Some(id)).unwrap();
    assert_eq!(t.id, id);
    for v in [b"a", b"b", b"c"] {
        t.partition(1).unwrap().append_as_leader(one(v), AppendOrigin::Embedded).unwrap();
    }
    store.delete_records("t", 1, 1).unwrap();
    store.close().unwrap();
    drop((t, store));
    fs::remove_file(dir.path().join(TOPICS_FILE)).unwrap();

    let store = Store::open(dir.path(), &none(), false).unwrap();
    assert!(store.topics().unwrap().is_empty());
    for other in [None, Some("AAAAAAAAAAAAAAAAAAAAAA")] {
        let refused = store.create_topic_with_id("t", 2, &none(), other).err().unwrap().to_string();
        assert!(refused.contains("already holds records of topic id"), "{refused}");
    }
    let t = store.create_topic_with_id("t", 2, &none(), Some(id)).unwrap();
    let p1 = t.partition(1).unwrap();
    assert_eq!((p1.log_start_offset(), p1.log_end_offset()), (1, 3));
    assert_eq!(t.partition(0).unwrap().log_end_offset(), 0);
    assert_eq!(p1.append_as_leader(one(b"d"), AppendOrigin::Embedded).unwrap().base_offset, 3);
    store.close().unwrap();
    drop((t, store));
    // Adopted, the partitions are the store's: named in its topics file, and
    // opened with it.
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let t = store.topic("t").unwrap();
    assert_eq!((t.id.as_str(), t.partition(1).unwrap().log_end_offset()), (id, 4));
    assert_eq!(names_in_topics_file(dir.path()), ["t"]);
    store.close().unwrap();
}

/// An older store kept a JSON file per topic in `.topics/` (a directory a
/// Kafka broker refuses to start beside); opened for writing, its topics move
/// into the topics file and the directory goes.
#[test]
fn per_topic_files_of_older_stores_are_folded_into_the_topics_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let cfg: BTreeMap<String, String> = [("retention.ms".to_string(), "60000".to_string())].into();
    let t = store.create_topic("old", 2, &cfg).unwrap();
    t.partition(0).unwrap().append_as_leader(one(b"kept"), AppendOrigin::Embedded).unwrap();
    let id = t.id.clone();
    store.close().unwrap();
    drop((t, store));
    let legacy = dir.path().join(LEGACY_TOPICS_DIR);
    fs::create_dir(&legacy).unwrap();
    let entry = serde_json::json!({"name": "old", "topic_id": id, "partitions": 2, "config": {"retention.ms": "60000"}});
    fs::write(legacy.join("old.json"), entry.to_string()).unwrap();
    fs::remove_file(dir.path().join(TOPICS_FILE)).unwrap();

    let reader = Store::open(dir.path(), &none(), true).unwrap();
    assert_eq!(reader.topic("old").unwrap().partitions.len(), 2);
    drop(reader);
    let store = Store::open(dir.path(), &none(), false).unwrap();
    let t = store.topic("old").unwrap();
    assert_eq!((t.id.as_str(), t.partitions.len()), (id.as_str(), 2));
    assert_eq!(t.overrides, cfg);
    assert_eq!(t.partition(0).unwrap().log_end_offset(), 1);
    assert!(!legacy.exists());
    assert_eq!(names_in_topics_file(dir.path()), ["old"]);
    store.close().unwrap();
}
