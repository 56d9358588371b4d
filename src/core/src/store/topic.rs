//! Topics: Kafka's name rules, the small JSON file each topic's settings live
//! in, the open topic with its partitions, and what `describe` reports.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine;
use serde::{Deserialize, Serialize};

use crate::config::LogConfig;
use crate::error::{Error, Result};
use crate::log::PartitionLog;

pub const MAX_TOPIC_NAME: usize = 249;
pub use crate::config::MAX_PARTITIONS;

/// Kafka's topic name rules; they also keep every name inside the store directory.
pub fn validate_topic_name(name: &str) -> Result<()> {
    let bad = |reason: &str| Err(Error::InvalidTopic { name: name.to_string(), reason: reason.to_string() });
    if name.is_empty() {
        return bad("the name is empty");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are not allowed");
    }
    if name.len() > MAX_TOPIC_NAME {
        return bad(&format!("longer than {MAX_TOPIC_NAME} characters"));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return bad(&format!(
            "character {c:?} is not allowed (only ASCII letters, digits, '.', '_' and '-')"
        ));
    }
    Ok(())
}

/// One topic's entry in the topics file.
#[derive(Serialize, Deserialize)]
pub(super) struct TopicFile {
    pub(super) name: String,
    pub(super) topic_id: String,
    pub(super) partitions: i32,
    #[serde(default)]
    pub(super) config: BTreeMap<String, String>,
}

impl TopicFile {
    pub(super) fn of(t: &Topic) -> TopicFile {
        TopicFile {
            name: t.name.clone(),
            topic_id: t.id.clone(),
            partitions: t.partitions.len() as i32,
            config: t.overrides.clone(),
        }
    }
}

/// The topics file (`.topics.json`): every topic of the store.
#[derive(Serialize, Deserialize)]
pub(super) struct TopicsFile {
    pub(super) version: i32,
    pub(super) topics: Vec<TopicFile>,
}

/// What a topic administration changes in the topics file.
pub(super) enum TopicChange<'a> {
    Put(TopicFile),
    Remove(&'a str),
    None,
}

pub struct Topic {
    pub name: String,
    /// Kafka's topic id form: a random UUID, base64url without padding.
    pub id: String,
    pub overrides: BTreeMap<String, String>,
    pub config: Arc<LogConfig>,
    pub partitions: Vec<Arc<PartitionLog>>,
}

impl Topic {
    pub fn partition(&self, p: i32) -> Result<&Arc<PartitionLog>> {
        usize::try_from(p).ok().and_then(|i| self.partitions.get(i)).ok_or_else(|| Error::UnknownPartition {
            topic: self.name.clone(),
            partition: p,
            count: self.partitions.len() as i32,
        })
    }
}

#[derive(Debug, Clone)]
pub struct PartitionDescription {
    pub partition: i32,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
    pub size_bytes: u64,
    pub segment_count: usize,
    pub recovery_point: i64,
}

#[derive(Debug, Clone)]
pub struct TopicDescription {
    pub name: String,
    pub topic_id: String,
    pub partitions: Vec<PartitionDescription>,
    pub config: BTreeMap<String, String>,
    pub overrides: BTreeMap<String, String>,
    /// The store's background maintenance's last failure, if any.
    pub last_maintenance_error: Option<String>,
}

pub(super) fn partition_dir(root: &Path, topic: &str, p: i32) -> PathBuf {
    root.join(format!("{topic}-{p}"))
}

pub(super) fn new_topic_id() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}
