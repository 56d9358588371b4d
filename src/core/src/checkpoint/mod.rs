//! Kafka's checkpoint files: a version line, a count line, then one entry per
//! line. Written to a temporary file of its own, fsynced, renamed over the old
//! file and the directory fsynced, so a crash leaves either the old file or the
//! new one, and two writers never share (and empty) one temporary file.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

pub const RECOVERY_POINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET: &str = "log-start-offset-checkpoint";
pub const CLEANER_OFFSET: &str = "cleaner-offset-checkpoint";
/// What a temporary file's name ends with (a writer's open removes strays).
pub const TMP_SUFFIX: &str = ".tmp";

/// The longest prefix of the target's name a temporary name keeps: with the
/// unique part and the suffix it stays well below the 255-byte name limit
/// (a 249-character topic's `.json` file is itself 254 bytes).
const TMP_NAME_PREFIX: usize = 200;

/// A temporary name beside `path` that no other writer uses: the target's
/// name (cut short), this process's id and a counter.
fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut cut = name.len().min(TMP_NAME_PREFIX);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let unique = format!(
        "{}.{}.{}{TMP_SUFFIX}",
        &name[..cut],
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    path.with_file_name(unique)
}

/// Writes `content` to `path` atomically and durably.
pub fn write_atomic(path: &Path, content: &[u8]) -> Result<()> {
    let tmp = temp_path(path);
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(content)?;
            f.sync_all()
        })
        .map_err(Error::at(&tmp))
        .and_then(|()| fs::rename(&tmp, path).map_err(Error::at(path)));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Removes the temporary files an interrupted `write_atomic` left in `dir`.
pub fn remove_temp_files(dir: &Path) -> Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::at(dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(Error::at(dir))?;
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if is_file && entry.file_name().to_string_lossy().ends_with(TMP_SUFFIX) {
            let p = entry.path();
            match fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::at(&p)(e)),
            }
        }
    }
    Ok(())
}

/// Renames a partition directory out of its name, as Kafka does,
/// to `<topic>-<partition>.<32 hex digits>-<suffix>` beside it (`delete`: on
/// its way out; `stray`: found in the way of a new partition), the topic cut
/// short where the name would pass 255 bytes, and syncs the parent. `Ok(None)`
/// if there is no such directory.
pub fn rename_aside(dir: &Path, suffix: &str) -> Result<Option<std::path::PathBuf>> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str())) else {
        return Ok(None);
    };
    let (topic, partition) = name.rsplit_once('-').unwrap_or((name, ""));
    let tail = format!("-{partition}.{}-{suffix}", uuid::Uuid::new_v4().simple());
    let mut keep = topic.len().min(255usize.saturating_sub(tail.len()));
    while !topic.is_char_boundary(keep) {
        keep -= 1;
    }
    let aside = parent.join(format!("{}{tail}", &topic[..keep]));
    match fs::rename(dir, &aside) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::at(dir)(e)),
    }
    sync_dir(parent)?;
    Ok(Some(aside))
}

/// Whether a store entry is a partition directory renamed aside for deletion.
pub fn is_being_deleted(name: &str) -> bool {
    name.strip_suffix("-delete")
        .and_then(|n| n.rsplit_once('.'))
        .is_some_and(|(_, id)| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()))
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

/// Reads an offsets checkpoint; a missing file is empty, and so is an empty
/// one (Kafka writes `cleaner-offset-checkpoint` with no bytes when its
/// cleaner has no offsets). A malformed one is an error naming the file and line.
pub fn read_offsets(path: &Path) -> Result<BTreeMap<(String, i32), i64>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(Error::at(path)(e)),
    };
    if text.is_empty() {
        return Ok(BTreeMap::new());
    }
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

/// Kafka's `replication-offset-checkpoint`: each partition's high watermark,
/// in the same form as the recovery points.
pub const REPLICATION_OFFSET: &str = "replication-offset-checkpoint";

/// `leader-epoch-checkpoint`'s text: version 0, a count, then `epoch
/// startOffset` lines (Kafka's `LeaderEpochCheckpointFile`).
pub fn encode_leader_epochs(entries: &[(i32, i64)]) -> String {
    let mut s = format!("0\n{}\n", entries.len());
    for (epoch, start) in entries {
        s.push_str(&format!("{epoch} {start}\n"));
    }
    s
}

/// `leader-epoch-checkpoint`: `epoch startOffset` entries, per partition directory.
pub fn write_leader_epochs(path: &Path, entries: &[(i32, i64)]) -> Result<()> {
    write_atomic(path, encode_leader_epochs(entries).as_bytes())
}

/// Parses `leader-epoch-checkpoint` text. Anything but Kafka's form with
/// epochs rising and start offsets not falling (both >= 0) is refused with
/// the line and what was expected: a damaged file is never half trusted.
pub fn decode_leader_epochs(text: &str) -> std::result::Result<Vec<(i32, i64)>, String> {
    let bad = |line: usize, why: &str| format!("malformed leader epoch checkpoint, line {line}: {why}");
    let Some(body) = text.strip_suffix('\n') else {
        return Err(bad(text.lines().count().max(1), "expected the file to end with a newline"));
    };
    let mut lines = body.split('\n');
    if lines.next() != Some("0") {
        return Err(bad(1, "expected version 0"));
    }
    let count: usize =
        lines.next().and_then(|l| l.parse().ok()).ok_or_else(|| bad(2, "expected an entry count"))?;
    let mut out: Vec<(i32, i64)> = Vec::new();
    for (i, line) in lines.enumerate() {
        let mut parts = line.split(' ');
        let (Some(epoch), Some(start), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad(i + 3, "expected `epoch startOffset`"));
        };
        let epoch: i32 = epoch.parse().map_err(|_| bad(i + 3, "expected an epoch (a number)"))?;
        let start: i64 = start.parse().map_err(|_| bad(i + 3, "expected a start offset (a number)"))?;
        if epoch < 0 || start < 0 {
            return Err(bad(i + 3, "expected an epoch and a start offset >= 0"));
        }
        if let Some(&(e, s)) = out.last() {
            if epoch <= e || start < s {
                return Err(bad(i + 3, "expected epochs rising and start offsets not falling"));
            }
        }
        out.push((epoch, start));
    }
    if out.len() != count {
        return Err(bad(2, &format!("the count says {count} entries, the file holds {}", out.len())));
    }
    Ok(out)
}

/// Reads `leader-epoch-checkpoint`: `None` if the file is missing, an error
/// naming the file if it is damaged.
pub fn read_leader_epochs(path: &Path) -> Result<Option<Vec<(i32, i64)>>> {
    let text = match fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::at(path)(e)),
    };
    let corrupt = |reason: String| Error::CorruptFile { path: path.to_owned(), reason };
    let text = String::from_utf8(text).map_err(|_| corrupt("not UTF-8 text".into()))?;
    decode_leader_epochs(&text).map(Some).map_err(corrupt)
}

#[cfg(test)]
#[path = "checkpoint_test.rs"]
mod tests;
