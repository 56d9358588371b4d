//! Appending to a segment: runs of batches written with one `pwritev`, the
//! indexes after them, blocks allocated ahead of the end, and a failed write
//! cut back to the last whole batch.

use super::*;

impl Segment {
    /// Writes one batch (its offsets already assigned) at the end of the segment,
    /// indexing it if more than `index_interval` bytes went by since the last entry.
    ///
    /// A failed append leaves the segment as it was: a write that failed part-way
    /// (a full disk, a file-size limit) is cut back to the last good end, and the
    /// index is only touched once the batch is in the file. If even the cut fails,
    /// the segment refuses appends until a later one manages it.
    pub fn append(&self, batch: &[u8], info: &BatchInfo, index_interval: u64) -> Result<()> {
        self.append_run(&[batch], std::slice::from_ref(info), index_interval)
    }

    /// `append` of consecutive batches (`infos[i]` describes `batches[i]`) with
    /// one write: the file and indexes end exactly as after appending them one
    /// by one, and a failed write leaves none of them. The caller makes sure the
    /// indexes have room for an entry per batch (`index_room`).
    pub fn append_run(&self, batches: &[&[u8]], infos: &[BatchInfo], index_interval: u64) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly("append"));
        }
        if batches.len() != infos.len() || batches.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{} batches described by {} infos",
                batches.len(),
                infos.len()
            )));
        }
        let position = self.size();
        if self.torn.load(Ordering::Acquire) {
            self.cut_back(position)?;
        }
        let total: u64 = batches.iter().map(|b| b.len() as u64).sum();
        // Where each batch starts, as the index stores it.
        let mut starts = Vec::with_capacity(batches.len());
        let mut at = position;
        for b in batches {
            starts.push(
                u32::try_from(at).map_err(|_| {
                    Error::InvalidArgument(format!("segment position {at} overflows the index"))
                })?,
            );
            at += b.len() as u64;
        }
        // Which batches get an index entry (the same rule as one by one), and
        // everything that can refuse those entries, checked before the write
        // (only the writer changes the indexes meanwhile); readers' index
        // lookups are not held up by the write.
        let indexed: Vec<bool> = {
            let mut ix = self.indexes.lock();
            let mut since = ix.bytes_since_last_entry;
            let indexed: Vec<bool> = batches
                .iter()
                .map(|b| {
                    let index_it = since > index_interval;
                    since = (if index_it { 0 } else { since }) + b.len() as u64;
                    index_it
                })
                .collect();
            let entries = indexed.iter().filter(|&&i| i).count();
            // Offsets grow: the last indexed batch has the largest entry.
            if let Some((info, _)) = infos.iter().zip(&indexed).rev().find(|(_, &i)| i) {
                ix.offsets.prepare_appends(info.last_offset, entries)?;
                ix.times.prepare_appends(entries)?;
            }
            indexed
        };
        self.allocate_ahead(position + total);
        if let Err(e) = write_all_vectored_at(&self.log, batches, position) {
            let e = Error::at(&self.log_path)(e);
            self.cut_back(position)?;
            return Err(e);
        }
        let mut ix = self.indexes.lock();
        for ((info, &pos), (&index_it, batch)) in infos.iter().zip(&starts).zip(indexed.iter().zip(batches)) {
            if ix.first_batch_timestamp.is_none() && pos == 0 {
                ix.first_batch_timestamp = Some(info.max_timestamp);
            }
            if info.max_timestamp > ix.max_timestamp_so_far {
                ix.max_timestamp_so_far = info.max_timestamp;
                ix.offset_of_max_timestamp = info.last_offset;
            }
            if index_it {
                ix.offsets.append(info.last_offset, pos)?;
                let (ts, off) = (ix.max_timestamp_so_far, ix.offset_of_max_timestamp);
                ix.times.maybe_append(ts, off, false)?;
                ix.bytes_since_last_entry = 0;
            }
            ix.bytes_since_last_entry += batch.len() as u64;
        }
        drop(ix);
        self.size.store(position + total, Ordering::Release);
        Ok(())
    }

    /// Index entries this segment can still take (the fewer of its two indexes').
    pub fn index_room(&self) -> usize {
        let ix = self.indexes.lock();
        ix.offsets.room().min(ix.times.room())
    }

    /// Makes sure the file has disk blocks up to `end`, allocating ahead of it
    /// (`fallocate`, the file's size unchanged: what readers and recovery see
    /// stays the log's bytes). Writing into blocks the file already has skips
    /// the file system's per-page allocation work: on ext4, 1 MiB writes into
    /// blocks allocated ahead take about a third less time than into a fresh
    /// file. The step grows with the
    /// segment, to ALLOCATE_AHEAD, so small segments take little. Failing
    /// costs nothing but the speed-up: the write allocates as it goes (and a
    /// full disk fails the write itself, as without this).
    fn allocate_ahead(&self, end: u64) {
        let have = self.allocated.load(Ordering::Acquire);
        if end <= have || self.no_allocate.load(Ordering::Relaxed) {
            return;
        }
        self.allocate_to(end + end.clamp(ALLOCATE_AHEAD_MIN, ALLOCATE_AHEAD));
    }

    /// Reserves `bytes` of disk for the whole segment at once (the topic's
    /// `preallocate`, with `segment.bytes`), the file's size unchanged; the
    /// blocks not written are given back when the segment is sealed.
    pub fn preallocate(&self, bytes: u64) {
        if !self.no_allocate.load(Ordering::Relaxed) {
            self.allocate_to(bytes);
        }
    }

    fn allocate_to(&self, to: u64) {
        let have = self.allocated.load(Ordering::Acquire);
        if to <= have {
            return;
        }
        let from = have.max(self.size());
        let (Ok(off), Ok(len)) = (libc::off_t::try_from(from), libc::off_t::try_from(to - from)) else {
            return;
        };
        // SAFETY: fallocate only reads its integer arguments; the descriptor is
        // this segment's open log file.
        let r = unsafe { libc::fallocate(self.log.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, off, len) };
        if r == 0 {
            self.allocated.store(to, Ordering::Release);
        } else if matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EOPNOTSUPP | libc::ENOSYS)
        ) {
            self.no_allocate.store(true, Ordering::Relaxed);
        }
    }

    /// Gives back the blocks allocated past the end (a cut to the size the file
    /// already has frees them; mapped pages and readers see no change). Only
    /// disk space rides on it: a cut that fails leaves the log as it was, and
    /// the next seal tries again.
    pub(super) fn release_ahead(&self) {
        let size = self.size();
        if self.allocated.load(Ordering::Acquire) > size.next_multiple_of(4096) {
            let _ = self.set_file_len(size);
        }
    }

    /// Sets the log file's length (the writer's), which also frees any blocks
    /// allocated past it.
    pub(super) fn set_file_len(&self, len: u64) -> std::io::Result<()> {
        self.log.set_len(len)?;
        self.allocated.store(len, Ordering::Release);
        Ok(())
    }

    /// Cuts the log file back to `size`, the end of its last whole batch, after
    /// a write that failed part-way. Until that succeeds the segment is torn.
    fn cut_back(&self, size: u64) -> Result<()> {
        match self.set_file_len(size) {
            Ok(()) => {
                self.torn.store(false, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                self.torn.store(true, Ordering::Release);
                Err(Error::at(&self.log_path)(e))
            }
        }
    }
}

/// Writes all of `parts`, back to back, at `offset` of `file` (`pwritev`,
/// continued after a short write or an interrupted call).
fn write_all_vectored_at(file: &File, parts: &[&[u8]], offset: u64) -> std::io::Result<()> {
    use std::io::IoSlice;
    // At most IOV_MAX (1024 on Linux) slices per call.
    const MAX_SLICES: usize = 1024;
    let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
    let mut rest = &mut slices[..];
    let mut offset = offset;
    IoSlice::advance_slices(&mut rest, 0); // drops leading empty parts
    while !rest.is_empty() {
        let n = rest.len().min(MAX_SLICES);
        let off = libc::off_t::try_from(offset).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "file offset overflows off_t")
        })?;
        // SAFETY: IoSlice is ABI-compatible with iovec on Unix (std documents
        // it), and `rest[..n]` are live slices borrowed for the call.
        let wrote =
            unsafe { libc::pwritev(file.as_raw_fd(), rest.as_ptr().cast::<libc::iovec>(), n as i32, off) };
        if wrote < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if wrote == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        offset += wrote as u64;
        IoSlice::advance_slices(&mut rest, wrote as usize);
    }
    Ok(())
}
