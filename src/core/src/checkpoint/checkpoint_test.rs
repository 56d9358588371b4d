//! Tests of `checkpoint`.

use super::*;

#[test]
fn offsets_round_trip_in_kafkas_text_form() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(RECOVERY_POINT);
    let mut m = BTreeMap::new();
    m.insert(("orders".to_string(), 0), 42i64);
    m.insert(("orders".to_string(), 1), 7i64);
    write_offsets(&p, &m).unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "0\n2\norders 0 42\norders 1 7\n");
    assert_eq!(read_offsets(&p).unwrap(), m);
    assert!(!dir.path().join(format!("{RECOVERY_POINT}.tmp")).exists());
    assert!(read_offsets(&dir.path().join("missing")).unwrap().is_empty());
    fs::write(&p, "0\n3\norders 0 42\n").unwrap();
    assert!(read_offsets(&p).is_err());
    // Kafka leaves cleaner-offset-checkpoint with no bytes when its cleaner has no offsets.
    fs::write(&p, "").unwrap();
    assert!(read_offsets(&p).unwrap().is_empty());
    fs::write(&p, "\n").unwrap();
    assert!(read_offsets(&p).is_err(), "a blank line is not Kafka's empty file");
}

#[test]
fn concurrent_writers_never_share_or_empty_a_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(RECOVERY_POINT);
    std::thread::scope(|s| {
        for t in 0..6 {
            let p = &p;
            s.spawn(move || {
                for i in 0..150 {
                    let mut m = BTreeMap::new();
                    m.insert(("t".to_string(), t), i);
                    write_offsets(p, &m).unwrap();
                    assert_eq!(read_offsets(p).unwrap().len(), 1, "never an empty checkpoint");
                }
            });
        }
    });
    let names: Vec<_> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, [RECOVERY_POINT], "no temporaries left");
}

#[test]
fn a_name_at_the_length_limit_is_written_through_a_shorter_temporary() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(format!("{}.json", "x".repeat(249)));
    write_atomic(&p, b"{}").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"{}");
    fs::write(dir.path().join("left.by.a.crash.123.4.tmp"), b"").unwrap();
    remove_temp_files(dir.path()).unwrap();
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn leader_epochs_round_trip_in_kafkas_text_form() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("leader-epoch-checkpoint");
    write_leader_epochs(&p, &[(0, 0), (3, 17)]).unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "0\n2\n0 0\n3 17\n");
    assert_eq!(read_leader_epochs(&p).unwrap(), Some(vec![(0, 0), (3, 17)]));
    assert_eq!(decode_leader_epochs("0\n0\n").unwrap(), vec![]);
    assert_eq!(read_leader_epochs(&dir.path().join("missing")).unwrap(), None);
    for bad in [
        "",
        "1\n1\n0 0\n",
        "0\n2\n0 0\n",
        "0\n1\n0 0",
        "0\n1\n0\n",
        "0\n1\n0 0 0\n",
        "0\n1\n-1 0\n",
        "0\n2\n3 5\n2 6\n",
        "0\n2\n3 5\n4 4\n",
        "0\n1\nx 0\n",
        "0\n1\n0 0\n\n",
    ] {
        assert!(decode_leader_epochs(bad).is_err(), "{bad:?} was taken");
    }
    fs::write(&p, [0xff, 0xfe]).unwrap();
    assert!(matches!(read_leader_epochs(&p), Err(Error::CorruptFile { .. })));
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn entries() -> impl Strategy<Value = Vec<(i32, i64)>> {
        prop::collection::vec((1..5i32, 0..100i64), 0..20).prop_map(|steps| {
            let (mut e, mut o) = (0i32, 0i64);
            steps
                .into_iter()
                .map(|(de, dof)| {
                    e += de;
                    o += dof;
                    (e, o)
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn leader_epochs_encode_and_decode_round_trip(v in entries()) {
            prop_assert_eq!(decode_leader_epochs(&encode_leader_epochs(&v)).unwrap(), v);
        }

        /// Any damage is either refused or reads back as well-formed entries;
        /// cutting the file short is always refused unless it lands exactly on
        /// a whole earlier form (which the count line then contradicts).
        #[test]
        fn damaged_leader_epochs_are_refused_or_well_formed(
            v in entries(), at in any::<prop::sample::Index>(), byte in any::<u8>(), cut in any::<bool>()
        ) {
            let mut text = encode_leader_epochs(&v).into_bytes();
            let i = at.index(text.len());
            if cut {
                text.truncate(i);
            } else {
                text[i] = byte;
            }
            let Ok(text) = String::from_utf8(text) else { return Ok(()) };
            if let Ok(got) = decode_leader_epochs(&text) {
                prop_assert!(got.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
                prop_assert!(got.iter().all(|&(e, o)| e >= 0 && o >= 0));
                if cut {
                    prop_assert_eq!(got.len(), 0);
                }
            }
        }
    }
}
