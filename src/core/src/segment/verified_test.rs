use super::*;

#[test]
fn a_range_counts_as_verified_once_recorded_and_merges_with_its_neighbours() {
    let v = VerifiedRanges::new(true);
    let t = v.ticket(100, 50);
    assert!(!t.verified);
    v.passed(t, 100, 50);
    assert!(v.ticket(100, 50).verified);
    assert!(v.ticket(120, 10).verified);
    assert!(!v.ticket(100, 51).verified, "past the end of what was checked");
    v.passed(v.ticket(150, 50), 150, 50);
    v.passed(v.ticket(0, 100), 0, 100);
    assert_eq!(v.ranges(), vec![(0, 200)]);
    assert!(v.ticket(0, 200).verified);
}

#[test]
fn truncation_forgets_what_lies_past_the_cut() {
    let v = VerifiedRanges::new(true);
    v.passed(v.ticket(0, 100), 0, 100);
    v.passed(v.ticket(200, 100), 200, 100);
    v.truncate(50);
    assert_eq!(v.ranges(), vec![(0, 50)]);
    assert!(!v.ticket(40, 20).verified);
    assert!(v.ticket(0, 50).verified);
}

#[test]
fn a_check_that_began_before_a_truncation_records_nothing() {
    let v = VerifiedRanges::new(true);
    let t = v.ticket(0, 100);
    v.truncate(0);
    v.passed(t, 0, 100);
    assert!(v.ranges().is_empty());
    assert!(!v.ticket(0, 100).verified);
}

#[test]
fn a_disabled_record_never_claims_a_check() {
    let v = VerifiedRanges::new(false);
    v.passed(v.ticket(0, 100), 0, 100);
    assert!(!v.ticket(0, 100).verified);
}

#[test]
fn record_marks_are_kept_until_a_truncation_cuts_their_batch() {
    let v = VerifiedRanges::new(true);
    let marks: RecordMarks = vec![0, 40, 80].into();
    v.keep_marks(v.ticket(0, 100), 0, marks.clone());
    v.keep_marks(v.ticket(100, 100), 100, marks.clone());
    assert_eq!(v.marks(100).as_deref(), Some(&[0, 40, 80][..]));
    v.truncate(100);
    assert!(v.marks(100).is_none(), "the batch at the cut is gone");
    assert!(v.marks(0).is_some());
    // Marks found in bytes read before a truncation are not kept: another
    // batch may sit at that position now.
    let t = v.ticket(100, 100);
    v.truncate(100);
    v.keep_marks(t, 100, marks.clone());
    assert!(v.marks(100).is_none());
    // A reader process keeps none.
    let r = VerifiedRanges::new(false);
    r.keep_marks(r.ticket(0, 10), 0, marks);
    assert!(r.marks(0).is_none());
}
