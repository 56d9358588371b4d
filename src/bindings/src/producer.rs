//! `seglog._native.Producer` and its delivery futures. `send` runs with the GIL
//! held (it only encodes into memory); waiting, flushing and closing release it.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::{PyBytes, PyString, PyTuple};

use super::batch_items::{with_items, ByteItems};
use super::errors::to_py;
use super::store::Store;
use seglog_client::destination::ClusterDestination;
use seglog_client::{Cluster, IdempotentProducer, ProducerConfig as RemoteConfig};
use seglog_core::client::producer::{
    Acks, DeliveryCell, DeliveryResult, Producer as CoreProducer, ProducerConfig, SendOutcome,
};
use seglog_core::clock::now_ms;
use seglog_core::error::Error;
use seglog_core::record::HeaderRef;
use seglog_core::record::{Compression, TimestampType};

/// Where a record landed: Kafka's RecordMetadata.
#[pyclass(frozen, module = "seglog", name = "RecordMetadata")]
pub struct RecordMetadata {
    #[pyo3(get)]
    topic: Py<PyString>,
    #[pyo3(get)]
    partition: i32,
    #[pyo3(get)]
    offset: i64,
    /// The record's timestamp, or the log's append time for LogAppendTime topics.
    #[pyo3(get)]
    timestamp: i64,
    /// 0 = CreateTime, 1 = LogAppendTime.
    #[pyo3(get)]
    timestamp_type: i32,
}

#[pymethods]
impl RecordMetadata {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "RecordMetadata(topic={:?}, partition={}, offset={}, timestamp={})",
            self.topic.bind(py).to_string(),
            self.partition,
            self.offset,
            self.timestamp
        )
    }
    fn __eq__(&self, py: Python<'_>, other: &Self) -> PyResult<bool> {
        Ok(self.topic.bind(py).to_str()? == other.topic.bind(py).to_str()?
            && (self.partition, self.offset, self.timestamp)
                == (other.partition, other.offset, other.timestamp))
    }
}

/// The pending result of one `send`, like kafka-python's FutureRecordMetadata.
#[pyclass(frozen, module = "seglog", name = "FutureRecordMetadata")]
pub struct FutureRecordMetadata {
    cell: Arc<DeliveryCell>,
    topic: Py<PyString>,
    partition: i32,
    index: i32,
    timestamp: i64,
}

fn metadata(
    py: Python<'_>,
    topic: &Py<PyString>,
    partition: i32,
    index: i32,
    timestamp: i64,
    r: &DeliveryResult,
) -> PyResult<RecordMetadata> {
    match r {
        Ok(d) => Ok(RecordMetadata {
            topic: topic.clone_ref(py),
            partition,
            offset: d.base_offset + i64::from(index),
            timestamp: if d.log_append_time >= 0 { d.log_append_time } else { timestamp },
            timestamp_type: if d.log_append_time >= 0 {
                TimestampType::LogAppendTime.id()
            } else {
                TimestampType::CreateTime.id()
            },
        }),
        Err(e) => Err(clone_error(e)),
    }
}

fn clone_error(e: &Arc<Error>) -> PyErr {
    // Errors are shared by every record of a batch; each raise gets its own copy,
    // mapped like any other core error.
    to_py(e.duplicate())
}

#[pymethods]
impl FutureRecordMetadata {
    /// Waits for delivery and returns the RecordMetadata, or raises the error.
    #[pyo3(signature = (timeout = None))]
    fn get(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<RecordMetadata> {
        let limit = match timeout {
            Some(t) if !(t >= 0.0 && t.is_finite()) => {
                return Err(PyValueError::new_err(format!("timeout must be a finite number >= 0, got {t}")))
            }
            t => t.map(Duration::from_secs_f64),
        };
        let cell = self.cell.clone();
        let r = match cell.result() {
            Some(r) => r,
            None => py.detach(|| cell.wait(limit)).ok_or_else(|| {
                to_py(Error::Timeout(
                    limit.map_or(0, |d| d.as_millis() as u64),
                    "the record was not delivered in time".into(),
                ))
            })?,
        };
        metadata(py, &self.topic, self.partition, self.index, self.timestamp, &r)
    }

    #[getter]
    fn is_done(&self) -> bool {
        self.cell.result().is_some()
    }

    fn succeeded(&self) -> bool {
        matches!(self.cell.result(), Some(Ok(_)))
    }

    fn failed(&self) -> bool {
        matches!(self.cell.result(), Some(Err(_)))
    }

    /// The error if delivery failed, else None.
    #[getter]
    fn exception(&self) -> Option<PyErr> {
        match self.cell.result() {
            Some(Err(e)) => Some(clone_error(&e)),
            _ => None,
        }
    }

    /// Calls `f(*args, metadata)` on delivery (at once if already delivered), in
    /// the producer's sender thread, as kafka-python does. Returns the future.
    #[pyo3(signature = (f, *args))]
    fn add_callback(slf: Bound<'_, Self>, f: Py<PyAny>, args: Py<PyTuple>) -> Bound<'_, Self> {
        Self::register(&slf, f, args, true);
        slf
    }

    /// Calls `f(*args, exception)` if delivery fails.
    #[pyo3(signature = (f, *args))]
    fn add_errback(slf: Bound<'_, Self>, f: Py<PyAny>, args: Py<PyTuple>) -> Bound<'_, Self> {
        Self::register(&slf, f, args, false);
        slf
    }

    fn __repr__(&self) -> String {
        let state = match self.cell.result() {
            None => "pending",
            Some(Ok(_)) => "delivered",
            Some(Err(_)) => "failed",
        };
        format!("<FutureRecordMetadata partition={} {state}>", self.partition)
    }
}

impl FutureRecordMetadata {
    fn register(slf: &Bound<'_, Self>, f: Py<PyAny>, args: Py<PyTuple>, on_success: bool) {
        let me = slf.get();
        let py = slf.py();
        let (topic, partition, index, timestamp) =
            (me.topic.clone_ref(py), me.partition, me.index, me.timestamp);
        me.cell.on_complete(Box::new(move |r: &DeliveryResult| {
            Python::attach(|py| {
                let first = match (r, on_success) {
                    (Ok(_), true) => metadata(py, &topic, partition, index, timestamp, r)
                        .and_then(|m| Ok(Py::new(py, m)?.into_any())),
                    (Err(e), false) => Ok(clone_error(e).into_value(py).into_any()),
                    _ => return,
                };
                // kafka-python's order: f(*args, value).
                let call = first.and_then(|first| {
                    let mut items: Vec<Py<PyAny>> = args.bind(py).iter().map(|a| a.unbind()).collect();
                    items.push(first);
                    f.call1(py, PyTuple::new(py, items)?)
                });
                if let Err(e) = call {
                    e.write_unraisable(py, Some(f.bind(py)));
                }
            });
        }));
    }
}

fn header_list(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(PyBackedStr, Option<PyBackedBytes>)>> {
    let mut out = Vec::new();
    let Some(h) = obj.filter(|h| !h.is_none()) else { return Ok(out) };
    let iter = h
        .try_iter()
        .map_err(|_| PyTypeError::new_err("headers must be a sequence of (str, bytes | None) pairs"))?;
    for item in iter {
        let item = item?;
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item
            .extract()
            .map_err(|_| PyTypeError::new_err("a header must be a (str, bytes | None) pair"))?;
        let k: PyBackedStr = k.extract().map_err(|_| PyTypeError::new_err("a header key must be str"))?;
        let v = if v.is_none() {
            None
        } else {
            Some(v.extract().map_err(|_| PyTypeError::new_err("a header value must be bytes or None"))?)
        };
        out.push((k, v));
    }
    Ok(out)
}

/// A key or value argument of one `send`: a `bytes` object's own buffer
/// (immutable, kept alive by the caller's reference for the call), else a copy
/// of what `bytes_arg` takes.
fn bytes_view<'a>(obj: Option<&'a Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Cow<'a, [u8]>>> {
    match obj.map(|o| o.cast::<PyBytes>()) {
        Some(Ok(b)) => Ok(Some(Cow::Borrowed(b.as_bytes()))),
        _ => Ok(bytes_arg(obj, what)?.map(|b| Cow::Owned(b.to_vec()))),
    }
}

pub(crate) fn bytes_arg(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<PyBackedBytes>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => o.extract::<PyBackedBytes>().map(Some).map_err(|_| {
            PyTypeError::new_err(format!(
                "{what} must be bytes, bytearray or None, got {}",
                o.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string())
            ))
        }),
    }
}

#[pyclass(frozen, subclass, module = "seglog._native", name = "Producer")]
pub struct Producer {
    inner: Arc<CoreProducer>,
    owner: super::Owner,
}

impl Producer {
    fn core(&self) -> PyResult<&Arc<CoreProducer>> {
        self.owner.check("Producer", "")?;
        Ok(&self.inner)
    }
}

#[pymethods]
impl Producer {
    #[new]
    #[pyo3(signature = (
        store = None, batch_size = 16384, linger_ms = 5.0, compression_type = "none", acks = "1",
        buffer_memory = 33554432, max_block_ms = 60000.0, bootstrap_servers = None,
        client_id = "seglog", request_timeout_ms = 30000
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        store: Option<&Store>,
        batch_size: i64,
        linger_ms: f64,
        compression_type: &str,
        acks: &str,
        buffer_memory: i64,
        max_block_ms: f64,
        bootstrap_servers: Option<&str>,
        client_id: &str,
        request_timeout_ms: u64,
    ) -> PyResult<Self> {
        let compression = Compression::parse(compression_type).map_err(to_py)?;
        let acks = Acks::parse(acks).map_err(to_py)?;
        for (name, v) in [("linger_ms", linger_ms), ("max_block_ms", max_block_ms)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(PyValueError::new_err(format!("{name} must be a finite number >= 0, got {v}")));
            }
        }
        for (name, v) in [("batch_size", batch_size), ("buffer_memory", buffer_memory)] {
            if v <= 0 {
                return Err(PyValueError::new_err(format!("{name} must be a positive int, got {v}")));
            }
        }
        let (batch_size, buffer_memory) = (batch_size as usize, buffer_memory as usize);
        let config = ProducerConfig {
            batch_size,
            linger: Duration::from_secs_f64(linger_ms / 1000.0),
            compression,
            acks,
            buffer_memory,
            max_block: Duration::from_secs_f64(max_block_ms / 1000.0),
        };
        let inner = match (store, bootstrap_servers) {
            (Some(store), None) => CoreProducer::new(store.core()?.clone(), config).map_err(to_py)?,
            (None, Some(servers)) => {
                let acks_all = config.acks == Acks::Durable;
                let client = crate::consumer::client_config(client_id, request_timeout_ms);
                py.detach(|| {
                    let cluster = Arc::new(Cluster::connect(servers, client)?);
                    let idempotent = IdempotentProducer::new(
                        cluster,
                        RemoteConfig { compression, ..RemoteConfig::default() },
                    )?;
                    CoreProducer::to(
                        Arc::new(ClusterDestination::new(Arc::new(idempotent), acks_all)),
                        config,
                    )
                })
                .map_err(to_py)?
            }
            _ => {
                return Err(PyTypeError::new_err(
                    "a Producer needs a store or bootstrap_servers (one of the two)",
                ))
            }
        };
        Ok(Producer { inner, owner: super::Owner::here() })
    }

    /// Queues one record; returns a FutureRecordMetadata.
    #[pyo3(signature = (topic, value = None, key = None, headers = None, partition = None, timestamp = None))]
    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        py: Python<'_>,
        topic: &Bound<'_, PyString>,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        headers: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> PyResult<FutureRecordMetadata> {
        let core = self.core()?;
        let value = bytes_view(value, "value")?;
        let key = bytes_view(key, "key")?;
        let headers = header_list(headers)?;
        let hrefs: Vec<HeaderRef<'_>> = headers.iter().map(|(k, v)| (k.as_bytes(), v.as_deref())).collect();
        let name = topic.to_str()?;
        if !core.knows_topic(name) {
            // A first send to a topic looks it up (through a broker, a round
            // trip): without the GIL.
            py.detach(|| core.topic(name)).map_err(to_py)?;
        }
        loop {
            match core
                .send(name, partition, key.as_deref(), value.as_deref(), &hrefs, timestamp)
                .map_err(to_py)?
            {
                SendOutcome::Sent(s) => {
                    return Ok(FutureRecordMetadata {
                        cell: s.cell,
                        topic: topic.clone().unbind(),
                        partition: s.partition,
                        index: s.index,
                        timestamp: s.timestamp,
                    })
                }
                SendOutcome::WouldBlock(needed) => {
                    py.detach(|| core.wait_for_space(needed)).map_err(to_py)?
                }
            }
        }
    }

    /// Appends many records as whole batches and waits for them; returns a list
    /// of (partition, first_offset, last_offset), one per partition written.
    #[pyo3(signature = (topic, values, keys = None, partition = None, timestamp = None))]
    fn send_batch(
        &self,
        py: Python<'_>,
        topic: &str,
        values: &Bound<'_, PyAny>,
        keys: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
    ) -> PyResult<Vec<(i32, i64, i64)>> {
        let core = self.core()?;
        core.ensure_open().map_err(to_py)?;
        let mut values = ByteItems::new(values, "values")?;
        let mut keys = match keys.filter(|k| !k.is_none()) {
            Some(k) => {
                let k = ByteItems::new(k, "keys")?;
                if k.len() != values.len() {
                    return Err(PyValueError::new_err(format!(
                        "keys has {} items but values has {}",
                        k.len(),
                        values.len()
                    )));
                }
                Some(k)
            }
            None => None,
        };
        if values.len() == 0 {
            return Ok(Vec::new());
        }
        let ts = timestamp.unwrap_or_else(now_ms);
        if !core.knows_topic(topic) {
            py.detach(|| core.topic(topic)).map_err(to_py)?;
        }
        let mut sink = core.batch_sink(topic).map_err(to_py)?;
        // Every record is checked before the first is added: the sink hands full
        // batches to the sender while the rest are encoded, and a call refused
        // for one of its records must write none of them.
        with_items(&mut values, keys.as_mut(), |values, keys| sink.add_all(partition, ts, keys, values))?
            .map_err(to_py)?;
        let groups = sink.finish().map_err(to_py)?;
        py.detach(|| {
            let mut out = Vec::new();
            for (p, cells) in groups {
                let mut first = i64::MAX;
                let mut last = i64::MIN;
                // The sender completes a partition's batches in the order they
                // were queued: waiting for the last first, the thread is woken
                // once rather than once per batch, and the rest are then read
                // in order (the first error in queue order is the one raised).
                if let Some((last, _)) = cells.last() {
                    last.wait(None);
                }
                for (cell, count) in cells {
                    match cell.wait(None) {
                        Some(Ok(d)) => {
                            first = first.min(d.base_offset);
                            last = last.max(d.base_offset + i64::from(count) - 1);
                        }
                        Some(Err(e)) => return Err(e),
                        None => unreachable!("wait(None) returns only with a result"),
                    }
                }
                out.push((p, first, last));
            }
            Ok(out)
        })
        .map_err(|e| clone_error(&e))
    }

    /// Sends all pending batches and waits for their delivery.
    #[pyo3(signature = (timeout = None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let core = self.core()?;
        let t = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        py.detach(|| core.flush(t)).map_err(to_py)
    }

    #[pyo3(signature = (timeout = None))]
    fn close(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        if !self.owner.is_here() {
            return Ok(());
        }
        let core = &self.inner;
        let t = timeout.map(|t| Duration::from_secs_f64(t.max(0.0)));
        py.detach(|| core.close(t, true)).map_err(to_py)
    }

    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }
}
