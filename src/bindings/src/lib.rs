//! PyO3 bindings: conversions, GIL release and error mapping only. Everything
//! that decides anything lives in the core modules.

mod batch_items;
mod broker;
mod buffer;
mod consumer;
mod errors;
mod inspect;
mod producer;
mod records;
mod remote;
mod store;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

use pyo3::prelude::*;

/// Bumped in every forked child: an object made under another generation
/// belongs to the parent (its threads, locks and maps did not come along).
/// Checking it costs an atomic load, where getpid() is a syscall per call.
static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

extern "C" fn forked_child() {
    FORK_GENERATION.fetch_add(1, Ordering::Relaxed);
}

pub(crate) fn fork_generation() -> u64 {
    FORK_GENERATION.load(Ordering::Relaxed)
}

/// The process (and fork generation) an object was made in: its threads, locks
/// and maps exist only there.
pub(crate) struct Owner {
    pid: u32,
    generation: u64,
}

impl Owner {
    pub(crate) fn here() -> Self {
        Owner { pid: std::process::id(), generation: fork_generation() }
    }
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }
    pub(crate) fn is_here(&self) -> bool {
        fork_generation() == self.generation
    }
    /// Refuses use in a forked child, naming `what` and how to recover.
    pub(crate) fn check(&self, what: &str, remedy: &str) -> PyResult<()> {
        if self.is_here() {
            return Ok(());
        }
        Err(errors::SeglogError::new_err(format!(
            "this {what} was made in process {} and cannot be used in forked process {}{remedy}",
            self.pid,
            std::process::id()
        )))
    }
}

/// `path` with every symbolic link, `.` and `..` resolved (realpath(3)); an
/// OSError when some part of it does not exist. What `os.path.realpath` gives
/// for an existing path, without its per-component work in Python, which a
/// fresh process pays ~50 µs for on its first store open.
#[pyfunction]
fn realpath(path: &str) -> PyResult<String> {
    let real = std::fs::canonicalize(path)?;
    real.into_os_string()
        .into_string()
        .map_err(|p| pyo3::exceptions::PyValueError::new_err(format!("{p:?} is not valid UTF-8")))
}

/// A new CA and a broker certificate for `hosts`, as PEM files in `dir`:
/// (the CA's certificate, the broker's key and chain).
#[pyfunction]
fn generate_pki(py: Python<'_>, dir: &str, hosts: Vec<String>) -> errors::PyResult<(String, String)> {
    let pki = py.detach(|| seglog_broker::security::pki::generate(std::path::Path::new(dir), &hosts))?;
    Ok((pki.ca.display().to_string(), pki.broker.display().to_string()))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    static REGISTER: Once = Once::new();
    // SAFETY: registers a handler that only increments an atomic, which is
    // async-signal-safe, as handlers run in the child right after fork.
    REGISTER.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(forked_child));
    });
    m.add_class::<store::Store>()?;
    m.add_class::<broker::Broker>()?;
    m.add_class::<remote::RemoteClient>()?;
    m.add("BROKER_KEYS", seglog_broker::config::BROKER_KEYS.to_vec())?;
    m.add("BROKER_KEY_PREFIXES", seglog_broker::config::BROKER_KEY_PREFIXES.to_vec())?;
    m.add_class::<records::ConsumerRecord>()?;
    m.add_class::<consumer::Consumer>()?;
    m.add_class::<consumer::ConsumerIterator>()?;
    m.add_class::<producer::Producer>()?;
    m.add_class::<buffer::ByteBuffer>()?;
    m.add_class::<producer::FutureRecordMetadata>()?;
    m.add_class::<producer::RecordMetadata>()?;
    m.add_function(wrap_pyfunction!(realpath, m)?)?;
    m.add_function(wrap_pyfunction!(generate_pki, m)?)?;
    m.add_function(wrap_pyfunction!(records::murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(records::decode_batches, m)?)?;
    m.add_class::<inspect::LogWalk>()?;
    m.add_class::<inspect::LogBatch>()?;
    m.add_class::<inspect::LogStop>()?;
    m.add_class::<inspect::IndexContents>()?;
    m.add_class::<inspect::SegmentScan>()?;
    m.add_function(wrap_pyfunction!(inspect::walk_log, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::read_index, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::scan_log, m)?)?;
    m.add_function(wrap_pyfunction!(inspect::check_index, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// Batch buffers are large and short-lived; the system allocator hands them
/// back to the OS and page-faults fresh zeroed pages on every batch, which
/// dominated bulk appends. mimalloc keeps them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
