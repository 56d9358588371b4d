//! The one mapping from core errors to Python exceptions. The exception classes
//! live in `seglog/errors.py`, so their hierarchy (and the built-in bases such
//! as ValueError) is defined and documented in Python.

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::types::PyAnyMethods;
use pyo3::{PyErr, Python};

use seglog_core::error::Error;

pyo3::import_exception!(seglog.errors, SeglogError);
pyo3::import_exception!(seglog.errors, CorruptRecordError);
pyo3::import_exception!(seglog.errors, InvalidTopicError);
pyo3::import_exception!(seglog.errors, UnknownTopicOrPartitionError);
pyo3::import_exception!(seglog.errors, TopicAlreadyExistsError);
pyo3::import_exception!(seglog.errors, InvalidConfigError);
pyo3::import_exception!(seglog.errors, RecordTooLargeError);
pyo3::import_exception!(seglog.errors, OffsetOutOfRangeError);
pyo3::import_exception!(seglog.errors, StoreLockedError);
pyo3::import_exception!(seglog.errors, ReadOnlyStoreError);
pyo3::import_exception!(seglog.errors, StoreClosedError);
pyo3::import_exception!(seglog.errors, ClientClosedError);
pyo3::import_exception!(seglog.errors, InvalidRecordError);
pyo3::import_exception!(seglog.errors, SeglogTimeoutError);
pyo3::import_exception!(seglog.errors, InvalidTimestampError);
pyo3::import_exception!(seglog.errors, UnsupportedCompressionTypeError);
pyo3::import_exception!(seglog.errors, RecordBatchTooLargeError);
pyo3::import_exception!(seglog.errors, CorruptFileError);
pyo3::import_exception!(seglog.errors, OutOfOrderSequenceError);
pyo3::import_exception!(seglog.errors, InvalidProducerEpochError);
pyo3::import_exception!(seglog.errors, KafkaError);
pyo3::import_exception!(seglog.errors, IllegalStateError);
pyo3::import_exception!(seglog.errors, NoOffsetForPartitionError);
pyo3::import_exception!(seglog.errors, CommitFailedError);

/// A Python exception on its way out of a binding: from the core's `Error`
/// (mapped below) or already a `PyErr`. Binding methods return `PyResult`
/// of this module, so `?` works on both.
pub struct BindError(PyErr);

pub type PyResult<T> = std::result::Result<T, BindError>;

impl From<PyErr> for BindError {
    fn from(e: PyErr) -> Self {
        BindError(e)
    }
}

impl From<BindError> for PyErr {
    fn from(e: BindError) -> PyErr {
        e.0
    }
}

impl From<Error> for BindError {
    fn from(e: Error) -> Self {
        BindError(to_py(e))
    }
}

/// The exception for a core error.
pub fn to_py(e: Error) -> PyErr {
    {
        let msg = e.to_string();
        match e {
            // OSError(errno, strerror, filename) picks the right subclass
            // (FileNotFoundError, NotADirectoryError, ...) from the errno.
            Error::IoAt { path, source } => match source.raw_os_error() {
                Some(errno) => {
                    // std's message ends in " (os error N)"; Python shows the errno itself.
                    let text = source.to_string();
                    let text = text.split(" (os error").next().unwrap_or(&text).to_string();
                    PyOSError::new_err((errno, text, path.display().to_string()))
                }
                None => PyOSError::new_err(msg),
            },
            Error::Io(source) => source.into(),
            Error::Corrupt(_) => CorruptRecordError::new_err(msg),
            Error::InvalidTopic { .. } => InvalidTopicError::new_err(msg),
            Error::UnknownTopic(_) | Error::UnknownPartition { .. } => {
                UnknownTopicOrPartitionError::new_err(msg)
            }
            Error::TopicExists(_) => TopicAlreadyExistsError::new_err(msg),
            Error::InvalidConfig(_) => InvalidConfigError::new_err(msg),
            Error::RecordTooLarge { .. } => RecordTooLargeError::new_err(msg),
            Error::OffsetOutOfRange { .. } => OffsetOutOfRangeError::new_err(msg),
            Error::StoreLocked { .. } => StoreLockedError::new_err(msg),
            Error::ReadOnly(_) => ReadOnlyStoreError::new_err(msg),
            Error::Closed => StoreClosedError::new_err(msg),
            Error::ClientClosed(_) => ClientClosedError::new_err(msg),
            Error::Timeout(..) => SeglogTimeoutError::new_err(msg),
            Error::InvalidArgument(_) => PyValueError::new_err(msg),
            Error::InvalidRecord(_) => InvalidRecordError::new_err(msg),
            Error::InvalidTimestamp(_) | Error::RecordErrors { timestamp: true, .. } => {
                InvalidTimestampError::new_err(msg)
            }
            Error::RecordErrors { timestamp: false, .. } => InvalidRecordError::new_err(msg),
            Error::UnsupportedCompression(_) => UnsupportedCompressionTypeError::new_err(msg),
            Error::RecordBatchTooLarge(_) => RecordBatchTooLargeError::new_err(msg),
            Error::OutOfOrderSequence { .. } => OutOfOrderSequenceError::new_err(msg),
            Error::InvalidProducerEpoch { .. } => InvalidProducerEpochError::new_err(msg),
            Error::IllegalState(_) => IllegalStateError::new_err(msg),
            Error::NoOffsetForPartition(_) => NoOffsetForPartitionError::new_err(msg),
            Error::CommitFailed { code, .. } => {
                let e = CommitFailedError::new_err(msg);
                Python::attach(|py| {
                    let _ = e.value(py).setattr("code", code);
                });
                e
            }
            Error::Kafka { code, .. } => {
                // A code the core has a variant for came back as one; these are
                // the codes it has an exception for but no fields to fill.
                let e = match code {
                    45 => OutOfOrderSequenceError::new_err(msg),
                    47 => InvalidProducerEpochError::new_err(msg),
                    10 => RecordTooLargeError::new_err(msg),
                    _ => KafkaError::new_err(msg),
                };
                Python::attach(|py| {
                    let _ = e.value(py).setattr("code", code);
                });
                e
            }
            Error::CorruptFile { path, .. } => {
                let e = CorruptFileError::new_err(msg);
                Python::attach(|py| {
                    let _ = e.value(py).setattr("filename", path.display().to_string());
                });
                e
            }
        }
    }
}
