//! Tests of `error`.

use super::*;

#[test]
fn a_duplicate_keeps_the_variant_the_message_and_the_errno() {
    let errors = vec![
        Error::IoAt { path: "/x/y.log".into(), source: io::Error::from_raw_os_error(libc::ENOSPC) },
        Error::Io(io::Error::other("custom")),
        Error::Corrupt(CorruptBatch::BadMagic(1)),
        Error::InvalidTopic { name: "t".into(), reason: "r".into() },
        Error::UnknownPartition { topic: "t".into(), partition: 9, count: 1 },
        Error::OffsetOutOfRange { topic: "t".into(), partition: 0, offset: 5, start: 0, end: 1 },
        Error::InvalidRecord("keyless".into()),
        Error::InvalidTimestamp("old".into()),
        Error::RecordBatchTooLarge("big".into()),
        Error::UnsupportedCompression("codec id 6".into()),
        Error::CorruptFile { path: "/x/cp".into(), reason: "line 3".into() },
        Error::Timeout(5, "flush".into()),
        Error::ReadOnly("append"),
    ];
    for e in errors {
        let d = e.duplicate();
        assert_eq!(d.to_string(), e.to_string());
        assert_eq!(std::mem::discriminant(&d), std::mem::discriminant(&e), "{e}");
        assert_eq!(d.kafka_code(), e.kafka_code(), "{e}");
        if let (Error::IoAt { source: a, .. }, Error::IoAt { source: b, .. }) = (&e, &d) {
            assert_eq!(a.raw_os_error(), b.raw_os_error());
        }
    }
}
