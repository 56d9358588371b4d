//! Kafka's ACLs: who (a principal, from a host) may or may not do which
//! operation on which resources (a literal name, `*`, or every name with a
//! prefix), stored as Kafka's ZooKeeper-mode authorizer stores them, and
//! the authorizer's rules: super users may do anything; a DENY that matches
//! wins; an ALLOW of the operation (or of one that implies it) lets the
//! request through; a resource no ACL names is open only with
//! `allow.everyone.if.no.acl.found`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
    DelegationToken,
    User,
}

impl ResourceType {
    pub const ALL: [ResourceType; 6] = [
        ResourceType::Topic,
        ResourceType::Group,
        ResourceType::Cluster,
        ResourceType::TransactionalId,
        ResourceType::DelegationToken,
        ResourceType::User,
    ];

    /// The name in ZooKeeper paths (`/kafka-acl/Topic/...`).
    pub fn name(self) -> &'static str {
        match self {
            ResourceType::Topic => "Topic",
            ResourceType::Group => "Group",
            ResourceType::Cluster => "Cluster",
            ResourceType::TransactionalId => "TransactionalId",
            ResourceType::DelegationToken => "DelegationToken",
            ResourceType::User => "User",
        }
    }

    pub fn from_name(name: &str) -> Option<ResourceType> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn wire(self) -> i8 {
        match self {
            ResourceType::Topic => 2,
            ResourceType::Group => 3,
            ResourceType::Cluster => 4,
            ResourceType::TransactionalId => 5,
            ResourceType::DelegationToken => 6,
            ResourceType::User => 7,
        }
    }

    pub fn from_wire(t: i8) -> Option<ResourceType> {
        Self::ALL.into_iter().find(|r| r.wire() == t)
    }
}

/// The cluster resource's one name.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The literal name and principal that match every name and principal.
pub const WILDCARD: &str = "*";
pub const WILDCARD_PRINCIPAL: &str = "User:*";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PatternType {
    Literal,
    Prefixed,
}

impl PatternType {
    pub fn wire(self) -> i8 {
        match self {
            PatternType::Literal => 3,
            PatternType::Prefixed => 4,
        }
    }

    pub fn from_wire(t: i8) -> Option<PatternType> {
        match t {
            3 => Some(PatternType::Literal),
            4 => Some(PatternType::Prefixed),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    All,
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    DescribeConfigs,
    AlterConfigs,
    IdempotentWrite,
    CreateTokens,
    DescribeTokens,
}

impl Operation {
    pub const ALL: [Operation; 13] = [
        Operation::All,
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Alter,
        Operation::Describe,
        Operation::ClusterAction,
        Operation::DescribeConfigs,
        Operation::AlterConfigs,
        Operation::IdempotentWrite,
        Operation::CreateTokens,
        Operation::DescribeTokens,
    ];

    pub fn wire(self) -> i8 {
        Self::ALL.iter().position(|o| *o == self).map_or(0, |i| i as i8 + 2)
    }

    pub fn from_wire(t: i8) -> Option<Operation> {
        Self::ALL.get(usize::try_from(t).ok()?.checked_sub(2)?).copied()
    }

    /// The name in Kafka's ACL JSON.
    pub fn name(self) -> &'static str {
        match self {
            Operation::All => "All",
            Operation::Read => "Read",
            Operation::Write => "Write",
            Operation::Create => "Create",
            Operation::Delete => "Delete",
            Operation::Alter => "Alter",
            Operation::Describe => "Describe",
            Operation::ClusterAction => "ClusterAction",
            Operation::DescribeConfigs => "DescribeConfigs",
            Operation::AlterConfigs => "AlterConfigs",
            Operation::IdempotentWrite => "IdempotentWrite",
            Operation::CreateTokens => "CreateTokens",
            Operation::DescribeTokens => "DescribeTokens",
        }
    }

    pub fn from_name(name: &str) -> Option<Operation> {
        Self::ALL.into_iter().find(|o| o.name().eq_ignore_ascii_case(name))
    }

    /// The operations an ALLOW of this one also allows: Kafka's implied
    /// DESCRIBE (by READ, WRITE, DELETE, ALTER) and DESCRIBE_CONFIGS (by
    /// ALTER_CONFIGS).
    fn allowed_by(self) -> &'static [Operation] {
        match self {
            Operation::Describe => {
                &[Operation::Describe, Operation::Read, Operation::Write, Operation::Delete, Operation::Alter]
            }
            Operation::DescribeConfigs => &[Operation::DescribeConfigs, Operation::AlterConfigs],
            _ => &[],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    Deny,
    Allow,
}

impl Permission {
    pub fn wire(self) -> i8 {
        match self {
            Permission::Deny => 2,
            Permission::Allow => 3,
        }
    }

    pub fn from_wire(t: i8) -> Option<Permission> {
        match t {
            2 => Some(Permission::Deny),
            3 => Some(Permission::Allow),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Permission::Deny => "Deny",
            Permission::Allow => "Allow",
        }
    }
}

/// A resource pattern: what an ACL is attached to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Resource {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern: PatternType,
}

/// One access control entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ace {
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// Every ACL, by resource pattern.
pub type Acls = BTreeMap<Resource, BTreeSet<Ace>>;

/// The znode of a resource pattern's ACLs.
pub fn znode(r: &Resource) -> String {
    match r.pattern {
        PatternType::Literal => format!("/kafka-acl/{}/{}", r.resource_type.name(), r.name),
        PatternType::Prefixed => {
            format!("/kafka-acl-extended/prefixed/{}/{}", r.resource_type.name(), r.name)
        }
    }
}

/// The parents under which resource patterns' znodes are, by pattern type.
pub const LITERAL_ROOT: &str = "/kafka-acl";
pub const PREFIXED_ROOT: &str = "/kafka-acl-extended/prefixed";
pub const LITERAL_CHANGES: &str = "/kafka-acl-changes";
pub const EXTENDED_CHANGES: &str = "/kafka-acl-extended-changes";

/// A resource pattern's ACLs as Kafka's authorizer writes them.
pub fn to_json(aces: &BTreeSet<Ace>) -> Value {
    let acls: Vec<Value> = aces
        .iter()
        .map(|a| {
            json!({
                "principal": a.principal,
                "permissionType": a.permission.name(),
                "operation": a.operation.name(),
                "host": a.host,
            })
        })
        .collect();
    json!({"version": 1, "acls": acls})
}

pub fn from_json(v: &Value) -> BTreeSet<Ace> {
    v["acls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            Some(Ace {
                principal: a["principal"].as_str()?.to_string(),
                host: a["host"].as_str().unwrap_or(WILDCARD).to_string(),
                operation: Operation::from_name(a["operation"].as_str()?)?,
                permission: match a["permissionType"].as_str()? {
                    "Allow" => Permission::Allow,
                    "Deny" => Permission::Deny,
                    _ => return None,
                },
            })
        })
        .collect()
}

/// The change notification Kafka's brokers read for a resource pattern:
/// (parent, data).
pub fn change_notification(r: &Resource) -> (&'static str, Vec<u8>) {
    match r.pattern {
        PatternType::Literal => (LITERAL_CHANGES, format!("{}:{}", r.resource_type.name(), r.name).into_bytes()),
        PatternType::Prefixed => (
            EXTENDED_CHANGES,
            json!({"version": 1, "resourceType": r.resource_type.name(), "name": r.name, "patternType": "PREFIXED"})
                .to_string()
                .into_bytes(),
        ),
    }
}

/// Whether `pattern` applies to the resource named `name`.
fn applies(pattern: &Resource, name: &str) -> bool {
    match pattern.pattern {
        PatternType::Literal => pattern.name == name || pattern.name == WILDCARD,
        PatternType::Prefixed => name.starts_with(&pattern.name),
    }
}

/// The authorizer's settings: `authorizer.class.name` (unset: every request
/// is allowed and the ACL APIs answer SECURITY_DISABLED), `super.users`,
/// `allow.everyone.if.no.acl.found`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Authorizer {
    pub enabled: bool,
    pub super_users: Vec<String>,
    pub allow_if_no_acl: bool,
}

/// The authorizer classes that turn it on: Kafka's ZooKeeper-mode one and KRaft's.
pub const AUTHORIZER_CLASSES: &[&str] =
    &["kafka.security.authorizer.AclAuthorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"];

impl Authorizer {
    /// Whether `principal` from `host` may do `op` on the resource.
    pub fn authorize(
        &self,
        acls: &Acls,
        principal: &str,
        host: &str,
        op: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if !self.enabled || self.super_users.iter().any(|s| s == principal) {
            return true;
        }
        let matching: Vec<&Ace> = acls
            .iter()
            .filter(|(r, _)| r.resource_type == resource_type && applies(r, name))
            .flat_map(|(_, aces)| aces.iter())
            .collect();
        if matching.is_empty() {
            return self.allow_if_no_acl;
        }
        let who = |a: &&&Ace| {
            (a.principal == principal || a.principal == WILDCARD_PRINCIPAL)
                && (a.host == host || a.host == WILDCARD)
        };
        let denied = matching.iter().filter(who).any(|a| {
            a.permission == Permission::Deny && (a.operation == op || a.operation == Operation::All)
        });
        if denied {
            return false;
        }
        let implied = op.allowed_by();
        matching.iter().filter(who).any(|a| {
            a.permission == Permission::Allow
                && (a.operation == op || a.operation == Operation::All || implied.contains(&a.operation))
        })
    }
}

#[cfg(test)]
#[path = "acl_test.rs"]
mod tests;

/// What a DescribeAcls or DeleteAcls filter asks for; `None` matches anything.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub resource_type: Option<ResourceType>,
    pub name: Option<String>,
    /// `None`: ANY; `Some(None)`: MATCH (the patterns that apply to `name`);
    /// `Some(Some(p))`: that pattern type.
    pub pattern: Option<Option<PatternType>>,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<Operation>,
    pub permission: Option<Permission>,
}

impl Filter {
    pub fn matches_resource(&self, r: &Resource) -> bool {
        if self.resource_type.is_some_and(|t| t != r.resource_type) {
            return false;
        }
        match (&self.name, self.pattern) {
            (None, None | Some(None)) => true,
            (None, Some(Some(p))) => r.pattern == p,
            (Some(n), None) => &r.name == n,
            (Some(n), Some(None)) => applies(r, n),
            (Some(n), Some(Some(p))) => r.pattern == p && &r.name == n,
        }
    }

    pub fn matches_ace(&self, a: &Ace) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == a.principal)
            && self.host.as_ref().is_none_or(|h| *h == a.host)
            && self.operation.is_none_or(|o| o == a.operation)
            && self.permission.is_none_or(|p| p == a.permission)
    }
}

/// A single broker's ACLs: one JSON file of the store directory, replaced
/// atomically on each change.
pub struct LocalAcls {
    path: std::path::PathBuf,
    acls: parking_lot::RwLock<std::sync::Arc<Acls>>,
}

pub const LOCAL_FILE: &str = ".acls.json";

fn pattern_name(p: PatternType) -> &'static str {
    match p {
        PatternType::Literal => "LITERAL",
        PatternType::Prefixed => "PREFIXED",
    }
}

impl LocalAcls {
    pub fn open(dir: &std::path::Path) -> seglog_core::Result<LocalAcls> {
        let path = dir.join(LOCAL_FILE);
        let mut acls = Acls::new();
        let stored = crate::dynamic_config::read_json(&path, "ACLs")?.unwrap_or_default();
        for r in stored["resources"].as_array().into_iter().flatten() {
            let resource = (|| {
                Some(Resource {
                    resource_type: ResourceType::from_name(r["resourceType"].as_str()?)?,
                    name: r["name"].as_str()?.to_string(),
                    pattern: match r["patternType"].as_str()? {
                        "PREFIXED" => PatternType::Prefixed,
                        _ => PatternType::Literal,
                    },
                })
            })();
            if let Some(resource) = resource {
                acls.insert(resource, from_json(r));
            }
        }
        Ok(LocalAcls { path, acls: parking_lot::RwLock::new(std::sync::Arc::new(acls)) })
    }

    pub fn get(&self) -> std::sync::Arc<Acls> {
        self.acls.read().clone()
    }

    /// Applies `change` to the ACLs under the lock and writes them.
    pub fn update<T>(&self, change: impl FnOnce(&mut Acls) -> T) -> seglog_core::Result<T> {
        let mut current = self.acls.write();
        let mut next = (**current).clone();
        let out = change(&mut next);
        next.retain(|_, aces| !aces.is_empty());
        let resources: Vec<Value> = next
            .iter()
            .map(|(r, aces)| {
                let mut v = to_json(aces);
                v["resourceType"] = json!(r.resource_type.name());
                v["name"] = json!(r.name);
                v["patternType"] = json!(pattern_name(r.pattern));
                v
            })
            .collect();
        crate::dynamic_config::write_json(&self.path, &json!({"version": 1, "resources": resources}))?;
        *current = std::sync::Arc::new(next);
        Ok(out)
    }
}
