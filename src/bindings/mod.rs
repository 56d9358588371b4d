//! PyO3 bindings: conversions, GIL release and error mapping only. Everything
//! that decides anything lives in the core modules.

mod errors;
mod records;
mod store;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<store::Store>()?;
    m.add_class::<records::ConsumerRecord>()?;
    m.add_function(wrap_pyfunction!(records::murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(records::decode_batches, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
