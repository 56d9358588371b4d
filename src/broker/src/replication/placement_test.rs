//! Tests of `placement`.

use super::*;

fn racked(pairs: &[(i32, &str)]) -> Vec<(i32, Option<String>)> {
    pairs.iter().map(|(id, r)| (*id, Some(r.to_string()))).collect()
}

#[test]
fn kafkas_worked_example() {
    let brokers =
        racked(&[(0, "rack1"), (1, "rack3"), (2, "rack3"), (3, "rack2"), (4, "rack2"), (5, "rack1")]);
    let got = assign(&brokers, 7, 3, Some(0)).unwrap();
    let want = vec![
        vec![0, 3, 1],
        vec![3, 1, 5],
        vec![1, 5, 4],
        vec![5, 4, 2],
        vec![4, 2, 0],
        vec![2, 0, 3],
        vec![0, 4, 2],
    ];
    assert_eq!(got, want);
}

#[test]
fn every_rack_holds_a_replica_and_leaders_go_round() {
    let brokers = racked(&[(1, "r1"), (2, "r2"), (3, "r3"), (4, "r1"), (5, "r2"), (6, "r3")]);
    for start in [None, Some(0), Some(4)] {
        let got = assign(&brokers, 12, 3, start).unwrap();
        for replicas in &got {
            let racks: BTreeSet<_> = replicas.iter().map(|b| (b - 1) % 3).collect();
            assert_eq!(racks.len(), 3, "{replicas:?}");
            assert_eq!(replicas.iter().collect::<BTreeSet<_>>().len(), 3);
        }
        let mut leaders: BTreeMap<i32, usize> = BTreeMap::new();
        for r in &got {
            *leaders.entry(r[0]).or_default() += 1;
        }
        assert!(leaders.values().all(|&c| c == 2), "{leaders:?}");
    }
}

#[test]
fn without_racks_and_the_errors() {
    let plain: Vec<_> = [3, 1, 2].iter().map(|&id| (id, None)).collect();
    assert_eq!(assign(&plain, 3, 2, Some(0)).unwrap(), vec![vec![1, 2], vec![2, 3], vec![3, 1]]);
    assert_eq!(assign(&plain, 1, 1, Some(0)).unwrap(), vec![vec![1]]);
    assert!(matches!(assign(&plain, 1, 4, None), Err(PlacementError::TooFewBrokers { .. })));
    let mixed = vec![(1, Some("r1".to_string())), (2, None)];
    assert_eq!(assign(&mixed, 1, 1, None), Err(PlacementError::SomeRacksMissing));
}

proptest::proptest! {
    /// Any brokers, racks, partition count and replication factor: each
    /// partition gets distinct brokers; with racks, min(RF, racks) racks.
    #[test]
    fn replicas_are_distinct_and_spread_over_racks(
        racks_of in proptest::collection::vec(0u8..4, 1..9),
        partitions in 1i32..20,
        rf_pick in 1i32..9,
        start in proptest::option::of(0usize..9),
        with_racks in proptest::bool::ANY,
    ) {
        let n = racks_of.len();
        let brokers: Vec<(i32, Option<String>)> = racks_of
            .iter()
            .enumerate()
            .map(|(i, r)| (i as i32 + 10, with_racks.then(|| format!("r{r}"))))
            .collect();
        let rf = 1 + (rf_pick - 1) % n as i32;
        let start = start.map(|s| s % n);
        let got = assign(&brokers, partitions, rf, start).unwrap();
        proptest::prop_assert_eq!(got.len(), partitions as usize);
        let racks: BTreeSet<u8> = racks_of.iter().copied().collect();
        for replicas in &got {
            let distinct: BTreeSet<i32> = replicas.iter().copied().collect();
            proptest::prop_assert_eq!(distinct.len(), rf as usize);
            if with_racks {
                let covered: BTreeSet<u8> = replicas.iter().map(|b| racks_of[(b - 10) as usize]).collect();
                proptest::prop_assert_eq!(covered.len(), (rf as usize).min(racks.len()));
            }
        }
    }
}

#[test]
fn manual_assignments_are_checked_as_kafka_checks_them() {
    let registered: BTreeSet<i32> = [1, 2, 3].into();
    assert_eq!(check_manual(&[vec![1, 2], vec![2, 3], vec![3, 1]], &registered, None), Ok(()));
    assert_eq!(check_manual(&[vec![1, 2]], &registered, Some(2)), Ok(()));
    let refused = |a: &[Vec<i32>], rf| check_manual(a, &registered, rf).unwrap_err();
    assert!(refused(&[vec![]], None).contains("no replicas"));
    assert!(refused(&[vec![1, 1]], None).starts_with("Duplicate brokers"));
    assert!(refused(&[vec![1, 2], vec![3]], None).contains("same number"));
    assert!(refused(&[vec![1]], Some(2)).contains("same number"));
    assert_eq!(refused(&[vec![1, 4], vec![5, 2]], None), "Unknown broker(s) in replica assignment: {4, 5}.");
}
