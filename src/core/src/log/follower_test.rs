//! Tests of `follower`.
