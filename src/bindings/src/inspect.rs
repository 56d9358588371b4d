//! `seglog._native` functions for tools that read segment files byte by byte
//! (dump-log, verify): conversions of `seglog_core::segment::inspect` only.

use std::fs::File;
use std::os::fd::FromRawFd;
use std::path::PathBuf;

use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::errors::PyResult;
use super::records::Shared;
use seglog_core::index::{self, IndexKind};
use seglog_core::record::TimestampType;
use seglog_core::segment::inspect::{self, BatchHeader, InspectedBatch, WalkItem};

/// A batch found in a `.log`: its header fields as stored, and whether it validates.
#[pyclass(frozen, module = "seglog._native")]
pub struct LogBatch {
    header: BatchHeader,
    /// Why the batch is invalid (CRC-32C, codec, record layout), or None.
    #[pyo3(get)]
    error: Option<String>,
    /// Its records when the walk decodes (none for a control or invalid batch).
    #[pyo3(get)]
    records: Py<PyList>,
}

#[pymethods]
impl LogBatch {
    #[getter]
    fn position(&self) -> u64 {
        self.header.position
    }
    #[getter]
    fn size(&self) -> u64 {
        self.header.size
    }
    #[getter]
    fn base_offset(&self) -> i64 {
        self.header.base_offset
    }
    #[getter]
    fn batch_length(&self) -> i32 {
        self.header.batch_length
    }
    #[getter]
    fn partition_leader_epoch(&self) -> i32 {
        self.header.partition_leader_epoch
    }
    #[getter]
    fn magic(&self) -> i8 {
        self.header.magic
    }
    #[getter]
    fn crc(&self) -> u32 {
        self.header.crc
    }
    #[getter]
    fn attributes(&self) -> i16 {
        self.header.attributes
    }
    #[getter]
    fn last_offset_delta(&self) -> i32 {
        self.header.last_offset_delta
    }
    #[getter]
    fn base_timestamp(&self) -> i64 {
        self.header.base_timestamp
    }
    #[getter]
    fn max_timestamp(&self) -> i64 {
        self.header.max_timestamp
    }
    #[getter]
    fn producer_id(&self) -> i64 {
        self.header.producer_id
    }
    #[getter]
    fn producer_epoch(&self) -> i16 {
        self.header.producer_epoch
    }
    #[getter]
    fn base_sequence(&self) -> i32 {
        self.header.base_sequence
    }
    #[getter]
    fn records_count(&self) -> i32 {
        self.header.records_count
    }
    #[getter]
    fn last_offset(&self) -> i64 {
        self.header.last_offset()
    }
    #[getter]
    fn codec(&self) -> String {
        self.header.codec()
    }
    #[getter]
    fn timestamp_type(&self) -> &'static str {
        self.header.timestamp_type()
    }
    #[getter]
    fn is_transactional(&self) -> bool {
        self.header.is_transactional()
    }
    #[getter]
    fn is_control(&self) -> bool {
        self.header.is_control()
    }
    #[getter]
    fn has_delete_horizon(&self) -> bool {
        self.header.has_delete_horizon()
    }
    #[getter]
    fn last_sequence(&self) -> i64 {
        self.header.last_sequence()
    }
    /// The sequence of the record at `offset` (-1 for a batch without sequences).
    fn sequence_at(&self, offset: i64) -> i64 {
        self.header.sequence_at(offset)
    }
    fn __repr__(&self) -> String {
        format!(
            "LogBatch(position={}, base_offset={}, last_offset={}, size={}, error={:?})",
            self.header.position,
            self.header.base_offset,
            self.header.last_offset(),
            self.header.size,
            self.error
        )
    }
}

impl LogBatch {
    fn new(py: Python<'_>, b: InspectedBatch) -> PyResult<Self> {
        let shared = Shared::new(py, &PyString::new(py, ""), -1);
        let ts_type =
            if b.header.log_append_time() { TimestampType::LogAppendTime } else { TimestampType::CreateTime };
        let records = PyList::empty(py);
        for r in b.records {
            let headers =
                PyTuple::new(py, r.headers.into_iter().map(|(k, v)| (k, v.map(|v| PyBytes::new(py, &v)))))?;
            let rec = shared.record(
                r.offset,
                r.timestamp,
                ts_type,
                r.key.as_deref(),
                r.value.as_deref(),
                Some(headers),
            );
            records.append(Py::new(py, rec)?)?;
        }
        Ok(LogBatch { header: b.header, error: b.error, records: records.unbind() })
    }
}

/// Where a walk of a `.log` had to stop (batch boundaries lost), and why.
#[pyclass(frozen, module = "seglog._native")]
pub struct LogStop {
    #[pyo3(get)]
    position: u64,
    #[pyo3(get)]
    reason: String,
    /// The bytes from `position` to the end of the file.
    #[pyo3(get)]
    length: u64,
}

#[pymethods]
impl LogStop {
    fn __repr__(&self) -> String {
        format!("LogStop(position={}, reason={:?}, length={})", self.position, self.reason, self.length)
    }
}

/// An iterator over the batches of a `.log`, a `LogStop` last if the walk lost
/// the batch boundaries.
#[pyclass(frozen, module = "seglog._native")]
pub struct LogWalk {
    walk: Mutex<inspect::LogWalk>,
}

#[pymethods]
impl LogWalk {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let item = py.detach(|| self.walk.lock().next()).transpose()?;
        Ok(match item {
            None => None,
            Some(WalkItem::Batch(b)) => Some(Py::new(py, LogBatch::new(py, b)?)?.into_any()),
            Some(WalkItem::Stop(s)) => Some(
                Py::new(py, LogStop { position: s.position, reason: s.reason, length: s.length })?.into_any(),
            ),
        })
    }
}

/// Walks the `.log` open as file descriptor `fd` from byte `start` (the descriptor
/// is duplicated: closing it does not end the walk). With `decode`, each batch's
/// CRC-32C is checked and its records decoded; without, only headers are read.
#[pyfunction]
#[pyo3(signature = (fd, start = 0, *, decode = true))]
pub fn walk_log(py: Python<'_>, fd: i32, start: u64, decode: bool) -> PyResult<LogWalk> {
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) only reads the descriptor table; an fd that is
    // not open gives -1 (EBADF), checked below.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if dup < 0 {
        return Err(seglog_core::error::Error::Io(std::io::Error::last_os_error()).into());
    }
    // SAFETY: `dup` is a new descriptor that nothing else owns; the File closes it.
    let file = unsafe { File::from_raw_fd(dup) };
    let walk = py.detach(|| inspect::walk_log(file, start, decode))?;
    Ok(LogWalk { walk: Mutex::new(walk) })
}

/// The entries of an index file, as stored.
#[pyclass(frozen, module = "seglog._native")]
pub struct IndexContents {
    contents: index::IndexContents,
}

#[pymethods]
impl IndexContents {
    /// `index` or `timeindex`.
    #[getter]
    fn kind(&self) -> &'static str {
        self.contents.kind.suffix()
    }
    /// `(relative offset, position)` for an index, `(timestamp, relative offset)` for a timeindex.
    #[getter]
    fn entries(&self) -> Vec<(i64, i64)> {
        self.contents.entries.clone()
    }
    /// Preallocated empty slots after the last entry.
    #[getter]
    fn unused(&self) -> usize {
        self.contents.unused
    }
    /// Why the file's size is wrong, or None.
    #[getter]
    fn size_problem(&self) -> Option<String> {
        self.contents.size_problem.clone()
    }
    fn __repr__(&self) -> String {
        format!(
            "IndexContents(kind={:?}, entries={}, unused={})",
            self.contents.kind.suffix(),
            self.contents.entries.len(),
            self.contents.unused
        )
    }
}

fn index_kind(kind: &str) -> PyResult<IndexKind> {
    IndexKind::from_suffix(kind).ok_or_else(|| {
        PyValueError::new_err(format!("index kind must be 'index' or 'timeindex', got {kind:?}")).into()
    })
}

/// Reads the index file at `path`; `kind` is `index` or `timeindex`.
#[pyfunction]
pub fn read_index(py: Python<'_>, path: PathBuf, kind: &str) -> PyResult<IndexContents> {
    let kind = index_kind(kind)?;
    let contents = py.detach(|| index::read_index(&path, kind))?;
    Ok(IndexContents { contents })
}

/// What an index check needs of a log: where batches start, how far valid ones reach.
#[pyclass(frozen, module = "seglog._native")]
pub struct SegmentScan {
    scan: Mutex<inspect::SegmentScan>,
}

#[pymethods]
impl SegmentScan {
    #[new]
    fn new(base_offset: i64) -> Self {
        SegmentScan { scan: Mutex::new(inspect::SegmentScan::new(base_offset)) }
    }
    /// Records a batch of the walk.
    fn add(&self, batch: &LogBatch) {
        let b = InspectedBatch { header: batch.header, error: batch.error.clone(), records: Vec::new() };
        self.scan.lock().add(&b);
    }
    #[getter]
    fn base_offset(&self) -> i64 {
        self.scan.lock().base_offset
    }
    /// How many batches were added.
    #[getter]
    fn batches(&self) -> usize {
        self.scan.lock().batch_starts.len()
    }
    /// The greatest last offset of a valid batch, or None.
    #[getter]
    fn last_offset(&self) -> Option<i64> {
        self.scan.lock().last_offset
    }
    /// The greatest maxTimestamp of a valid batch, or -1.
    #[getter]
    fn max_timestamp(&self) -> i64 {
        self.scan.lock().max_timestamp
    }
}

/// Batch positions and offsets of a `.log` (headers only), or None if it is missing.
#[pyfunction]
pub fn scan_log(py: Python<'_>, path: PathBuf, base_offset: i64) -> PyResult<Option<SegmentScan>> {
    let scan = py.detach(|| inspect::scan_log(&path, base_offset))?;
    Ok(scan.map(|s| SegmentScan { scan: Mutex::new(s) }))
}

/// What is wrong with an index, one line each (checked against `log` if given).
#[pyfunction]
#[pyo3(signature = (index, log, base_offset))]
pub fn check_index(index: &IndexContents, log: Option<&SegmentScan>, base_offset: i64) -> Vec<String> {
    let scan = log.map(|l| l.scan.lock().clone());
    inspect::check_index(&index.contents, scan.as_ref(), base_offset)
}
