//! CreateAcls, DescribeAcls and DeleteAcls: the ACLs `kafka-acls` and
//! AdminClients manage, kept where Kafka's ZooKeeper-mode authorizer keeps
//! them (`/kafka-acl/...`, `/kafka-acl-extended/prefixed/...`) or, for a
//! single broker, in its store. Without an authorizer they answer
//! SECURITY_DISABLED, as Kafka does; with one, they need ALTER (create and
//! delete) or DESCRIBE on the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{DeleteAclsFilterResult, DeleteAclsMatchingAcl};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError as E;

use super::{error_code, Reply};
use crate::security::acl::{
    Ace, Acls, Filter, Operation, PatternType, Permission, Resource, ResourceType, CLUSTER_NAME,
};
use crate::server::Shared;

/// v1–v3 of each (v1 brought PREFIXED patterns; Kafka 4 serves no v0 either).
pub const VERSIONS: (i16, i16) = (1, 3);

type Refusal = (i16, String);

fn disabled() -> Refusal {
    (E::SecurityDisabled.code(), "No Authorizer is configured on the broker".into())
}

fn refused_unless(shared: &Shared, op: Operation) -> Result<(), Refusal> {
    if !shared.authorizer.enabled {
        return Err(disabled());
    }
    if !shared.authorize(op, ResourceType::Cluster, CLUSTER_NAME) {
        return Err((E::ClusterAuthorizationFailed.code(), "Cluster authorization failed.".into()));
    }
    Ok(())
}

fn text(s: Option<StrBytes>) -> Option<String> {
    s.map(|s| s.to_string())
}

/// A principal as Kafka parses one: `Type:name`.
fn principal(p: &str) -> Result<String, Refusal> {
    match p.split_once(':') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() => Ok(p.to_string()),
        _ => {
            Err((E::InvalidRequest.code(), format!("Invalid ACL creation: principal {p:?} is not TYPE:NAME")))
        }
    }
}

fn creation(
    resource_type: i8,
    name: &str,
    pattern: i8,
    who: &str,
    host: &str,
    operation: i8,
    permission: i8,
) -> Result<(Resource, Ace), Refusal> {
    let invalid = |what: String| (E::InvalidRequest.code(), format!("Invalid ACL creation: {what}"));
    let resource_type = ResourceType::from_wire(resource_type)
        .ok_or_else(|| invalid(format!("resource type {resource_type} is not one an ACL may name")))?;
    let pattern = PatternType::from_wire(pattern)
        .ok_or_else(|| invalid(format!("pattern type {pattern} is not LITERAL or PREFIXED")))?;
    let operation = Operation::from_wire(operation)
        .ok_or_else(|| invalid(format!("operation {operation} is not one an ACL may name")))?;
    let permission = Permission::from_wire(permission)
        .ok_or_else(|| invalid(format!("permission {permission} is not ALLOW or DENY")))?;
    if name.is_empty() {
        return Err(invalid("resource name must not be empty".into()));
    }
    if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
        return Err(invalid(format!("The only valid name for the CLUSTER resource is {CLUSTER_NAME}")));
    }
    let ace = Ace { principal: principal(who)?, host: host.to_string(), operation, permission };
    Ok((Resource { resource_type, name: name.to_string(), pattern }, ace))
}

/// Applies `change` to each resource's ACLs, in the store or ZooKeeper:
/// for each resource, whether its write succeeded.
async fn write(
    shared: &Arc<Shared>,
    resources: BTreeSet<Resource>,
    change: impl Fn(&Resource, &mut BTreeSet<Ace>),
) -> BTreeMap<Resource, Result<(), Refusal>> {
    let mut out = BTreeMap::new();
    match (&shared.replication, &shared.local_acls) {
        (Some(repl), _) => {
            for r in resources {
                let written = repl.update_acls(&r, |aces| change(&r, aces)).await;
                out.insert(r, written);
            }
        }
        (None, Some(local)) => {
            let written = local
                .update(|acls: &mut Acls| {
                    for r in &resources {
                        change(r, acls.entry(r.clone()).or_default());
                    }
                })
                .map_err(|e| (error_code(&e), e.to_string()));
            for r in resources {
                out.insert(r, written.clone());
            }
        }
        (None, None) => {}
    }
    out
}

pub async fn create(shared: &Arc<Shared>, r: CreateAclsRequest) -> Reply {
    let allowed = refused_unless(shared, Operation::Alter);
    let parsed: Vec<Result<(Resource, Ace), Refusal>> = r
        .creations
        .iter()
        .map(|c| {
            allowed.clone()?;
            creation(
                c.resource_type,
                &c.resource_name,
                c.resource_pattern_type,
                &c.principal,
                &c.host,
                c.operation,
                c.permission_type,
            )
        })
        .collect();
    let mut wanted: BTreeMap<Resource, BTreeSet<Ace>> = BTreeMap::new();
    for (res, ace) in parsed.iter().flatten() {
        wanted.entry(res.clone()).or_default().insert(ace.clone());
    }
    let written = write(shared, wanted.keys().cloned().collect(), |res, aces| {
        aces.extend(wanted.get(res).into_iter().flatten().cloned())
    })
    .await;
    let results = parsed
        .into_iter()
        .map(|p| {
            let outcome = p.and_then(|(res, _)| written.get(&res).cloned().unwrap_or(Ok(())));
            match outcome {
                Ok(()) => AclCreationResult::default().with_error_message(None),
                Err((code, message)) => AclCreationResult::default()
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(message))),
            }
        })
        .collect();
    Reply::Message(Box::new(ResponseKind::CreateAcls(CreateAclsResponse::default().with_results(results))))
}

/// A filter from the wire's ids: 1 is ANY, 2 MATCH (pattern type only).
fn filter(
    resource_type: i8,
    name: Option<StrBytes>,
    pattern: i8,
    principal: Option<StrBytes>,
    host: Option<StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<Filter, Refusal> {
    let invalid = |what: &str, v: i8| (E::InvalidRequest.code(), format!("Invalid ACL filter: {what} {v}"));
    Ok(Filter {
        resource_type: match resource_type {
            1 => None,
            t => Some(ResourceType::from_wire(t).ok_or_else(|| invalid("resource type", t))?),
        },
        name: text(name),
        pattern: match pattern {
            1 => None,
            2 => Some(None),
            p => Some(Some(PatternType::from_wire(p).ok_or_else(|| invalid("pattern type", p))?)),
        },
        principal: text(principal),
        host: text(host),
        operation: match operation {
            1 => None,
            o => Some(Operation::from_wire(o).ok_or_else(|| invalid("operation", o))?),
        },
        permission: match permission {
            1 => None,
            p => Some(Permission::from_wire(p).ok_or_else(|| invalid("permission", p))?),
        },
    })
}

pub fn describe(shared: &Arc<Shared>, r: DescribeAclsRequest) -> Reply {
    let found = refused_unless(shared, Operation::Describe).and_then(|()| {
        filter(
            r.resource_type_filter,
            r.resource_name_filter,
            r.pattern_type_filter,
            r.principal_filter,
            r.host_filter,
            r.operation,
            r.permission_type,
        )
    });
    let response = match found {
        Err((code, message)) => DescribeAclsResponse::default()
            .with_error_code(code)
            .with_error_message(Some(StrBytes::from_string(message))),
        Ok(f) => {
            let acls = shared.acls();
            let resources = acls
                .iter()
                .filter(|(res, _)| f.matches_resource(res))
                .filter_map(|(res, aces)| {
                    let matching: Vec<AclDescription> = aces
                        .iter()
                        .filter(|a| f.matches_ace(a))
                        .map(|a| {
                            AclDescription::default()
                                .with_principal(StrBytes::from_string(a.principal.clone()))
                                .with_host(StrBytes::from_string(a.host.clone()))
                                .with_operation(a.operation.wire())
                                .with_permission_type(a.permission.wire())
                        })
                        .collect();
                    (!matching.is_empty()).then(|| {
                        DescribeAclsResource::default()
                            .with_resource_type(res.resource_type.wire())
                            .with_resource_name(StrBytes::from_string(res.name.clone()))
                            .with_pattern_type(res.pattern.wire())
                            .with_acls(matching)
                    })
                })
                .collect();
            DescribeAclsResponse::default().with_error_message(None).with_resources(resources)
        }
    };
    Reply::Message(Box::new(ResponseKind::DescribeAcls(response)))
}

pub async fn delete(shared: &Arc<Shared>, r: DeleteAclsRequest) -> Reply {
    let allowed = refused_unless(shared, Operation::Alter);
    let filters: Vec<Result<Filter, Refusal>> = r
        .filters
        .into_iter()
        .map(|f| {
            allowed.clone()?;
            filter(
                f.resource_type_filter,
                f.resource_name_filter,
                f.pattern_type_filter,
                f.principal_filter,
                f.host_filter,
                f.operation,
                f.permission_type,
            )
        })
        .collect();
    // What each filter matches now; every match is deleted.
    let acls = shared.acls();
    let matched: Vec<Vec<(Resource, Ace)>> = filters
        .iter()
        .map(|f| match f {
            Ok(f) => acls
                .iter()
                .filter(|(res, _)| f.matches_resource(res))
                .flat_map(|(res, aces)| {
                    aces.iter().filter(|a| f.matches_ace(a)).map(|a| (res.clone(), a.clone()))
                })
                .collect(),
            Err(_) => Vec::new(),
        })
        .collect();
    let mut doomed: BTreeMap<Resource, BTreeSet<Ace>> = BTreeMap::new();
    for (res, ace) in matched.iter().flatten() {
        doomed.entry(res.clone()).or_default().insert(ace.clone());
    }
    let written = write(shared, doomed.keys().cloned().collect(), |res, aces| {
        if let Some(gone) = doomed.get(res) {
            aces.retain(|a| !gone.contains(a));
        }
    })
    .await;
    let results = filters
        .into_iter()
        .zip(matched)
        .map(|(f, matches)| match f {
            Err((code, message)) => DeleteAclsFilterResult::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(message))),
            Ok(_) => DeleteAclsFilterResult::default().with_error_message(None).with_matching_acls(
                matches
                    .into_iter()
                    .map(|(res, a)| {
                        let (code, message) = match written.get(&res) {
                            Some(Err((code, message))) => {
                                (*code, Some(StrBytes::from_string(message.clone())))
                            }
                            _ => (0, None),
                        };
                        DeleteAclsMatchingAcl::default()
                            .with_error_code(code)
                            .with_error_message(message)
                            .with_resource_type(res.resource_type.wire())
                            .with_resource_name(StrBytes::from_string(res.name))
                            .with_pattern_type(res.pattern.wire())
                            .with_principal(StrBytes::from_string(a.principal))
                            .with_host(StrBytes::from_string(a.host))
                            .with_operation(a.operation.wire())
                            .with_permission_type(a.permission.wire())
                    })
                    .collect(),
            ),
        })
        .collect();
    Reply::Message(Box::new(ResponseKind::DeleteAcls(
        DeleteAclsResponse::default().with_filter_results(results),
    )))
}
