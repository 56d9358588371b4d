//! Kafka's checkpoint files: a version line, a count line, then one entry per
//! line. Written to `<file>.tmp`, fsynced, renamed over the old file and the
//! directory fsynced, so a crash leaves either the old file or the new one.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

pub const RECOVERY_POINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET: &str = "log-start-offset-checkpoint";
pub const CLEANER_OFFSET: &str = "cleaner-offset-checkpoint";

/// Writes `content` to `path` atomically and durably.
pub fn write_atomic(path: &Path, content: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let mut f = File::create(&tmp).map_err(Error::at(&tmp))?;
    f.write_all(content).map_err(Error::at(&tmp))?;
    f.sync_all().map_err(Error::at(&tmp))?;
    fs::rename(&tmp, path).map_err(Error::at(path))?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(Error::at(dir))
}

/// `topic partition offset` entries, as Kafka's OffsetCheckpointFile.
pub fn write_offsets(path: &Path, entries: &BTreeMap<(String, i32), i64>) -> Result<()> {
    let mut s = format!("0\n{}\n", entries.len());
    for ((topic, partition), offset) in entries {
        s.push_str(&format!("{topic} {partition} {offset}\n"));
    }
    write_atomic(path, s.as_bytes())
}

/// Reads an offsets checkpoint; a missing file is empty. A malformed one is an
/// error naming the file and line.
pub fn read_offsets(path: &Path) -> Result<BTreeMap<(String, i32), i64>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(Error::at(path)(e)),
    };
    let bad = |line: usize, why: &str| Error::CorruptFile {
        path: path.to_owned(),
        reason: format!("malformed checkpoint, line {line}: {why}"),
    };
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some("0") {
        return Err(bad(1, "expected version 0"));
    }
    let count: usize =
        lines.next().and_then(|l| l.trim().parse().ok()).ok_or_else(|| bad(2, "expected a count"))?;
    let mut out = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [topic, partition, offset] = parts[..] else { return Err(bad(i + 3, "expected 3 fields")) };
        let partition = partition.parse().map_err(|_| bad(i + 3, "bad partition"))?;
        let offset = offset.parse().map_err(|_| bad(i + 3, "bad offset"))?;
        out.insert((topic.to_string(), partition), offset);
    }
    if out.len() != count {
        return Err(bad(2, "count does not match the entries"));
    }
    Ok(out)
}

/// `leader-epoch-checkpoint`: `epoch startOffset` entries, per partition directory.
pub fn write_leader_epochs(path: &Path, entries: &[(i32, i64)]) -> Result<()> {
    let mut s = format!("0\n{}\n", entries.len());
    for (epoch, start) in entries {
        s.push_str(&format!("{epoch} {start}\n"));
    }
    write_atomic(path, s.as_bytes())
}

#[cfg(test)]
#[path = "checkpoint_test.rs"]
mod tests;
