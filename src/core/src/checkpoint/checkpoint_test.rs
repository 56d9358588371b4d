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
