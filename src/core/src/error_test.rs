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
        Error::InvalidProducerEpoch { producer_id: 7, epoch: 1, current_epoch: 2 },
        Error::OutOfOrderSequence { producer_id: 7, epoch: 1, sequence: 9, expected: 5, new_epoch: false },
        Error::Kafka { code: 16, message: "NOT_COORDINATOR from broker 1".into() },
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

#[test]
fn producer_errors_carry_kafkas_codes_and_say_what_was_expected() {
    let fenced = Error::InvalidProducerEpoch { producer_id: 7, epoch: 1, current_epoch: 2 };
    assert_eq!(fenced.kafka_code(), Some(47));
    assert!(fenced.to_string().contains("epoch 1, older than its current epoch 2"), "{fenced}");
    let gap =
        Error::OutOfOrderSequence { producer_id: 7, epoch: 1, sequence: 9, expected: 5, new_epoch: false };
    assert_eq!(gap.kafka_code(), Some(45));
    assert!(gap.to_string().contains("starts at sequence 9, but 5 was expected"), "{gap}");
    let new_epoch =
        Error::OutOfOrderSequence { producer_id: 7, epoch: 2, sequence: 3, expected: 0, new_epoch: true };
    assert!(new_epoch.to_string().contains("a new epoch starts at sequence 0"), "{new_epoch}");
}
