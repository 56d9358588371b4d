//! `seglog._native.Store`: the core store behind a frozen class. Every call that
//! touches the disk runs with the GIL released.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use super::errors::PyResult;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use super::buffer::ByteBuffer;
use super::records::{extract_record, record_vec, with_new_records, ConsumerRecord, InRecord};
use seglog_core::client::columns::{BinaryColumn, Columns};
use seglog_core::client::consumer_read::{read_batches, read_columns};
use seglog_core::client::partitioner::partition_for_key;
use seglog_core::group;
use seglog_core::log::AppendOrigin;
use seglog_core::record::batch::NO_TIMESTAMP;
use seglog_core::record::Compression;
use seglog_core::store::Store as CoreStore;

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
            ))
            .into());
        };
        out.insert(key, value);
    }
    Ok(out)
}

#[pyclass(frozen, module = "seglog._native", name = "Store")]
pub struct Store {
    inner: Arc<CoreStore>,
    owner: super::Owner,
}

impl Store {
    /// The store, if this is still the process that opened it (a forked child
    /// must not share the parent's locks, maps or threads).
    pub(crate) fn core(&self) -> PyResult<&Arc<CoreStore>> {
        self.owner.check("Store", "; call seglog.open() again in the child")?;
        Ok(&self.inner)
    }

    /// The records `read_next` returns, and the offset to read
    /// next: right after the last record when `max_records` cut the read short,
    /// else after the last batch read (which may hold no records: a compacted
    /// log can end a segment with an empty batch).
    fn records_and_next(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyString>,
        partition: i32,
        offset: i64,
        max_bytes: u64,
        max_records: Option<usize>,
    ) -> PyResult<(Vec<Py<ConsumerRecord>>, i64)> {
        let name = topic.to_str()?;
        let core = self.core()?;
        let limit = max_records.unwrap_or(usize::MAX);
        let batches =
            py.detach(|| read_batches(&*core.partition(name, partition)?, offset, max_bytes, limit.max(1)))?;
        let records = record_vec(py, topic, partition, &batches, offset, limit)?;
        let next = match records.last() {
            Some(last) if records.len() >= limit && limit > 0 => last.get().offset + 1,
            _ => batches.last().map_or(offset, |b| b.next_offset().max(offset)),
        };
        Ok((records, next))
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
        Ok(Store { inner, owner: super::Owner::here() })
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
        self.owner.pid()
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
        out.set_item("last_maintenance_error", d.last_maintenance_error)?;
        Ok(out)
    }

    /// Kafka's default partitioner: murmur2(key) mod the topic's partition count.
    fn partition_for_key(&self, py: Python<'_>, topic: &str, key: PyBackedBytes) -> PyResult<i32> {
        let core = self.core()?;
        let t = py.detach(|| core.topic(topic))?;
        Ok(partition_for_key(&key, t.partitions.len() as i32))
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
        let codec = Compression::parse(compression_type)?;
        let items: Vec<InRecord> = records
            .try_iter()
            .map_err(|_| PyTypeError::new_err("records must be an iterable of bytes or tuples"))?
            .map(|r| extract_record(&r?))
            .collect::<pyo3::PyResult<_>>()?;
        let core = self.core()?;
        let info = py.detach(|| {
            let t = if create { core.topic_or_create(topic)? } else { core.topic(topic)? };
            let log = t.partition(partition)?;
            with_new_records(&items, NO_TIMESTAMP, |recs| {
                log.append_records(recs, codec, durable, AppendOrigin::Client)
            })
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
            let info = log.append_as_leader(data.to_vec(), AppendOrigin::Client)?;
            if durable {
                log.wait_durable(info.last_offset + 1)?;
            }
            Ok::<_, seglog_core::error::Error>(info)
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
        let (records, next) = self.records_and_next(py, topic, partition, offset, max_bytes, max_records)?;
        Ok((PyList::new(py, records)?, next))
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
            log.catch_up()?;
            Ok::<_, seglog_core::error::Error>((log.log_start_offset(), log.log_end_offset()))
        })?)
    }

    #[pyo3(signature = (requests, max_records, max_bytes = 1048576))]
    fn read_columns<'py>(
        &self,
        py: Python<'py>,
        requests: Vec<(String, i32, i64)>,
        max_records: usize,
        max_bytes: u64,
    ) -> PyResult<(Bound<'py, PyDict>, Vec<Option<i64>>)> {
        let core = self.core()?;
        let (cols, nexts) = py.detach(|| read_columns(core, &requests, max_records, max_bytes))?;
        Ok((columns_to_py(py, cols)?, nexts))
    }

    /// The committed (offset, metadata) per (topic, partition) of `group`, and
    /// how many records of `__consumer_offsets` could not be parsed.
    fn load_committed(&self, py: Python<'_>, group: &str) -> PyResult<(group::CommittedOffsets, usize)> {
        let core = self.core()?;
        Ok(py.detach(|| group::load_committed(core, group))?)
    }

    /// Appends a group's commits to `__consumer_offsets`, durably.
    fn commit_offsets(&self, py: Python<'_>, group: &str, offsets: group::CommittedOffsets) -> PyResult<()> {
        let core = self.core()?;
        Ok(py.detach(|| group::commit(core, group, &offsets))?)
    }

    /// Every group `__consumer_offsets` knows (only `group` when given): id ->
    /// {"offsets": {(topic, partition): (offset, metadata, commit_timestamp)},
    /// "metadata": None or the last GroupMetadataValue as a dict}; and how many
    /// records could not be parsed.
    #[pyo3(signature = (group = None))]
    fn load_groups<'py>(
        &self,
        py: Python<'py>,
        group: Option<&str>,
    ) -> PyResult<(Bound<'py, PyDict>, usize)> {
        let core = self.core()?;
        let (groups, skipped) = py.detach(|| group::load_groups(core, group))?;
        let out = PyDict::new(py);
        for (id, g) in groups {
            let d = PyDict::new(py);
            let offsets = PyDict::new(py);
            for ((topic, partition), v) in g.offsets {
                offsets.set_item((topic, partition), (v.offset, v.metadata, v.commit_timestamp))?;
            }
            d.set_item("offsets", offsets)?;
            match g.metadata {
                None => d.set_item("metadata", py.None())?,
                Some(m) => {
                    let md = PyDict::new(py);
                    md.set_item("protocol_type", &m.protocol_type)?;
                    md.set_item("generation", m.generation)?;
                    md.set_item("protocol", &m.protocol)?;
                    md.set_item("leader", &m.leader)?;
                    md.set_item("current_state_timestamp", m.current_state_timestamp)?;
                    let members = PyList::empty(py);
                    for member in &m.members {
                        let e = member_dict(
                            py,
                            &m.protocol_type,
                            &member.member_id,
                            member.group_instance_id.as_deref(),
                            &member.client_id,
                            &member.client_host,
                            &member.assignment,
                        )?;
                        e.set_item("session_timeout", member.session_timeout)?;
                        e.set_item("rebalance_timeout", member.rebalance_timeout)?;
                        members.append(e)?;
                    }
                    md.set_item("members", members)?;
                    d.set_item("metadata", md)?;
                }
            }
            out.set_item(id, d)?;
        }
        Ok((out, skipped))
    }

    /// Deletes a group as Kafka's coordinator does (tombstones for its offsets
    /// and metadata, durably); how many tombstones: 0 for an unknown group.
    fn delete_group(&self, py: Python<'_>, group: &str) -> PyResult<usize> {
        let core = self.core()?;
        Ok(py.detach(|| group::delete_group(core, group))?)
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
            return Err(seglog_core::error::Error::ReadOnly("delete_records").into());
        }
        Ok(py.detach(|| core.delete_records(topic, partition, before_offset))?)
    }

    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let core = self.core()?;
        Ok(py.detach(|| core.flush())?)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        if !self.owner.is_here() {
            // The child never owned the store: nothing of it to close here.
            return Ok(());
        }
        let core = &self.inner;
        Ok(py.detach(|| core.close())?)
    }
}

/// The columns as the dict `seglog._arrow.columns_to_batch` reads: the column
/// vectors move into ByteBuffers that pyarrow wraps in place.
pub(crate) fn columns_to_py<'py>(py: Python<'py>, cols: Columns) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let buf = |v: Vec<u8>| Ok::<_, PyErr>(Bound::new(py, ByteBuffer(v))?.into_any());
    let bin = |c: BinaryColumn| -> pyo3::PyResult<Bound<'py, PyTuple>> {
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
    Ok(d)
}

/// A group member as Python sees it: ids, client, host, and (for a consumer
/// group) its assigned (topic, partition)s from its ConsumerProtocolAssignment;
/// an assignment that does not decode is shown as none.
pub(crate) fn member_dict<'py>(
    py: Python<'py>,
    protocol_type: &str,
    member_id: &str,
    group_instance_id: Option<&str>,
    client_id: &str,
    client_host: &str,
    assignment: &[u8],
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("member_id", member_id)?;
    d.set_item("group_instance_id", group_instance_id)?;
    d.set_item("client_id", client_id)?;
    d.set_item("client_host", client_host)?;
    let assigned: Vec<(String, i32)> = if protocol_type == "consumer" && !assignment.is_empty() {
        group::decode_consumer_assignment(assignment)
            .map(|ts| {
                ts.into_iter().flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p))).collect()
            })
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    d.set_item("assignment", assigned)?;
    Ok(d)
}
