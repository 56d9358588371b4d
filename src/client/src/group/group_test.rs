use super::*;

fn sub(id: &str, topics: &[&str]) -> Subscriber {
    Subscriber {
        member_id: id.into(),
        instance_id: None,
        topics: topics.iter().map(|t| t.to_string()).collect(),
    }
}

fn counts(c: &[(&str, i32)]) -> BTreeMap<String, i32> {
    c.iter().map(|(t, n)| (t.to_string(), *n)).collect()
}

fn tp(t: &str, ps: &[i32]) -> Vec<(String, i32)> {
    ps.iter().map(|p| (t.to_string(), *p)).collect()
}

#[test]
fn range_gives_the_first_members_the_extra_partitions_per_topic() {
    let members = [sub("b", &["t"]), sub("a", &["t"])];
    let plan = assign("range", &members, &counts(&[("t", 5)])).unwrap();
    assert_eq!(plan["a"], tp("t", &[0, 1, 2]));
    assert_eq!(plan["b"], tp("t", &[3, 4]));
}

#[test]
fn roundrobin_deals_partitions_in_a_circle_skipping_unsubscribed_members() {
    let members = [sub("a", &["t", "u"]), sub("b", &["t"])];
    let plan = assign("roundrobin", &members, &counts(&[("t", 3), ("u", 2)])).unwrap();
    assert_eq!(plan["a"], [tp("t", &[0, 2]), tp("u", &[0, 1])].concat());
    assert_eq!(plan["b"], tp("t", &[1]));
}

#[test]
fn static_members_sort_first_by_instance_id() {
    let mut s = sub("zzz", &["t"]);
    s.instance_id = Some("i1".into());
    let members = [sub("aaa", &["t"]), s];
    let plan = assign("range", &members, &counts(&[("t", 2)])).unwrap();
    assert_eq!(plan["zzz"], tp("t", &[0]));
    assert_eq!(plan["aaa"], tp("t", &[1]));
}

#[test]
fn unknown_assignors_are_refused() {
    assert!(assign("sticky", &[sub("a", &["t"])], &counts(&[("t", 1)])).is_err());
}
