//! Tests of `connection`: version choice against canned ApiVersions answers,
//! the handshake's fallback, and the response size bound, against fake
//! servers on threads.
