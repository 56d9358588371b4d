//! DescribeLogDirs: the store's directory is this broker's one log directory;
//! each partition it holds (leader or follower) with the bytes of its
//! segments, and from v4 the file system's total and usable bytes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use seglog_core::store::Store;

use super::{blocking, Reply};
use crate::server::Shared;

/// v0 is below what Kafka 4 serves; v2 is the first flexible version, v3 adds
/// the top-level error code, v4 the directory's total and usable bytes.
pub const VERSIONS: (i16, i16) = (1, 4);

pub async fn handle(shared: &Arc<Shared>, r: DescribeLogDirsRequest) -> Reply {
    let store = shared.store.clone();
    let result = blocking(move || describe(&store, r.topics.as_deref())).await;
    Reply::Message(Box::new(ResponseKind::DescribeLogDirs(
        DescribeLogDirsResponse::default().with_results(vec![result]),
    )))
}

/// The partitions asked for (`None`: every one) that the store holds.
fn describe(
    store: &Store,
    wanted: Option<&[kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic]>,
) -> DescribeLogDirsResult {
    let mut asked: Option<BTreeMap<String, Vec<i32>>> = None;
    if let Some(wanted) = wanted {
        let mut m: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for t in wanted {
            m.entry(t.topic.0.to_string()).or_default().extend(&t.partitions);
        }
        asked = Some(m);
    }
    let names = match &asked {
        Some(m) => m.keys().cloned().collect(),
        None => store.topics().unwrap_or_default(),
    };
    let mut topics = Vec::new();
    for name in names {
        let Ok(topic) = store.topic(&name) else { continue };
        let partitions: Vec<DescribeLogDirsPartition> = topic
            .partitions
            .iter()
            .filter(|log| asked.as_ref().is_none_or(|m| m[&name].contains(&log.partition())))
            .map(|log| {
                DescribeLogDirsPartition::default()
                    .with_partition_index(log.partition())
                    .with_partition_size(log.size_bytes() as i64)
            })
            .collect();
        if !partitions.is_empty() {
            topics.push(
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(name)))
                    .with_partitions(partitions),
            );
        }
    }
    let dir = std::fs::canonicalize(store.path()).unwrap_or_else(|_| store.path().to_path_buf());
    let (total, usable) = space(&dir).unwrap_or((-1, -1));
    DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(total)
        .with_usable_bytes(usable)
}

/// The file system's size and the bytes an unprivileged writer may still use.
fn space(dir: &Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut s = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a NUL-terminated path and a pointer to a statvfs the call fills.
    if unsafe { libc::statvfs(path.as_ptr(), s.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled the struct.
    let s = unsafe { s.assume_init() };
    let block = s.f_frsize as i64;
    Some((s.f_blocks as i64 * block, s.f_bavail as i64 * block))
}
