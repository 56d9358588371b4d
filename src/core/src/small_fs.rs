//! For tests: a real, small filesystem (a tmpfs mounted on a temporary
//! directory, unmounted on drop) that fills up, so full-disk paths are tested
//! against the kernel rather than a mock. Mounting needs root (CAP_SYS_ADMIN).
//! Compiled only for tests; every step returns its error, for the test to
//! fail on.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    /// A tmpfs of `bytes` bytes (an error if it cannot be mounted: the
    /// full-disk tests need root).
    pub fn new(bytes: usize) -> io::Result<SmallFs> {
        let dir = tempfile::tempdir()?;
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .status()?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "mounting a tmpfs on {} failed ({status}): the full-disk tests need root",
                dir.path().display()
            )));
        }
        Ok(SmallFs { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills the filesystem with a filler file, then frees `leave` bytes of it.
    pub fn fill(&self, leave: u64) -> io::Result<PathBuf> {
        let p = self.path().join("filler");
        let mut f = OpenOptions::new().create(true).append(true).open(&p)?;
        let chunk = vec![1u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let len = f.metadata()?.len();
        f.set_len(len.saturating_sub(leave))?;
        Ok(p)
    }

    /// Frees all the space `fill` took.
    pub fn free(&self) {
        let _ = fs::remove_file(self.path().join("filler"));
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// The bytes of disk `file` holds (its allocated blocks).
pub fn allocated_bytes(file: &File) -> io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(file.metadata()?.blocks() * 512)
}
