//! The broker: a tokio runtime of its own, an accept loop, one task per
//! connection, and a clean stop (no new connections, in-flight requests
//! finished, then the runtime down). The store stays the caller's to close.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use seglog_core::error::{Error, Result};
use seglog_core::store::Store;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::client_quota::{ClientQuotas, LocalQuotas, QuotaConfigs};
use crate::config::BrokerConfig;
use crate::connection::serve_connection;
use crate::connection_quotas::{raise_descriptor_limit, ConnectionQuotas, OverIpLimit};
use crate::coordinator::{Coordinator, GroupConfig};
use crate::dynamic_config::{Entities, LocalConfigs, LOCAL_FILE, USERS_FILE};
use crate::fetch_session::FetchSessions;
use crate::logline::log;
use crate::memory::Memory;
use crate::metrics::{serve_metrics, Metrics};
use crate::purgatory::Purgatory;
use crate::replica_manager::ReplicaManager;
use crate::replication::Replication;
use crate::security::acl::{Acls, Authorizer, LocalAcls, Operation, ResourceType};
use crate::security::listeners::{Listener, SecurityProtocol};
use crate::security::scram::{ScramCredential, ScramMechanism};
use crate::security::{InterBroker, ListenerSecurity};

/// What every request handler can see.
pub struct Shared {
    pub store: Arc<Store>,
    pub config: BrokerConfig,
    /// Every listener as Metadata hands it out (its bound port where it was
    /// given as 0), in the order of `listeners`.
    pub advertised: Vec<Listener>,
    pub cluster_id: String,
    pub metrics: Arc<Metrics>,
    /// The bytes of requests read and not yet answered (`queued.max.request.bytes`).
    pub request_memory: Memory,
    /// The bytes of responses built and not yet written (`queued.max.response.bytes`).
    pub response_memory: Memory,
    /// Turns at making the answer of a read-only request: one per network thread.
    pub answering: tokio::sync::Semaphore,
    /// Appends, reads and offsets of the partitions this broker leads.
    pub replica_manager: Arc<ReplicaManager>,
    /// The group coordinator (every group's for a single broker; a cluster
    /// member's serves the groups of the `__consumer_offsets` partitions it leads).
    pub coordinator: Arc<Coordinator>,
    /// This broker's part in a cluster (`zookeeper.connect`); `None` for a
    /// single broker, which leads every partition of its store.
    pub replication: Option<Arc<Replication>>,
    /// Fetchers' sessions (KIP-227).
    pub fetch_sessions: FetchSessions,
    /// A single broker's dynamic configs (a cluster member's are ZooKeeper's).
    pub local_configs: Option<LocalConfigs>,
    /// A single broker's users: their SCRAM credentials (a cluster member's
    /// are ZooKeeper's, `/config/users/<user>`).
    pub local_users: Option<LocalConfigs>,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
    pub authorizer: Authorizer,
    /// A single broker's ACLs (a cluster member's are ZooKeeper's).
    pub local_acls: Option<LocalAcls>,
    /// Each client's measured rates against its quotas.
    pub client_quotas: ClientQuotas,
    /// A single broker's quota configs (a cluster member's are ZooKeeper's).
    pub local_quotas: Option<LocalQuotas>,
}

impl Shared {
    /// The dynamic broker configs, per entity: ZooKeeper's for a cluster
    /// member (as its view last read them), the store's for a single broker.
    pub fn dynamic_configs(&self) -> Entities {
        match (&self.replication, &self.local_configs) {
            (Some(r), _) => r.view().broker_configs.clone(),
            (None, Some(local)) => local.get(),
            (None, None) => Entities::new(),
        }
    }

    /// Each user's configs (its SCRAM credentials): ZooKeeper's for a
    /// cluster member, the store's for a single broker.
    pub fn user_configs(&self) -> Entities {
        match (&self.replication, &self.local_users) {
            (Some(r), _) => r.view().user_configs.clone(),
            (None, Some(local)) => local.get(),
            (None, None) => Entities::new(),
        }
    }

    /// `user`'s SCRAM credential for mechanism `m`, as Kafka stores it.
    pub fn scram_credential(&self, user: &str, m: ScramMechanism) -> Option<ScramCredential> {
        let text = match (&self.replication, &self.local_users) {
            (Some(r), _) => r.view().user_configs.get(user)?.get(m.name())?.clone(),
            (None, Some(local)) => local.get_entity(user)?.get(m.name())?.clone(),
            (None, None) => return None,
        };
        ScramCredential::from_kafka(&text)
    }

    /// Every quota config: ZooKeeper's for a cluster member, the store's for
    /// a single broker.
    pub fn quota_configs(&self) -> Arc<QuotaConfigs> {
        match (&self.replication, &self.local_quotas) {
            (Some(r), _) => r.view().client_quotas.clone(),
            (None, Some(local)) => local.get(),
            (None, None) => Arc::new(QuotaConfigs::new()),
        }
    }

    /// Every ACL: ZooKeeper's for a cluster member, the store's for a single broker.
    pub fn acls(&self) -> Arc<Acls> {
        match (&self.replication, &self.local_acls) {
            (Some(r), _) => r.view().acls.clone(),
            (None, Some(local)) => local.get(),
            (None, None) => Arc::new(Acls::new()),
        }
    }

    /// Whether the principal of the request being handled may do `op` on
    /// the resource (always, without an authorizer).
    pub fn authorize(&self, op: Operation, resource_type: ResourceType, name: &str) -> bool {
        if !self.authorizer.enabled {
            return true;
        }
        let (principal, host) = crate::connection::principal_and_host();
        self.authorizer.authorize(&self.acls(), &principal, &host, op, resource_type, name)
    }

    /// Whether the principal may do `op` on some resource of the type (an
    /// idempotent producer needs WRITE on a topic, or IDEMPOTENT_WRITE).
    pub fn authorize_any(&self, op: Operation, resource_type: ResourceType) -> bool {
        if !self.authorizer.enabled {
            return true;
        }
        let (principal, host) = crate::connection::principal_and_host();
        let acls = self.acls();
        acls.keys()
            .filter(|r| r.resource_type == resource_type)
            .any(|r| self.authorizer.authorize(&acls, &principal, &host, op, resource_type, &r.name))
            || (self.authorizer.allow_if_no_acl && !acls.keys().any(|r| r.resource_type == resource_type))
    }

    /// The name of the listener the request being handled came on (the
    /// first listener's outside a request).
    pub fn listener_name(&self) -> String {
        crate::connection::listener_name()
            .map_or_else(|| self.config.listeners[0].name.clone(), |l| l.to_string())
    }

    /// This broker's `(host, port)` as the client of the request being
    /// handled reaches it: the endpoint of the listener it came on.
    pub fn advertised_here(&self) -> (String, i32) {
        let name = self.listener_name();
        let l = self.advertised.iter().find(|l| l.name == name).unwrap_or(&self.advertised[0]);
        (l.host.clone(), i32::from(l.port))
    }
}

pub struct Broker {
    runtime: Option<tokio::runtime::Runtime>,
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    /// Each listener's name, protocol and bound address.
    bound: Vec<(String, SecurityProtocol, SocketAddr)>,
    metrics_addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    servers: Vec<tokio::task::JoinHandle<()>>,
    /// The ZooKeeper session loop of a cluster member.
    membership: Option<tokio::task::JoinHandle<()>>,
    stopped: bool,
}

fn io_err(what: &str) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::Io(std::io::Error::new(e.kind(), format!("{what}: {e}")))
}

impl Broker {
    /// Binds the listener (and the metrics listener, if any) and starts serving
    /// `store` on background threads.
    pub fn start(store: Arc<Store>, config: BrokerConfig, metrics_listen: Option<&str>) -> Result<Broker> {
        if store.is_read_only() {
            return Err(Error::ReadOnly("serving a store as a broker"));
        }
        // A cluster member takes the cluster's id from ZooKeeper and writes
        // `meta.properties` only then; one alone makes its own.
        let stored_cluster_id = match &config.zookeeper_connect {
            None => Some(crate::cluster::load_or_create(store.path(), config.node_id, false)?),
            Some(_) => crate::cluster::load(store.path(), config.node_id)?,
        };
        let quotas = ConnectionQuotas::new(&config, raise_descriptor_limit())?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.network_threads)
            .thread_name("seglog-broker")
            .enable_all()
            .build()
            .map_err(io_err("starting the broker's runtime"))?;
        // Each listener's security first: a missing key file or a bad key is
        // an error at start, not at a client's first connection.
        let securities = config
            .listeners
            .iter()
            .map(|l| ListenerSecurity::build(&config, l))
            .collect::<Result<Vec<_>>>()?;
        let inter_broker = InterBroker::build(&config)?;
        let mut bound_listeners = Vec::with_capacity(config.listeners.len());
        for l in &config.listeners {
            let host = if l.host.is_empty() { "0.0.0.0" } else { l.host.as_str() };
            let address = if host.contains(':') {
                format!("[{host}]:{}", l.port)
            } else {
                format!("{host}:{}", l.port)
            };
            let listener = runtime
                .block_on(TcpListener::bind(&address))
                .map_err(io_err(&format!("binding listener {} to {address}", l.name)))?;
            let addr = listener.local_addr().map_err(io_err("reading the bound address"))?;
            if !addr.ip().is_loopback() && !l.protocol.sasl() && l.protocol != SecurityProtocol::Ssl {
                log(
                    "warn",
                    "listening_without_authentication",
                    &[
                        ("listener", &l.name),
                        ("address", &addr),
                        ("why", &"any host that reaches it may read, write and delete"),
                    ],
                );
            }
            bound_listeners.push((listener, addr));
        }
        let local_addr = bound_listeners[0].1;
        // What Metadata hands out: `advertised.listeners`' entry for a
        // listener, else where it is bound.
        let advertised: Vec<Listener> = config
            .listeners
            .iter()
            .zip(&bound_listeners)
            .map(|(l, (_, addr))| {
                config.advertised_listeners.iter().find(|a| a.name == l.name).cloned().unwrap_or_else(|| {
                    Listener { host: addr.ip().to_string(), port: addr.port(), ..l.clone() }
                })
            })
            .collect();
        let metrics = Arc::new(Metrics::default());
        let metrics_addr = match metrics_listen {
            Some(addr) => {
                let l =
                    runtime.block_on(TcpListener::bind(addr)).map_err(io_err(&format!("binding {addr}")))?;
                let a = l.local_addr().map_err(io_err("reading the metrics address"))?;
                runtime.spawn(serve_metrics(l, metrics.clone(), store.clone()));
                Some(a)
            }
            None => None,
        };
        let (stop, stop_rx) = watch::channel(false);
        let purgatory =
            Arc::new(Purgatory::new(metrics.purgatory_wakeups.clone(), metrics.purgatory_parked.clone()));
        // A cluster member joins before it serves: registered, the cluster
        // read, its replicas' roles taken.
        let (replication, cluster_id, membership) = match &config.zookeeper_connect {
            None => (None, stored_cluster_id.unwrap_or_default(), None),
            Some(_) => {
                let r = Replication::new(
                    store.clone(),
                    config.clone(),
                    (advertised.clone(), inter_broker.clone()),
                    stored_cluster_id.clone(),
                    stop_rx.clone(),
                    metrics.clone(),
                    purgatory.clone(),
                );
                let wait = Duration::from_millis(config.zookeeper_session_timeout_ms * 2 + 10_000);
                let session = match runtime.block_on(r.join(wait)) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = stop.send(true);
                        return Err(e);
                    }
                };
                let id = r.cluster_id();
                if stored_cluster_id.is_none() {
                    if let Err(e) = crate::cluster::create(store.path(), config.node_id, &id) {
                        let _ = stop.send(true);
                        return Err(e);
                    }
                }
                let task = runtime.spawn(r.clone().run(session));
                (Some(r), id, Some(task))
            }
        };
        // A single broker's coordinator serves every group, loaded now; a
        // cluster member's takes up each partition of `__consumer_offsets` as
        // it comes to lead it.
        let groups = GroupConfig::from_broker(&config);
        let coordinator = match &replication {
            None => match Coordinator::load(store.clone(), groups) {
                Ok(c) => c,
                Err(e) => {
                    let _ = stop.send(true);
                    return Err(e);
                }
            },
            Some(r) => {
                let c = Coordinator::new(store.clone(), groups);
                c.set_replication(r.clone());
                runtime.spawn(c.clone().follow_leadership(r.clone(), stop_rx.clone()));
                c
            }
        };
        let request_memory =
            Memory::new(config.queued_max_request_bytes, metrics.queued_request_bytes.clone());
        let answering = tokio::sync::Semaphore::new(config.network_threads);
        let response_memory =
            Memory::new(config.queued_max_response_bytes, metrics.queued_response_bytes.clone());
        let replica_manager = Arc::new(ReplicaManager::new(
            store.clone(),
            replication.clone(),
            purgatory.clone(),
            metrics.clone(),
            stop_rx.clone(),
        ));
        let fetch_sessions = FetchSessions::new(config.max_incremental_fetch_session_cache_slots);
        let (local_configs, local_users, local_acls, local_quotas) = match &replication {
            Some(_) => (None, None, None, None),
            None => match LocalConfigs::open(store.path(), LOCAL_FILE).and_then(|c| {
                Ok((
                    c,
                    LocalConfigs::open(store.path(), USERS_FILE)?,
                    LocalAcls::open(store.path())?,
                    LocalQuotas::open(store.path())?,
                ))
            }) {
                Ok((c, u, a, q)) => (Some(c), Some(u), Some(a), Some(q)),
                Err(e) => {
                    let _ = stop.send(true);
                    return Err(e);
                }
            },
        };
        let authorizer = config.authorizer.clone();
        let client_quotas = ClientQuotas::new(&config);
        let shared = Arc::new(Shared {
            store,
            config,
            advertised,
            cluster_id,
            metrics,
            request_memory,
            response_memory,
            answering,
            replica_manager,
            coordinator,
            replication,
            fetch_sessions,
            local_configs,
            local_users,
            authorizer,
            local_acls,
            client_quotas,
            local_quotas,
        });
        runtime.spawn(shared.coordinator.clone().run_timer(stop_rx.clone()));
        crate::cluster::announce(
            shared.store.path(),
            shared.config.node_id,
            &shared.advertised[0].address(),
        )?;
        // Every append to the store, from this broker's requests or the
        // process's own producers, wakes the requests parked on its partition.
        shared.store.append_signal().set_listener(Some(Arc::new(move |topic: &str, partition: i32| {
            purgatory.changed(topic, partition)
        })));
        let bound = config_bound(&shared.config.listeners, &bound_listeners);
        let servers = bound_listeners
            .into_iter()
            .zip(securities)
            .map(|((listener, _), security)| {
                runtime.spawn(accept_loop(
                    listener,
                    security,
                    shared.clone(),
                    quotas.clone(),
                    stop_rx.clone(),
                ))
            })
            .collect();
        Ok(Broker {
            runtime: Some(runtime),
            shared,
            local_addr,
            bound,
            metrics_addr,
            stop,
            servers,
            membership,
            stopped: false,
        })
    }

    /// The first listener's bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Every listener: its name, security protocol and bound address.
    pub fn listeners(&self) -> &[(String, SecurityProtocol, SocketAddr)] {
        &self.bound
    }
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }
    pub fn node_id(&self) -> i32 {
        self.shared.config.node_id
    }
    pub fn cluster_id(&self) -> &str {
        &self.shared.cluster_id
    }
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }
    pub fn store(&self) -> &Arc<Store> {
        &self.shared.store
    }
    pub fn coordinator(&self) -> &Arc<Coordinator> {
        &self.shared.coordinator
    }

    /// Stops accepting, lets in-flight requests finish (up to `grace`), then
    /// stops the runtime. Idempotent.
    pub fn shutdown(&mut self, grace: Duration) {
        // A cluster member first hands its leaderships over (controlled
        // shutdown), still serving while clients move to the new leaders.
        if let (Some(rt), Some(repl), false) =
            (self.runtime.as_ref(), self.shared.replication.clone(), *self.stop.borrow())
        {
            rt.block_on(repl.controlled_shutdown());
        }
        let _ = self.stop.send(true);
        // Members waiting in a join or sync are answered now, not at the grace's end.
        self.shared.coordinator.shutdown();
        if let Some(rt) = self.runtime.as_ref() {
            let servers = std::mem::take(&mut self.servers);
            let _ = rt.block_on(async {
                tokio::time::timeout(grace, async {
                    for s in servers {
                        let _ = s.await;
                    }
                })
                .await
            });
        }
        // Deregistered (and the controller given up) before the runtime goes.
        if let (Some(rt), Some(task)) = (self.runtime.as_ref(), self.membership.take()) {
            let _ = rt.block_on(async { tokio::time::timeout(Duration::from_secs(3), task).await });
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
        if !self.stopped {
            self.stopped = true;
            self.shared.store.append_signal().set_listener(None);
            crate::cluster::withdraw(self.shared.store.path());
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.shutdown(Duration::from_secs(5));
    }
}

/// Accepts connections within the connection limits: while `max.connections`
/// are open nothing is accepted (the kernel's backlog holds the newcomers),
/// and a connection over its address's `max.connections.per.ip` is closed
/// as soon as it is accepted.
async fn accept_loop(
    listener: TcpListener,
    security: Arc<ListenerSecurity>,
    shared: Arc<Shared>,
    quotas: Arc<ConnectionQuotas>,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    'accepting: loop {
        let slot = match quotas.try_slot(&security.name) {
            Some(slot) => slot,
            None => {
                shared.metrics.connection_slot_waits.inc();
                log(
                    "warn",
                    "connections_at_limit",
                    &[("listener", &security.name), ("max_connections", &quotas.max(&security.name))],
                );
                loop {
                    tokio::select! {
                        slot = quotas.slot(&security.name) => match slot {
                            Some(slot) => break slot,
                            None => break 'accepting,
                        },
                        Some(_) = connections.join_next(), if !connections.is_empty() => {}
                        _ = stop.changed() => break 'accepting,
                    }
                }
            }
        };
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match quotas.admit(peer.ip(), slot) {
                    Ok(admitted) => {
                        let _ = stream.set_nodelay(true);
                        shared.metrics.connections_created.inc();
                        let serving =
                            serve_connection(stream, peer, security.clone(), shared.clone(), stop.clone());
                        connections.spawn(async move {
                            serving.await;
                            drop(admitted);
                        });
                    }
                    Err(OverIpLimit(limit)) => {
                        shared.metrics.connections_rejected.inc();
                        log(
                            "info",
                            "connection_rejected",
                            &[("peer", &peer), ("max_connections_per_ip", &limit)],
                        );
                    }
                },
                Err(e) => {
                    // Out of descriptors and the like: say so, back off, go on.
                    log("warn", "accept_failed", &[("error", &e)]);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    // Each connection finishes the request it is serving and then closes.
    while connections.join_next().await.is_some() {}
}

/// Each listener's name, protocol and bound address.
fn config_bound(
    listeners: &[Listener],
    bound: &[(TcpListener, SocketAddr)],
) -> Vec<(String, SecurityProtocol, SocketAddr)> {
    listeners.iter().zip(bound).map(|(l, (_, addr))| (l.name.clone(), l.protocol, *addr)).collect()
}
