//! Tests of `controller`.

use super::*;

fn state(leader: i32, epoch: i32, isr: &[i32]) -> PartitionState {
    PartitionState::new(1, leader, epoch, isr.to_vec())
}

#[test]
fn elections_follow_kafkas_rules() {
    let all = |_: i32| true;
    let a = [1, 2, 3];
    // A new partition: the live replicas, the first one leads.
    assert_eq!(
        decide(&a, None, &|b| b != 1, &|_| false, false, false, 5),
        Some(PartitionState::new(5, 2, 0, vec![2, 3]))
    );
    assert_eq!(decide(&a, None, &|_| false, &|_| false, false, false, 5), None);
    // Nothing to do.
    assert_eq!(decide(&a, Some(&state(1, 3, &[1, 2, 3])), &all, &|_| false, false, false, 5), None);
    // The leader died: the first live ISR member in assignment order, epoch + 1.
    let s = state(1, 3, &[3, 1, 2]);
    assert_eq!(
        decide(&a, Some(&s), &|b| b != 1, &|_| false, false, false, 5),
        Some(PartitionState::new(5, 2, 4, vec![3, 2]))
    );
    // Never outside the ISR: 3 is live but out of sync.
    let s = state(1, 3, &[1, 2]);
    assert_eq!(
        decide(&a, Some(&s), &|b| b == 3, &|_| false, false, false, 5),
        Some(PartitionState::new(5, -1, 4, vec![1, 2])),
        "offline; the ISR keeps its members"
    );
    let offline = state(-1, 4, &[1, 2]);
    assert_eq!(decide(&a, Some(&offline), &|b| b == 3, &|_| false, false, false, 5), None, "already offline");
    // ... unless unclean election is on.
    assert_eq!(
        decide(&a, Some(&s), &|b| b == 3, &|_| false, true, false, 5),
        Some(PartitionState::new(5, 3, 4, vec![3]))
    );
    // An ISR member returns to an offline partition: it leads.
    assert_eq!(
        decide(&a, Some(&offline), &|b| b != 1, &|_| false, false, false, 5),
        Some(PartitionState::new(5, 2, 5, vec![2]))
    );
    // A dead follower leaves the ISR.
    let s = state(1, 3, &[1, 2, 3]);
    assert_eq!(
        decide(&a, Some(&s), &|b| b != 3, &|_| false, false, false, 5),
        Some(PartitionState::new(5, 1, 4, vec![1, 2]))
    );
    // Preferred leader election, only when the preferred replica is in sync.
    let s = state(2, 3, &[2, 3, 1]);
    assert_eq!(decide(&a, Some(&s), &all, &|_| false, false, false, 5), None);
    assert_eq!(
        decide(&a, Some(&s), &all, &|_| false, false, true, 5),
        Some(PartitionState::new(5, 1, 4, vec![2, 3, 1]))
    );
    assert_eq!(decide(&a, Some(&state(2, 3, &[2, 3])), &all, &|_| false, false, true, 5), None);
}

#[test]
fn elections_an_admin_asks_for() {
    use kafka_protocol::ResponseError as E;
    let all = |_: i32| true;
    let a = [1, 2, 3];
    let p = Election::Preferred;
    // Preferred: 1 leads once it is live and in sync; the ISR stays.
    let s = state(2, 3, &[2, 3, 1]);
    assert_eq!(elect(&a, &s, &all, p, 5), Ok(PartitionState::new(5, 1, 4, vec![2, 3, 1])));
    assert_eq!(elect(&a, &state(1, 3, &[1, 2]), &all, p, 5), Err(E::ElectionNotNeeded.code()));
    let out_of_sync = state(2, 3, &[2, 3]);
    assert_eq!(elect(&a, &out_of_sync, &all, p, 5), Err(E::PreferredLeaderNotAvailable.code()));
    assert_eq!(elect(&a, &s, &|b| b != 1, p, 5), Err(E::PreferredLeaderNotAvailable.code()));
    // ... and takes over from a dead leader too.
    assert_eq!(elect(&a, &s, &|b| b != 2, p, 5), Ok(PartitionState::new(5, 1, 4, vec![2, 3, 1])));
    // Unclean: not while the leader lives.
    let u = Election::Unclean;
    assert_eq!(elect(&a, &s, &all, u, 5), Err(E::ElectionNotNeeded.code()));
    // A live ISR member first, then any live replica.
    let offline = state(-1, 4, &[1, 2]);
    assert_eq!(elect(&a, &offline, &|b| b != 1, u, 5), Ok(PartitionState::new(5, 2, 5, vec![2])));
    assert_eq!(elect(&a, &offline, &|b| b == 3, u, 5), Ok(PartitionState::new(5, 3, 5, vec![3])));
    assert_eq!(elect(&a, &offline, &|_| false, u, 5), Err(E::EligibleLeadersNotAvailable.code()));
}

proptest::proptest! {
    /// Whatever the liveness, ISR and settings: a leader is live and in the
    /// new ISR; without unclean election it was in the old ISR; the ISR is
    /// never empty and only holds assigned replicas; any change bumps the epoch.
    #[test]
    fn decisions_keep_kafkas_invariants(
        n in 1usize..6,
        leader_pick in 0usize..8,
        isr_mask in 0u8..64,
        live_mask in 0u8..64,
        unclean in proptest::bool::ANY,
        prefer in proptest::bool::ANY,
        has_state in proptest::bool::ANY,
    ) {
        let assignment: Vec<i32> = (1..=n as i32).collect();
        let live = |b: i32| live_mask & (1 << (b - 1)) != 0;
        let mut isr: Vec<i32> = assignment.iter().copied().filter(|b| isr_mask & (1 << (b - 1)) != 0).collect();
        if isr.is_empty() {
            isr.push(assignment[leader_pick % n]);
        }
        let leader = if leader_pick >= n { -1 } else { isr[leader_pick % isr.len()] };
        let current = has_state.then(|| state(leader, 4, &isr));
        let Some(new) = decide(&assignment, current.as_ref(), &live, &|_| false, unclean, prefer, 9) else { return Ok(()) };
        proptest::prop_assert!(!new.isr.is_empty());
        proptest::prop_assert!(new.isr.iter().all(|b| assignment.contains(b)));
        proptest::prop_assert_eq!(new.controller_epoch, 9);
        match &current {
            None => proptest::prop_assert_eq!(new.leader_epoch, 0),
            Some(old) => proptest::prop_assert_eq!(new.leader_epoch, old.leader_epoch + 1),
        }
        if new.leader >= 0 {
            proptest::prop_assert!(live(new.leader));
            proptest::prop_assert!(new.isr.contains(&new.leader));
            if let (Some(old), false) = (&current, unclean) {
                proptest::prop_assert!(old.isr.contains(&new.leader), "elected outside the ISR: {:?} -> {:?}", old, new);
            }
        }
    }
}
