//! Tests of `offset_for_leader_epoch`.

use super::*;

#[test]
fn the_current_epoch_ends_at_the_log_end() {
    assert_eq!(end_offset_for(0, 5, 42), (0, 42));
    assert_eq!(end_offset_for(0, 0, 0), (0, 0), "an empty log");
}

#[test]
fn epochs_never_seen_are_undefined_or_end_at_the_log_start() {
    assert_eq!(end_offset_for(-1, 5, 42), (-1, -1), "undefined asked, undefined answered");
    assert_eq!(end_offset_for(1, 5, 42), (-1, -1), "a later epoch is unknown");
    assert_eq!(end_offset_for(7, 5, 42), (-1, -1));
    assert_eq!(end_offset_for(-3, 5, 42), (-3, 5), "before the first epoch: its start");
}

#[test]
fn the_current_leader_epoch_fences_or_is_unknown() {
    assert_eq!(check_current_epoch(-1), 0, "not given");
    assert_eq!(check_current_epoch(0), 0);
    assert_eq!(check_current_epoch(1), ResponseError::UnknownLeaderEpoch.code());
    assert_eq!(check_current_epoch(-2), ResponseError::FencedLeaderEpoch.code());
}
