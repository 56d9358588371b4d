//! Completing or discarding, before a log is loaded, what an interrupted
//! cleaning left (Kafka's LogLoader does the same with swap files).

use std::fs;
use std::path::Path;

use crate::checkpoint::sync_dir;
use crate::error::{Error, Result};
use crate::record::BatchIter;
use crate::segment::files::{self, file_name, parse_file_name};

/// Completes or discards what an interrupted cleaning left in `dir` (Kafka's
/// rules): `.cleaned` files are dropped; a `.swap` log is whole (it was fsynced
/// before the rename), so the segments it covers give way to it.
pub fn recover_swaps(dir: &Path) -> Result<()> {
    let mut swaps = Vec::new();
    for entry in fs::read_dir(dir).map_err(Error::at(dir))? {
        let path = entry.map_err(Error::at(dir))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        if name.ends_with(files::CLEANED) {
            fs::remove_file(&path).map_err(Error::at(&path))?;
        } else if let Some(stem) = name.strip_suffix(files::SWAP) {
            match parse_file_name(stem, files::LOG) {
                Some(base) => swaps.push((base, path)),
                // Index swaps are rebuilt from the log instead.
                None => fs::remove_file(&path).map_err(Error::at(&path))?,
            }
        }
    }
    for (base, swap) in swaps {
        let data = fs::read(&swap).map_err(Error::at(&swap))?;
        let mut next = base;
        for b in BatchIter::new(&data, true) {
            match b {
                Ok(b) => next = b.last_offset() + 1,
                Err(_) => break,
            }
        }
        for entry in fs::read_dir(dir).map_err(Error::at(dir))? {
            let path = entry.map_err(Error::at(dir))?.path();
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            let covered = [files::LOG, files::INDEX, files::TIME_INDEX]
                .iter()
                .any(|sfx| parse_file_name(name, sfx).is_some_and(|b| b >= base && b < next));
            if covered {
                fs::remove_file(&path).map_err(Error::at(&path))?;
            }
        }
        fs::rename(&swap, dir.join(file_name(base, files::LOG))).map_err(Error::at(&swap))?;
    }
    sync_dir(dir)
}
