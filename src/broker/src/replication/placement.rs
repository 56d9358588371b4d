//! Kafka's replica assignment (`AdminUtils.assignReplicasToBrokers`): brokers
//! alternated by rack, a start index and a shift, so that leaders go round
//! the brokers and, when every broker has a rack, each partition's replicas
//! spread over as many racks as it has replicas.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementError {
    TooFewBrokers { replication_factor: i32, brokers: usize },
    SomeRacksMissing,
}

impl std::fmt::Display for PlacementError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlacementError::TooFewBrokers { replication_factor, brokers } => write!(
                f,
                "replication factor {replication_factor} is larger than the {brokers} available broker(s)"
            ),
            PlacementError::SomeRacksMissing => {
                write!(
                    f,
                    "not all brokers have rack information (broker.rack): give every broker one, or none"
                )
            }
        }
    }
}

/// Why a manual replica assignment is refused (Kafka's INVALID_REPLICA_ASSIGNMENT),
/// if it is: every partition needs replicas, none twice, all partitions as many
/// (`replication_factor`, if the topic has one already), on registered brokers.
pub fn check_manual(
    assignment: &[Vec<i32>],
    registered: &BTreeSet<i32>,
    replication_factor: Option<usize>,
) -> Result<(), String> {
    let want = replication_factor.or_else(|| assignment.first().map(Vec::len));
    for (p, replicas) in assignment.iter().enumerate() {
        if replicas.is_empty() {
            return Err(format!("partition {p} has no replicas"));
        }
        let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
        if distinct.len() != replicas.len() {
            return Err(format!(
                "Duplicate brokers not allowed in replica assignment: {replicas:?} for partition id {p}."
            ));
        }
        if Some(replicas.len()) != want {
            return Err(format!(
                "partition {p} has {} replicas where the others have {}: all partitions need the same number",
                replicas.len(),
                want.unwrap_or(0)
            ));
        }
    }
    let unknown: BTreeSet<i32> =
        assignment.iter().flatten().copied().filter(|b| !registered.contains(b)).collect();
    if !unknown.is_empty() {
        return Err(format!("Unknown broker(s) in replica assignment: {unknown:?}."));
    }
    Ok(())
}

/// The replicas of each of `partitions` partitions, preferred leader first.
/// `brokers` are (id, rack); `start` fixes the start index and the shift
/// (Kafka picks them at random when not given).
pub fn assign(
    brokers: &[(i32, Option<String>)],
    partitions: i32,
    replication_factor: i32,
    start: Option<usize>,
) -> Result<Vec<Vec<i32>>, PlacementError> {
    let n = brokers.len();
    if replication_factor < 1 || replication_factor as usize > n {
        return Err(PlacementError::TooFewBrokers { replication_factor, brokers: n });
    }
    let racked = brokers.iter().filter(|b| b.1.is_some()).count();
    if racked != 0 && racked != n {
        return Err(PlacementError::SomeRacksMissing);
    }
    let pick = |bound: usize| start.unwrap_or_else(|| random_below(bound));
    let start_index = pick(n);
    let mut shift = pick(n);
    let rf = replication_factor as usize;
    let mut out = Vec::with_capacity(partitions.max(0) as usize);
    if racked == 0 {
        let mut ids: Vec<i32> = brokers.iter().map(|b| b.0).collect();
        ids.sort_unstable();
        for p in 0..partitions.max(0) as usize {
            if p > 0 && p % n == 0 {
                shift += 1;
            }
            let first = (p + start_index) % n;
            let mut replicas = vec![ids[first]];
            for j in 0..rf - 1 {
                replicas.push(ids[replica_index(first, shift, j, n)]);
            }
            out.push(replicas);
        }
        return Ok(out);
    }
    let rack_of: BTreeMap<i32, &str> =
        brokers.iter().map(|(id, r)| (*id, r.as_deref().unwrap_or(""))).collect();
    let list = rack_alternated(&rack_of);
    let racks = rack_of.values().collect::<BTreeSet<_>>().len();
    for p in 0..partitions.max(0) as usize {
        if p > 0 && p % n == 0 {
            shift += 1;
        }
        let first = (p + start_index) % n;
        let leader = list[first];
        let mut replicas = vec![leader];
        let mut racks_with = BTreeSet::from([rack_of[&leader]]);
        let mut brokers_with = BTreeSet::from([leader]);
        let mut k = 0;
        while replicas.len() < rf {
            let broker = list[replica_index(first, shift * racks, k, n)];
            let rack = rack_of[&broker];
            let rack_ok = !racks_with.contains(rack) || racks_with.len() == racks;
            let broker_ok = !brokers_with.contains(&broker) || brokers_with.len() == n;
            if rack_ok && broker_ok {
                replicas.push(broker);
                racks_with.insert(rack);
                brokers_with.insert(broker);
            }
            k += 1;
        }
        out.push(replicas);
    }
    Ok(out)
}

fn replica_index(first: usize, shift: usize, j: usize, n: usize) -> usize {
    (first + 1 + (shift + j) % (n - 1).max(1)) % n
}

/// Brokers taken one per rack in turn (racks in name order, each rack's
/// brokers in id order), skipping racks that ran out.
fn rack_alternated(rack_of: &BTreeMap<i32, &str>) -> Vec<i32> {
    let mut by_rack: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (&id, &rack) in rack_of {
        by_rack.entry(rack).or_default().push(id);
    }
    let mut iters: Vec<_> = by_rack.into_values().map(|v| v.into_iter()).collect();
    let mut out = Vec::with_capacity(rack_of.len());
    while out.len() < rack_of.len() {
        for it in &mut iters {
            if let Some(id) = it.next() {
                out.push(id);
            }
        }
    }
    out
}

fn random_below(bound: usize) -> usize {
    (uuid::Uuid::new_v4().as_u128() % bound.max(1) as u128) as usize
}

#[cfg(test)]
#[path = "placement_test.rs"]
mod tests;
