//! The client against a real seglog broker started in-process on a store in a
//! temporary directory: what it writes is read back through the broker and
//! through the store itself, and faults (a cut connection, a too-large batch,
//! unknown topics) come back as the core's errors.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use seglog_broker::{Broker, BrokerConfig};
use seglog_client::{
    fetch, fetch_columns, fetch_one, list_offset, list_offsets, ClientConfig, Cluster, FetchOptions,
    FetchPartition, IdempotentProducer, ProducerConfig, EARLIEST, LATEST,
};
use seglog_core::client::consumer_read::read_columns;
use seglog_core::error::Error;
use seglog_core::record::{BatchIter, Compression, NewRecord, TimestampType};
use seglog_core::store::Store;
use tempfile::TempDir;

struct Setup {
    store: Arc<Store>,
    broker: Broker,
    _dir: TempDir,
}

fn start(advertised: Option<String>) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), &BTreeMap::new(), false).expect("store");
    let mut keys = BTreeMap::from([("listeners".to_string(), "127.0.0.1:0".to_string())]);
    if let Some(a) = advertised {
        keys.insert("advertised.listeners".into(), a);
    }
    let config = BrokerConfig::from_map(&keys).expect("config");
    let broker = Broker::start(store.clone(), config, None).expect("broker");
    Setup { store, broker, _dir: dir }
}

fn config() -> ClientConfig {
    ClientConfig {
        request_timeout: Duration::from_secs(10),
        retry_backoff: Duration::from_millis(20),
        ..ClientConfig::default()
    }
}

fn cluster(addr: &str) -> Arc<Cluster> {
    Arc::new(Cluster::connect(addr, config()).expect("cluster"))
}

fn topic(s: &Setup, name: &str, partitions: i32, overrides: &[(&str, &str)]) {
    let o = overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    s.store.create_topic(name, partitions, &o).expect("topic");
}

const H: &[(&[u8], Option<&[u8]>)] = &[(b"trace", Some(b"abc")), (b"empty", None)];

fn records(n: usize, from: usize) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    (from..from + n)
        .map(|i| (format!("k{i}").into_bytes(), format!("value-{i}").into_bytes(), 1_000 * i as i64 + 5))
        .collect()
}

fn new_records(rs: &[(Vec<u8>, Vec<u8>, i64)]) -> Vec<NewRecord<'_>> {
    rs.iter()
        .map(|(k, v, ts)| NewRecord { timestamp: *ts, key: Some(k), value: Some(v), headers: H })
        .collect()
}

#[test]
fn produced_records_fetch_back_with_offsets_keys_headers_and_timestamps() {
    let s = start(None);
    topic(&s, "events", 2, &[]);
    let c = cluster(&s.broker.local_addr().to_string());
    let p = IdempotentProducer::new(
        c.clone(),
        ProducerConfig { compression: Compression::Lz4, ..Default::default() },
    )
    .expect("producer");
    let first = records(3, 0);
    let second = records(2, 3);
    let r1 = p.send("events", 1, &new_records(&first)).expect("send");
    let r2 = p.send("events", 1, &new_records(&second)).expect("send");
    assert_eq!((r1.base_offset, r1.last_offset), (0, 2));
    assert_eq!((r2.base_offset, r2.last_offset), (3, 4));
    assert_eq!(r1.log_start_offset, 0);

    let got = fetch_one(&c, &FetchPartition::new("events", 1, 0), &FetchOptions::default()).expect("fetch");
    assert_eq!((got.high_watermark, got.log_start_offset), (5, 0));
    assert_eq!(got.next_offset().expect("next"), 5);
    let recs = got.records(usize::MAX).expect("records");
    let want: Vec<_> = first.iter().chain(&second).collect();
    assert_eq!(recs.len(), 5);
    for (i, (r, (k, v, ts))) in recs.iter().zip(want).enumerate() {
        assert_eq!(r.offset, i as i64);
        assert_eq!(r.key.as_deref(), Some(k.as_slice()));
        assert_eq!(r.value.as_deref(), Some(v.as_slice()));
        assert_eq!(r.timestamp, *ts);
        assert_eq!(r.timestamp_type, TimestampType::CreateTime);
        assert_eq!(
            r.headers,
            vec![("trace".to_string(), Some(b"abc".to_vec())), ("empty".to_string(), None)]
        );
    }

    // A fetch from inside a batch returns the whole batch; records before the offset are skipped.
    let mid = fetch_one(&c, &FetchPartition::new("events", 1, 1), &FetchOptions::default()).expect("fetch");
    assert_eq!(mid.records(2).expect("records").iter().map(|r| r.offset).collect::<Vec<_>>(), vec![1, 2]);

    // The batches on disk carry the producer id and consecutive sequences, compressed as asked.
    let (pid, epoch) = p.producer_id().expect("pid");
    let bytes =
        s.store.partition("events", 1).expect("log").read(0, 1 << 20).expect("read").bytes().expect("bytes");
    let batches: Vec<_> = BatchIter::new(&bytes, true)
        .map(|b| {
            let b = b.expect("batch");
            (b.producer_id(), b.producer_epoch(), b.base_sequence(), b.compression().expect("codec"))
        })
        .collect();
    assert_eq!(batches, vec![(pid, epoch, 0, Compression::Lz4), (pid, epoch, 3, Compression::Lz4)]);

    // Partition 0 is untouched; past the end is an empty answer, not an error.
    let empty = fetch_one(
        &c,
        &FetchPartition::new("events", 0, 0),
        &FetchOptions { max_wait_ms: 10, ..Default::default() },
    )
    .expect("fetch");
    assert!(empty.records.is_empty() && empty.high_watermark == 0);
}

#[test]
fn one_fetch_reads_several_partitions_and_each_answers_for_itself() {
    let s = start(None);
    topic(&s, "a", 2, &[]);
    let c = cluster(&s.broker.local_addr().to_string());
    let p = IdempotentProducer::new(c.clone(), ProducerConfig::default()).expect("producer");
    p.send("a", 0, &new_records(&records(2, 0))).expect("send");
    p.send("a", 1, &new_records(&records(3, 0))).expect("send");
    let wanted = [
        FetchPartition::new("a", 0, 1),
        FetchPartition::new("a", 1, 0),
        FetchPartition::new("a", 1, 99),
        FetchPartition::new("missing", 0, 0),
        FetchPartition::new("a", 7, 0),
    ];
    let got = fetch(&c, &wanted, &FetchOptions::default());
    let offsets = |i: usize| -> Vec<i64> {
        got[i]
            .as_ref()
            .expect("fetched")
            .records(usize::MAX)
            .expect("records")
            .iter()
            .map(|r| r.offset)
            .collect()
    };
    assert_eq!(offsets(0), vec![1]);
    assert_eq!(offsets(1), vec![0, 1, 2]);
    match &got[2] {
        Err(Error::OffsetOutOfRange { offset: 99, start: 0, end: 3, .. }) => {}
        other => panic!("expected OffsetOutOfRange, got {other:?}"),
    }
    assert!(matches!(&got[3], Err(Error::UnknownTopic(t)) if t == "missing"), "{:?}", got[3]);
    assert!(matches!(&got[4], Err(Error::UnknownPartition { partition: 7, count: 2, .. })), "{:?}", got[4]);
}

#[test]
fn arrow_columns_from_the_broker_equal_the_stores_own() {
    let s = start(None);
    topic(&s, "cols", 1, &[]);
    let c = cluster(&s.broker.local_addr().to_string());
    let p = IdempotentProducer::new(
        c.clone(),
        ProducerConfig { compression: Compression::Zstd, ..Default::default() },
    )
    .expect("producer");
    for i in 0..4 {
        p.send("cols", 0, &new_records(&records(5, i * 5))).expect("send");
    }
    // From inside the second batch, more rows than a single fetch of 1 batch gives.
    let wanted = FetchPartition { max_bytes: 200, ..FetchPartition::new("cols", 0, 7) };
    let (remote, next, last) = fetch_columns(&c, &wanted, 11, &FetchOptions::default()).expect("columns");
    let (local, nexts) = read_columns(&s.store, &[("cols".into(), 0, 7)], 11, 1 << 20).expect("local");
    assert_eq!(remote.rows, 11);
    assert_eq!(next, Some(18));
    assert_eq!(nexts, vec![Some(18)]);
    assert_eq!(last.high_watermark, 20);
    for (name, a, b) in [
        ("key", &remote.key, &local.key),
        ("value", &remote.value, &local.value),
        ("topic", &remote.topic, &local.topic),
        ("header_key", &remote.header_key, &local.header_key),
        ("header_value", &remote.header_value, &local.header_value),
    ] {
        assert_eq!(
            (&a.validity, &a.offsets, &a.data, a.nulls),
            (&b.validity, &b.offsets, &b.data, b.nulls),
            "{name}"
        );
    }
    assert_eq!(remote.partition, local.partition);
    assert_eq!(remote.offset, local.offset);
    assert_eq!(remote.timestamp, local.timestamp);
    assert_eq!(remote.timestamp_type, local.timestamp_type);
    assert_eq!(remote.header_offsets, local.header_offsets);
}

#[test]
fn list_offsets_gives_earliest_latest_and_the_first_offset_at_a_time() {
    let s = start(None);
    topic(&s, "times", 1, &[]);
    let c = cluster(&s.broker.local_addr().to_string());
    let p = IdempotentProducer::new(c.clone(), ProducerConfig::default()).expect("producer");
    p.send("times", 0, &new_records(&records(4, 1))).expect("send"); // timestamps 1005, 2005, 3005, 4005
    assert_eq!(list_offset(&c, "times", 0, EARLIEST).expect("earliest"), Some((0, -1)));
    assert_eq!(list_offset(&c, "times", 0, LATEST).expect("latest"), Some((4, -1)));
    assert_eq!(list_offset(&c, "times", 0, 2_500).expect("for time"), Some((2, 3_005)));
    assert_eq!(list_offset(&c, "times", 0, 9_999).expect("after the last"), None);
    // One request for several times of one partition: each gets its own answer.
    let both = list_offsets(&c, &[("times".into(), 0, LATEST), ("times".into(), 0, EARLIEST)]);
    let both: Vec<_> = both.into_iter().map(|r| r.expect("listed")).collect();
    assert_eq!(both, vec![Some((4, -1)), Some((0, -1))]);
    s.store.delete_records("times", 0, 2).expect("delete records");
    assert_eq!(list_offset(&c, "times", 0, EARLIEST).expect("earliest"), Some((2, -1)));
    assert!(matches!(list_offset(&c, "nope", 0, LATEST), Err(Error::UnknownTopic(_))));
}

#[test]
fn unknown_topics_and_partitions_are_the_cores_errors() {
    let s = start(None);
    topic(&s, "t", 1, &[]);
    let c = cluster(&s.broker.local_addr().to_string());
    let p =
        IdempotentProducer::new(c.clone(), ProducerConfig { allow_auto_create: false, ..Default::default() })
            .expect("producer");
    let rs = records(1, 0);
    assert!(matches!(p.send("absent", 0, &new_records(&rs)), Err(Error::UnknownTopic(t)) if t == "absent"));
    assert!(matches!(
        p.send("t", 3, &new_records(&rs)),
        Err(Error::UnknownPartition { partition: 3, count: 1, .. })
    ));
    assert!(s.store.topic("absent").is_err(), "a fetch or a producer without auto-create made the topic");
    // With auto-create (Kafka's producer default) the broker creates it.
    let auto = IdempotentProducer::new(c.clone(), ProducerConfig::default()).expect("producer");
    assert_eq!(auto.send("fresh", 0, &new_records(&rs)).expect("created").base_offset, 0);
    assert!(c.metadata().topics.contains_key("fresh"));
}

#[test]
fn a_batch_over_max_message_bytes_is_record_too_large_and_spends_no_sequence() {
    let s = start(None);
    topic(&s, "small", 1, &[("max.message.bytes", "1000")]);
    let c = cluster(&s.broker.local_addr().to_string());
    let p = IdempotentProducer::new(c.clone(), ProducerConfig::default()).expect("producer");
    let big = vec![7u8; 5_000];
    let rec = [NewRecord { timestamp: 1, key: None, value: Some(&big), headers: &[] }];
    match p.send("small", 0, &rec) {
        Err(Error::RecordTooLarge { size, max: 1000 }) => assert!(size > 5_000, "{size}"),
        other => panic!("expected RecordTooLarge, got {other:?}"),
    }
    // The refused batch's sequence is free for the next one.
    let ok = p.send("small", 0, &new_records(&records(1, 0))).expect("small record");
    assert_eq!(ok.base_offset, 0);
}

#[test]
fn a_send_larger_than_a_batch_goes_as_several_batches_in_order() {
    let s = start(None);
    topic(&s, "split", 1, &[]);
    let c = cluster(&s.broker.local_addr().to_string());
    let p = IdempotentProducer::new(c, ProducerConfig { max_batch_bytes: 200, ..Default::default() })
        .expect("producer");
    let r = p.send("split", 0, &new_records(&records(10, 0))).expect("send");
    assert_eq!((r.base_offset, r.last_offset), (0, 9));
    let bytes =
        s.store.partition("split", 0).expect("log").read(0, 1 << 20).expect("read").bytes().expect("bytes");
    let seqs: Vec<i32> = BatchIter::new(&bytes, true).map(|b| b.expect("batch").base_sequence()).collect();
    assert!(seqs.len() > 1, "{seqs:?}");
    assert_eq!(seqs[0], 0);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

/// A proxy in front of the broker that drops the broker's answer to the first
/// `cuts` Produce requests and closes the client's connection instead: the
/// batch is stored, the client does not know it.
struct CuttingProxy {
    addr: String,
    cut: Arc<AtomicUsize>,
}

fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).ok()?;
    let mut out = size.to_vec();
    out.extend_from_slice(&body);
    Some(out)
}

impl CuttingProxy {
    fn bind() -> (TcpListener, String) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        (l, addr)
    }

    fn serve(listener: TcpListener, addr: String, target: SocketAddr, cuts: usize) -> CuttingProxy {
        let left = Arc::new(AtomicUsize::new(cuts));
        let cut = Arc::new(AtomicUsize::new(0));
        let (l2, c2) = (left.clone(), cut.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(mut client) = client else { return };
                let (left, cut) = (l2.clone(), c2.clone());
                thread::spawn(move || {
                    let Ok(mut upstream) = TcpStream::connect(target) else { return };
                    while let Some(request) = read_frame(&mut client) {
                        let produce = request.get(4..6) == Some(&[0, 0]);
                        if upstream.write_all(&request).is_err() {
                            return;
                        }
                        let Some(response) = read_frame(&mut upstream) else { return };
                        if produce
                            && left
                                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                                .is_ok()
                        {
                            cut.fetch_add(1, Ordering::SeqCst);
                            return; // both sockets close here
                        }
                        if client.write_all(&response).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        CuttingProxy { addr, cut }
    }
}

#[test]
fn a_batch_retried_after_a_cut_connection_is_stored_once() {
    let (listener, proxy_addr) = CuttingProxy::bind();
    // Metadata hands out the proxy, so every connection goes through it.
    let s = start(Some(proxy_addr.clone()));
    topic(&s, "once", 1, &[]);
    let proxy = CuttingProxy::serve(listener, proxy_addr, s.broker.local_addr(), 1);
    let c = cluster(&proxy.addr);
    let p = IdempotentProducer::new(c.clone(), ProducerConfig::default()).expect("producer");
    let r = p.send("once", 0, &new_records(&records(3, 0))).expect("retried send");
    assert_eq!(proxy.cut.load(Ordering::SeqCst), 1, "the first answer was cut");
    assert_eq!((r.base_offset, r.last_offset), (0, 2), "the retry got the first copy's offsets");
    let r2 = p.send("once", 0, &new_records(&records(1, 3))).expect("next send");
    assert_eq!(r2.base_offset, 3);
    let log = s.store.partition("once", 0).expect("log");
    assert_eq!(log.log_end_offset(), 4, "the retried batch is in the log once");
}

#[test]
fn a_send_whose_retries_all_fail_starts_over_with_a_new_producer_id() {
    let (listener, proxy_addr) = CuttingProxy::bind();
    let s = start(Some(proxy_addr.clone()));
    topic(&s, "lost", 1, &[]);
    let proxy = CuttingProxy::serve(listener, proxy_addr, s.broker.local_addr(), 2);
    let c =
        Arc::new(Cluster::connect(&proxy.addr, ClientConfig { retries: 1, ..config() }).expect("cluster"));
    let p = IdempotentProducer::new(c, ProducerConfig::default()).expect("producer");
    let before = p.producer_id().expect("pid");
    let e = p.send("lost", 0, &new_records(&records(2, 0))).expect_err("every answer cut");
    assert!(matches!(&e, Error::Io(_)), "{e:?}");
    assert_eq!(proxy.cut.load(Ordering::SeqCst), 2);
    // The outcome is unknown (it was stored, once): the next send must not
    // reuse the sequence, nor skip one, so it starts a new producer.
    let r = p.send("lost", 0, &new_records(&records(1, 2))).expect("after the cuts");
    assert_ne!(p.producer_id().expect("pid").0, before.0);
    assert_eq!(r.base_offset, 2, "the unacknowledged batch was stored once, the new one after it");
}
