//! Blocking store work (reads, writes, fsyncs) run from async code.

/// Runs blocking store work (a page-cache read, a write, maybe an fsync) on
/// this worker thread, telling tokio to move its other tasks elsewhere
/// meanwhile: cheaper than handing the work to the blocking pool and back,
/// which cost several futex round trips per request.
pub async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}
