//! What this process learnt about a segment's batches, so that it need not be
//! learnt again: the byte ranges whose batches passed their CRC (a batch read
//! again, by a random lookup or a second pass, is not checked again), and
//! where records start inside batches that lookups went into (see
//! [`RecordMarks`]). Either is recorded only if no truncation ran between the
//! read of the bytes and the recording; truncation forgets everything past the
//! cut. Segments a reader process opened (another process writes them) keep no
//! record.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// At most this many disjoint ranges per segment (random lookups of small
/// batches could otherwise grow the map without bound); past it, batches not
/// yet recorded are checked on every read.
const MAX_RANGES: usize = 1 << 16;

/// At most this many batches per segment, and in all the process's segments,
/// keep record marks (about 120 bytes each, so at most ~30 MB in all); lookups
/// into batches past it walk their records as before.
const MAX_MARKED: usize = 1 << 16;
const MAX_MARKED_IN_PROCESS: usize = 1 << 18;

/// The batches with record marks in all segments of this process.
static MARKED_IN_PROCESS: AtomicUsize = AtomicUsize::new(0);

/// Where every `MARK_STRIDE`th record of a batch starts, as byte positions
/// in its records payload (record 0, STRIDE, 2 x STRIDE, ...): a lookup of
/// record k starts walking at mark k / STRIDE instead of at the first record
/// (`crate::record::records::record_marks`).
pub type RecordMarks = Arc<[u32]>;

#[derive(Default)]
struct Ranges {
    /// start -> end (exclusive), disjoint and not touching.
    map: BTreeMap<u64, u64>,
    /// A batch's position in the segment -> its record marks.
    marks: HashMap<u64, RecordMarks>,
    /// Bumped by each truncation: a check that began before it records nothing.
    generation: u64,
}

pub(super) struct VerifiedRanges {
    enabled: bool,
    inner: Mutex<Ranges>,
}

/// What a reader takes before reading bytes: whether they were checked already,
/// and the truncation generation to record its own check under.
#[derive(Debug, Clone, Copy)]
pub struct CrcTicket {
    pub verified: bool,
    generation: u64,
}

impl CrcTicket {
    /// Nothing known to be checked, and nothing to record.
    pub const UNCHECKED: CrcTicket = CrcTicket { verified: false, generation: u64::MAX };
}

impl VerifiedRanges {
    pub(super) fn new(enabled: bool) -> Self {
        VerifiedRanges { enabled, inner: Mutex::new(Ranges::default()) }
    }

    pub(super) fn ticket(&self, position: u64, len: u64) -> CrcTicket {
        if !self.enabled {
            return CrcTicket { verified: false, generation: 0 };
        }
        let r = self.inner.lock();
        let end = position.saturating_add(len);
        let verified = r.map.range(..=position).next_back().is_some_and(|(_, &e)| e >= end);
        CrcTicket { verified, generation: r.generation }
    }

    /// Records `[position, position + len)` as checked, unless a truncation ran
    /// since `ticket` was taken.
    pub(super) fn passed(&self, ticket: CrcTicket, position: u64, len: u64) {
        if !self.enabled || ticket.verified || len == 0 {
            return;
        }
        let mut r = self.inner.lock();
        if r.generation != ticket.generation {
            return;
        }
        let (mut start, mut end) = (position, position.saturating_add(len));
        // Merge with every range that overlaps or touches this one.
        let touching: Vec<(u64, u64)> =
            r.map.range(..=end).rev().take_while(|(_, &e)| e >= start).map(|(&s, &e)| (s, e)).collect();
        if touching.is_empty() && r.map.len() >= MAX_RANGES {
            return;
        }
        for (s, e) in touching {
            r.map.remove(&s);
            start = start.min(s);
            end = end.max(e);
        }
        r.map.insert(start, end);
    }

    /// The record marks of the batch at `position`, if a lookup left them.
    pub(super) fn marks(&self, position: u64) -> Option<RecordMarks> {
        if !self.enabled {
            return None;
        }
        self.inner.lock().marks.get(&position).cloned()
    }

    /// Keeps the record marks of the batch at `position`, found in bytes read
    /// under `ticket`, unless a truncation ran since.
    pub(super) fn keep_marks(&self, ticket: CrcTicket, position: u64, marks: RecordMarks) {
        if !self.enabled {
            return;
        }
        let mut r = self.inner.lock();
        if r.generation != ticket.generation || r.marks.len() >= MAX_MARKED || r.marks.contains_key(&position)
        {
            return;
        }
        // Taken only while under the bound: the count never passes it.
        let taken = MARKED_IN_PROCESS.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < MAX_MARKED_IN_PROCESS).then_some(n + 1)
        });
        if taken.is_ok() {
            r.marks.insert(position, marks);
        }
    }

    /// Forgets everything at or past `cut` (the segment was cut back there).
    pub(super) fn truncate(&self, cut: u64) {
        let mut r = self.inner.lock();
        r.generation += 1;
        let before = r.marks.len();
        r.marks.retain(|&p, _| p < cut);
        MARKED_IN_PROCESS.fetch_sub(before - r.marks.len(), Ordering::AcqRel);
        let _ = r.map.split_off(&cut);
        if let Some((_, e)) = r.map.range_mut(..cut).next_back() {
            *e = (*e).min(cut);
        }
    }

    #[cfg(test)]
    pub(super) fn ranges(&self) -> Vec<(u64, u64)> {
        self.inner.lock().map.iter().map(|(&s, &e)| (s, e)).collect()
    }
}

impl Drop for VerifiedRanges {
    fn drop(&mut self) {
        MARKED_IN_PROCESS.fetch_sub(self.inner.get_mut().marks.len(), Ordering::AcqRel);
    }
}

#[cfg(test)]
#[path = "verified_test.rs"]
mod tests;
