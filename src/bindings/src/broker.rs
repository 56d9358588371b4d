//! `seglog._native.Broker`: the broker crate's server over a store open in
//! this process, serving from its own threads until `close()`.

use std::collections::BTreeMap;
use std::time::Duration;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use seglog_broker::{Broker as CoreBroker, BrokerConfig};
use seglog_core::error::Error;

use crate::errors::PyResult;
use crate::store::{config_map, Store};

#[pyclass(frozen, module = "seglog._native", name = "Broker")]
pub struct Broker {
    inner: Mutex<Option<CoreBroker>>,
    host: String,
    port: u16,
    listeners: Vec<(String, String, String, u16)>,
    node_id: i32,
    cluster_id: String,
    metrics_address: Option<String>,
    owner: super::Owner,
}

/// A broker's memory comes in bursts its clients drive (answers made and
/// dropped, requests read and appended); what a burst frees goes back to the
/// system at once rather than after mimalloc's purge delay, which only runs
/// on the next allocation by the same thread and so can keep an idle broker's
/// burst resident. The setting is the process's: an embedded producer in the
/// same process reuses fewer of its freed batch buffers. The broker's own
/// throughput is unchanged by it (the broker rows of `make bench`).
fn return_freed_memory_at_once() {
    /// `mi_option_purge_delay` in mimalloc's `mi_option_e` (not among the
    /// constants libmimalloc-sys names).
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: sets one of mimalloc's options, read at each purge; 0 is valid.
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY, 0) };
}

#[pymethods]
impl Broker {
    #[new]
    #[pyo3(signature = (store, config = None, metrics = None))]
    fn new(
        py: Python<'_>,
        store: &Store,
        config: Option<&Bound<'_, PyDict>>,
        metrics: Option<String>,
    ) -> PyResult<Self> {
        let core = store.core()?.clone();
        let config = BrokerConfig::from_map(&config_map(config)?)?;
        if let Some(key) = config.store.keys().next() {
            return Err(Error::InvalidConfig(format!(
                "{key:?} is not a broker key (broker keys: {}); store and topic keys are given \
                 when the store is opened",
                seglog_broker::config::BROKER_KEYS.join(", ")
            ))
            .into());
        }
        return_freed_memory_at_once();
        let broker = py.detach(|| CoreBroker::start(core, config, metrics.as_deref()))?;
        let addr = broker.local_addr();
        let listeners = broker
            .listeners()
            .iter()
            .map(|(name, protocol, a)| {
                (name.clone(), protocol.name().to_string(), a.ip().to_string(), a.port())
            })
            .collect();
        Ok(Broker {
            listeners,
            host: addr.ip().to_string(),
            port: addr.port(),
            node_id: broker.node_id(),
            cluster_id: broker.cluster_id().to_string(),
            metrics_address: broker.metrics_addr().map(|a| a.to_string()),
            inner: Mutex::new(Some(broker)),
            owner: super::Owner::here(),
        })
    }

    #[getter]
    fn host(&self) -> &str {
        &self.host
    }
    #[getter]
    fn port(&self) -> u16 {
        self.port
    }
    /// Every listener: (name, security protocol, host, port), as bound.
    #[getter]
    fn listeners(&self) -> Vec<(String, String, String, u16)> {
        self.listeners.clone()
    }
    #[getter]
    fn node_id(&self) -> i32 {
        self.node_id
    }
    #[getter]
    fn cluster_id(&self) -> &str {
        &self.cluster_id
    }
    #[getter]
    fn metrics_address(&self) -> Option<&str> {
        self.metrics_address.as_deref()
    }
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().is_none()
    }

    /// The broker's counters (bytes in and out, sendfile vs copied, connections).
    fn stats(&self, py: Python<'_>) -> BTreeMap<String, u64> {
        py.detach(|| self.inner.lock().as_ref().map(|b| b.metrics().snapshot()).unwrap_or_default())
    }

    /// The metrics as Prometheus text.
    fn metrics_text(&self, py: Python<'_>) -> String {
        py.detach(|| self.inner.lock().as_ref().map(|b| b.metrics().render(b.store())).unwrap_or_default())
    }

    /// Stops accepting, finishes in-flight requests (up to `timeout` seconds)
    /// and stops the broker's threads. The store stays open.
    #[pyo3(signature = (timeout = 10.0))]
    fn close(&self, py: Python<'_>, timeout: f64) -> PyResult<()> {
        if !self.owner.is_here() {
            // A forked child has none of the broker's threads to stop.
            return Ok(());
        }
        let grace = Duration::try_from_secs_f64(timeout.max(0.0)).unwrap_or(Duration::from_secs(10));
        let broker = self.inner.lock().take();
        if let Some(mut b) = broker {
            py.detach(move || b.shutdown(grace));
        }
        Ok(())
    }
}
