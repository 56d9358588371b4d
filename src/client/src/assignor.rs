//! Kafka's client-side partition assignors, as a group's leader runs them on
//! the subscriptions JoinGroup hands it: "range" and "roundrobin", with
//! Kafka's member order (static members first).

use std::collections::BTreeMap;

use seglog_core::error::{Error, Result};

/// The assignors this member implements, in Kafka's names.
pub const ASSIGNORS: &[&str] = &["range", "roundrobin"];

/// A member as the leader sees it in JoinGroup's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscriber {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub topics: Vec<String>,
}

impl Subscriber {
    /// Kafka's `MemberInfo` order: static members first, by instance id,
    /// then dynamic ones by member id.
    fn order_key(&self) -> (bool, &str) {
        match &self.instance_id {
            Some(i) => (false, i.as_str()),
            None => (true, self.member_id.as_str()),
        }
    }
}

/// Kafka's client-side assignors: member id -> its partitions (sorted), for
/// every member (an empty list for one that gets none). Topics missing from
/// `partition_counts` (unknown to the metadata) are assigned to nobody.
pub fn assign(
    assignor: &str,
    members: &[Subscriber],
    partition_counts: &BTreeMap<String, i32>,
) -> Result<BTreeMap<String, Vec<(String, i32)>>> {
    let mut sorted: Vec<&Subscriber> = members.iter().collect();
    sorted.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    let mut out: BTreeMap<String, Vec<(String, i32)>> =
        members.iter().map(|m| (m.member_id.clone(), Vec::new())).collect();
    match assignor {
        // RangeAssignor: per topic, its subscribers in order get consecutive
        // ranges, the first `count % subscribers` one partition more.
        "range" => {
            for (topic, &count) in partition_counts {
                let subs: Vec<&&Subscriber> = sorted.iter().filter(|m| m.topics.contains(topic)).collect();
                if subs.is_empty() {
                    continue;
                }
                let n = subs.len() as i32;
                let (per, extra) = (count / n, count % n);
                for (i, m) in subs.iter().enumerate() {
                    let i = i as i32;
                    let start = per * i + i.min(extra);
                    let len = per + i32::from(i < extra);
                    let list = out.entry(m.member_id.clone()).or_default();
                    list.extend((start..start + len).map(|p| (topic.clone(), p)));
                }
            }
        }
        // RoundRobinAssignor: every subscribed partition in (topic, partition)
        // order goes to the next member in a circle that subscribes to its topic.
        "roundrobin" => {
            if !sorted.is_empty() {
                let mut next = 0usize;
                for (topic, &count) in partition_counts {
                    if !sorted.iter().any(|m| m.topics.contains(topic)) {
                        continue;
                    }
                    for p in 0..count {
                        while !sorted[next % sorted.len()].topics.contains(topic) {
                            next += 1;
                        }
                        let m = sorted[next % sorted.len()];
                        next += 1;
                        out.entry(m.member_id.clone()).or_default().push((topic.clone(), p));
                    }
                }
            }
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "the group chose assignor {other:?}, which this member does not implement ({ASSIGNORS:?})"
            )))
        }
    }
    for list in out.values_mut() {
        list.sort();
    }
    Ok(out)
}
