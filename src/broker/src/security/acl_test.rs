//! Tests of `acl`: Kafka's authorizer rules.

use super::*;

fn ace(principal: &str, op: Operation, permission: Permission) -> Ace {
    Ace { principal: principal.into(), host: WILDCARD.into(), operation: op, permission }
}

fn acls(entries: &[(ResourceType, &str, PatternType, Ace)]) -> Acls {
    let mut out = Acls::new();
    for (t, name, pattern, ace) in entries {
        out.entry(Resource { resource_type: *t, name: name.to_string(), pattern: *pattern })
            .or_default()
            .insert(ace.clone());
    }
    out
}

const ON: Authorizer = Authorizer { enabled: true, super_users: Vec::new(), allow_if_no_acl: false };

#[test]
fn an_allow_lets_in_only_its_principal_and_operation_and_what_it_implies() {
    use Operation::*;
    let a = acls(&[(
        ResourceType::Topic,
        "orders",
        PatternType::Literal,
        ace("User:alice", Read, Permission::Allow),
    )]);
    let ok =
        |p: &str, op: Operation, name: &str| ON.authorize(&a, p, "10.0.0.1", op, ResourceType::Topic, name);
    assert!(ok("User:alice", Read, "orders"));
    assert!(ok("User:alice", Describe, "orders"), "READ implies DESCRIBE");
    assert!(!ok("User:alice", Write, "orders"));
    assert!(!ok("User:bob", Read, "orders"));
    // A topic no ACL names: closed, unless allow.everyone.if.no.acl.found.
    assert!(!ok("User:alice", Read, "other"));
    let open = Authorizer { allow_if_no_acl: true, ..ON };
    assert!(open.authorize(&a, "User:bob", "h", Write, ResourceType::Topic, "other"));
    assert!(!open.authorize(&a, "User:bob", "h", Read, ResourceType::Topic, "orders"));
    // The same name as a group is another resource.
    assert!(!ON.authorize(&a, "User:alice", "h", Read, ResourceType::Group, "orders"));
}

#[test]
fn a_deny_beats_an_allow_and_super_users_pass_everything() {
    use Operation::*;
    let a = acls(&[
        (
            ResourceType::Topic,
            WILDCARD,
            PatternType::Literal,
            ace(WILDCARD_PRINCIPAL, All, Permission::Allow),
        ),
        (ResourceType::Topic, "secret", PatternType::Literal, ace("User:bob", Read, Permission::Deny)),
    ]);
    assert!(ON.authorize(&a, "User:bob", "h", Read, ResourceType::Topic, "public"));
    assert!(!ON.authorize(&a, "User:bob", "h", Read, ResourceType::Topic, "secret"));
    assert!(ON.authorize(&a, "User:bob", "h", Write, ResourceType::Topic, "secret"));
    assert!(ON.authorize(&a, "User:alice", "h", Read, ResourceType::Topic, "secret"));
    let supers = Authorizer { super_users: vec!["User:bob".into()], ..ON };
    assert!(supers.authorize(&a, "User:bob", "h", Read, ResourceType::Topic, "secret"));
    // Off, everything passes.
    assert!(Authorizer::default().authorize(&a, "User:bob", "h", Read, ResourceType::Topic, "secret"));
}

#[test]
fn prefixed_acls_and_hosts() {
    use Operation::*;
    let mut from_one_host = ace("User:carol", Write, Permission::Allow);
    from_one_host.host = "10.0.0.7".into();
    let a = acls(&[
        (ResourceType::Topic, "team-a.", PatternType::Prefixed, ace("User:carol", Read, Permission::Allow)),
        (ResourceType::Topic, "team-a.", PatternType::Literal, from_one_host),
    ]);
    assert!(ON.authorize(&a, "User:carol", "h", Read, ResourceType::Topic, "team-a.orders"));
    assert!(!ON.authorize(&a, "User:carol", "h", Read, ResourceType::Topic, "team-b.orders"));
    assert!(ON.authorize(&a, "User:carol", "10.0.0.7", Write, ResourceType::Topic, "team-a."));
    assert!(!ON.authorize(&a, "User:carol", "10.0.0.8", Write, ResourceType::Topic, "team-a."));
}

#[test]
fn kafkas_json_and_paths() {
    let r = Resource { resource_type: ResourceType::Topic, name: "t".into(), pattern: PatternType::Prefixed };
    assert_eq!(znode(&r), "/kafka-acl-extended/prefixed/Topic/t");
    let lit = Resource { pattern: PatternType::Literal, ..r.clone() };
    assert_eq!(znode(&lit), "/kafka-acl/Topic/t");
    assert_eq!(change_notification(&lit), (LITERAL_CHANGES, b"Topic:t".to_vec()));
    let aces: BTreeSet<Ace> = [ace("User:a", Operation::DescribeConfigs, Permission::Deny)].into();
    let v = to_json(&aces);
    assert_eq!(
        v,
        json!({"version": 1, "acls": [{"principal": "User:a", "permissionType": "Deny", "operation": "DescribeConfigs", "host": "*"}]})
    );
    assert_eq!(from_json(&v), aces);
    for op in Operation::ALL {
        assert_eq!(Operation::from_wire(op.wire()), Some(op));
    }
    assert_eq!(Operation::Read.wire(), 3);
    assert_eq!(Operation::DescribeTokens.wire(), 14);
    assert_eq!(Operation::from_wire(1), None, "ANY is a filter, not an operation");
}
