//! Opening a log: recovery of what an unclean stop left, the producer state
//! rebuilt from its snapshots and the log, the leader epoch cache loaded, and the read-only opening of a log
//! another process writes.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::swaps::recover_swaps;
use super::{PartitionLog, MAX_OFFSET};
use crate::checkpoint;
use crate::config::LogConfig;
use crate::error::{CorruptBatch, Error, Result};
use crate::segment::{files, Expect, Segment, SegmentMode};

/// What opening the log found and did.
#[derive(Debug, Clone, Default)]
pub struct LoadReport {
    pub recovered_segments: usize,
    pub truncated_bytes: u64,
    pub deleted_segments: usize,
    /// Sealed segments whose batches do not end where the next segment begins:
    /// damaged on disk; reads of the missing offsets fail as corrupt.
    pub damaged_segments: usize,
    /// Producer state snapshots found damaged, deleted and rebuilt from the log.
    pub damaged_snapshots: usize,
    /// `leader-epoch-checkpoint` files found damaged and rebuilt from the log.
    pub damaged_epoch_checkpoints: usize,
}

/// Removes what an interrupted operation left behind: temporary files and
/// indexes whose log is gone (Kafka's rules before recovery).
fn remove_strays(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(Error::at(dir))? {
        let entry = entry.map_err(Error::at(dir))?;
        let path = entry.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
        let orphan_index = [files::INDEX, files::TIME_INDEX].iter().any(|sfx| {
            files::parse_file_name(name, sfx)
                .is_some_and(|b| !dir.join(files::file_name(b, files::LOG)).exists())
        });
        if files::is_leftover(name) || orphan_index {
            fs::remove_file(&path).map_err(Error::at(&path))?;
        }
    }
    Ok(())
}

/// Refuses offsets so near the i64 limit that the log's offsets would overflow:
/// a segment named after one, or a log start offset beyond `MAX_OFFSET`.
fn check_offset_limits(dir: &Path, bases: &[i64], log_start: Option<i64>) -> Result<()> {
    if let Some(&base) = bases.iter().find(|&&b| b > MAX_OFFSET) {
        let path = dir.join(files::file_name(base, files::LOG));
        return Err(CorruptBatch::InSegment {
            path,
            position: 0,
            reason: format!("base offset {base} is beyond the largest supported offset {MAX_OFFSET}"),
        }
        .into());
    }
    match log_start {
        Some(start) if !(0..=MAX_OFFSET).contains(&start) => {
            let path = dir.parent().unwrap_or(dir).join(checkpoint::LOG_START_OFFSET);
            Err(Error::IoAt {
                path,
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "log start offset {start} of {} is outside 0..={MAX_OFFSET}, the offsets a log can hold",
                        dir.display()
                    ),
                ),
            })
        }
        _ => Ok(()),
    }
}

/// Refuses segments whose offsets overlap (a file renamed or copied over
/// another's range gives duplicate offsets). Runs before recovery, which could
/// otherwise cut and delete around the confusion.
fn check_overlaps(dir: &Path, bases: &[i64], index_bytes: usize, allow_gaps: bool) -> Result<()> {
    // Offsets must run on inside a segment for its end to count: a damaged
    // baseOffset in its last batch is damage (reads report it), not an overlap.
    let expect = Expect { next_base: i64::MAX, allow_gaps };
    for pair in bases.windows(2) {
        let (base, next) = (pair[0], pair[1]);
        let seg = Segment::open(dir, base, index_bytes, SegmentMode::Sealed)?;
        let Ok(Some(last)) = seg.last_batch(seg.size(), expect) else { continue };
        // A damaged lastOffsetDelta (inside the CRC) is damage too.
        if last.last_offset >= next && seg.crc_valid(&last)? {
            return Err(seg.corrupt(
                last.position,
                format!(
                    "offsets {}..={} overlap {}, which starts at offset {next}: two segments hold the \
                     same offsets (a file renamed or copied?); move one of them away",
                    last.base_offset,
                    last.last_offset,
                    dir.join(files::file_name(next, files::LOG)).display()
                ),
            ));
        }
    }
    Ok(())
}

impl PartitionLog {
    /// Opens the log for writing. Unless the store shut down cleanly, every
    /// segment from the one holding `recovery_point` on is scanned and cut at the
    /// first bad batch; segments after a cut are deleted.
    pub fn open(
        dir: &Path,
        topic: &str,
        partition: i32,
        config: Arc<LogConfig>,
        recovery_point: i64,
        log_start_checkpoint: Option<i64>,
        clean_shutdown: bool,
    ) -> Result<(Self, LoadReport)> {
        fs::create_dir_all(dir).map_err(Error::at(dir))?;
        recover_swaps(dir)?;
        remove_strays(dir)?;
        let mut report = LoadReport::default();
        let mut bases = files::list_segments(dir)?;
        check_offset_limits(dir, &bases, log_start_checkpoint)?;
        check_overlaps(dir, &bases, config.segment_index_bytes, config.cleanup_policy.compact)?;
        if bases.is_empty() {
            bases.push(log_start_checkpoint.unwrap_or(0).max(0));
        }
        let last_base = *bases.last().unwrap_or(&0);
        let index_bytes = config.segment_index_bytes;
        let max_batch = (config.max_message_bytes as u64).max(1 << 20) * 16;
        let allow_gaps = config.cleanup_policy.compact;
        let mut segments = BTreeMap::new();
        let recover_from =
            bases.iter().copied().take_while(|&b| b <= recovery_point).last().unwrap_or(bases[0]);
        let mut cut = false;
        for &base in &bases {
            if cut {
                Segment::open(dir, base, index_bytes, SegmentMode::Sealed)?.delete_files()?;
                report.deleted_segments += 1;
                continue;
            }
            let is_last = base == last_base;
            let mode = if is_last { SegmentMode::Active } else { SegmentMode::Sealed };
            let needs_recovery = !clean_shutdown && base >= recover_from;
            let seg = if needs_recovery || !Segment::indexes_exist(dir, base) {
                let seg = Segment::open(dir, base, index_bytes, SegmentMode::Active)?;
                let r = seg.recover(config.index_interval_bytes, max_batch, allow_gaps)?;
                report.recovered_segments += 1;
                report.truncated_bytes += r.truncated_bytes;
                if r.truncated_bytes > 0 {
                    cut = true;
                }
                if is_last || cut {
                    seg
                } else {
                    seg.seal()?;
                    Segment::open(dir, base, index_bytes, mode)?
                }
            } else {
                let seg = Segment::open(dir, base, index_bytes, mode)?;
                let next_base = bases.iter().copied().find(|&b| b > base).unwrap_or(i64::MAX);
                if !seg.index_is_sane(Expect { next_base, allow_gaps })? {
                    // A damaged index is rebuilt from the log, as Kafka does. A
                    // sealed segment keeps its bytes (what is damaged there stays
                    // for reads to report); the active one is cut at the damage,
                    // as recovery would.
                    drop(seg);
                    let seg = Segment::open(dir, base, index_bytes, SegmentMode::Active)?;
                    let r = seg.rebuild(config.index_interval_bytes, max_batch, allow_gaps, is_last)?;
                    report.recovered_segments += 1;
                    report.truncated_bytes += r.truncated_bytes;
                    if is_last {
                        seg
                    } else {
                        seg.seal()?;
                        let sealed = Segment::open(dir, base, index_bytes, mode)?;
                        if r.valid_bytes < sealed.size() {
                            // Its indexes stop at the damage; searches must not pass it.
                            sealed.mark_damaged(r.valid_bytes);
                        }
                        sealed
                    }
                } else {
                    seg
                }
            };
            segments.insert(base, Arc::new(seg));
        }
        // A sealed segment must end where the next one begins; one that does not
        // was damaged (cut short, zeroed) where recovery did not look. Reads of
        // what is missing fail as corrupt; the open goes on for the rest.
        let all: Vec<(i64, Arc<Segment>)> = segments.iter().map(|(b, s)| (*b, s.clone())).collect();
        for pair in all.windows(2) {
            let (seg, next_base) = (&pair[0].1, pair[1].0);
            let expect = Expect { next_base, allow_gaps };
            let damaged_at = match seg.last_batch(seg.size(), expect) {
                Ok(last) => {
                    let end = last.map_or(seg.base_offset, |b| b.last_offset + 1);
                    let meets = end == next_base || (allow_gaps && end <= next_base);
                    (!meets).then(|| seg.size())
                }
                Err(Error::Corrupt(CorruptBatch::InSegment { position, .. })) => Some(position),
                Err(_) => Some(0),
            };
            if let Some(position) = damaged_at {
                seg.mark_damaged(position);
                report.damaged_segments += 1;
            }
        }
        // A cut makes the cut segment the active one.
        let (&active_base, active) = segments
            .iter()
            .next_back()
            .ok_or_else(|| Error::InvalidArgument(format!("no segments in {}", dir.display())))?;
        let end = active
            .last_batch(active.size(), Expect { next_base: i64::MAX, allow_gaps })?
            .map_or(active_base, |b| b.last_offset + 1);
        let first_base = *segments.keys().next().unwrap_or(&0);
        let start = log_start_checkpoint.unwrap_or(first_base).clamp(first_base, end);
        let rp = recovery_point.min(end);
        let durable = if clean_shutdown { end } else { rp };
        let log = PartitionLog::new(dir, topic, partition, config, segments, false);
        log.end_offset.store(end, Ordering::Release);
        log.high_watermark.store(end, Ordering::Release);
        log.start_offset.store(start, Ordering::Release);
        log.recovery_point.store(durable, Ordering::Release);
        log.flush.lock().flushed_to = durable;
        {
            // Kafka's order: stray snapshots go, then the state is rebuilt up
            // to the log end that recovery left.
            let mut w = log.writer.lock();
            w.producers.remove_stray_snapshots(&log.segment_bases())?;
            let damaged = log.rebuild_producer_state(&mut w.producers, end, clean_shutdown)?;
            report.damaged_snapshots += damaged.len();
        }
        if log.load_leader_epochs(start, end)? {
            report.damaged_epoch_checkpoints += 1;
        }
        Ok((log, report))
    }

    /// Opens the log for reading while another process may be writing it. Nothing
    /// on disk is changed; reads stop at the last whole, CRC-valid batch.
    pub fn open_read_only(dir: &Path, topic: &str, partition: i32, config: Arc<LogConfig>) -> Result<Self> {
        let log = Self::open_read_only_on_demand(dir, topic, partition, config);
        log.catch_up()?;
        Ok(log)
    }

    /// As `open_read_only`, but its segments are opened when the log is first
    /// used: what a read-only store does, so that opening it to read one
    /// partition does not open every segment (and read every index) of every
    /// other. Every read-only access catches up with the writer before it
    /// answers (`catch_up`, or a read past the known end), which opens them.
    pub fn open_read_only_on_demand(dir: &Path, topic: &str, partition: i32, config: Arc<LogConfig>) -> Self {
        let log = PartitionLog::new(dir, topic, partition, config, BTreeMap::new(), true);
        log.load_leader_epochs_read_only();
        log
    }
}
