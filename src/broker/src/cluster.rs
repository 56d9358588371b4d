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
fn new_cluster_id() -> String {
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

/// The cluster id of the store at `dir` for broker `node_id`, creating
/// `meta.properties` if the store has none.
pub fn load_or_create(dir: &Path, node_id: i32, read_only: bool) -> Result<String> {
    let path = dir.join(META_PROPERTIES);
    match fs::read_to_string(&path) {
        Ok(text) => {
            let props = parse(&text);
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
            props
                .get("cluster.id")
                .cloned()
                .ok_or_else(|| Error::CorruptFile { path: path.clone(), reason: "no cluster.id line".into() })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !read_only => {
            let id = new_cluster_id();
            let tmp = dir.join(format!("{META_PROPERTIES}.tmp"));
            let text = format!("#\n#written by seglog\nversion=0\nbroker.id={node_id}\ncluster.id={id}\n");
            let mut f = fs::File::create(&tmp).map_err(Error::at(&tmp))?;
            f.write_all(text.as_bytes()).and_then(|_| f.sync_all()).map_err(Error::at(&tmp))?;
            fs::rename(&tmp, &path).map_err(Error::at(&path))?;
            seglog_core::checkpoint::sync_dir(dir)?;
            Ok(id)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(new_cluster_id()),
        Err(e) => Err(Error::at(&path)(e)),
    }
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
