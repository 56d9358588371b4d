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
