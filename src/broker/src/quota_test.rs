//! Tests of `quota`.

use super::*;

const SEC: Duration = Duration::from_secs(1);

#[test]
fn the_span_is_at_least_all_windows_but_one() {
    let t0 = Instant::now();
    let mut r = Rate::new(SEC, 11);
    r.record(t0, 10_000.0);
    // One second in: 10,000 bytes over at least ten windows.
    assert_eq!(r.measure(t0 + SEC), 1_000.0);
    // Fifteen seconds of 1,000 bytes a second: the oldest windows drop out.
    for s in 1..15 {
        r.record(t0 + SEC * s, 1_000.0);
    }
    let measured = r.measure(t0 + SEC * 15);
    assert!((900.0..=1_100.0).contains(&measured), "{measured}");
}

#[test]
fn a_quiet_rate_forgets_its_burst() {
    let t0 = Instant::now();
    let mut r = Rate::new(SEC, 11);
    r.record(t0, f64::from(1u32 << 30));
    assert!(r.measure(t0 + SEC * 5) > 1e6);
    assert_eq!(r.measure(t0 + SEC * 11), 0.0);
}

#[test]
fn a_bound_is_exceeded_only_when_set_and_passed() {
    let q = Quota::new(SEC, 11);
    q.record(1 << 30);
    assert!(!q.exceeded(), "no bound: never exceeded");
    q.set_bound(1 << 20);
    assert!(q.exceeded());
    q.set_bound(1 << 30);
    assert!(!q.exceeded());
}
