//! Tests of `epochs`.
