//! What a batch from outside (a client, a file) must satisfy before it is
//! appended: the home of Kafka's `LogValidator` rules. Batches seglog builds
//! itself skip it.

use super::batch::RecordBatch;
use crate::error::{CorruptBatch, Error, Result};

/// The topic's rules a client batch is checked against.
#[derive(Debug, Clone, Copy)]
pub struct BatchRules<'a> {
    pub topic: &'a str,
    pub max_batch_bytes: usize,
    /// A compacted topic needs a key on every record.
    pub compacted: bool,
}

impl BatchRules<'_> {
    /// Checks a batch whose CRC was verified: not a control batch (those are a
    /// broker's to write), holding exactly the records its header declares, each
    /// keyed if the topic is compacted.
    pub fn check_client_batch(&self, b: &RecordBatch<'_>) -> Result<()> {
        self.check_size(b)?;
        if b.is_control() {
            return Err(CorruptBatch::BadRecord("control batch from a client".into()).into());
        }
        let payload = b.records_payload()?;
        let recs = b.records(&payload)?;
        if recs.is_empty() {
            return Err(CorruptBatch::BadRecord("batch holds no records".into()).into());
        }
        if self.compacted && recs.iter().any(|r| r.key.is_none()) {
            return Err(self.keyless());
        }
        Ok(())
    }

    /// The size bound every batch is held to, whoever built it.
    pub fn check_size(&self, b: &RecordBatch<'_>) -> Result<()> {
        if b.size() > self.max_batch_bytes {
            return Err(Error::RecordTooLarge { size: b.size(), max: self.max_batch_bytes });
        }
        Ok(())
    }

    /// Refuses a keyless record for a compacted topic (Kafka's rule).
    pub fn check_key(&self, key: Option<&[u8]>) -> Result<()> {
        if key.is_none() && self.compacted {
            return Err(self.keyless());
        }
        Ok(())
    }

    fn keyless(&self) -> Error {
        Error::InvalidRecord(format!("compacted topic {} cannot accept a record without a key", self.topic))
    }
}
