//! A follower's fetcher (Kafka's `ReplicaFetcherThread`): one task per
//! leader broker, sending the leader Fetch requests with this broker's id as
//! `replica_id` for every partition followed from it (in a fetch session,
//! KIP-227: after the first, a request names only the partitions whose
//! position moved), appending the batches
//! as they are (offsets, leader epochs and timestamps kept) and taking the
//! leader's high watermark. Before a partition is fetched in a new leader
//! epoch its log is cut back to where it agrees with the leader, by leader
//! epoch (OffsetForLeaderEpoch, KIP-101 with KIP-279's loop), never by the
//! high watermark.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    SaslAuthenticateRequest, SaslHandshakeRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;
use seglog_client::connection::{api_name, decode_response, encode_request, response_body, Request};
use seglog_core::leader_epoch::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};
use seglog_core::log::PartitionLog;
use seglog_core::record::batch::whole_batches_len;
use seglog_core::record::RecordBatch;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::partition::Followed;
use super::shutdown::wire;
use super::Replication;
use crate::logline::log as note;
use crate::security::sasl::{Login, Mechanism};
use crate::security::InterBroker;

/// How long connecting to another broker may take (TCP, TLS, each SASL step).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Fetch v11 (the broker's newest: current leader epochs, KIP-320) and
/// OffsetForLeaderEpoch v3 (with the replica id).
const FETCH_VERSION: i16 = 11;
const EPOCH_VERSION: i16 = 3;
/// `replica.fetch.backoff.ms`.
const BACKOFF: Duration = Duration::from_millis(500);

/// A byte stream to another broker: TCP, or TLS over it.
trait LinkStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> LinkStream for T {}

/// A connection to another broker, for the requests one broker sends another,
/// over the inter-broker listener's protocol (TLS, then a SASL login, where
/// it has them).
pub(super) struct Link {
    stream: Box<dyn LinkStream>,
    next_correlation: i32,
    client_id: &'static str,
}

impl Link {
    pub(super) async fn connect(
        addr: &str,
        client_id: &'static str,
        security: &InterBroker,
    ) -> std::io::Result<Link> {
        let timed_out = || std::io::Error::new(std::io::ErrorKind::TimedOut, format!("connecting to {addr}"));
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| timed_out())??;
        tcp.set_nodelay(true)?;
        let stream: Box<dyn LinkStream> = match &security.tls {
            None => Box::new(tcp),
            Some(connector) => {
                let host = addr
                    .rsplit_once(':')
                    .map_or(addr, |(h, _)| h)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: {e}"))
                })?;
                let tls = tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp))
                    .await
                    .map_err(|_| timed_out())??;
                Box::new(tls)
            }
        };
        let mut link = Link { stream, next_correlation: 0, client_id };
        if let Some((mechanism, user, password)) = &security.login {
            link.login(*mechanism, user, password).await.map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("SASL {} login to {addr} as {user}: {e}", mechanism.name()),
                )
            })?;
        }
        Ok(link)
    }

    /// SaslHandshake v1, then SaslAuthenticate v1 until the login is done.
    async fn login(&mut self, mechanism: Mechanism, user: &str, password: &str) -> std::io::Result<()> {
        let refused = |what: String| std::io::Error::new(std::io::ErrorKind::PermissionDenied, what);
        let handshake =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism.name()));
        let answer = self.call(1, &handshake, CONNECT_TIMEOUT).await?;
        if answer.error_code != 0 {
            return Err(refused(format!(
                "the broker does not serve {} (error {})",
                mechanism.name(),
                answer.error_code
            )));
        }
        let (mut login, mut token) = Login::start(mechanism, user, password);
        loop {
            let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
            let answer = self.call(1, &request, CONNECT_TIMEOUT).await?;
            if answer.error_code != 0 {
                let message = answer.error_message.as_ref().map_or("", |m| m.as_str()).to_string();
                return Err(refused(message));
            }
            match login.step(&answer.auth_bytes).map_err(refused)? {
                Some(next) => token = next,
                None => return Ok(()),
            }
        }
    }

    /// One request and its answer, framed by seglog-client's codec: the
    /// same bytes its blocking connection sends, over this tokio stream.
    pub(super) async fn call<R: Request>(
        &mut self,
        version: i16,
        request: &R,
        wait: Duration,
    ) -> std::io::Result<R::Response> {
        let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let client_id = StrBytes::from_static_str(self.client_id);
        let frame =
            encode_request(request, version, correlation, &client_id).map_err(|e| bad(e.to_string()))?;
        let exchange = async {
            self.stream.write_all(&frame).await?;
            let size = self.stream.read_i32().await?;
            if !(0..=512 << 20).contains(&size) {
                return Err(bad(format!("a response of {size} bytes")));
            }
            let mut body = vec![0; size as usize];
            self.stream.read_exact(&mut body).await?;
            Ok(Bytes::from(body))
        };
        let frame =
            tokio::time::timeout(wait + Duration::from_secs(10), exchange).await.map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::TimedOut, format!("{} unanswered", api_name(R::KEY)))
            })??;
        let body = response_body::<R>(frame, version, correlation).map_err(bad)?;
        decode_response::<R>(body, version).map_err(bad)
    }

    /// ControlledShutdown, which the protocol crate lacks, at its newest version.
    pub(super) async fn call_controlled_shutdown(
        &mut self,
        request: &wire::Request,
        wait: Duration,
    ) -> std::io::Result<wire::Answer> {
        let bad = |what: String| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        let version = wire::VERSIONS.1;
        let correlation = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        buf.put_i16(wire::API_KEY);
        buf.put_i16(version);
        buf.put_i32(correlation);
        buf.put_i16(self.client_id.len() as i16);
        buf.put_slice(self.client_id.as_bytes());
        if wire::request_header_version(version) >= 2 {
            buf.put_u8(0); // no tagged fields
        }
        wire::encode_request(request, version, &mut buf);
        let size = (buf.len() - 4) as i32;
        buf[..4].copy_from_slice(&size.to_be_bytes());
        let exchange = async {
            self.stream.write_all(&buf).await?;
            let size = self.stream.read_i32().await?;
            if !(4..=1 << 20).contains(&size) {
                return Err(bad(format!("a response of {size} bytes")));
            }
            let mut body = vec![0; size as usize];
            self.stream.read_exact(&mut body).await?;
            Ok(Bytes::from(body))
        };
        let mut body = tokio::time::timeout(wait, exchange).await.map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "ControlledShutdown unanswered")
        })??;
        let answered = body.get_i32();
        if answered != correlation {
            return Err(bad(format!("correlation id {answered}, expected {correlation}")));
        }
        if wire::response_header_version(version) >= 1 {
            // The response header's tagged fields: none are sent.
            if body.first() != Some(&0) {
                return Err(bad("tagged fields in a ControlledShutdown response header".into()));
            }
            body.advance(1);
        }
        wire::decode_response(&mut body, version).map_err(bad)
    }
}

/// The fetch loop for partitions led by `leader`. It idles while there are
/// none and ends when the broker stops.
pub async fn run(me: Arc<Replication>, leader: i32) {
    let mut changes = me.changes();
    let mut link: Option<Link> = None;
    let mut session = Session::default();
    while !me.stopped() {
        changes.borrow_and_update();
        let followed = me.followed_from(leader);
        let addr = me.view().brokers.get(&leader).and_then(|b| b.address(&me.config.inter_broker_listener));
        let (false, Some(addr)) = (followed.is_empty(), addr) else {
            link = None;
            session = Session::default();
            let _ = tokio::time::timeout(Duration::from_secs(1), changes.changed()).await;
            continue;
        };
        if link.is_none() {
            match Link::connect(&addr, "seglog-replica-fetcher", &me.inter_broker).await {
                Ok(l) => link = Some(l),
                Err(e) => {
                    note(
                        "warn",
                        "replica_fetch_connect",
                        &[("leader", &leader), ("addr", &addr), ("error", &e)],
                    );
                    tokio::time::sleep(BACKOFF).await;
                    continue;
                }
            }
        }
        let Some(l) = link.as_mut() else { continue };
        let result = match followed.iter().filter(|f| !f.truncated).cloned().collect::<Vec<_>>() {
            untruncated if !untruncated.is_empty() => truncate(&me, l, &untruncated).await,
            _ => fetch(&me, l, &mut session, &followed).await,
        };
        if let Err(e) = result {
            note("warn", "replica_fetch_failed", &[("leader", &leader), ("addr", &addr), ("error", &e)]);
            link = None;
            session = Session::default();
            tokio::time::sleep(BACKOFF).await;
        }
    }
}

/// One OffsetForLeaderEpoch round for partitions new to this leadership:
/// each log is cut to where it agrees with the leader, and is done once the
/// leader's answer names an epoch the follower has (or it has none).
async fn truncate(me: &Arc<Replication>, link: &mut Link, parts: &[Followed]) -> std::io::Result<()> {
    let mut asked = Vec::new();
    let mut wanted = Vec::new();
    for f in parts {
        let Some(latest) = f.log.latest_epoch() else {
            // Nothing to disagree about.
            me.set_truncated(&f.topic, f.partition, f.epoch, true);
            continue;
        };
        asked.push((f.clone(), latest));
        let p = OffsetForLeaderPartition::default()
            .with_partition(f.partition)
            .with_current_leader_epoch(f.epoch)
            .with_leader_epoch(latest);
        wanted.push((f.topic.as_str(), p));
    }
    let topics: Vec<OffsetForLeaderTopic> = by_topic(wanted)
        .into_iter()
        .map(|(name, ps)| OffsetForLeaderTopic::default().with_topic(name).with_partitions(ps))
        .collect();
    if topics.is_empty() {
        return Ok(());
    }
    let request =
        OffsetForLeaderEpochRequest::default().with_replica_id(BrokerId(me.node_id())).with_topics(topics);
    let response: OffsetForLeaderEpochResponse = link.call(EPOCH_VERSION, &request, Duration::ZERO).await?;
    for (f, _) in &asked {
        let answer = response
            .topics
            .iter()
            .filter(|t| t.topic.0.as_str() == f.topic)
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition == f.partition);
        let Some(a) = answer else { continue };
        if a.error_code != 0 {
            note(
                "info",
                "replica_truncation_deferred",
                &[("topic", &f.topic), ("partition", &f.partition), ("error_code", &a.error_code)],
            );
            tokio::time::sleep(BACKOFF / 5).await;
            continue;
        }
        let log_end = f.log.log_end_offset();
        let (to, done) = if a.end_offset == UNDEFINED_EPOCH_OFFSET || a.leader_epoch == UNDEFINED_EPOCH {
            // The leader knows no epoch this early: keep what is committed.
            (f.log.high_watermark().min(log_end), true)
        } else {
            let (mine, my_end) = f.log.offset_for_leader_epoch(a.leader_epoch);
            if mine == UNDEFINED_EPOCH {
                (a.end_offset.min(log_end), true)
            } else if mine != a.leader_epoch {
                // KIP-279: the follower lacks the leader's epoch; cut to the end
                // of its largest epoch below it and ask again.
                (my_end.min(log_end), false)
            } else {
                (a.end_offset.min(my_end).min(log_end), true)
            }
        };
        let cut = to < log_end;
        if cut {
            let l = f.log.clone();
            if let Err(e) = tokio::task::block_in_place(move || l.truncate_to(to)) {
                note(
                    "error",
                    "replica_truncate_failed",
                    &[("topic", &f.topic), ("partition", &f.partition), ("error", &e)],
                );
                continue;
            }
            note(
                "info",
                "replica_truncated",
                &[("topic", &f.topic), ("partition", &f.partition), ("from", &log_end), ("to", &to)],
            );
        }
        // A cut that changed the latest epoch may need another round.
        me.set_truncated(&f.topic, f.partition, f.epoch, done || !cut);
    }
    Ok(())
}

/// Where the leader has a followed partition: fetch offset, log start
/// offset, leader epoch.
type Position = (i64, i64, i32);

/// The follower's side of a fetch session with its leader (KIP-227): what
/// the leader was last told of each partition, so that a request names only
/// the partitions whose position changed, and those no longer followed.
#[derive(Default)]
struct Session {
    /// 0: none; the next request asks for one.
    id: i32,
    /// The epoch the next request names.
    epoch: i32,
    /// Per topic, per partition.
    told: HashMap<String, HashMap<i32, Position>>,
}

impl Session {
    fn told_of(&self, topic: &str, partition: i32) -> Option<&Position> {
        self.told.get(topic)?.get(&partition)
    }

    /// After a request of `epoch` naming `named` and forgetting `forgotten`
    /// was answered with session `id` (0: none).
    fn answered(&mut self, id: i32, named: Vec<((String, i32), Position)>, forgotten: &[(String, i32)]) {
        if id == 0 || (self.id != 0 && id != self.id) {
            *self = Session::default();
            return;
        }
        if self.id == 0 {
            self.id = id;
            self.epoch = 1;
            self.told.clear();
        } else {
            self.epoch = if self.epoch == i32::MAX { 1 } else { self.epoch + 1 };
            for (topic, partition) in forgotten {
                if let Some(ps) = self.told.get_mut(topic) {
                    ps.remove(partition);
                    if ps.is_empty() {
                        self.told.remove(topic);
                    }
                }
            }
        }
        for ((topic, partition), pos) in named {
            self.told.entry(topic).or_default().insert(partition, pos);
        }
    }
}

/// One Fetch for every followed partition: in a session, naming only those
/// whose position the leader does not have.
async fn fetch(
    me: &Arc<Replication>,
    link: &mut Link,
    session: &mut Session,
    parts: &[Followed],
) -> std::io::Result<()> {
    let max_bytes = me.config.replica_fetch_max_bytes;
    // Throttled replicas outside the ISR sit this fetch out while the
    // follower's rate is over its bound (see `throttle`).
    let parts: Vec<&Followed> = parts.iter().filter(|f| !me.follower_throttles(&f.log)).collect();
    if parts.is_empty() {
        tokio::time::sleep(BACKOFF).await;
        return Ok(());
    }
    let position = |f: &Followed| (f.log.log_end_offset(), f.log.log_start_offset(), f.epoch);
    let named: Vec<((String, i32), Position)> = parts
        .iter()
        .filter_map(|f| {
            let pos = position(f);
            let told = session.told_of(&f.topic, f.partition);
            (session.id == 0 || told != Some(&pos)).then(|| ((f.topic.clone(), f.partition), pos))
        })
        .collect();
    let followed: HashSet<(&str, i32)> = parts.iter().map(|f| (f.topic.as_str(), f.partition)).collect();
    let forgotten: Vec<(String, i32)> = session
        .told
        .iter()
        .flat_map(|(t, ps)| ps.keys().map(move |&p| (t, p)))
        .filter(|(t, p)| !followed.contains(&(t.as_str(), *p)))
        .map(|(t, p)| (t.clone(), p))
        .collect();
    let wanted = named.iter().map(|((topic, partition), (offset, start, epoch))| {
        let p = FetchPartition::default()
            .with_partition(*partition)
            .with_current_leader_epoch(*epoch)
            .with_fetch_offset(*offset)
            .with_log_start_offset(*start)
            .with_partition_max_bytes(max_bytes);
        (topic.as_str(), p)
    });
    let topics: Vec<FetchTopic> = by_topic(wanted)
        .into_iter()
        .map(|(name, ps)| FetchTopic::default().with_topic(name).with_partitions(ps))
        .collect();
    let forgotten_topics: Vec<ForgottenTopic> = by_topic(forgotten.iter().map(|(t, p)| (t.as_str(), *p)))
        .into_iter()
        .map(|(name, ps)| ForgottenTopic::default().with_topic(name).with_partitions(ps))
        .collect();
    let wait = Duration::from_millis(me.config.replica_fetch_wait_max_ms);
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(me.node_id()))
        .with_max_wait_ms(wait.as_millis() as i32)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes.saturating_mul(parts.len().min(64) as i32).max(max_bytes))
        .with_session_id(session.id)
        .with_session_epoch(session.epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten_topics);
    let response: FetchResponse = link.call(FETCH_VERSION, &request, wait).await?;
    if response.error_code != 0 {
        // A session the leader no longer has (evicted, or the leader restarted),
        // or an epoch it did not expect: the next request is a full one.
        if response.error_code != E::FetchSessionIdNotFound.code()
            && response.error_code != E::InvalidFetchSessionEpoch.code()
        {
            note("warn", "replica_fetch_error", &[("error_code", &response.error_code)]);
            tokio::time::sleep(BACKOFF / 5).await;
        }
        *session = Session::default();
        return Ok(());
    }
    session.answered(response.session_id, named, &forgotten);
    let mut backoff = false;
    for t in response.responses {
        for p in t.partitions {
            let Some(f) =
                parts.iter().find(|f| f.topic == t.topic.0.as_str() && f.partition == p.partition_index)
            else {
                continue;
            };
            match p.error_code {
                0 => {}
                c if c == E::OffsetOutOfRange.code() => {
                    let log_end = f.log.log_end_offset();
                    if p.log_start_offset > log_end {
                        // Behind the leader's log start (retention or DeleteRecords ran
                        // there while this replica was away): start again where it starts.
                        let (l, start) = (f.log.clone(), p.log_start_offset);
                        match tokio::task::block_in_place(move || l.truncate_fully_and_start_at(start)) {
                            Ok(()) => note(
                                "info",
                                "replica_restarted_at_leader_start",
                                &[
                                    ("topic", &f.topic),
                                    ("partition", &f.partition),
                                    ("from", &log_end),
                                    ("at", &start),
                                ],
                            ),
                            Err(e) => note(
                                "error",
                                "replica_restart_failed",
                                &[("topic", &f.topic), ("partition", &f.partition), ("error", &e)],
                            ),
                        }
                    } else {
                        // Past the leader's end: agree on epochs again.
                        me.set_truncated(&f.topic, f.partition, f.epoch, false);
                    }
                    continue;
                }
                c => {
                    // Not (or no longer) the leader, another epoch: wait for the new state.
                    if c != E::NotLeaderOrFollower.code()
                        && c != E::FencedLeaderEpoch.code()
                        && c != E::UnknownLeaderEpoch.code()
                    {
                        note(
                            "warn",
                            "replica_fetch_error",
                            &[("topic", &f.topic), ("partition", &f.partition), ("error_code", &c)],
                        );
                    }
                    backoff = true;
                    continue;
                }
            }
            let records = p.records.map(|r| r[..whole_batches_len(&r)].to_vec()).unwrap_or_default();
            me.follower_fetched_bytes(&f.log, records.len() as u64);
            let log = f.log.clone();
            let (hw, start) = (p.high_watermark, p.log_start_offset);
            let store = me.store.clone();
            let appended = tokio::task::block_in_place(move || {
                if !records.is_empty() {
                    start_inside_first_batch(&log, &records)?;
                    log.append_as_follower(records)?;
                }
                log.set_high_watermark(hw.max(0))?;
                // Records the leader deleted (DeleteRecords, retention) go here too.
                if start > log.log_start_offset() && start <= log.high_watermark() {
                    store.delete_records(log.topic(), log.partition(), start)?;
                }
                Ok::<_, seglog_core::Error>(())
            });
            if let Err(e) = appended {
                note(
                    "warn",
                    "replica_append_failed",
                    &[("topic", &f.topic), ("partition", &f.partition), ("error", &e)],
                );
                me.set_truncated(&f.topic, f.partition, f.epoch, false);
            }
        }
    }
    if backoff {
        tokio::time::sleep(BACKOFF / 5).await;
    }
    Ok(())
}

/// An empty log that starts inside the leader's first batch (it started
/// again at the leader's log start, which fell inside a batch) starts again
/// at that batch's base, so the batch can be taken whole (Kafka does the same
/// on an `UnexpectedAppendOffsetException`).
fn start_inside_first_batch(log: &PartitionLog, records: &[u8]) -> seglog_core::Result<()> {
    let Ok(first) = RecordBatch::parse_header(records) else { return Ok(()) };
    let end = log.log_end_offset();
    if end == log.log_start_offset() && first.base_offset() < end && first.last_offset() >= end {
        log.truncate_fully_and_start_at(first.base_offset())?;
    }
    Ok(())
}

/// Partitions grouped under their topic's name, as requests carry them (the
/// followed partitions come sorted by topic).
fn by_topic<'a, P>(parts: impl IntoIterator<Item = (&'a str, P)>) -> Vec<(TopicName, Vec<P>)> {
    let mut out: Vec<(TopicName, Vec<P>)> = Vec::new();
    for (topic, p) in parts {
        match out.last_mut() {
            Some((name, ps)) if name.0.as_str() == topic => ps.push(p),
            _ => out.push((TopicName(StrBytes::from_string(topic.to_string())), vec![p])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> (String, i32) {
        ("t".to_string(), p)
    }

    #[test]
    fn a_session_remembers_what_the_leader_was_told() {
        let mut s = Session::default();
        // A full request answered without a session: none.
        s.answered(0, vec![(key(0), (5, 0, 1))], &[]);
        assert_eq!((s.id, s.epoch, s.told.len()), (0, 0, 0));
        // Answered with one: epoch 1, every partition told.
        s.answered(7, vec![(key(0), (5, 0, 1)), (key(1), (9, 0, 1))], &[]);
        assert_eq!((s.id, s.epoch), (7, 1));
        assert_eq!(s.told_of("t", 1), Some(&(9, 0, 1)));
        // An incremental one moves partition 0 and forgets partition 1.
        s.answered(7, vec![(key(0), (6, 0, 1))], &[key(1)]);
        assert_eq!((s.id, s.epoch), (7, 2));
        assert_eq!(s.told["t"].len(), 1);
        assert_eq!(s.told_of("t", 0), Some(&(6, 0, 1)));
        // Another id than the session's: start over.
        s.answered(8, Vec::new(), &[]);
        assert_eq!((s.id, s.epoch, s.told.len()), (0, 0, 0));
        // Epochs wrap to 1.
        s.answered(3, Vec::new(), &[]);
        s.epoch = i32::MAX;
        s.answered(3, Vec::new(), &[]);
        assert_eq!(s.epoch, 1);
    }
}
