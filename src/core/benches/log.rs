//! Criterion benchmarks of the core's hot paths, without Python: appending
//! batches, reading them back, and the sparse index lookup behind every read.
//! The Python-level figures with baselines are `make bench`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use seglog_core::config::LogConfig;
use seglog_core::index::OffsetIndex;
use seglog_core::log::{AppendOrigin, PartitionLog};
use seglog_core::record::batch::set_base_offset;
use seglog_core::record::{BatchBuilder, Compression, NewRecord};

const RECORDS_PER_BATCH: usize = 100;
const VALUE: [u8; 100] = [7u8; 100];

/// One batch of 100 records of 8-byte keys and 100-byte values, as `make bench` uses.
fn batch() -> Vec<u8> {
    let mut b = BatchBuilder::new(Compression::None);
    for i in 0..RECORDS_PER_BATCH as u64 {
        let key = i.to_be_bytes();
        b.append(&NewRecord {
            timestamp: 1_700_000_000_000,
            key: Some(&key),
            value: Some(&VALUE),
            headers: &[],
        });
    }
    ok(b.build(), "build a batch")
}

/// A benchmark whose set-up fails has nothing to measure: it stops, saying why.
fn ok<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}

fn open(dir: &std::path::Path) -> PartitionLog {
    let config = Arc::new(LogConfig::default());
    ok(PartitionLog::open(&dir.join("bench-0"), "bench", 0, config, 0, None, true), "opening the log").0
}

fn append(c: &mut Criterion) {
    let bytes = batch();
    let mut g = c.benchmark_group("append");
    g.throughput(Throughput::Elements(RECORDS_PER_BATCH as u64));
    for (name, origin) in [("embedded", AppendOrigin::Embedded), ("client (validated)", AppendOrigin::Client)]
    {
        let dir = ok(tempfile::tempdir(), "a temporary directory");
        let log = open(dir.path());
        g.bench_function(name, |b| {
            b.iter_batched(
                || bytes.clone(),
                |buf| ok(log.append_as_leader(buf, origin), "append"),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// A follower's append of what one fetch brings: ~1 MiB of the leader's
/// batches, back to back, starting at the follower's log end.
fn follower(c: &mut Criterion) {
    let one = batch();
    let per_fetch = (1 << 20) / one.len();
    let mut g = c.benchmark_group("append as follower");
    g.throughput(Throughput::Bytes((per_fetch * one.len()) as u64));
    g.sample_size(30);
    let dir = ok(tempfile::tempdir(), "a temporary directory");
    let log = open(dir.path());
    g.bench_function("1 MiB fetch of 12 KiB batches", |b| {
        b.iter_batched(
            || {
                let mut next = log.log_end_offset();
                let mut fetch = Vec::with_capacity(per_fetch * one.len());
                for _ in 0..per_fetch {
                    let start = fetch.len();
                    fetch.extend_from_slice(&one);
                    set_base_offset(&mut fetch[start..], next);
                    next += RECORDS_PER_BATCH as i64;
                }
                fetch
            },
            |fetch| ok(log.append_as_follower(fetch), "follower append"),
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

fn read(c: &mut Criterion) {
    let dir = ok(tempfile::tempdir(), "a temporary directory");
    let log = open(dir.path());
    let bytes = batch();
    for _ in 0..10_000 {
        ok(log.append_as_leader(bytes.clone(), AppendOrigin::Embedded), "append");
    }
    let end = log.log_end_offset();
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Bytes(1 << 20));
    g.bench_function("1 MiB from a random offset", |b| {
        let mut offset = 0i64;
        b.iter(|| {
            offset = (offset + 7_919 * RECORDS_PER_BATCH as i64) % end;
            black_box(ok(log.read(offset, 1 << 20).and_then(|s| s.bytes()), "read"))
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("file range of one offset", |b| {
        let mut offset = 0i64;
        b.iter(|| {
            offset = (offset + 7_919) % end;
            black_box(ok(log.read(offset, 1), "read").range)
        })
    });
    g.finish();
}

fn index_lookup(c: &mut Criterion) {
    let dir = ok(tempfile::tempdir(), "a temporary directory");
    let path = dir.path().join("00000000000000000000.index");
    let mut index = ok(OffsetIndex::open(&path, 0, 10 << 20, true), "index");
    let entries = 100_000i64;
    for i in 0..entries {
        ok(index.append(i * 40, (i * 4096) as u32), "index append");
    }
    c.bench_function("index lookup (100k entries)", |b| {
        let mut target = 0i64;
        b.iter(|| {
            target = (target + 104_729) % (entries * 40);
            black_box(index.lookup(target))
        })
    });
}

criterion_group!(benches, append, follower, read, index_lookup);
criterion_main!(benches);
