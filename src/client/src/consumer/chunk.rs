//! A partition's decoded records with a cursor: those before it have been
//! handed out (they count as consumed), the rest are pending. An iterator
//! handing records out one at a time moves the cursor with no other
//! bookkeeping; a seek clears the chunk, and the iterator follows at once.

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A record the consumer hands out: it knows its offset.
pub trait Record: Send + Sync {
    fn offset(&self) -> i64;
}

pub struct Chunk<R> {
    records: Vec<R>,
    next: AtomicUsize,
}

impl<R: Record> Chunk<R> {
    pub fn new(records: Vec<R>) -> Self {
        Chunk { records, next: AtomicUsize::new(0) }
    }

    /// How many records are still pending.
    pub fn len(&self) -> usize {
        self.records.len().saturating_sub(self.next.load(Ordering::Relaxed))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The offset of the next pending record (None when all are handed out).
    pub fn position(&self) -> Option<i64> {
        self.records.get(self.next.load(Ordering::Relaxed)).map(Record::offset)
    }

    /// Hands out the next pending record.
    pub fn next_record(&self) -> Option<&R> {
        // A consumer is used by one thread at a time; the atomic only keeps a
        // misuse from two threads memory-safe (it may then repeat a record).
        let i = self.next.load(Ordering::Relaxed);
        let r = self.records.get(i)?;
        self.next.store(i + 1, Ordering::Relaxed);
        Some(r)
    }

    /// Hands out up to `limit` pending records: which of `records()` they are.
    pub fn take(&self, limit: usize) -> Range<usize> {
        let i = self.next.load(Ordering::Relaxed).min(self.records.len());
        let j = i.saturating_add(limit).min(self.records.len());
        self.next.store(j, Ordering::Relaxed);
        i..j
    }

    pub fn records(&self) -> &[R] {
        &self.records
    }

    /// Drops the pending records (the position moved elsewhere).
    pub fn clear(&self) {
        self.next.store(self.records.len(), Ordering::Relaxed);
    }
}
