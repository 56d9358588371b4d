//! `seglog._native.ByteBuffer`: Rust-owned bytes lent to Python through the
//! buffer protocol, so that pyarrow wraps column buffers without a copy.

use std::ffi::{c_int, c_void};

use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;

/// An immutable byte buffer owned by Rust and lent to Python through the
/// buffer protocol, so that pyarrow wraps it without a copy.
#[pyclass(frozen, module = "seglog._native", name = "ByteBuffer")]
pub struct ByteBuffer(pub Vec<u8>);

#[pymethods]
impl ByteBuffer {
    fn __len__(&self) -> usize {
        self.0.len()
    }

    /// # Safety
    /// Called by the interpreter with a valid `view`; the exported memory is
    /// the Vec's, which never changes (the class is frozen) and lives as long as
    /// `view.obj` holds a reference to this object.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        use pyo3::ffi;
        if view.is_null() {
            return Err(PyBufferError::new_err("null view"));
        }
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("the buffer is read-only"));
        }
        let data = &slf.get().0;
        // SAFETY: `view` is non-null and points at a Py_buffer the caller owns.
        let v = unsafe { &mut *view };
        v.buf = data.as_ptr() as *mut c_void;
        v.len = data.len() as isize;
        v.readonly = 1;
        v.itemsize = 1;
        v.format = if flags & ffi::PyBUF_FORMAT == ffi::PyBUF_FORMAT {
            c"B".as_ptr() as *mut _
        } else {
            std::ptr::null_mut()
        };
        v.ndim = 1;
        v.shape = if flags & ffi::PyBUF_ND == ffi::PyBUF_ND { &mut v.len } else { std::ptr::null_mut() };
        v.strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
            &mut v.itemsize
        } else {
            std::ptr::null_mut()
        };
        v.suboffsets = std::ptr::null_mut();
        v.internal = std::ptr::null_mut();
        v.obj = slf.into_any().into_ptr();
        Ok(())
    }

    /// # Safety
    /// Nothing to release: the memory belongs to the object.
    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}
}
