//! DescribeUserScramCredentials and AlterUserScramCredentials: users' SCRAM
//! credentials, kept as Kafka keeps them (`/config/users/<user>` in a
//! cluster, the store's users file for a single broker), so that
//! `kafka-configs --entity-type users --alter --add-config
//! 'SCRAM-SHA-256=[password=...]'` and AdminClient manage them. A client
//! sends the salted password, never the password.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;

use super::{error_code, Reply};
use crate::security::scram::{ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};
use crate::server::Shared;

pub const DESCRIBE_VERSIONS: (i16, i16) = (0, 0);
pub const ALTER_VERSIONS: (i16, i16) = (0, 0);

/// The mechanisms a user has credentials for, with their iterations.
fn credentials(config: &BTreeMap<String, String>) -> Vec<(ScramMechanism, i32)> {
    ScramMechanism::ALL
        .into_iter()
        .filter_map(|m| Some((m, ScramCredential::from_kafka(config.get(m.name())?)?.iterations)))
        .collect()
}

pub fn describe(shared: &Arc<Shared>, r: DescribeUserScramCredentialsRequest) -> Reply {
    let users = shared.user_configs();
    let result = |name: &str, code: i16, message: Option<String>, infos: Vec<(ScramMechanism, i32)>| {
        DescribeUserScramCredentialsResult::default()
            .with_user(StrBytes::from_string(name.to_string()))
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
            .with_credential_infos(
                infos
                    .into_iter()
                    .map(|(m, i)| CredentialInfo::default().with_mechanism(m.wire_type()).with_iterations(i))
                    .collect(),
            )
    };
    let results = match r.users.filter(|u| !u.is_empty()) {
        // Every user with a credential (null or no users asked for).
        None => users
            .iter()
            .filter_map(|(name, config)| {
                let infos = credentials(config);
                (!infos.is_empty()).then(|| result(name, 0, None, infos))
            })
            .collect(),
        Some(asked) => {
            let mut count: BTreeMap<&str, usize> = BTreeMap::new();
            for u in &asked {
                *count.entry(u.name.as_str()).or_default() += 1;
            }
            let mut seen = BTreeSet::new();
            asked
                .iter()
                .map(|u| u.name.as_str())
                .filter(|name| seen.insert(*name))
                .map(|name| {
                    if count[name] > 1 {
                        return result(
                            name,
                            E::DuplicateResource.code(),
                            Some(format!(
                                "Cannot describe SCRAM credentials for the same user twice in a single request: {name}"
                            )),
                            Vec::new(),
                        );
                    }
                    let infos = users.get(name).map(credentials).unwrap_or_default();
                    if infos.is_empty() {
                        result(
                            name,
                            E::ResourceNotFound.code(),
                            Some(format!("Attempt to describe a user credential that does not exist: {name}")),
                            Vec::new(),
                        )
                    } else {
                        result(name, 0, None, infos)
                    }
                })
                .collect()
        }
    };
    let response = DescribeUserScramCredentialsResponse::default().with_results(results);
    Reply::Message(Box::new(ResponseKind::DescribeUserScramCredentials(response)))
}

/// One user's changes: mechanisms to delete, credentials to set.
#[derive(Default)]
struct UserChanges {
    delete: Vec<ScramMechanism>,
    set: Vec<(ScramMechanism, ScramCredential)>,
}

type Refusal = (i16, String);

fn check_upsertion(
    mechanism: i8,
    iterations: i32,
    salt: &[u8],
    salted: &[u8],
) -> Result<(ScramMechanism, ScramCredential), Refusal> {
    let m = ScramMechanism::from_wire_type(mechanism)
        .ok_or((E::UnsupportedSaslMechanism.code(), "Unknown SCRAM mechanism".to_string()))?;
    if iterations < MIN_ITERATIONS {
        return Err((E::UnacceptableCredential.code(), "Too few iterations".into()));
    }
    if iterations > MAX_ITERATIONS {
        return Err((E::UnacceptableCredential.code(), "Too many iterations".into()));
    }
    if salt.is_empty() || salted.is_empty() {
        return Err((
            E::UnacceptableCredential.code(),
            "Credential must have a salt and a salted password".into(),
        ));
    }
    Ok((m, ScramCredential::from_salted(m, salt, salted, iterations)))
}

/// A user's configs after its changes; a deletion of a credential it does
/// not have is refused.
fn apply(
    current: &BTreeMap<String, String>,
    changes: &UserChanges,
) -> Result<BTreeMap<String, String>, Refusal> {
    let mut next = current.clone();
    for m in &changes.delete {
        if next.remove(m.name()).is_none() {
            return Err((
                E::ResourceNotFound.code(),
                "Attempt to delete a user credential that does not exist".to_string(),
            ));
        }
    }
    for (m, c) in &changes.set {
        next.insert(m.name().to_string(), c.to_kafka());
    }
    Ok(next)
}

pub async fn alter(shared: &Arc<Shared>, r: AlterUserScramCredentialsRequest) -> Reply {
    // Every user named, in the order first named, with its changes or why
    // they are all refused.
    let mut order: Vec<String> = Vec::new();
    let mut changes: BTreeMap<String, Result<UserChanges, Refusal>> = BTreeMap::new();
    let mut named: BTreeMap<(String, i8), usize> = BTreeMap::new();
    let deletions = r.deletions.iter().map(|d| (d.name.to_string(), d.mechanism, None));
    let upsertions = r.upsertions.iter().map(|u| {
        (u.name.to_string(), u.mechanism, Some((u.iterations, &u.salt[..], &u.salted_password[..])))
    });
    for (name, mechanism, upsert) in deletions.chain(upsertions) {
        if !changes.contains_key(&name) {
            order.push(name.clone());
            changes.insert(name.clone(), Ok(UserChanges::default()));
        }
        *named.entry((name.clone(), mechanism)).or_default() += 1;
        let Some(Ok(entry)) = changes.get_mut(&name) else { continue };
        let step = if name.is_empty() {
            Err((E::UnacceptableCredential.code(), "Username must not be empty".to_string()))
        } else {
            match upsert {
                None => ScramMechanism::from_wire_type(mechanism)
                    .map(|m| entry.delete.push(m))
                    .ok_or((E::UnsupportedSaslMechanism.code(), "Unknown SCRAM mechanism".to_string())),
                Some((iterations, salt, salted)) => {
                    check_upsertion(mechanism, iterations, salt, salted).map(|c| entry.set.push(c))
                }
            }
        };
        if let Err(refusal) = step {
            changes.insert(name, Err(refusal));
        }
    }
    for ((name, _), n) in &named {
        if *n > 1 {
            changes.insert(
                name.clone(),
                Err((
                    E::DuplicateResource.code(),
                    "A user credential cannot be altered twice in the same request".to_string(),
                )),
            );
        }
    }
    let mut results = Vec::with_capacity(order.len());
    for name in order {
        let outcome = match changes.remove(&name) {
            Some(Ok(c)) => write(shared, &name, &c).await,
            Some(Err(refusal)) => Err(refusal),
            None => Ok(()),
        };
        let (code, message) = match outcome {
            Ok(()) => (0, None),
            Err((code, message)) => (code, Some(StrBytes::from_string(message))),
        };
        results.push(
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_string(name))
                .with_error_code(code)
                .with_error_message(message),
        );
    }
    let response = AlterUserScramCredentialsResponse::default().with_results(results);
    Reply::Message(Box::new(ResponseKind::AlterUserScramCredentials(response)))
}

async fn write(shared: &Arc<Shared>, user: &str, changes: &UserChanges) -> Result<(), Refusal> {
    if let Some(repl) = &shared.replication {
        let mut refused = None;
        repl.update_user_config(user, |current| match apply(current, changes) {
            Ok(next) => next,
            Err(r) => {
                refused = Some(r);
                current.clone()
            }
        })
        .await?;
        return refused.map_or(Ok(()), Err);
    }
    let Some(local) = &shared.local_users else { return Ok(()) };
    let mut refused = None;
    local
        .update(user, |current| match apply(current, changes) {
            Ok(next) => Some(next),
            Err(r) => {
                refused = Some(r);
                None
            }
        })
        .map_err(|e| (error_code(&e), e.to_string()))?;
    refused.map_or(Ok(()), Err)
}
