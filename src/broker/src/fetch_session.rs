//! Fetch sessions (KIP-227, Kafka's `FetchSessionCache`): a fetcher that
//! asks for one (session id 0, epoch 0) is given an id, and from then on
//! names only the partitions whose fetch position changed (and those it
//! forgets); the broker keeps the rest and answers only partitions with
//! something new — records, an error, or a moved high watermark, log start
//! offset or preferred read replica. With many partitions and little
//! traffic, requests and responses shrink from every partition to the few
//! that moved.
//!
//! Epochs order a session's requests: each names the epoch after the last
//! one (1 after the first, wrapping to 1 after `i32::MAX`); another is
//! INVALID_FETCH_SESSION_EPOCH, an unknown id FETCH_SESSION_ID_NOT_FOUND,
//! and epoch -1 closes the session (the request itself is answered
//! whole, without one). With every slot taken (`max.incremental.fetch.
//! session.cache.slots`) a new session displaces the least recently used
//! one idle for at least two minutes, or is not made: the fetch is answered
//! without a session, as Kafka answers it.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kafka_protocol::ResponseError as E;
use parking_lot::Mutex;

use crate::replica_manager::{TopicData, Wanted};

pub const INITIAL_EPOCH: i32 = 0;
pub const FINAL_EPOCH: i32 = -1;

/// How long a session must have been idle before a new one may displace it
/// (Kafka's `min.incremental.fetch.session.eviction.ms`).
const EVICTION_IDLE: Duration = Duration::from_secs(120);

/// How a fetch is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// No session: every partition asked, session id 0.
    Sessionless,
    /// A session made by this request: every partition, and its id.
    New(i32),
    /// A session's next request: only what moved.
    Incremental(i32),
}

impl Context {
    pub fn session_id(self) -> i32 {
        match self {
            Context::Sessionless => 0,
            Context::New(id) | Context::Incremental(id) => id,
        }
    }
}

/// What a partition's answer told the fetcher last: high watermark, log
/// start offset, preferred read replica.
type Told = (i64, i64, i32);

struct Cached {
    wanted: Wanted,
    told: Option<Told>,
}

struct Session {
    /// The epoch the next request must name.
    epoch: i32,
    /// Per topic, per partition: what the fetcher asked and was told. Read
    /// in this order, so that each topic's partitions come together.
    partitions: BTreeMap<String, BTreeMap<i32, Cached>>,
    last_used: Instant,
}

impl Session {
    fn add(&mut self, w: Wanted) {
        let topic = self.partitions.entry(w.topic.clone()).or_default();
        match topic.get_mut(&w.partition) {
            Some(c) => c.wanted = w,
            None => {
                topic.insert(w.partition, Cached { wanted: w, told: None });
            }
        }
    }

    fn forget(&mut self, topic: &str, partition: i32) {
        if let Some(ps) = self.partitions.get_mut(topic) {
            ps.remove(&partition);
            if ps.is_empty() {
                self.partitions.remove(topic);
            }
        }
    }

    fn wanted(&self) -> Vec<Wanted> {
        self.partitions.values().flat_map(|ps| ps.values().map(|c| c.wanted.clone())).collect()
    }
}

pub struct FetchSessions {
    slots: usize,
    sessions: Mutex<HashMap<i32, Session>>,
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessions {
    pub fn new(slots: usize) -> FetchSessions {
        FetchSessions { slots, sessions: Mutex::new(HashMap::new()) }
    }

    /// Sessions open now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves a request: how to answer it and what to read. `Err` is the
    /// fetch's top-level error (an unknown session, a wrong epoch).
    pub fn begin(
        &self,
        session_id: i32,
        epoch: i32,
        wanted: Vec<Wanted>,
        forgotten: &[(String, i32)],
    ) -> Result<(Context, Vec<Wanted>), i16> {
        if session_id == 0 && epoch == FINAL_EPOCH {
            // A fetcher that uses no sessions (librdkafka): nothing to look up.
            return Ok((Context::Sessionless, wanted));
        }
        let mut sessions = self.sessions.lock();
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            // A full request ends the session it names.
            if session_id != 0 {
                sessions.remove(&session_id);
            }
            if epoch == FINAL_EPOCH {
                return Ok((Context::Sessionless, wanted));
            }
            let Some(id) = self.make_room(&mut sessions) else { return Ok((Context::Sessionless, wanted)) };
            let mut session = Session { epoch: 1, partitions: BTreeMap::new(), last_used: Instant::now() };
            for w in &wanted {
                session.add(w.clone());
            }
            sessions.insert(id, session);
            return Ok((Context::New(id), wanted));
        }
        let Some(session) = sessions.get_mut(&session_id) else {
            return Err(E::FetchSessionIdNotFound.code());
        };
        if session.epoch != epoch {
            return Err(E::InvalidFetchSessionEpoch.code());
        }
        for w in wanted {
            session.add(w);
        }
        for (topic, partition) in forgotten {
            session.forget(topic, *partition);
        }
        session.epoch = next_epoch(epoch);
        session.last_used = Instant::now();
        Ok((Context::Incremental(session_id), session.wanted()))
    }

    /// A free id, after displacing an idle session if every slot is taken;
    /// `None` when none may be displaced.
    fn make_room(&self, sessions: &mut HashMap<i32, Session>) -> Option<i32> {
        if self.slots == 0 {
            return None;
        }
        if sessions.len() >= self.slots {
            let (&oldest, s) = sessions.iter().min_by_key(|(_, s)| s.last_used)?;
            if s.last_used.elapsed() < EVICTION_IDLE {
                return None;
            }
            sessions.remove(&oldest);
        }
        loop {
            let bytes = uuid::Uuid::new_v4().into_bytes();
            let id = (u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) >> 1) as i32;
            if id != 0 && !sessions.contains_key(&id) {
                return Some(id);
            }
        }
    }

    /// A read answered with nothing (a throttled one): a session it made is
    /// dropped, as its fetcher starts over; the session id to answer with.
    pub fn abandon(&self, context: Context) -> i32 {
        match context {
            Context::New(id) => {
                self.sessions.lock().remove(&id);
                0
            }
            other => other.session_id(),
        }
    }

    /// The partitions of a read to send: all of them without a session or
    /// for a new one; for an incremental request those with records, an
    /// error, or a high watermark, log start offset or preferred read
    /// replica other than last told. What each is told is remembered.
    pub fn finish(&self, context: Context, topics: Vec<TopicData>) -> Vec<TopicData> {
        let (id, incremental) = match context {
            Context::Sessionless => return topics,
            Context::New(id) => (id, false),
            Context::Incremental(id) => (id, true),
        };
        let mut sessions = self.sessions.lock();
        // Closed or displaced meanwhile: nothing to remember, everything sent.
        let Some(session) = sessions.get_mut(&id) else { return topics };
        let mut out = Vec::with_capacity(topics.len());
        for mut t in topics {
            let mut cached = session.partitions.get_mut(t.name.as_str());
            t.partitions.retain(|p| {
                let Some(c) = cached.as_mut().and_then(|ps| ps.get_mut(&p.partition)) else {
                    return !incremental;
                };
                let now = (p.high_watermark, p.log_start_offset, p.preferred_read_replica);
                let news = p.records.as_ref().is_some_and(|r| r.length > 0)
                    || p.error_code != 0
                    || c.told != Some(now);
                c.told = Some(now);
                news || !incremental
            });
            if !t.partitions.is_empty() || !incremental {
                out.push(t);
            }
        }
        out
    }
}

#[cfg(test)]
#[path = "fetch_session_test.rs"]
mod tests;
