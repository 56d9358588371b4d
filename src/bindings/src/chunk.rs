//! Fetched records handed out one at a time: a Consumer's position moves per
//! record inside a `RecordChunk` (an atomic index, no Python objects made), and
//! its Python bookkeeping runs once per chunk, in the `refill` callable that a
//! `RecordIterator` calls when its chunk is used up.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyList;

use super::records::ConsumerRecord;

/// Records of one partition, in offset order, with a cursor: those before it
/// have been handed out (they count as consumed), the rest are pending.
#[pyclass(frozen, module = "seglog._native", name = "RecordChunk")]
pub struct RecordChunk {
    records: Vec<Py<ConsumerRecord>>,
    next: AtomicUsize,
}

impl RecordChunk {
    pub(crate) fn from_vec(records: Vec<Py<ConsumerRecord>>) -> Self {
        RecordChunk { records, next: AtomicUsize::new(0) }
    }

    /// The next pending record, now handed out.
    fn next_record(&self, py: Python<'_>) -> Option<Py<ConsumerRecord>> {
        // A Consumer is used by one thread at a time; the atomic only keeps a
        // misuse from two threads memory-safe (it may then repeat a record).
        let i = self.next.load(Ordering::Relaxed);
        let r = self.records.get(i)?;
        self.next.store(i + 1, Ordering::Relaxed);
        Some(r.clone_ref(py))
    }
}

#[pymethods]
impl RecordChunk {
    #[new]
    fn new(records: Vec<Py<ConsumerRecord>>) -> Self {
        Self::from_vec(records)
    }

    /// How many records are still pending.
    pub(crate) fn __len__(&self) -> usize {
        self.records.len().saturating_sub(self.next.load(Ordering::Relaxed))
    }

    /// The offset of the next pending record, or None when all are handed out.
    fn position(&self) -> Option<i64> {
        self.records.get(self.next.load(Ordering::Relaxed)).map(|r| r.get().offset)
    }

    /// Up to `limit` pending records, now handed out.
    fn take<'py>(&self, py: Python<'py>, limit: usize) -> PyResult<Bound<'py, PyList>> {
        let i = self.next.load(Ordering::Relaxed).min(self.records.len());
        let j = i.saturating_add(limit).min(self.records.len());
        self.next.store(j, Ordering::Relaxed);
        PyList::new(py, self.records[i..j].iter().map(|r| r.clone_ref(py)))
    }

    /// Drops the pending records (a seek moved the position elsewhere).
    fn clear(&self) {
        self.next.store(self.records.len(), Ordering::Relaxed);
    }
}

/// Iterates records chunk by chunk: `refill()` returns the next RecordChunk,
/// or None to stop.
#[pyclass(frozen, module = "seglog._native", name = "RecordIterator")]
pub struct RecordIterator {
    refill: Py<PyAny>,
    // Held only to read or swap the chunk, never across a call into Python.
    current: Mutex<Option<Py<RecordChunk>>>,
}

#[pymethods]
impl RecordIterator {
    #[new]
    fn new(refill: Py<PyAny>) -> Self {
        RecordIterator { refill, current: Mutex::new(None) }
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<ConsumerRecord>>> {
        loop {
            if let Some(chunk) = self.current.lock().as_ref() {
                if let Some(r) = chunk.get().next_record(py) {
                    return Ok(Some(r));
                }
            }
            let next = self.refill.bind(py).call0()?;
            if next.is_none() {
                *self.current.lock() = None;
                return Ok(None);
            }
            let chunk = next.cast_into::<RecordChunk>()?.unbind();
            *self.current.lock() = Some(chunk);
        }
    }
}
