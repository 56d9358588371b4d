//! `seglog._native.Consumer`: seglog-client's consumer engine with Python
//! records. Every call runs with the GIL released (the engine's lock is taken
//! after releasing it), and takes the GIL back only to make the records of a
//! read; a `ConsumerIterator` hands records out one at a time from the chunk
//! they were decoded into, with no Python bookkeeping per record.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use seglog_client::consumer::{
    BrokerSource, Chunk, ConsumerConfig, Decode, Membership, OffsetReset, Record, Source, StoreSource,
    TopicPartition,
};
use seglog_client::{ClientConfig, Cluster, GroupMember, MemberConfig};
use seglog_core::client::consumer_read::DecodedBatch;
use seglog_core::error::Result as CoreResult;
use seglog_core::group::CommittedOffsets;

use crate::errors::{to_py, BindError, PyResult};
use crate::records::{record_vec, ConsumerRecord};
use crate::store::{columns_to_py, Store};

/// A record as the engine keeps it: the Python object, its offset readable
/// without the GIL.
pub struct PyRecord(Py<ConsumerRecord>);

impl Record for PyRecord {
    fn offset(&self) -> i64 {
        self.0.get().offset
    }
}

type Engine = seglog_client::consumer::Consumer<PyRecord>;

/// Makes ConsumerRecord objects, taking the GIL back for it; each topic's
/// name is one str object shared by its records.
#[derive(Default)]
struct PyDecode {
    names: HashMap<String, Py<PyString>>,
    /// Why the last decoding failed, as Python raised it.
    failed: Option<PyErr>,
}

impl Decode<PyRecord> for PyDecode {
    fn decode(
        &mut self,
        tp: &TopicPartition,
        batches: &[DecodedBatch],
        from: i64,
        limit: usize,
    ) -> CoreResult<Vec<PyRecord>> {
        Python::attach(|py| {
            let name = self.names.entry(tp.0.clone()).or_insert_with(|| PyString::new(py, &tp.0).unbind());
            let name = name.bind(py).clone();
            match record_vec(py, &name, tp.1, batches, from, limit) {
                Ok(records) => Ok(records.into_iter().map(PyRecord).collect()),
                Err(e) => {
                    let text = e.to_string();
                    self.failed = Some(e);
                    Err(seglog_core::error::Error::InvalidRecord(text))
                }
            }
        })
    }
}

/// A timeout in milliseconds: inf waits for ever, NaN and <= 0 not at all.
fn millis(ms: f64) -> Duration {
    if ms.is_nan() {
        Duration::ZERO
    } else if ms.is_finite() {
        Duration::from_secs_f64((ms / 1000.0).clamp(0.0, 1e9))
    } else {
        Duration::from_secs(1_000_000_000)
    }
}

pub(crate) fn client_config(client_id: &str, timeout_ms: u64) -> ClientConfig {
    let timeout = Duration::from_millis(timeout_ms.max(1));
    ClientConfig {
        client_id: client_id.to_string(),
        connect_timeout: timeout,
        request_timeout: timeout,
        ..ClientConfig::default()
    }
}

struct State {
    engine: Engine,
    decode: PyDecode,
}

#[pyclass(frozen, module = "seglog._native", name = "Consumer")]
pub struct Consumer {
    state: Mutex<State>,
    /// The Python class a poll's keys are made of (seglog.TopicPartition), and
    /// one key object per partition, made once.
    key_type: Py<PyAny>,
    keys: Mutex<HashMap<TopicPartition, Py<PyAny>>>,
    /// Records of `__consumer_offsets` that could not be parsed when the
    /// group's offsets were loaded from a store.
    #[pyo3(get)]
    skipped_offset_records: usize,
    owner: super::Owner,
}

impl Consumer {
    /// Runs `f` on the engine with the GIL released.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Engine, &mut PyDecode) -> CoreResult<T> + Send,
    ) -> PyResult<T> {
        self.owner.check("Consumer", "; make a new Consumer in the child")?;
        py.detach(|| {
            let mut state = self.state.lock();
            let State { engine, decode } = &mut *state;
            f(engine, decode).map_err(|e| match decode.failed.take() {
                Some(raised) => BindError::from(raised),
                None => BindError::from(e),
            })
        })
    }
}

fn records_list<'py>(
    py: Python<'py>,
    chunk: &Chunk<PyRecord>,
    range: std::ops::Range<usize>,
) -> PyResult<Bound<'py, PyList>> {
    Ok(PyList::new(py, chunk.records()[range].iter().map(|r| r.0.clone_ref(py)))?)
}

#[pymethods]
impl Consumer {
    /// A consumer of `store` (a native Store) or, without one, of the
    /// cluster at `bootstrap_servers`. With `group_id`, the group goes
    /// through the coordinator at `coordinator` when given, else its offsets
    /// live in the store.
    #[new]
    #[pyo3(signature = (
        store, bootstrap_servers, group_id, coordinator, *, key_type, auto_offset_reset, enable_auto_commit,
        auto_commit_interval_ms, max_partition_fetch_bytes, metadata_max_age_ms, fetch_max_wait_ms,
        group_instance_id, session_timeout_ms, heartbeat_interval_ms, max_poll_interval_ms,
        partition_assignment_strategy, client_id, request_timeout_ms
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: Option<&Bound<'_, Store>>,
        bootstrap_servers: Option<&str>,
        group_id: Option<&str>,
        coordinator: Option<&str>,
        key_type: Py<PyAny>,
        auto_offset_reset: &str,
        enable_auto_commit: bool,
        auto_commit_interval_ms: u64,
        max_partition_fetch_bytes: u64,
        metadata_max_age_ms: u64,
        fetch_max_wait_ms: u64,
        group_instance_id: Option<String>,
        session_timeout_ms: i32,
        heartbeat_interval_ms: i32,
        max_poll_interval_ms: i32,
        partition_assignment_strategy: Vec<String>,
        client_id: &str,
        request_timeout_ms: u64,
    ) -> PyResult<Self> {
        let config = ConsumerConfig {
            auto_offset_reset: OffsetReset::parse(auto_offset_reset)?,
            enable_auto_commit,
            auto_commit_interval: Duration::from_millis(auto_commit_interval_ms),
            max_partition_fetch_bytes,
            metadata_max_age: Duration::from_millis(metadata_max_age_ms),
            fetch_max_wait: Duration::from_millis(fetch_max_wait_ms),
        };
        let core = store.map(|s| s.get().core().cloned()).transpose()?;
        let client = client_config(client_id, request_timeout_ms);
        let member = MemberConfig {
            group_id: group_id.unwrap_or_default().to_string(),
            instance_id: group_instance_id,
            session_timeout_ms,
            rebalance_timeout_ms: max_poll_interval_ms,
            heartbeat_interval_ms,
            assignors: partition_assignment_strategy,
            ..MemberConfig::default()
        };
        let (engine, skipped) = py.detach(|| {
            let mut cluster: Option<Arc<Cluster>> = None;
            let source: Box<dyn Source> = match (&core, bootstrap_servers) {
                (Some(core), _) => Box::new(StoreSource::new(core.clone())),
                (None, Some(servers)) => {
                    let c = Arc::new(Cluster::connect(servers, client.clone())?);
                    cluster = Some(c.clone());
                    Box::new(BrokerSource::new(c))
                }
                (None, None) => {
                    return Err(seglog_core::error::Error::InvalidArgument(
                        "a Consumer needs a store or bootstrap_servers".into(),
                    ))
                }
            };
            let mut skipped = 0;
            let membership = match (group_id, coordinator, &core) {
                (None, ..) => None,
                (Some(_), Some(servers), _) => {
                    let c = match cluster.filter(|_| Some(servers) == bootstrap_servers) {
                        Some(c) => c,
                        None => Arc::new(Cluster::connect(servers, client.clone())?),
                    };
                    Some(Membership::Coordinated(GroupMember::new(c, member)?))
                }
                (Some(group), None, Some(core)) => {
                    let (m, n) = Membership::on_store(core.clone(), group)?;
                    skipped = n;
                    Some(m)
                }
                (Some(_), None, None) => {
                    return Err(seglog_core::error::Error::InvalidArgument(
                        "a group through a broker needs its coordinator's address".into(),
                    ))
                }
            };
            Ok((Engine::new(source, membership, config)?, skipped))
        })?;
        Ok(Consumer {
            state: Mutex::new(State { engine, decode: PyDecode::default() }),
            key_type,
            keys: Mutex::new(HashMap::new()),
            skipped_offset_records: skipped,
            owner: super::Owner::here(),
        })
    }

    /// The topics there are (internal ones included), sorted.
    fn topics(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.with(py, |e, _| e.topics())
    }

    /// How many partitions `topic` has; None if there is no such topic.
    fn partition_count(&self, py: Python<'_>, topic: String) -> PyResult<Option<i32>> {
        self.with(py, |e, _| e.partition_count(&topic))
    }

    #[pyo3(signature = (topics, pattern = None))]
    fn subscribe(&self, py: Python<'_>, topics: Vec<String>, pattern: Option<String>) -> PyResult<()> {
        self.with(py, |e, _| e.subscribe(&topics, pattern.as_deref()))
    }

    fn subscription(&self) -> Option<Vec<String>> {
        self.state.lock().engine.subscription()
    }

    fn unsubscribe(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |e, _| e.unsubscribe())
    }

    fn assign(&self, py: Python<'_>, partitions: Vec<TopicPartition>) -> PyResult<()> {
        self.with(py, |e, _| e.assign(partitions))
    }

    fn assignment(&self, py: Python<'_>) -> PyResult<Vec<TopicPartition>> {
        self.with(py, |e, _| e.assignment().map(<[_]>::to_vec))
    }

    fn position(&self, py: Python<'_>, topic: String, partition: i32) -> PyResult<i64> {
        let tp = (topic, partition);
        self.with(py, |e, _| e.position(&tp))
    }

    fn seek(&self, py: Python<'_>, topic: String, partition: i32, offset: i64) -> PyResult<()> {
        let tp = (topic, partition);
        self.with(py, |e, _| e.seek(&tp, offset))
    }

    /// Seeks to the log start ("earliest") or end ("latest") of `partitions`
    /// (every assigned one, for an empty list).
    fn seek_to(&self, py: Python<'_>, partitions: Vec<TopicPartition>, to: &str) -> PyResult<()> {
        let to = OffsetReset::parse(to)?;
        self.with(py, |e, _| e.seek_to(&partitions, to))
    }

    /// (log start offset, high watermark) of each partition.
    fn offsets(&self, py: Python<'_>, partitions: Vec<TopicPartition>) -> PyResult<Vec<(i64, i64)>> {
        self.with(py, |e, _| e.offsets(&partitions))
    }

    fn offsets_for_times(
        &self,
        py: Python<'_>,
        times: Vec<(TopicPartition, i64)>,
    ) -> PyResult<Vec<Option<(i64, i64)>>> {
        self.with(py, |e, _| e.offsets_for_times(&times))
    }

    /// {TopicPartition: [records]} of at most `max_records` records, waiting
    /// up to `timeout_ms` for some.
    fn poll<'py>(
        &self,
        py: Python<'py>,
        max_records: usize,
        timeout_ms: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let timeout = millis(timeout_ms);
        let got = self.with(py, |e, d| e.poll(max_records, timeout, d))?;
        let out = PyDict::new(py);
        for (tp, chunk, range) in got {
            let key = {
                let mut keys = self.keys.lock();
                match keys.get(&tp) {
                    Some(k) => k.clone_ref(py),
                    None => {
                        let k = self.key_type.bind(py).call1((tp.0.as_str(), tp.1))?.unbind();
                        keys.insert(tp, k.clone_ref(py));
                        k
                    }
                }
            };
            let records = records_list(py, &chunk, range)?;
            // A partition drained and read again in one poll comes twice.
            match out.get_item(&key)? {
                Some(list) => {
                    let list = list.cast_into::<PyList>().map_err(PyErr::from)?;
                    for r in records.iter() {
                        list.append(r)?;
                    }
                }
                None => out.set_item(key, records)?,
            }
        }
        Ok(out)
    }

    /// Iterates records one at a time, waiting up to `timeout_ms` (inf:
    /// forever) for more when none are left.
    fn records(slf: Bound<'_, Self>, timeout_ms: f64) -> ConsumerIterator {
        ConsumerIterator { consumer: slf.unbind(), timeout: millis(timeout_ms), current: Mutex::new(None) }
    }

    /// Arrow column buffers (what `Store.read_columns` gives) of at most
    /// `max_records` records, waiting up to `timeout_ms` for some.
    fn poll_columns<'py>(
        &self,
        py: Python<'py>,
        max_records: usize,
        timeout_ms: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let timeout = millis(timeout_ms);
        let cols = self.with(py, |e, _| e.poll_columns(max_records, timeout))?;
        columns_to_py(py, cols)
    }

    /// Commits [(topic, partition, offset, metadata)], or every assigned
    /// partition's position (None).
    #[pyo3(signature = (offsets = None))]
    fn commit(&self, py: Python<'_>, offsets: Option<Vec<(String, i32, i64, String)>>) -> PyResult<()> {
        let offsets: Option<CommittedOffsets> =
            offsets.map(|o| o.into_iter().map(|(t, p, off, m)| ((t, p), (off, m))).collect());
        self.with(py, |e, _| e.commit(offsets))
    }

    /// The group's committed (offset, metadata) of a partition, or None.
    fn committed(&self, py: Python<'_>, topic: String, partition: i32) -> PyResult<Option<(i64, String)>> {
        let tp = (topic, partition);
        self.with(py, |e, _| e.committed(&tp))
    }

    /// The generation of the group this member joined last (-1 before it
    /// joined, None when not a member through a broker).
    #[getter]
    fn generation(&self) -> Option<i32> {
        self.state.lock().engine.membership().and_then(Membership::coordinated).map(GroupMember::generation)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.state.lock().engine.is_closed()
    }

    /// Commits (with auto-commit and `autocommit`), leaves the group,
    /// stops. Returns why leaving the group failed, if it did.
    fn close(&self, py: Python<'_>, autocommit: bool) -> PyResult<Option<String>> {
        if !self.owner.is_here() {
            return Ok(None);
        }
        let left = self.with(py, |e, _| e.close(autocommit))?;
        Ok(left.map(|e| to_py(e).to_string()))
    }
}

/// Records one at a time from a Consumer's chunks.
#[pyclass(frozen, module = "seglog._native", name = "ConsumerIterator")]
pub struct ConsumerIterator {
    consumer: Py<Consumer>,
    timeout: Duration,
    // Held only to read or swap the chunk, never across a call.
    current: Mutex<Option<Arc<Chunk<PyRecord>>>>,
}

#[pymethods]
impl ConsumerIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<ConsumerRecord>>> {
        loop {
            if let Some(chunk) = self.current.lock().as_ref() {
                if let Some(r) = chunk.next_record() {
                    return Ok(Some(r.0.clone_ref(py)));
                }
            }
            let timeout = self.timeout;
            let next = self.consumer.get().with(py, |e, d| e.next_chunk(timeout, d))?;
            let Some(chunk) = next else {
                *self.current.lock() = None;
                return Ok(None);
            };
            *self.current.lock() = Some(chunk);
        }
    }
}
