//! Finding batches in a segment: walking its headers from an index hint,
//! checking what the CRC does not cover, and the lookups by offset and by
//! time that reads, the index check and truncation use.

use super::*;

impl Segment {
    /// Walks batch headers from `start` up to `end`, reading in chunks and calling
    /// `f` for each whole batch; `f` returns false to stop. Headers only: no CRC,
    /// but what the CRC does not cover is checked (see `Expect`): `prev_next` is
    /// the offset the first batch must start at (None: not known, from a hint).
    pub(super) fn walk(
        &self,
        start: u64,
        end: u64,
        prev_next: Option<i64>,
        expect: Expect,
        mut f: impl FnMut(BatchInfo) -> bool,
    ) -> Result<()> {
        self.walk_headers(start, end, prev_next, expect, |info, _| f(info))
    }

    /// As `walk`, also handing `f` each batch's header (its first 61 bytes only).
    fn walk_headers(
        &self,
        start: u64,
        end: u64,
        mut prev_next: Option<i64>,
        expect: Expect,
        mut f: impl FnMut(BatchInfo, &RecordBatch<'_>) -> bool,
    ) -> Result<()> {
        let len = end.saturating_sub(start) as usize;
        let walk = |bytes: &[u8]| self.walk_in(bytes, start, end, prev_next, expect, &mut f);
        if let Some(walked) = self.with_mapped(start, len, walk) {
            return walked;
        }
        let mut buf = vec![0u8; WALK_CHUNK];
        let (mut buf_pos, mut buf_len) = (start, 0usize);
        let mut pos = start;
        let mut chunk = WALK_FIRST;
        while pos < end {
            let rel = (pos - buf_pos) as usize;
            if rel + HEADER_LEN > buf_len {
                if pos + HEADER_LEN as u64 > end {
                    return Err(self.corrupt(
                        pos,
                        format!("{} bytes at the end of the segment are not a whole batch", end - pos),
                    ));
                }
                let n = ((end - pos) as usize).min(chunk);
                self.read_exact_at(&mut buf[..n], pos)?;
                buf_pos = pos;
                buf_len = n;
                chunk = WALK_CHUNK;
                continue;
            }
            let b =
                RecordBatch::header_only(&buf[rel..buf_len]).map_err(|e| self.corrupt(pos, e.to_string()))?;
            let info = BatchInfo::from_batch(pos, &b);
            self.check_batch(&info, b.last_offset_delta(), prev_next, end, expect)?;
            if !f(info, &b) {
                break;
            }
            prev_next = Some(info.last_offset + 1);
            pos += info.size;
            if info.size >= WALK_CHUNK as u64 {
                chunk = WALK_AFTER_LARGE;
            }
        }
        Ok(())
    }

    /// `walk_headers` over `bytes`, the segment's `[start, end)` in memory.
    fn walk_in(
        &self,
        bytes: &[u8],
        start: u64,
        end: u64,
        mut prev_next: Option<i64>,
        expect: Expect,
        f: &mut impl FnMut(BatchInfo, &RecordBatch<'_>) -> bool,
    ) -> Result<()> {
        let mut rel = 0usize;
        while rel < bytes.len() {
            let pos = start + rel as u64;
            if rel + HEADER_LEN > bytes.len() {
                return Err(self.corrupt(
                    pos,
                    format!("{} bytes at the end of the segment are not a whole batch", end - pos),
                ));
            }
            let b = RecordBatch::header_only(&bytes[rel..]).map_err(|e| self.corrupt(pos, e.to_string()))?;
            let info = BatchInfo::from_batch(pos, &b);
            self.check_batch(&info, b.last_offset_delta(), prev_next, end, expect)?;
            if !f(info, &b) {
                break;
            }
            prev_next = Some(info.last_offset + 1);
            rel = rel.saturating_add(info.size as usize);
        }
        Ok(())
    }

    /// What the CRC cannot vouch for in a batch header found at `info.position`.
    fn check_batch(
        &self,
        info: &BatchInfo,
        last_offset_delta: i32,
        prev_next: Option<i64>,
        end: u64,
        expect: Expect,
    ) -> Result<()> {
        let (base, last) = (info.base_offset, info.last_offset);
        let problem = if info.position + info.size > end {
            Some(format!(
                "batchLength {} runs past the segment's end at position {end}",
                info.size - LOG_OVERHEAD as u64
            ))
        } else if last_offset_delta < 0 {
            Some(format!("lastOffsetDelta {last_offset_delta} is negative"))
        } else if base < self.base_offset || last - self.base_offset > i64::from(i32::MAX) {
            Some(format!("baseOffset {base} lies outside the segment that starts at {}", self.base_offset))
        } else if last >= expect.next_base {
            Some(format!(
                "offsets {base}..={last} reach into the next segment, which starts at {}",
                expect.next_base
            ))
        } else {
            match prev_next {
                Some(want) if base < want || (base > want && !expect.allow_gaps) => {
                    Some(format!("baseOffset {base} where offset {want} was expected"))
                }
                _ => None,
            }
        };
        match problem {
            Some(p) => Err(self.corrupt(info.position, p)),
            None => Ok(()),
        }
    }

    /// Walks from an index entry's position after checking the entry's claim:
    /// the batch there holds its offset. An index is a hint, never trusted.
    pub(super) fn hinted_walk(
        &self,
        (claimed, position): (i64, u32),
        end: u64,
        expect: Expect,
        mut f: impl FnMut(BatchInfo) -> bool,
    ) -> Result<()> {
        let mut first = true;
        let mut bad_claim = None;
        self.walk(u64::from(position), end, None, expect, |b| {
            if first {
                first = false;
                if !(b.base_offset <= claimed && claimed <= b.last_offset) {
                    bad_claim = Some(b);
                    return false;
                }
            }
            f(b)
        })?;
        match bad_claim {
            Some(b) => Err(self.corrupt(
                b.position,
                format!(
                    "the index puts offset {claimed} in the batch of offsets {}..={}",
                    b.base_offset, b.last_offset
                ),
            )),
            None => Ok(()),
        }
    }

    /// The first batch whose last offset is >= `offset`, searching below `end`:
    /// from the index's hint for `offset` if it holds up, else from the start.
    pub fn find_batch(&self, offset: i64, end: u64, expect: Expect) -> Result<Option<BatchInfo>> {
        let mut found = None;
        let mut holds = |b: BatchInfo| {
            if b.last_offset >= offset {
                found = Some(b);
                return false;
            }
            true
        };
        let hint = self.indexes.lock().offsets.lookup(offset);
        // A bad hint, or damage after it, costs only a second walk from the
        // start, which reports the damage (the batches passed on the way are
        // all before `offset`, so nothing was found yet).
        if hint.1 > 0 && u64::from(hint.1) < end && self.hinted_walk(hint, end, expect, &mut holds).is_ok() {
            return Ok(found);
        }
        self.walk(0, end, Some(self.base_offset), expect, holds)?;
        Ok(found)
    }

    /// The file range of whole batches from the one holding `offset`, at most
    /// `max_bytes` long but always at least one batch (so a large batch is not
    /// stuck forever), never past `end`.
    pub fn range_from(
        &self,
        offset: i64,
        max_bytes: u64,
        end: u64,
        expect: Expect,
    ) -> Result<Option<FileRange>> {
        self.range_upto(offset, max_bytes, end, expect, i64::MAX)
    }

    /// As `range_from`, but only batches whose base offset is below
    /// `max_offset` (a read bound such as the high watermark); None if the
    /// batch holding `offset` starts at or after it.
    pub fn range_upto(
        &self,
        offset: i64,
        max_bytes: u64,
        end: u64,
        expect: Expect,
        max_offset: i64,
    ) -> Result<Option<FileRange>> {
        let Some(first) = self.find_batch(offset, end, expect)? else { return Ok(None) };
        if first.base_offset >= max_offset {
            return Ok(None);
        }
        let mut length = first.size;
        if first.size < max_bytes {
            self.walk(first.position + first.size, end, Some(first.last_offset + 1), expect, |b| {
                if b.base_offset >= max_offset || length + b.size > max_bytes {
                    return false;
                }
                length += b.size;
                true
            })?;
        }
        Ok(Some(FileRange { path: self.log_path.clone(), position: first.position, length }))
    }

    /// Calls `f` with the header of each batch from the one holding `offset`
    /// up to (not including) the first whose base offset reaches `end_offset`.
    /// Headers only, no CRC (what producer state replay needs: the segment was
    /// checked when it was recovered). Offsets are checked as `Expect::ANY`.
    pub fn for_each_header(
        &self,
        offset: i64,
        end_offset: i64,
        mut f: impl FnMut(BatchInfo, &RecordBatch<'_>),
    ) -> Result<()> {
        let end = self.size();
        let Some(first) = self.find_batch(offset, end, Expect::ANY)? else { return Ok(()) };
        self.walk_headers(first.position, end, None, Expect::ANY, |info, b| {
            if info.base_offset >= end_offset {
                return false;
            }
            f(info, b);
            true
        })
    }

    /// The batch a time index entry (timestamp, offset) names, if the entry holds
    /// up: that batch ends at `offset` and its max timestamp is `timestamp`.
    pub(super) fn time_entry_batch(
        &self,
        timestamp: i64,
        offset: i64,
        end: u64,
    ) -> Result<Option<BatchInfo>> {
        if offset < self.base_offset {
            return Ok(None);
        }
        Ok(self
            .find_batch(offset, end, Expect::ANY)?
            .filter(|b| b.last_offset == offset && b.max_timestamp == timestamp))
    }

    /// The first batch with a record timestamp >= `timestamp` (by its maxTimestamp).
    pub fn find_by_timestamp(&self, timestamp: i64, end: u64, expect: Expect) -> Result<Option<BatchInfo>> {
        self.find_by_timestamp_from(timestamp, None, end, expect)
    }

    /// As `find_by_timestamp`, but after the batch `after` (to continue a search).
    /// The time index is a hint: its entry is used only if the batch it names
    /// agrees with it, else the search starts at the segment's start.
    pub fn find_by_timestamp_from(
        &self,
        timestamp: i64,
        after: Option<&BatchInfo>,
        end: u64,
        expect: Expect,
    ) -> Result<Option<BatchInfo>> {
        let (start, prev_next) = match after {
            Some(a) => (a.position + a.size, Some(a.last_offset + 1)),
            None => {
                let entry = self.indexes.lock().times_read()?.lookup_entry(timestamp);
                let hinted = match entry {
                    Some((ts, off)) => self.time_entry_batch(ts, off, end).ok().flatten(),
                    None => None,
                };
                match hinted {
                    Some(b) => (b.position, None),
                    None => (0, Some(self.base_offset)),
                }
            }
        };
        let mut found = None;
        let mut damaged = None;
        self.walk(start, end, prev_next, expect, |b| {
            if b.max_timestamp >= timestamp {
                found = Some(b);
                return false;
            }
            // Passed over on its maxTimestamp: that must be the batch's own (CRC).
            match self.read_bytes(b.position, b.size as usize) {
                Ok(bytes) => match RecordBatch::parse(&bytes) {
                    Ok(_) => true,
                    Err(e) => {
                        damaged = Some(self.corrupt(b.position, e.to_string()));
                        false
                    }
                },
                Err(e) => {
                    damaged = Some(e);
                    false
                }
            }
        })?;
        match damaged {
            Some(e) => Err(e),
            None => Ok(found),
        }
    }

    /// The last whole batch below `end`, starting from the last index entry
    /// (if it holds up).
    pub fn last_batch(&self, end: u64, expect: Expect) -> Result<Option<BatchInfo>> {
        let hint = self.indexes.lock().offsets.last_entry();
        if let Some(hint) = hint.filter(|h| h.1 > 0 && u64::from(h.1) < end) {
            let mut last = None;
            if self
                .hinted_walk(hint, end, expect, |b| {
                    last = Some(b);
                    true
                })
                .is_ok()
            {
                return Ok(last);
            }
        }
        let mut last = None;
        self.walk(0, end, Some(self.base_offset), expect, |b| {
            last = Some(b);
            true
        })?;
        Ok(last)
    }
}
