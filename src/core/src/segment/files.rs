//! The names of a partition directory's files (Kafka's `LogFileUtils`): the
//! 20-digit base-offset names of segments and their indexes, and the suffixes
//! that mark a file as being deleted, cleaned or swapped in.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub const LOG: &str = ".log";
pub const INDEX: &str = ".index";
pub const TIME_INDEX: &str = ".timeindex";
/// A segment file waiting for `file.delete.delay.ms` before it is removed.
pub const DELETED: &str = ".deleted";
/// A cleaned segment being written.
pub const CLEANED: &str = ".cleaned";
/// A cleaned segment, whole and fsynced, about to replace the ones it was made from.
pub const SWAP: &str = ".swap";
/// A checkpoint or config file being written.
pub const TMP: &str = ".tmp";

/// Kafka's file name for a base offset: 20 digits, zero-padded.
pub fn file_name(base_offset: i64, suffix: &str) -> String {
    format!("{base_offset:020}{suffix}")
}

/// Parses `00000000000000000042.log` back to 42.
pub fn parse_file_name(name: &str, suffix: &str) -> Option<i64> {
    let stem = name.strip_suffix(suffix)?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The log, offset index and time index of the segment at `base_offset`.
pub fn segment_paths(dir: &Path, base_offset: i64) -> (PathBuf, PathBuf, PathBuf) {
    (
        dir.join(file_name(base_offset, LOG)),
        dir.join(file_name(base_offset, INDEX)),
        dir.join(file_name(base_offset, TIME_INDEX)),
    )
}

/// `path` with `suffix` appended to its file name.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// What an interrupted operation leaves and a writer's open removes.
pub fn is_leftover(name: &str) -> bool {
    [DELETED, CLEANED, TMP].iter().any(|sfx| name.ends_with(sfx))
}

/// The base offsets of the segments in `dir`, in order.
pub fn list_segments(dir: &Path) -> Result<Vec<i64>> {
    let mut bases = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::at(dir))? {
        let entry = entry.map_err(Error::at(dir))?;
        let name = entry.file_name();
        if let Some(base) = name.to_str().and_then(|n| parse_file_name(n, LOG)) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases)
}

/// Renames a segment's files to `<name>.deleted` (so that no reader lists them
/// any more) and returns the new paths; readers that have them open keep reading.
pub fn rename_deleted(dir: &Path, base: i64) -> Result<Vec<PathBuf>> {
    let (log, index, time) = segment_paths(dir, base);
    let mut out = Vec::new();
    for p in [log, index, time] {
        let to = with_suffix(&p, DELETED);
        match fs::rename(&p, &to) {
            Ok(()) => out.push(to),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::at(&p)(e)),
        }
    }
    Ok(out)
}
