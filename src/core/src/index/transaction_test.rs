//! Tests of `transaction` (the `.txnindex`).

use proptest::prelude::*;

use super::*;

fn txn(producer_id: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
    AbortedTxn { producer_id, first_offset: first, last_offset: last, last_stable_offset: lso }
}

#[test]
fn an_entry_is_kafkas_34_bytes() {
    let e = txn(7, 100, 250, 90);
    let b = e.encode();
    assert_eq!(b.len(), 34);
    assert_eq!(&b[0..2], &[0, 0], "version 0");
    assert_eq!(&b[2..10], &7i64.to_be_bytes());
    assert_eq!(&b[18..26], &250i64.to_be_bytes());
    assert_eq!(AbortedTxn::decode(&b), Ok(e));
    let mut newer = b;
    newer[1] = 1;
    assert_eq!(AbortedTxn::decode(&newer), Err("unexpected aborted transaction version 1".into()));
    assert!(AbortedTxn::decode(&b[..33]).is_err());
}

#[test]
fn appends_are_in_order_reach_the_file_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000100.txnindex");
    let mut ix = TransactionIndex::open(&path, 100).unwrap();
    assert!(!path.exists(), "no file until an abort");
    ix.append(txn(1, 100, 120, 100)).unwrap();
    ix.append(txn(2, 105, 130, 121)).unwrap();
    assert!(ix.append(txn(3, 125, 130, 131)).is_err(), "a last offset not past the last one's");
    ix.flush().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 68);
    assert_eq!(ix.read_back().unwrap(), ix.entries());
    let again = TransactionIndex::open(&path, 100).unwrap();
    assert_eq!(again.entries(), ix.entries());
}

#[test]
fn damaged_files_are_corrupt_and_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("00000000000000000000.txnindex");
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (txn(1, 0, 5, 0).encode()[..20].to_vec(), "whole number"),
        ([txn(1, 0, 9, 0).encode(), txn(2, 0, 5, 0).encode()].concat(), "out of order"),
        (
            {
                let mut b = txn(1, 0, 5, 0).encode();
                b[1] = 3;
                b.to_vec()
            },
            "version 3",
        ),
    ];
    for (bytes, reason) in cases {
        std::fs::write(&path, bytes).unwrap();
        match TransactionIndex::open(&path, 0) {
            Err(Error::CorruptFile { path: p, reason: r }) => {
                assert_eq!(p, path);
                assert!(r.contains(reason), "{r}");
            }
            other => panic!("{reason}: {:?}", other.map(|ix| ix.entries().to_vec())),
        }
    }
    std::fs::write(&path, txn(1, 0, 5, 0).encode()).unwrap();
    assert!(TransactionIndex::open(&path, 10).is_err(), "an abort before the segment's start");
}

/// Aborts in increasing last offset, each spanning a few offsets.
fn aborts() -> impl Strategy<Value = Vec<AbortedTxn>> {
    prop::collection::vec((1i64..50, 0i64..40, 0i64..5, 0i64..30), 0..20).prop_map(|steps| {
        let mut last = 0;
        steps
            .into_iter()
            .map(|(gap, span, pid, lso_back)| {
                last += gap;
                txn(pid, (last - span).max(0), last, (last - lso_back).max(0))
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn truncation_and_search_match_kafkas_rules(entries in aborts(), cut in 0i64..1100, from in 0i64..1100, len in 0i64..400) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000.txnindex");
        let mut ix = TransactionIndex::open(&path, 0).unwrap();
        for e in &entries {
            ix.append(*e).unwrap();
        }
        let upper = from + len;
        // Kafka's collectAbortedTxns, as a model.
        let mut want = AbortedSearch::default();
        for e in &entries {
            if e.last_offset >= from && e.first_offset < upper {
                want.aborted.push(*e);
            }
            if e.last_stable_offset >= upper {
                want.complete = true;
                break;
            }
        }
        prop_assert_eq!(ix.collect_aborted(from, upper), want);
        ix.truncate_to(cut).unwrap();
        let kept: Vec<AbortedTxn> = entries.iter().copied().filter(|e| e.last_offset < cut).collect();
        prop_assert_eq!(ix.entries(), &kept[..]);
        let reopened = TransactionIndex::open(&path, 0).unwrap();
        prop_assert_eq!(reopened.entries(), &kept[..]);
    }
}
