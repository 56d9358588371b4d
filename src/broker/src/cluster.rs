//! The broker's identity in its log directory: Kafka's `meta.properties`
//! (`version`, `broker.id`, `cluster.id`), written once and checked on every
//! start, so a store is never served under another broker's id by mistake.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use base64::Engine;
use seglog_core::error::{Error, Result};

pub const META_PROPERTIES: &str = "meta.properties";

/// A new cluster id in Kafka's form: a random UUID, base64url without padding.
pub fn new_cluster_id() -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The cluster id `meta.properties` in `dir` records, if the file is there;
/// refused when it belongs to another broker id or has a version Kafka does
/// not write (0 in ZooKeeper mode, 1 in KRaft mode).
pub fn load(dir: &Path, node_id: i32) -> Result<Option<String>> {
    let path = dir.join(META_PROPERTIES);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::at(&path)(e)),
    };
    let props = parse(&text);
    let corrupt = |reason: String| Error::CorruptFile { path: path.clone(), reason };
    match props.get("version").map(String::as_str) {
        Some("0") | Some("1") => {}
        Some(v) => return Err(corrupt(format!("unknown version {v} (Kafka writes 0 or 1)"))),
        None => return Err(corrupt("no version line".into())),
    }
    let stored = props.get("broker.id").or_else(|| props.get("node.id"));
    if let Some(stored) = stored {
        if stored.parse::<i32>().ok() != Some(node_id) {
            return Err(Error::InvalidConfig(format!(
                "{}: this store belongs to broker {stored}, not node id {node_id} \
                 (start the broker with --node-id {stored})",
                path.display()
            )));
        }
    }
    props.get("cluster.id").cloned().map(Some).ok_or_else(|| corrupt("no cluster.id line".into()))
}

/// Writes `meta.properties` (version 0, as a ZooKeeper-mode Kafka broker does).
pub fn create(dir: &Path, node_id: i32, cluster_id: &str) -> Result<()> {
    let path = dir.join(META_PROPERTIES);
    let tmp = dir.join(format!("{META_PROPERTIES}.tmp"));
    let text = format!("#\n#written by seglog\nversion=0\nbroker.id={node_id}\ncluster.id={cluster_id}\n");
    let mut f = fs::File::create(&tmp).map_err(Error::at(&tmp))?;
    f.write_all(text.as_bytes()).and_then(|_| f.sync_all()).map_err(Error::at(&tmp))?;
    fs::rename(&tmp, &path).map_err(Error::at(&path))?;
    seglog_core::checkpoint::sync_dir(dir)
}

/// The cluster id of the store at `dir` for broker `node_id`, creating
/// `meta.properties` if the store has none (a broker serving alone).
pub fn load_or_create(dir: &Path, node_id: i32, read_only: bool) -> Result<String> {
    if let Some(id) = load(dir, node_id)? {
        return Ok(id);
    }
    let id = new_cluster_id();
    if !read_only {
        create(dir, node_id, &id)?;
    }
    Ok(id)
}

/// Where a serving broker says so in its store, for other processes: a reader
/// of the store that wants group membership is told to go through it.
pub const BROKER_FILE: &str = ".broker.json";

/// Writes `.broker.json` ({"node_id", "listener", "pid"}) atomically.
pub fn announce(dir: &Path, node_id: i32, listener: &str) -> Result<()> {
    let text = serde_json::json!({ "node_id": node_id, "listener": listener, "pid": std::process::id() });
    let path = dir.join(BROKER_FILE);
    let tmp = dir.join(format!("{BROKER_FILE}.tmp"));
    fs::write(&tmp, text.to_string()).map_err(Error::at(&tmp))?;
    fs::rename(&tmp, &path).map_err(Error::at(&path))
}

/// Removes `.broker.json` when the broker stops (a crash leaves it; readers
/// check that its pid still holds the store's lock).
pub fn withdraw(dir: &Path) {
    let _ = fs::remove_file(dir.join(BROKER_FILE));
}
