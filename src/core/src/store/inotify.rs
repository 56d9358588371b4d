//! Waiting for another process's appends without polling: inotify on the
//! partition directories (the writer's writes and new segment files show up as
//! events there).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

pub(super) struct DirWatcher {
    fd: OwnedFd,
}

impl DirWatcher {
    pub(super) fn new(dirs: &[&Path]) -> Result<DirWatcher> {
        // SAFETY: plain syscall; the returned descriptor is checked, then owned.
        let raw = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if raw < 0 {
            return Err(Error::Io(std::io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh, valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mask = libc::IN_MODIFY | libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_CLOSE_WRITE;
        for dir in dirs {
            let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
                .map_err(|_| Error::InvalidArgument(format!("path {} holds a NUL byte", dir.display())))?;
            // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
            if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), c.as_ptr(), mask) } < 0 {
                let e = std::io::Error::last_os_error();
                // A directory that does not exist yet is simply not watched (the
                // waits' cap catches it). Anything else, such as running out of
                // fs.inotify.max_user_watches, would leave the wait blind: say so.
                if e.raw_os_error() != Some(libc::ENOENT) {
                    return Err(Error::IoAt { path: dir.to_path_buf(), source: e });
                }
            }
        }
        Ok(DirWatcher { fd })
    }

    /// Blocks until an event arrives or the timeout passes; drains the events.
    pub(super) fn wait(&self, timeout: Duration) -> Result<bool> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let ms = left.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: `pfd` is a valid pollfd array of length 1.
            let n = unsafe { libc::poll(&mut pfd, 1, ms) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted && !left.is_zero() {
                    continue;
                }
                return Err(Error::Io(e));
            }
            if n == 0 {
                return Ok(false);
            }
            let mut buf = [0u8; 4096];
            // SAFETY: reads into a stack buffer of the given length.
            while unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) } > 0 {}
            return Ok(true);
        }
    }
}
