//! The store's writer lock: an exclusive flock on `.lock`, which holds the
//! PID of the process that has it, so a second writer is told who.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, Result};

pub const LOCK_FILE: &str = ".lock";

/// Takes the lock of the store at `path`, or says which process holds it.
pub(super) fn acquire(path: &Path) -> Result<File> {
    let lock_path = path.join(LOCK_FILE);
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(Error::at(&lock_path))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = f.read_to_string(&mut holder);
            let holder = holder.trim();
            let mut pid = if holder.is_empty() { "unknown".to_string() } else { holder.to_string() };
            if pid == std::process::id().to_string() {
                pid.push_str(", this process: use the Store already open");
            }
            return Err(Error::StoreLocked { path: path.to_owned(), pid });
        }
        Err(fs::TryLockError::Error(e)) => return Err(Error::at(&lock_path)(e)),
    }
    f.set_len(0).map_err(Error::at(&lock_path))?;
    f.seek(SeekFrom::Start(0)).map_err(Error::at(&lock_path))?;
    writeln!(f, "{}", std::process::id()).map_err(Error::at(&lock_path))?;
    Ok(f)
}
