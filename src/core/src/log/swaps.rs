//! Completing or discarding, before a log is loaded, what an interrupted
//! cleaning left (Kafka's LogLoader does the same with swap files).

use std::fs;
use std::path::Path;

use super::MAX_OFFSET;
use crate::checkpoint::sync_dir;
use crate::error::{Error, Result};
use crate::record::BatchIter;
use crate::segment::files::{self, file_name, parse_file_name};
use crate::segment::{Expect, Segment, SegmentMode};

/// Completes or discards what an interrupted cleaning left in `dir` (Kafka's
/// rules): `.cleaned` files are dropped; a `.swap` log that checks out (see
/// `swap_end`) takes the place of the segments it covers, any other is dropped.
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
        match swap_end(dir, base, &swap)? {
            Some(next) => {
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
            // Not what a cleaning writes: the segments it would replace stay.
            None => fs::remove_file(&swap).map_err(Error::at(&swap))?,
        }
    }
    sync_dir(dir)
}

/// One past the last offset of a swap file that can be trusted, or None. A
/// cleaning fsyncs its output before naming it `.swap`, so a real one is whole:
/// every byte belongs to a CRC-valid batch, offsets rise from `base`, and it
/// holds nothing past the segments it replaces (those named from `base` up to
/// its last offset), so it ends before the next segment kept and, if it
/// replaces the last one, within that segment's offsets.
fn swap_end(dir: &Path, base: i64, swap: &Path) -> Result<Option<i64>> {
    let data = fs::read(swap).map_err(Error::at(swap))?;
    let mut next = base;
    let mut size = 0usize;
    for b in BatchIter::new(&data, true) {
        let Ok(b) = b else { return Ok(None) };
        if b.base_offset() < next || b.last_offset() < b.base_offset() || b.last_offset() > MAX_OFFSET {
            return Ok(None);
        }
        next = b.last_offset() + 1;
        size += b.size();
    }
    if size != data.len() || next == base {
        // Torn, trailing garbage, or no batch at all: nothing proves what it replaces.
        return Ok(None);
    }
    let bases = files::list_segments(dir)?;
    let replaced: Vec<i64> = bases.iter().copied().filter(|&b| b >= base && b < next).collect();
    if let Some(&last) = replaced.last() {
        if bases.last() == Some(&last) {
            // It would replace the last segment: its offsets must lie within it.
            let seg = Segment::open(dir, last, 0, SegmentMode::Sealed)?;
            let end = match seg.last_batch(seg.size(), Expect::ANY) {
                Ok(b) => b.map_or(last, |b| b.last_offset + 1),
                Err(_) => return Ok(None),
            };
            if next > end {
                return Ok(None);
            }
        }
    }
    Ok(Some(next))
}
