//! Replication (Kafka's ZooKeeper mode): a broker given `zookeeper.connect`
//! registers in `/brokers/ids/N`, may win the controller, and learns which
//! partitions it leads or follows by watching the state znodes, applying only
//! newer leader epochs (or, in the same epoch, newer ISRs).
//!
//! - `znodes`: Kafka's paths and JSON. `view`: the cluster read whole.
//! - `controller`: election with epoch fencing, leader election, ISR
//!   pruning, preferred leaders. `placement`: rack-aware assignment.
//! - `partition` (Kafka's `Partition`): each local partition's role; a
//!   leader's followers, ISR and high watermark; acks=all waiting.
//! - `topics`: creating, configuring, growing and deleting topics through
//!   their znodes, as the admin requests ask.
//! - `reassignment`: moving a partition's replicas (KIP-455).
//! - `controller_requests`: what a Kafka controller sends a seglog broker
//!   in a cluster in migration (LeaderAndIsr, UpdateMetadata, StopReplica).
//! - `shutdown`: controlled shutdown, both the stopping broker's side and
//!   the controller's.
//! - `fetcher`: a follower's fetch loop, one per leader, with truncation by
//!   leader epoch (OffsetForLeaderEpoch, KIP-101/279) before it fetches.
//!
//! ZooKeeper holds metadata only; every write to it is conditional on a
//! znode version, so no two brokers can both believe a stale state wins.

mod codec;
mod controller;
pub mod controller_requests;
mod elections;
mod fetcher;
mod partition;
pub mod placement;
mod producer_ids;
mod reassignment;
pub mod shutdown;
mod throttle;
mod topics;
mod view;
pub mod znodes;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use seglog_core::store::Store;
use tokio::sync::watch;
use zookeeper_client::{AddWatchMode, Client, CreateMode, Error as ZkError, EventType, SessionState};

pub use self::controller::Election;
use self::controller::{ControllerState, Fenced};
pub use self::elections::Elected;
pub use self::partition::Partition;
use self::partition::{PartitionKey, SharedPartition};
pub use self::reassignment::{Ongoing, Reassigned, Target};
pub use self::topics::Placing;
pub use self::view::{ClusterView, TopicView};
use crate::config::BrokerConfig;
use crate::logline::log;
use crate::metrics::Metrics;
use crate::purgatory::Purgatory;
use crate::security::listeners::Listener;
use crate::security::InterBroker;

pub struct Replication {
    node_id: i32,
    config: BrokerConfig,
    store: Arc<Store>,
    /// Every listener, as advertised in the registration.
    advertised: Vec<Listener>,
    /// How this broker connects to the others.
    pub(crate) inter_broker: Arc<InterBroker>,
    /// The current session's client; `None` while there is none.
    client: Mutex<Option<Client>>,
    view: RwLock<Arc<ClusterView>>,
    /// Each local partition behind its own lock (Kafka's `leaderIsrUpdateLock`):
    /// the map's lock is held only to find or add one.
    partitions: RwLock<HashMap<PartitionKey, SharedPartition>>,
    /// Bumped whenever a role changes (or the view): what wakes idle fetchers
    /// and acks=all waits whose leadership may be gone.
    changed: watch::Sender<u64>,
    /// Where a high watermark's move wakes the requests parked on its partition.
    purgatory: Arc<Purgatory>,
    controller: tokio::sync::Mutex<Option<ControllerState>>,
    last_rebalance: Mutex<Instant>,
    /// The block of producer ids this broker hands out from (see `producer_ids`).
    producer_ids: tokio::sync::Mutex<producer_ids::ProducerIds>,
    /// A block is being taken ahead of need.
    taking_producer_ids: AtomicBool,
    fetchers: Mutex<HashSet<i32>>,
    /// In a controlled shutdown: follows nothing (see `shutdown`).
    leaving: AtomicBool,
    /// The view may be behind ZooKeeper: a conditional write was refused for
    /// a newer version, or a read failed. The next tick reads it all again
    /// rather than wait for a watch event that may not come.
    stale: AtomicBool,
    /// Per topic, the newest config znode version applied to the local topic
    /// (by a view, or by this broker's own config change): held while
    /// applying, so an older view never undoes a newer config.
    config_versions: Mutex<HashMap<String, i32>>,
    stopping: watch::Receiver<bool>,
    /// The cluster id in `/cluster/id`.
    cluster_id: Mutex<String>,
    /// The cluster id this broker's `meta.properties` records, if it has one:
    /// joining a cluster of another id is refused, as Kafka refuses it.
    stored_cluster_id: Option<String>,
    metrics: Arc<Metrics>,
    /// The replication throttles' rates (see `throttle`).
    quotas: throttle::ReplicationQuotas,
}

/// A ZooKeeper failure as a request's Kafka code and message.
fn refusal(e: ZkError) -> (i16, String) {
    (kafka_protocol::ResponseError::UnknownServerError.code(), format!("ZooKeeper: {e}"))
}

fn zk_err(what: &str, e: ZkError) -> seglog_core::Error {
    seglog_core::Error::Io(std::io::Error::other(format!("ZooKeeper: {what}: {e}")))
}

impl Replication {
    pub fn new(
        store: Arc<Store>,
        config: BrokerConfig,
        (advertised, inter_broker): (Vec<Listener>, Arc<InterBroker>),
        cluster_id: Option<String>,
        stopping: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
        purgatory: Arc<Purgatory>,
    ) -> Arc<Replication> {
        let quotas = throttle::ReplicationQuotas::new(&config);
        Arc::new(Replication {
            node_id: config.node_id,
            config,
            store,
            advertised,
            inter_broker,
            client: Mutex::new(None),
            view: RwLock::new(Arc::new(ClusterView::default())),
            partitions: RwLock::new(HashMap::new()),
            changed: watch::channel(0).0,
            purgatory,
            controller: tokio::sync::Mutex::new(None),
            last_rebalance: Mutex::new(Instant::now()),
            producer_ids: tokio::sync::Mutex::new(Default::default()),
            taking_producer_ids: AtomicBool::new(false),
            fetchers: Mutex::new(HashSet::new()),
            leaving: AtomicBool::new(false),
            stale: AtomicBool::new(false),
            config_versions: Mutex::new(HashMap::new()),
            stopping,
            // A new cluster's id is new, as Kafka's first broker makes it,
            // never the one a store brought from elsewhere.
            cluster_id: Mutex::new(crate::cluster::new_cluster_id()),
            stored_cluster_id: cluster_id,
            metrics,
            quotas,
        })
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub fn view(&self) -> Arc<ClusterView> {
        self.view.read().clone()
    }

    pub fn cluster_id(&self) -> String {
        self.cluster_id.lock().clone()
    }

    fn client(&self) -> Option<Client> {
        self.client.lock().clone()
    }

    /// The session's client for a request that writes to ZooKeeper, or the
    /// answer for the request while there is none.
    fn connected(&self) -> Result<Client, (i16, String)> {
        self.client().ok_or((
            kafka_protocol::ResponseError::NotController.code(),
            "not connected to ZooKeeper: try again".to_string(),
        ))
    }

    fn not_controller(&self) -> (i16, String) {
        (
            kafka_protocol::ResponseError::NotController.code(),
            format!("broker {} is not the controller", self.node_id),
        )
    }

    /// The session's client and the controller's state, held for a request
    /// only the controller serves; NOT_CONTROLLER (or no session) otherwise.
    async fn controlling(&self) -> Result<Controlling<'_>, (i16, String)> {
        let client = self.connected()?;
        let guard = self.controller.lock().await;
        if self.view().controller != Some(self.node_id) || guard.is_none() {
            return Err(self.not_controller());
        }
        Ok(Controlling { client, guard })
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn stopped(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Connects, registers and serves the first view: what `Broker::start`
    /// waits for, so that a started broker is a member. Then the session loop
    /// goes on in the background (`run`).
    pub async fn join(self: &Arc<Self>, timeout: Duration) -> seglog_core::Result<Session> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.open_session(deadline).await {
                Ok(s) => return Ok(s),
                // A mistake in the configuration does not go away by waiting.
                Err(e @ seglog_core::Error::InvalidConfig(_)) => return Err(e),
                Err(e) if Instant::now() < deadline && !self.stopped() => {
                    log("warn", "zookeeper_join_retry", &[("error", &e)]);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The session loop: events refresh the view; ticks shrink ISRs, move
    /// leaders back and checkpoint high watermarks; an expired session is
    /// replaced by a new one after every leadership is given up.
    pub async fn run(self: Arc<Self>, mut session: Session) {
        loop {
            let ended = self.serve_session(&mut session).await;
            self.lose_everything();
            if self.stopped() {
                self.leave(&session.client).await;
                return;
            }
            log("warn", "zookeeper_session_ended", &[("node", &self.node_id), ("why", &ended)]);
            loop {
                let deadline =
                    Instant::now() + Duration::from_millis(self.config.zookeeper_session_timeout_ms * 3);
                match self.open_session(deadline).await {
                    Ok(s) => {
                        session = s;
                        break;
                    }
                    Err(e) => {
                        log("warn", "zookeeper_rejoin_failed", &[("error", &e)]);
                        if self.stopped() {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        }
    }

    async fn open_session(self: &Arc<Self>, deadline: Instant) -> seglog_core::Result<Session> {
        let connect = self.config.zookeeper_connect.clone().unwrap_or_default();
        let (servers, chroot) = match connect.find('/') {
            Some(i) => (connect[..i].to_string(), Some(connect[i..].to_string())),
            None => (connect.clone(), None),
        };
        let timeout = Duration::from_millis(self.config.zookeeper_session_timeout_ms);
        let connecting = Client::connector().with_session_timeout(timeout).connect(&servers);
        let client = tokio::time::timeout(timeout, connecting)
            .await
            .map_err(|_| zk_err(&format!("connecting to {servers}"), ZkError::Timeout))?
            .map_err(|e| zk_err(&format!("connecting to {servers}"), e))?;
        let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        let client = match chroot {
            Some(root) => {
                match client.mkdir(&root, &persistent).await {
                    Ok(()) | Err(ZkError::NodeExists) => {}
                    Err(e) => return Err(zk_err(&format!("creating the chroot {root}"), e)),
                }
                client.chroot(root.clone()).map_err(|_| {
                    seglog_core::Error::InvalidConfig(format!("zookeeper.connect: bad chroot {root:?}"))
                })?
            }
            None => client,
        };
        for parent in znodes::PARENTS {
            match client.mkdir(parent, &persistent).await {
                Ok(()) | Err(ZkError::NodeExists) => {}
                Err(e) => return Err(zk_err(&format!("creating {parent}"), e)),
            }
        }
        self.settle_cluster_id(&client).await?;
        // Watch before registering, so that nothing after it is missed.
        let watcher = client
            .watch("/", AddWatchMode::PersistentRecursive)
            .await
            .map_err(|e| zk_err("watching /", e))?;
        self.register(&client, deadline).await?;
        *self.client.lock() = Some(client.clone());
        self.ensure_producer_ids().await;
        let session = Session { client, watcher };
        self.refresh(&session.client).await.map_err(|e| zk_err("reading the cluster", e))?;
        Ok(session)
    }

    /// `/cluster/id`: created with a new id by the first broker; the others
    /// take it, unless their `meta.properties` names another.
    async fn settle_cluster_id(&self, client: &Client) -> seglog_core::Result<()> {
        let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
        let mine = self.cluster_id();
        match client.create(znodes::CLUSTER_ID, &znodes::cluster_id_to_json(&mine), &persistent).await {
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(zk_err("creating /cluster/id", e)),
        }
        let (data, _) =
            client.get_data(znodes::CLUSTER_ID).await.map_err(|e| zk_err("reading /cluster/id", e))?;
        if let Some(id) = znodes::cluster_id_from_json(&data) {
            if let Some(stored) = self.stored_cluster_id.as_ref().filter(|s| **s != id) {
                return Err(seglog_core::Error::InvalidConfig(format!(
                    "the cluster id {id} in ZooKeeper does not match the cluster id {stored} in {}: \
                     this broker is trying to join the wrong cluster (check --zookeeper and its chroot)",
                    self.store.path().join(crate::cluster::META_PROPERTIES).display()
                )));
            }
            *self.cluster_id.lock() = id;
        }
        Ok(())
    }

    /// Creates `/brokers/ids/N`. A registration left by this broker's previous
    /// process (killed, its session not yet expired) is waited out.
    async fn register(&self, client: &Client, deadline: Instant) -> seglog_core::Result<()> {
        let ephemeral = CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all());
        let me = znodes::BrokerRegistration {
            id: self.node_id,
            endpoints: self
                .advertised
                .iter()
                .map(|l| znodes::Endpoint {
                    listener: l.name.clone(),
                    host: l.host.clone(),
                    port: i32::from(l.port),
                    protocol: l.protocol.name().to_string(),
                })
                .collect(),
            rack: self.config.rack.clone(),
            epoch: 0,
            seglog: true,
        };
        let path = znodes::broker_path(self.node_id);
        loop {
            match client.create(&path, &me.to_json(seglog_core::clock::now_ms()), &ephemeral).await {
                Ok((stat, _)) => {
                    log(
                        "info",
                        "broker_registered",
                        &[
                            ("node", &self.node_id),
                            ("broker_epoch", &stat.czxid),
                            ("rack", &format!("{:?}", me.rack)),
                        ],
                    );
                    return Ok(());
                }
                Err(ZkError::NodeExists) if Instant::now() < deadline && !self.stopped() => {
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(ZkError::NodeExists) => {
                    return Err(seglog_core::Error::InvalidConfig(format!(
                        "node.id {}: {path} is held by another live broker (a duplicate node id?)",
                        self.node_id
                    )))
                }
                Err(e) => return Err(zk_err(&format!("registering {path}"), e)),
            }
        }
    }

    async fn serve_session(self: &Arc<Self>, session: &mut Session) -> String {
        let mut stop = self.stopping.clone();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let mut last_checkpoint = Instant::now();
        loop {
            tokio::select! {
                event = session.watcher.changed() => {
                    if event.event_type == EventType::Session {
                        match event.session_state {
                            SessionState::Expired | SessionState::Closed | SessionState::AuthFailed => {
                                return format!("{:?}", event.session_state);
                            }
                            SessionState::Disconnected => continue,
                            // Events may have been lost while disconnected: read everything again.
                            _ => {}
                        }
                    }
                    // Let a burst of events settle into one read.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    if let Err(e) = self.refresh(&session.client).await {
                        if matches!(e, ZkError::SessionExpired) {
                            return "session expired".into();
                        }
                        log("warn", "zookeeper_read_failed", &[("error", &e)]);
                        self.stale.store(true, std::sync::atomic::Ordering::Release);
                    }
                }
                _ = tick.tick() => {
                    if self.stale.swap(false, std::sync::atomic::Ordering::AcqRel) {
                        if let Err(e) = self.refresh(&session.client).await {
                            if matches!(e, ZkError::SessionExpired) {
                                return "session expired".into();
                            }
                            log("warn", "zookeeper_read_failed", &[("error", &e)]);
                            self.stale.store(true, std::sync::atomic::Ordering::Release);
                        }
                    }
                    self.shrink_isrs(&session.client).await;
                    self.count_partitions();
                    let interval = Duration::from_secs(self.config.leader_imbalance_check_interval_seconds);
                    let due = self.config.auto_leader_rebalance_enable && self.last_rebalance.lock().elapsed() >= interval;
                    if due {
                        *self.last_rebalance.lock() = Instant::now();
                        let view = self.view();
                        self.control(&session.client, &view, true).await;
                    }
                    let every = Duration::from_millis(self.config.replica_high_watermark_checkpoint_interval_ms);
                    if last_checkpoint.elapsed() >= every {
                        last_checkpoint = Instant::now();
                        let store = self.store.clone();
                        if let Err(e) = tokio::task::block_in_place(|| store.checkpoint()) {
                            log("warn", "checkpoint_failed", &[("error", &e)]);
                        }
                    }
                }
                _ = async { let _ = stop.wait_for(|s| *s).await; } => return "stopping".into(),
            }
        }
    }

    /// Reads the view, makes the local replicas follow it, and, for the
    /// controller, acts on it.
    async fn refresh(self: &Arc<Self>, client: &Client) -> Result<(), ZkError> {
        let view = Arc::new(view::read(client).await?);
        let me = self.clone();
        let v = view.clone();
        tokio::task::block_in_place(move || me.apply(&v));
        // Published once applied: what Metadata answers, the replicas already
        // act on (a client told "ISR [1]" meets a leader that knows it). The
        // fetchers woken by `apply` look again once the view is in.
        *self.view.write() = view.clone();
        self.quotas.update(&view.broker_configs, self.node_id);
        self.bump();
        if view.controller.is_none() && !view.has_kafka_broker() {
            let mut ctl = self.controller.lock().await;
            *ctl = controller::try_elect(client, self.node_id).await?;
            if ctl.is_some() {
                *self.last_rebalance.lock() = Instant::now();
            }
        }
        self.control(client, &view, false).await;
        self.legacy_reassignments(client).await;
        Ok(())
    }

    /// A controller pass, if this broker is the controller.
    async fn control(&self, client: &Client, view: &ClusterView, prefer: bool) {
        let mut guard = self.controller.lock().await;
        if view.controller.is_some_and(|c| c != self.node_id) {
            *guard = None;
        }
        let Some(ctl) = guard.as_mut() else { return };
        if view.has_kafka_broker() {
            // A Kafka broker joined: it takes the controller, the only one
            // its brokers follow.
            match controller::resign(client, self.node_id).await {
                Ok(()) => {
                    log(
                        "info",
                        "controller_resigned",
                        &[("node", &self.node_id), ("why", &"a Kafka broker is live")],
                    );
                    *guard = None;
                }
                Err(e) => log("warn", "controller_write_failed", &[("error", &e)]),
            }
            return;
        }
        if ctl.known.is_empty() {
            ctl.known = view.brokers.iter().map(|(id, b)| (*id, b.epoch)).collect();
        }
        let unclean = self.store.config().topic_defaults.unclean_leader_election_enable;
        match controller::reconcile(client, ctl, view, unclean, prefer).await {
            Ok(_) => {}
            Err(Fenced::Deposed) => {
                log(
                    "warn",
                    "controller_deposed",
                    &[("node", &self.node_id), ("controller_epoch", &ctl.epoch)],
                );
                *guard = None;
            }
            Err(Fenced::Zk(e)) => log("warn", "controller_write_failed", &[("error", &e)]),
        }
    }

    /// Deregisters and gives up the controller on a clean stop, so that the
    /// others act at once rather than after the session timeout.
    async fn leave(&self, client: &Client) {
        let _ = client.delete(&znodes::broker_path(self.node_id), None).await;
        if self.controller.lock().await.take().is_some() {
            let _ = client.delete(znodes::CONTROLLER, None).await;
        }
        *self.client.lock() = None;
    }
}

/// What a request only the controller serves holds while it runs.
struct Controlling<'a> {
    client: Client,
    guard: tokio::sync::MutexGuard<'a, Option<ControllerState>>,
}

/// One ZooKeeper session: its client and the recursive watch on `/`.
pub struct Session {
    client: Client,
    watcher: zookeeper_client::PersistentWatcher,
}
