//! DescribeClientQuotas and AlterClientQuotas: the quotas of users, client
//! ids and both, kept as Kafka keeps them (`/config/users/<user>`,
//! `/config/clients/<client>`, `/config/users/<user>/clients/<client>` in a
//! cluster, the store's `.client-quotas.json` for a single broker), so that
//! `kafka-configs --entity-type users|clients` and AdminClient manage them.
//! Also where a request's use is recorded against its client's quotas, and
//! the throttle time written into its response.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::alter_client_quotas_response::{self, AlterClientQuotasResponse};
use kafka_protocol::messages::describe_client_quotas_response::{self, DescribeClientQuotasResponse};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, ApiKey, DescribeClientQuotasRequest, RequestHeader, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;

use super::{error_code, Reply};
use crate::client_quota::{self, EntityName, QuotaConfigs, QuotaEntity, KEYS};
use crate::server::Shared;

/// v1 is flexible.
pub const VERSIONS: (i16, i16) = (0, 1);

const USER: &str = "user";
const CLIENT_ID: &str = "client-id";
const IP: &str = "ip";

type Refusal = (i16, String);

fn invalid(message: impl Into<String>) -> Refusal {
    (E::InvalidRequest.code(), message.into())
}

/// Records a request against its client's produce byte-rate (Produce) and
/// request-time quotas; a client over either is throttled.
pub fn record(
    shared: &Shared,
    quotas: &QuotaConfigs,
    key: ApiKey,
    header: &RequestHeader,
    size: usize,
    busy: Duration,
) {
    let user = crate::connection::quota_user();
    let client_id = header.client_id.as_deref().unwrap_or("");
    let now = Instant::now();
    let q = &shared.client_quotas;
    if key == ApiKey::Produce {
        throttle(shared, "produce", q.produce.record(quotas, &user, client_id, size as f64, now));
    }
    // Kafka counts request time in percent of one thread: 100 a second of it.
    let percent = busy.as_secs_f64() * 100.0;
    throttle(shared, "request", q.request.record(quotas, &user, client_id, percent, now));
}

tokio::task_local! {
    /// The client id of the request being handled, while quotas are in force.
    pub static REQUEST_CLIENT_ID: Arc<str>;
}

/// Records partitions created or deleted by the request being handled
/// against its client's controller mutation quota (KIP-599). Every version
/// served takes Kafka's permissive course (the strict one starts at
/// CreateTopics v6, CreatePartitions v3 and DeleteTopics v5): the work is
/// done, and a client that went over is told to wait, and not read from
/// meanwhile, until its bucket has refilled.
pub fn record_mutations(shared: &Shared, permits: i64) {
    if permits <= 0 {
        return;
    }
    let quotas = shared.quota_configs();
    if quotas.is_empty() {
        return;
    }
    let user = crate::connection::quota_user();
    let client_id = REQUEST_CLIENT_ID.try_with(|c| c.clone()).unwrap_or_else(|_| Arc::from(""));
    let mutation = &shared.client_quotas.mutation;
    if let Ok(wait) = mutation.record(&quotas, &user, &client_id, permits as f64, false, Instant::now()) {
        throttle(shared, "controller_mutation", wait);
    }
}

/// Makes the client wait `wait` (when it is not zero), counted in the metrics.
pub fn throttle(shared: &Shared, quota: &str, wait: Duration) {
    if !wait.is_zero() {
        shared.metrics.throttled(quota, wait.as_millis() as u64);
        crate::connection::throttle(wait);
    }
}

/// Sets `throttle_time_ms` in a response that has it.
pub fn set_throttle_time(message: &mut ResponseKind, ms: i32) {
    macro_rules! set {
        ($($variant:ident),* $(,)?) => {
            match message {
                $(ResponseKind::$variant(r) => r.throttle_time_ms = ms,)*
                _ => {}
            }
        };
    }
    set!(
        Produce,
        ListOffsets,
        Metadata,
        ApiVersions,
        InitProducerId,
        CreateTopics,
        DeleteTopics,
        CreatePartitions,
        DescribeConfigs,
        AlterConfigs,
        IncrementalAlterConfigs,
        DeleteRecords,
        DescribeCluster,
        DescribeLogDirs,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        OffsetForLeaderEpoch,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        ListGroups,
        DescribeGroups,
        DeleteGroups,
        OffsetDelete,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        DescribeClientQuotas,
        AlterClientQuotas,
    );
}

/// What a filter component asks of one side (user or client id) of an entity.
#[derive(Clone, Copy)]
enum Match<'a> {
    /// This name (or the default, `None`).
    Exactly(Option<&'a str>),
    /// Any entity that names this side.
    Any,
}

impl Match<'_> {
    /// Kafka's rule: an absent component matches entities without that side,
    /// and, unless strict, those with it too.
    fn matches(component: Option<Match>, side: &Option<EntityName>, strict: bool) -> bool {
        match (component, side) {
            (Some(Match::Exactly(want)), Some(name)) => name.as_deref() == want,
            (Some(Match::Exactly(_)), None) => false,
            (Some(Match::Any), side) => side.is_some(),
            (None, side) => side.is_none() || !strict,
        }
    }
}

fn described(filter: &DescribeClientQuotasRequest, quotas: &QuotaConfigs) -> Result<QuotaConfigs, Refusal> {
    let (mut user, mut client_id) = (None, None);
    for c in &filter.components {
        let wanted = match c.match_type {
            0 => match c._match.as_deref() {
                Some(name) => Match::Exactly(Some(name)),
                None => return Err(invalid("Unexpected null match string for an exact match")),
            },
            1 => Match::Exactly(None),
            2 => Match::Any,
            other => return Err(invalid(format!("Unexpected match type: {other}"))),
        };
        let slot = match c.entity_type.as_str() {
            USER => &mut user,
            CLIENT_ID => &mut client_id,
            // IP quotas (connection_creation_rate) are not kept: none match.
            IP => return Ok(QuotaConfigs::new()),
            "" => return Err(invalid("Unexpected empty filter component entity type")),
            other => {
                return Err((
                    E::UnsupportedVersion.code(),
                    format!("Custom entity type '{other}' not supported"),
                ))
            }
        };
        if slot.is_some() {
            let side = if c.entity_type.as_str() == USER { "user" } else { "client" };
            return Err(invalid(format!("Duplicate {side} filter component entity type")));
        }
        *slot = Some(wanted);
    }
    Ok(quotas
        .iter()
        .filter(|(e, _)| {
            Match::matches(user, &e.user, filter.strict)
                && Match::matches(client_id, &e.client_id, filter.strict)
        })
        .map(|(e, v)| (e.clone(), v.clone()))
        .collect())
}

fn entity_data<T: Default>(
    entity: &QuotaEntity,
    make: impl Fn(T, &'static str, Option<StrBytes>) -> T,
) -> Vec<T> {
    let name = |n: &EntityName| n.as_ref().map(|n| StrBytes::from_string(n.clone()));
    let mut out = Vec::new();
    if let Some(u) = &entity.user {
        out.push(make(T::default(), USER, name(u)));
    }
    if let Some(c) = &entity.client_id {
        out.push(make(T::default(), CLIENT_ID, name(c)));
    }
    out
}

pub fn describe(shared: &Arc<Shared>, r: DescribeClientQuotasRequest) -> Reply {
    use describe_client_quotas_response::{EntityData, EntryData, ValueData};
    let response = match described(&r, &shared.quota_configs()) {
        Ok(found) => DescribeClientQuotasResponse::default().with_entries(Some(
            found
                .iter()
                .map(|(entity, values)| {
                    EntryData::default()
                        .with_entity(entity_data(entity, |d: EntityData, t, n| {
                            d.with_entity_type(StrBytes::from_static_str(t)).with_entity_name(n)
                        }))
                        .with_values(
                            values
                                .iter()
                                .map(|(k, v)| {
                                    ValueData::default()
                                        .with_key(StrBytes::from_string(k.clone()))
                                        .with_value(*v)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )),
        Err((code, message)) => DescribeClientQuotasResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message))),
    };
    Reply::Message(Box::new(ResponseKind::DescribeClientQuotas(response)))
}

/// The entity an alteration names; Kafka's errors for one it cannot have.
fn entity_of(
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
) -> Result<QuotaEntity, Refusal> {
    let mut entity = QuotaEntity { user: None, client_id: None };
    for e in &entry.entity {
        let name = e.entity_name.as_ref().map(|n| n.to_string());
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {} not supported", e.entity_type.as_str())));
        }
        let slot = match e.entity_type.as_str() {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            IP => {
                return Err(invalid("IP quotas (connection_creation_rate) are not supported by this broker"))
            }
            other => return Err(invalid(format!("Unhandled client quota entity type: {other}"))),
        };
        if slot.is_some() {
            return Err(invalid(format!("Duplicate {} entity type", e.entity_type.as_str())));
        }
        *slot = Some(name);
    }
    if entity.user.is_none() && entity.client_id.is_none() {
        return Err(invalid("Invalid client quota entity"));
    }
    Ok(entity)
}

/// The entity's quota keys after `ops` (as Kafka writes them: whole numbers
/// for LONG keys); the keys that are not quotas (a user's SCRAM credentials)
/// are kept.
fn altered(
    current: &BTreeMap<String, String>,
    ops: &[kafka_protocol::messages::alter_client_quotas_request::OpData],
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut next = current.clone();
    for op in ops {
        let key = op.key.as_str();
        if op.remove {
            next.remove(key);
            continue;
        }
        let Some((_, whole)) = KEYS.iter().find(|(k, _)| *k == key) else {
            return Err(invalid(format!("Invalid configuration key {key}")));
        };
        let text = if *whole {
            // Kafka's conversion: towards zero after a nudge, so that -1
            // (which becomes 0) and fractions are refused.
            let n = (op.value + 1e-6).trunc();
            if !n.is_finite() || n.abs() >= i64::MAX as f64 || (n - op.value).abs() > 1e-6 {
                return Err(invalid(format!("Configuration {key} must be a LONG value")));
            }
            format!("{}", n as i64)
        } else {
            if !op.value.is_finite() {
                return Err(invalid(format!("Configuration {key} must be a DOUBLE value")));
            }
            format!("{:?}", op.value)
        };
        next.insert(key.to_string(), text);
    }
    Ok(next)
}

pub async fn alter(shared: &Arc<Shared>, r: AlterClientQuotasRequest) -> Reply {
    use alter_client_quotas_response::{EntityData, EntryData};
    let mut entries = Vec::with_capacity(r.entries.len());
    for entry in &r.entries {
        let outcome = match entity_of(entry) {
            Ok(entity) => apply(shared, &entity, &entry.ops, r.validate_only).await,
            Err(refusal) => Err(refusal),
        };
        let (code, message) = match outcome {
            Ok(()) => (0, None),
            Err((code, message)) => (code, Some(StrBytes::from_string(message))),
        };
        let entity = entry
            .entity
            .iter()
            .map(|e| {
                EntityData::default()
                    .with_entity_type(e.entity_type.clone())
                    .with_entity_name(e.entity_name.clone())
            })
            .collect();
        entries
            .push(EntryData::default().with_error_code(code).with_error_message(message).with_entity(entity));
    }
    let response = AlterClientQuotasResponse::default().with_entries(entries);
    Reply::Message(Box::new(ResponseKind::AlterClientQuotas(response)))
}

async fn apply(
    shared: &Arc<Shared>,
    entity: &QuotaEntity,
    ops: &[kafka_protocol::messages::alter_client_quotas_request::OpData],
    validate_only: bool,
) -> Result<(), Refusal> {
    // Checked against nothing first: a bad key or value is refused whatever is stored.
    altered(&BTreeMap::new(), ops)?;
    if validate_only {
        return Ok(());
    }
    let Some(path) = entity.path() else { return Err(invalid("Invalid client quota entity")) };
    let written = std::sync::Mutex::new(BTreeMap::new());
    let change = |current: &BTreeMap<String, String>| {
        let next = altered(current, ops).unwrap_or_else(|_| current.clone());
        if let Ok(mut w) = written.lock() {
            *w = client_quota::quota_values(&next);
        }
        next
    };
    if let Some(repl) = &shared.replication {
        repl.update_entity_config(&path, change).await?;
        // Answered once this broker's view has the change, so that a
        // DescribeClientQuotas sent here next sees it (as Kafka's, which
        // reads ZooKeeper, would).
        let wanted = written.lock().map(|w| w.clone()).unwrap_or_default();
        let seen = |view: &crate::replication::ClusterView| {
            view.client_quotas.get(entity).cloned().unwrap_or_default() == wanted
        };
        repl.wait_for_view(seen, Duration::from_secs(10)).await;
        return Ok(());
    }
    let Some(local) = &shared.local_quotas else { return Ok(()) };
    local.update(entity, change).map_err(|e| (error_code(&e), e.to_string()))
}

#[cfg(test)]
#[path = "client_quotas_test.rs"]
mod tests;
