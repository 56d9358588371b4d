//! Producer ids for InitProducerId, unique across restarts and crashes: ids
//! are handed out from blocks of `PRODUCER_ID_BLOCK_SIZE`, and a block is
//! claimed by writing (atomically, fsynced, directory fsynced) the file
//! `latest-producer-id-block` before any id of it is handed out, so that a
//! restart, even after kill -9, starts past every block ever claimed. Kafka
//! keeps the same record, in the same JSON form, in ZooKeeper's
//! `/latest_producer_id_block` (blocks of 1000); the ids left of a block a
//! process did not use up are skipped, never reused.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::checkpoint;
use crate::error::{Error, Result};

pub const PRODUCER_ID_BLOCK_FILE: &str = "latest-producer-id-block";
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// Kafka's `ProducerIdBlockZNode` JSON: the latest block claimed, both ends
/// inclusive, as strings.
#[derive(Serialize, Deserialize)]
struct BlockFile {
    version: i32,
    broker: i32,
    block_start: String,
    block_end: String,
}

/// The ids of the block in hand: `next` up to `end` (inclusive).
#[derive(Debug, Default)]
pub(super) struct ProducerIdBlock {
    next: i64,
    end: i64,
    /// False until a block is claimed in this process.
    claimed: bool,
}

impl ProducerIdBlock {
    /// The next id, claiming a new block in `store_dir` first when this one is used up.
    pub(super) fn allocate(&mut self, store_dir: &Path) -> Result<i64> {
        if !self.claimed || self.next > self.end {
            let (start, end) = claim_block(store_dir)?;
            *self = ProducerIdBlock { next: start, end, claimed: true };
        }
        let id = self.next;
        self.next += 1;
        Ok(id)
    }
}

/// Reads the latest block claimed, writes the one after it, and returns it.
fn claim_block(store_dir: &Path) -> Result<(i64, i64)> {
    let path = store_dir.join(PRODUCER_ID_BLOCK_FILE);
    let corrupt = |reason: String| Error::CorruptFile { path: path.clone(), reason };
    let start = match fs::read(&path) {
        Ok(bytes) => {
            let f: BlockFile = serde_json::from_slice(&bytes).map_err(|e| {
                corrupt(format!("not a producer id block ({e}); ids could repeat, so none are handed out"))
            })?;
            let end: i64 = f.block_end.parse().map_err(|_| {
                corrupt(format!("block_end {:?} is not an integer; ids could repeat", f.block_end))
            })?;
            if end < -1 {
                return Err(corrupt(format!("block_end {end} is negative")));
            }
            end.checked_add(1).ok_or_else(|| corrupt("every producer id has been handed out".into()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(Error::at(&path)(e)),
    };
    let end = start
        .checked_add(PRODUCER_ID_BLOCK_SIZE - 1)
        .ok_or_else(|| corrupt("every producer id has been handed out".into()))?;
    let f = BlockFile { version: 1, broker: 0, block_start: start.to_string(), block_end: end.to_string() };
    let json = serde_json::to_vec(&f).map_err(|e| Error::InvalidConfig(e.to_string()))?;
    checkpoint::write_atomic(&path, &json)?;
    Ok((start, end))
}
