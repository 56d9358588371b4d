//! `seglog._native.Store`: the core store behind a frozen class. Every call that
//! touches the disk runs with the GIL released.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use super::columns::{BinaryColumn, ByteBuffer, Columns};
use super::errors::SeglogError;
use super::records::{decode, extract_record, to_records, InRecord};
use crate::log::now_ms;
use crate::record::batch::{build_batches, HeaderRef};
use crate::record::{Compression, NewRecord};
use crate::store::Store as CoreStore;
use crate::watch::DirWatcher;

/// Config values may be given as str, int, float or bool; Kafka's own form is text.
pub fn config_map(config: Option<&Bound<'_, PyDict>>) -> PyResult<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let Some(config) = config else { return Ok(out) };
    for (k, v) in config.iter() {
        let key: String = k.extract().map_err(|_| PyTypeError::new_err("config keys must be str"))?;
        let value = if v.is_instance_of::<PyBool>() {
            if v.extract::<bool>()? { "true" } else { "false" }.to_string()
        } else if v.is_instance_of::<PyInt>()
            || v.is_instance_of::<PyFloat>()
            || v.is_instance_of::<PyString>()
        {
            v.str()?.to_string()
        } else {
            return Err(PyTypeError::new_err(format!(
                "config {key:?}: expected str, int, float or bool, got {}",
                v.get_type().name()?
            )));
        };
        out.insert(key, value);
    }
    Ok(out)
}

fn compression(name: &str) -> PyResult<Compression> {
    Compression::from_name(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "compression_type must be one of none, gzip, snappy, lz4, zstd; got {name:?}"
        ))
    })
}

/// Decoded, CRC-checked batches from `offset` on. Batches a cleaning emptied
/// hold no records: reading goes on past them, so that an empty answer means
/// the log end, never "nothing here, look further".
fn read_records(
    core: &CoreStore,
    topic: &str,
    partition: i32,
    offset: i64,
    max_bytes: u64,
) -> crate::error::Result<Vec<super::records::DecodedBatch>> {
    let log = core.partition(topic, partition)?;
    let mut pos = offset;
    loop {
        let bytes = log.read(pos, max_bytes)?.bytes()?;
        // Every batch a reader gets is CRC-checked: nothing corrupt reaches it.
        let batches = decode(&bytes, true)?;
        let Some(last) = batches.last() else { return Ok(batches) };
        if batches.iter().any(|b| b.has_records_from(offset)) {
            return Ok(batches);
        }
        let next = last.next_offset();
        if next <= pos || next >= log.log_end_offset() {
            return Ok(batches);
        }
        pos = next;
    }
}

#[pyclass(frozen, module = "seglog._native", name = "Store")]
pub struct Store {
    inner: Arc<CoreStore>,
    pid: u32,
    generation: u64,
}

impl Store {
    /// The store, if this is still the process that opened it (a forked child
    /// must not share the parent's locks, maps or threads).
    pub(crate) fn core(&self) -> PyResult<&Arc<CoreStore>> {
        if super::fork_generation() != self.generation {
            let pid = std::process::id();
            return Err(SeglogError::new_err(format!(
                "this Store was opened by process {} and cannot be used in forked process {pid}; \
                 call seglog.open() again in the child",
                self.pid
            )));
        }
        Ok(&self.inner)
    }
}

#[pymethods]
impl Store {
    #[new]
    #[pyo3(signature = (path, config = None, read_only = false))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        config: Option<&Bound<'_, PyDict>>,
        read_only: bool,
    ) -> PyResult<Self> {
        let config = config_map(config)?;
        let inner = py.detach(|| CoreStore::open(&path, &config, read_only))?;
        Ok(Store { inner, pid: std::process::id(), generation: super::fork_generation() })
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path().to_owned()
    }
    #[getter]
    fn read_only(&self) -> bool {
        self.inner.is_read_only()
    }
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }
    #[getter]
    fn opened_by_pid(&self) -> u32 {
        self.pid
    }
    #[getter]
    fn clean_shutdown(&self) -> bool {
        self.inner.was_clean_shutdown()
    }
    /// (segments scanned, bytes truncated, segments deleted) by recovery at open.
    #[getter]
    fn recovery(&self) -> (usize, u64, usize) {
        let r = self.inner.load_report();
        (r.recovered_segments, r.truncated_bytes, r.deleted_segments)
    }

    #[pyo3(signature = (name, partitions = 1, config = None))]
    fn create_topic(
        &self,
        py: Python<'_>,
        name: &str,
        partitions: i32,
        config: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        let config = config_map(config)?;
        let core = self.core()?;
        py.detach(|| core.create_topic(name, partitions, &config))?;
        Ok(())
    }

    fn delete_topic(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let core = self.core()?;
        Ok(py.detach(|| core.delete_topic(name))?)
    }

    fn alter_topic_config(&self, py: Python<'_>, name: &str, changes: &Bound<'_, PyDict>) -> PyResult<()> {
        let mut map = BTreeMap::new();
        for (k, v) in changes.iter() {
            let key: String = k.extract().map_err(|_| PyTypeError::new_err("config keys must be str"))?;
            let value = if v.is_none() {
                None
            } else {
                let d = PyDict::new(py);
                d.set_item(&key, v)?;
                config_map(Some(&d))?.remove(&key)
            };
            map.insert(key, value);
        }
        let core = self.core()?;
        Ok(py.detach(|| core.alter_topic_config(name, &map))?)
    }

    fn topics(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let core = self.core()?;
        Ok(py.detach(|| core.topics())?)
    }

    fn partition_count(&self, py: Python<'_>, topic: &str) -> PyResult<usize> {
        let core = self.core()?;
        Ok(py.detach(|| core.topic(topic))?.partitions.len())
    }

    /// A dict: name, topic_id, partitions (list of dicts), config, overrides.
    fn describe<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let core = self.core()?;
        let d = py.detach(|| core.describe(name))?;
        let out = PyDict::new(py);
        out.set_item("name", &d.name)?;
        out.set_item("topic_id", &d.topic_id)?;
        let parts = PyList::empty(py);
        for p in &d.partitions {
            let pd = PyDict::new(py);
            pd.set_item("partition", p.partition)?;
            pd.set_item("log_start_offset", p.log_start_offset)?;
            pd.set_item("log_end_offset", p.log_end_offset)?;
            pd.set_item("size_bytes", p.size_bytes)?;
            pd.set_item("segment_count", p.segment_count)?;
            pd.set_item("recovery_point", p.recovery_point)?;
            parts.append(pd)?;
        }
        out.set_item("partitions", parts)?;
        out.set_item("config", d.config)?;
        out.set_item("overrides", d.overrides)?;
        Ok(out)
    }

    /// Kafka's default partitioner: murmur2(key) mod the topic's partition count.
    fn partition_for_key(&self, py: Python<'_>, topic: &str, key: PyBackedBytes) -> PyResult<i32> {
        let core = self.core()?;
        let t = py.detach(|| core.topic(topic))?;
        Ok(t.partition_for_key(&key))
    }

    /// Appends records as one or more batches; returns (base_offset, last_offset).
    #[pyo3(signature = (topic, partition, records, compression_type = "none", durable = false, create = false))]
    #[allow(clippy::too_many_arguments)]
    fn append(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        records: &Bound<'_, PyAny>,
        compression_type: &str,
        durable: bool,
        create: bool,
    ) -> PyResult<(i64, i64)> {
        let codec = compression(compression_type)?;
        let items: Vec<InRecord> = records
            .try_iter()
            .map_err(|_| PyTypeError::new_err("records must be an iterable of bytes or tuples"))?
            .map(|r| extract_record(&r?))
            .collect::<PyResult<_>>()?;
        if items.is_empty() {
            return Err(PyValueError::new_err("records is empty: nothing to append"));
        }
        let core = self.core()?;
        let info = py.detach(|| {
            let t = if create { core.topic_or_create(topic)? } else { core.topic(topic)? };
            let log = t.partition(partition)?.clone();
            for r in &items {
                log.check_key(r.key.as_deref())?;
            }
            let config = log.config();
            let now = now_ms();
            let headers: Vec<Vec<HeaderRef<'_>>> = items
                .iter()
                .map(|r| r.headers.iter().map(|(k, v)| (k.as_bytes(), v.as_deref())).collect())
                .collect();
            let recs: Vec<NewRecord<'_>> = items
                .iter()
                .zip(&headers)
                .map(|(r, h)| NewRecord {
                    timestamp: r.timestamp.unwrap_or(now),
                    key: r.key.as_deref(),
                    value: r.value.as_deref(),
                    headers: h,
                })
                .collect();
            let max = config.max_message_bytes.min(1 << 20);
            let buf = build_batches(&recs, codec, crate::record::TimestampType::CreateTime, max);
            let info = log.append_trusted(buf)?;
            if durable {
                log.wait_durable(info.last_offset + 1)?;
            }
            Ok::<_, crate::error::Error>(info)
        })?;
        Ok((info.base_offset, info.last_offset))
    }

    /// Appends RecordBatch v2 bytes made elsewhere (validated: CRC, records).
    #[pyo3(signature = (topic, partition, data, durable = false))]
    fn append_raw(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        data: PyBackedBytes,
        durable: bool,
    ) -> PyResult<(i64, i64)> {
        let core = self.core()?;
        let info = py.detach(|| {
            let log = core.partition(topic, partition)?;
            let info = log.append(data.to_vec())?;
            if durable {
                log.wait_durable(info.last_offset + 1)?;
            }
            Ok::<_, crate::error::Error>(info)
        })?;
        Ok((info.base_offset, info.last_offset))
    }

    /// Records at or after `offset`, from whole batches of at most `max_bytes`
    /// (always at least one batch).
    #[pyo3(signature = (topic, partition, offset, max_bytes = 1048576, max_records = None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyString>,
        partition: i32,
        offset: i64,
        max_bytes: u64,
        max_records: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        Ok(self.read_next(py, topic, partition, offset, max_bytes, max_records)?.0)
    }

    /// As `read`, plus the offset after the last batch read (which may hold no
    /// records: a compacted log can end a segment with an empty batch), so that
    /// a consumer can move past it. At the log end: ([], offset).
    #[pyo3(signature = (topic, partition, offset, max_bytes = 1048576, max_records = None))]
    fn read_next<'py>(
        &self,
        py: Python<'py>,
        topic: &Bound<'py, PyString>,
        partition: i32,
        offset: i64,
        max_bytes: u64,
        max_records: Option<usize>,
    ) -> PyResult<(Bound<'py, PyList>, i64)> {
        let name = topic.to_str()?;
        let core = self.core()?;
        let batches = py.detach(|| read_records(core, name, partition, offset, max_bytes))?;
        let limit = max_records.unwrap_or(usize::MAX);
        let records = to_records(py, topic, partition, &batches, offset, limit)?;
        let next = if records.len() >= limit && limit > 0 {
            // Cut short: go on right after the last record returned.
            let last = records.get_item(records.len() - 1)?;
            last.getattr("offset")?.extract::<i64>()? + 1
        } else {
            batches.last().map_or(offset, |b| b.next_offset().max(offset))
        };
        Ok((records, next))
    }

    /// The raw batches `read` would decode, as bytes.
    #[pyo3(signature = (topic, partition, offset, max_bytes = 1048576))]
    fn read_raw<'py>(
        &self,
        py: Python<'py>,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: u64,
    ) -> PyResult<Vec<u8>> {
        let core = self.core()?;
        Ok(py.detach(|| core.partition(topic, partition)?.read(offset, max_bytes)?.bytes())?)
    }

    /// (segment path, position, length) of the batches `read` would return, for
    /// zero-copy transfer (os.sendfile), or None at the log end.
    #[pyo3(signature = (topic, partition, offset, max_bytes = 1048576))]
    fn file_range(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: u64,
    ) -> PyResult<Option<(PathBuf, u64, u64)>> {
        let core = self.core()?;
        let slice = py.detach(|| core.partition(topic, partition)?.read(offset, max_bytes))?;
        Ok(slice.range.map(|r| (r.path, r.position, r.length)))
    }

    /// (offset, timestamp) of the first record with timestamp >= `timestamp`.
    fn offset_for_time(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> PyResult<Option<(i64, i64)>> {
        let core = self.core()?;
        Ok(py.detach(|| core.partition(topic, partition)?.offset_for_time(timestamp))?)
    }

    /// (log start offset, log end offset) of a partition.
    fn offsets(&self, py: Python<'_>, topic: &str, partition: i32) -> PyResult<(i64, i64)> {
        let core = self.core()?;
        Ok(py.detach(|| {
            let log = core.partition(topic, partition)?;
            log.follow_writer()?;
            Ok::<_, crate::error::Error>((log.log_start_offset(), log.log_end_offset()))
        })?)
    }

    /// Waits up to `timeout` seconds until any of `partitions` ((topic, partition,
    /// position) triples) has data at or past its position. Returns whether one has.
    fn wait_for_data(
        &self,
        py: Python<'_>,
        partitions: Vec<(String, i32, i64)>,
        timeout: f64,
    ) -> PyResult<bool> {
        let core = self.core()?;
        let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 1e9));
        Ok(py.detach(|| -> crate::error::Result<bool> {
            let logs = partitions
                .iter()
                .map(|(t, p, pos)| Ok((core.partition(t, *p)?, *pos)))
                .collect::<crate::error::Result<Vec<_>>>()?;
            let deadline = Instant::now() + timeout;
            if core.is_read_only() {
                let dirs: Vec<&std::path::Path> = logs.iter().map(|(l, _)| l.dir()).collect();
                let watcher = DirWatcher::new(&dirs)?;
                loop {
                    for (log, _) in &logs {
                        log.follow_writer()?;
                    }
                    if logs.iter().any(|(l, pos)| l.log_end_offset() > *pos) {
                        return Ok(true);
                    }
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(false);
                    }
                    // A cap on each wait also catches what inotify cannot see
                    // (a directory created after the watch was set up).
                    watcher.wait(left.min(Duration::from_millis(500)))?;
                }
            }
            let signal = core.append_signal();
            loop {
                let seen = signal.current();
                if logs.iter().any(|(l, pos)| l.log_end_offset() > *pos) {
                    return Ok(true);
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() || !signal.wait_after(seen, left) {
                    return Ok(logs.iter().any(|(l, pos)| l.log_end_offset() > *pos));
                }
            }
        })?)
    }

    /// Reads records from several partitions into Arrow column buffers. Each
    /// request is (topic, partition, offset); reading stops at `max_records` in
    /// all or `max_bytes` per partition. Returns the columns (as bytes, see
    /// seglog._consumer) and each partition's next offset (None if nothing read).
    #[pyo3(signature = (requests, max_records, max_bytes = 1048576))]
    fn read_columns<'py>(
        &self,
        py: Python<'py>,
        requests: Vec<(String, i32, i64)>,
        max_records: usize,
        max_bytes: u64,
    ) -> PyResult<(Bound<'py, PyDict>, Vec<Option<i64>>)> {
        let core = self.core()?;
        let (cols, nexts) = py.detach(|| -> crate::error::Result<_> {
            let mut cols = Columns::default();
            let mut nexts = Vec::with_capacity(requests.len());
            for (topic, p, offset) in &requests {
                let log = core.partition(topic, *p)?;
                let mut pos = *offset;
                let mut next = None;
                while cols.rows < max_records {
                    let slice = log.read(pos, max_bytes)?;
                    if slice.range.is_none() {
                        break;
                    }
                    let bytes = slice.bytes()?;
                    match cols.extend(topic, *p, &bytes, pos, max_records, true)? {
                        Some(n) if n > pos => {
                            pos = n;
                            next = Some(n);
                        }
                        _ => break,
                    }
                }
                nexts.push(next);
            }
            Ok((cols, nexts))
        })?;
        // The column vectors move into ByteBuffers that pyarrow wraps in place.
        let d = PyDict::new(py);
        let buf = |v: Vec<u8>| Ok::<_, PyErr>(Bound::new(py, ByteBuffer(v))?.into_any());
        let bin = |c: BinaryColumn| -> PyResult<Bound<'py, PyTuple>> {
            let nulls = c.nulls.into_pyobject(py)?.into_any();
            PyTuple::new(py, [buf(c.validity)?, buf(c.offsets)?, buf(c.data)?, nulls])
        };
        let Columns {
            key,
            value,
            topic,
            partition,
            offset,
            timestamp,
            timestamp_type,
            header_offsets,
            header_key,
            header_value,
            rows,
            ..
        } = cols;
        d.set_item("rows", rows)?;
        d.set_item("key", bin(key)?)?;
        d.set_item("value", bin(value)?)?;
        d.set_item("topic", bin(topic)?)?;
        d.set_item("partition", buf(partition)?)?;
        d.set_item("offset", buf(offset)?)?;
        d.set_item("timestamp", buf(timestamp)?)?;
        d.set_item("timestampType", buf(timestamp_type)?)?;
        d.set_item("header_offsets", buf(header_offsets)?)?;
        d.set_item("header_key", bin(header_key)?)?;
        d.set_item("header_value", bin(header_value)?)?;
        Ok((d, nexts))
    }

    fn truncate_to(&self, py: Python<'_>, topic: &str, partition: i32, offset: i64) -> PyResult<()> {
        let core = self.core()?;
        Ok(py.detach(|| core.partition(topic, partition)?.truncate_to(offset))?)
    }

    /// Retention, compaction and removal of `.deleted` files now (for every
    /// topic, or one). Returns what was done, as a dict.
    #[pyo3(signature = (topic = None, force_clean = false))]
    fn run_maintenance<'py>(
        &self,
        py: Python<'py>,
        topic: Option<&str>,
        force_clean: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let core = self.core()?;
        let r = py.detach(|| core.run_maintenance(force_clean, topic))?;
        let d = PyDict::new(py);
        d.set_item("deleted_segments", r.deleted_segments)?;
        d.set_item("deleted_bytes", r.deleted_bytes)?;
        d.set_item("cleaned_partitions", r.cleaned_partitions)?;
        d.set_item("cleaned_bytes_in", r.cleaned_bytes_in)?;
        d.set_item("cleaned_bytes_out", r.cleaned_bytes_out)?;
        d.set_item("records_removed", r.records_removed)?;
        d.set_item("files_removed", r.files_removed)?;
        Ok(d)
    }

    /// Moves a partition's log start offset forward (Kafka's DeleteRecords).
    fn delete_records(
        &self,
        py: Python<'_>,
        topic: &str,
        partition: i32,
        before_offset: i64,
    ) -> PyResult<()> {
        let core = self.core()?;
        if core.is_read_only() {
            return Err(crate::error::Error::ReadOnly("delete_records").into());
        }
        Ok(py.detach(|| core.delete_records(topic, partition, before_offset))?)
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let core = self.core()?;
        Ok(py.detach(|| core.flush())?)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if super::fork_generation() != self.generation {
            // The child never owned the store: nothing of it to close here.
            return Ok(());
        }
        let core = &self.inner;
        Ok(py.detach(|| core.close())?)
    }
}
