//! What `Producer.send_batch` takes, read in place: a list's bytes objects by
//! borrowed references, or a pyarrow binary or string array's buffers, so that
//! no record's bytes are copied before they go into a batch.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::producer::bytes_arg;

/// The items of `values`/`keys` for `send_batch`, read in place: a list's
/// bytes objects, or a pyarrow binary array's buffers, so that no record's
/// bytes are copied before they go into a batch.
pub(crate) enum ByteItems<'py> {
    /// The caller's list, or a new one (of another iterable's items, or of
    /// bytes copies of items that are bytes-like but not `bytes`).
    List(Bound<'py, PyList>),
    Arrow(ArrowBinary),
}

/// Each item's bytes, None for None.
type Spans<'a> = Vec<Option<&'a [u8]>>;

/// The bytes of each item of `values` and (if given) `keys` handed to `f`,
/// read in place. A list's items are read by borrowed references, with no
/// reference taken or dropped per item: under the stable ABI each of those
/// is a call, and a bulk send spent more time in them (and in touching
/// every object's count twice more) than in encoding the records.
///
/// Borrowed references stay valid while nothing changes the list. This
/// thread holds the GIL from the first item read until `f` returns, so no
/// other thread runs Python meanwhile; reading the items makes and frees no
/// Python object (which could start a collection and with it a finalizer
/// that changes the list); and `f` is `Send`, so it cannot reach Python.
/// Lists with other items are first replaced by new lists of bytes copies,
/// which only this call can reach, and every list is read again after.
pub(crate) fn with_items<R>(
    values: &mut ByteItems<'_>,
    mut keys: Option<&mut ByteItems<'_>>,
    f: impl FnOnce(&[Option<&[u8]>], Option<&[Option<&[u8]>]>) -> R + Send,
) -> PyResult<R> {
    for _ in 0..2 {
        // SAFETY: see above; from here until `f` returns nothing makes or
        // frees a Python object or runs Python code (an error from an Arrow
        // array's offsets is made after the lists are read, and returned).
        let v = unsafe { values.read_in_place() }?;
        // SAFETY: as for `values`.
        let k = keys.as_deref().map(|k| unsafe { k.read_in_place() }).transpose()?;
        if let Some(v) = &v {
            match &k {
                None => return Ok(f(v, None)),
                Some(Some(k)) => return Ok(f(v, Some(k))),
                Some(None) => {}
            }
        }
        values.replace_with_bytes("values")?;
        if let Some(k) = keys.as_deref_mut() {
            k.replace_with_bytes("keys")?;
        }
    }
    // New lists of bytes, which nothing else can reach, are always read.
    Err(PyRuntimeError::new_err("send_batch: the items changed while they were read"))
}

/// A pyarrow `binary`/`string` (or `large_*`) array, by its buffers.
pub(crate) struct ArrowBinary {
    validity: Option<PyBuffer<u8>>,
    offsets: PyBuffer<u8>,
    data: Option<PyBuffer<u8>>,
    offset: usize,
    len: usize,
    large: bool,
}

fn buffer_u8(obj: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    // pyarrow exports its buffers as signed bytes ('b'); a byte is a byte here.
    let view = obj.call_method1("cast", ("B",)).or_else(|_| {
        let mv = obj.py().import("builtins")?.getattr("memoryview")?.call1((obj,))?;
        mv.call_method1("cast", ("B",))
    })?;
    PyBuffer::get(&view)
}

fn raw(buf: &PyBuffer<u8>) -> &[u8] {
    // SAFETY: the PyBuffer keeps the exporter's memory alive and unmoved while it
    // lives, and the slice borrows the PyBuffer; pyarrow buffers are immutable.
    unsafe { std::slice::from_raw_parts(buf.buf_ptr() as *const u8, buf.len_bytes()) }
}

impl ArrowBinary {
    fn from_array(arr: &Bound<'_, PyAny>) -> PyResult<Option<Self>> {
        // A ChunkedArray (e.g. a Table column) becomes one array first.
        let arr = if arr.hasattr("combine_chunks")? && arr.hasattr("chunks")? {
            arr.call_method0("combine_chunks")?
        } else {
            arr.clone()
        };
        if !arr.hasattr("buffers")? || !arr.hasattr("type")? {
            return Ok(None);
        }
        let ty = arr.getattr("type")?.str()?.to_string();
        let large = match ty.as_str() {
            "binary" | "string" => false,
            "large_binary" | "large_string" => true,
            other => {
                return Err(PyTypeError::new_err(format!(
                    "a pyarrow array for send_batch must be binary or string, got {other}"
                )))
            }
        };
        let bufs = arr.call_method0("buffers")?;
        let get = |i: usize| -> PyResult<Option<PyBuffer<u8>>> {
            let b = bufs.get_item(i)?;
            if b.is_none() {
                Ok(None)
            } else {
                let mv = arr.py().import("builtins")?.getattr("memoryview")?.call1((b,))?;
                Ok(Some(buffer_u8(&mv)?))
            }
        };
        let offsets =
            get(1)?.ok_or_else(|| PyValueError::new_err("pyarrow array without an offsets buffer"))?;
        let a = ArrowBinary {
            validity: get(0)?,
            offsets,
            data: get(2)?,
            offset: arr.getattr("offset")?.extract()?,
            len: arr.len()?,
            large,
        };
        let width = if large { 8 } else { 4 };
        if a.offsets.len_bytes() < (a.offset + a.len + 1) * width {
            return Err(PyValueError::new_err("pyarrow offsets buffer is shorter than the array"));
        }
        Ok(Some(a))
    }

    /// Every item's bytes (None where the validity bitmap says null), checked
    /// once against the buffers: offsets that run backwards or past the data
    /// are refused.
    fn spans(&self) -> PyResult<Vec<Option<&[u8]>>> {
        let width = if self.large { 8 } else { 4 };
        let offsets = &raw(&self.offsets)[self.offset * width..(self.offset + self.len + 1) * width];
        let validity = self.validity.as_ref().map(raw);
        let data = self.data.as_ref().map_or(&[][..], raw);
        // Each width decoded in a loop of its own (the offsets walk is most of
        // what a bulk send does before its first batch can go to the sender).
        if self.large {
            let bounds =
                offsets.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap_or_default()));
            spans_between(bounds.map(|o| o as usize), data, validity, self.offset, self.len)
        } else {
            let bounds =
                offsets.chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap_or_default()));
            spans_between(bounds.map(|o| o as usize), data, validity, self.offset, self.len)
        }
    }
}

/// The items of an Arrow binary array from its offsets (`len + 1` of them):
/// None where the validity bitmap (from bit `first`) says null, else the bytes
/// between consecutive offsets, which must lie inside `data` in order.
fn spans_between<'a>(
    mut bounds: impl Iterator<Item = usize>,
    data: &'a [u8],
    validity: Option<&[u8]>,
    first: usize,
    len: usize,
) -> PyResult<Vec<Option<&'a [u8]>>> {
    let mut out = Vec::with_capacity(len);
    let mut start = bounds.next().unwrap_or(0);
    for (i, end) in bounds.enumerate() {
        let j = first + i;
        if validity.is_some_and(|v| v.get(j / 8).is_none_or(|byte| byte >> (j % 8) & 1 == 0)) {
            out.push(None);
        } else {
            let item = data
                .get(start..end)
                .ok_or_else(|| PyValueError::new_err("pyarrow offsets point past the data buffer"))?;
            out.push(Some(item));
        }
        start = end;
    }
    Ok(out)
}

impl<'py> ByteItems<'py> {
    pub(crate) fn new(seq: &Bound<'py, PyAny>, what: &'static str) -> PyResult<Self> {
        // A list first: asking it for pyarrow's attributes would make (and
        // drop) an AttributeError each, per call.
        if let Ok(l) = seq.cast::<PyList>() {
            return Ok(ByteItems::List(l.clone()));
        }
        if let Some(a) = ArrowBinary::from_array(seq)? {
            return Ok(ByteItems::Arrow(a));
        }
        let items = seq
            .try_iter()
            .map_err(|_| PyTypeError::new_err(format!("{what} must be a sequence of bytes")))?
            .collect::<PyResult<Vec<_>>>()?;
        Ok(ByteItems::List(PyList::new(seq.py(), items)?))
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            ByteItems::List(l) => l.len(),
            ByteItems::Arrow(a) => a.len,
        }
    }

    /// Each item's bytes (None for None), or None if a list holds an item that
    /// is neither a `bytes` object nor None (see `replace_with_bytes`).
    ///
    /// # Safety
    ///
    /// A list's items are read by borrowed references: the caller must not
    /// let anything change the list while it uses them (see `with_items`).
    unsafe fn read_in_place(&self) -> PyResult<Option<Spans<'_>>> {
        let list = match self {
            ByteItems::Arrow(a) => return a.spans().map(Some),
            ByteItems::List(l) => l,
        };
        let n = list.len();
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: `i` is within the list, which the caller keeps unchanged
            // (and so its items alive) while it uses what is read here.
            let item = unsafe {
                let ptr = pyo3::ffi::PyList_GetItem(list.as_ptr(), i as pyo3::ffi::Py_ssize_t);
                if ptr.is_null() {
                    return Err(PyErr::fetch(list.py()));
                }
                pyo3::Borrowed::from_ptr(list.py(), ptr)
            };
            if item.is_none() {
                out.push(None);
                continue;
            }
            let Ok(b) = item.cast::<PyBytes>() else { return Ok(None) };
            let b = b.as_bytes();
            // SAFETY: the bytes of an immutable object the list keeps alive
            // (above); the borrow of `item` itself ends here.
            out.push(Some(unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) }));
        }
        Ok(Some(out))
    }

    /// Replaces a list with a new one of its items as `bytes` objects (bytes-like
    /// items copied; None kept; anything else refused with a TypeError).
    fn replace_with_bytes(&mut self, what: &str) -> PyResult<()> {
        let ByteItems::List(list) = self else { return Ok(()) };
        let py = list.py();
        let mut items = Vec::with_capacity(list.len());
        for item in list.iter() {
            let item = if item.is_none() || item.is_instance_of::<PyBytes>() {
                item
            } else {
                let backed = bytes_arg(Some(&item), &format!("each of {what}"))?;
                PyBytes::new(py, backed.as_deref().unwrap_or_default()).into_any()
            };
            items.push(item);
        }
        *list = PyList::new(py, items)?;
        Ok(())
    }
}
