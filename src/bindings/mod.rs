//! PyO3 bindings: conversions, GIL release and error mapping only. Everything
//! that decides anything lives in the core modules.

mod columns;
mod errors;
mod producer;
mod records;
mod store;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::Store>()?;
    m.add_class::<records::ConsumerRecord>()?;
    m.add_class::<producer::Producer>()?;
    m.add_class::<columns::ByteBuffer>()?;
    m.add_class::<producer::FutureRecordMetadata>()?;
    m.add_class::<producer::RecordMetadata>()?;
    m.add_function(wrap_pyfunction!(records::murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(records::decode_batches, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// Batch buffers are large and short-lived; the system allocator hands them
/// back to the OS and page-faults fresh zeroed pages on every batch, which
/// dominated bulk appends. mimalloc keeps them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
