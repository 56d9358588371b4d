//! Tests of `fetch_session`: the session rules of KIP-227, without a broker.

use super::*;
use crate::replica_manager::PartitionData;

fn want(topic: &str, partition: i32, offset: i64) -> Wanted {
    Wanted { topic: topic.into(), partition, offset, max_bytes: 1 << 20, current_epoch: -1 }
}

fn answer(parts: &[(&str, i32, i64)]) -> Vec<TopicData> {
    let mut topics: Vec<TopicData> = Vec::new();
    for &(t, p, hw) in parts {
        let data = PartitionData {
            partition: p,
            error_code: 0,
            high_watermark: hw,
            log_start_offset: 0,
            records: None,
            preferred_read_replica: -1,
            throttled: false,
            held_back: false,
        };
        match topics.iter_mut().find(|x| x.name == t) {
            Some(x) => x.partitions.push(data),
            None => topics.push(TopicData { name: t.into(), partitions: vec![data] }),
        }
    }
    topics
}

fn sent(topics: &[TopicData]) -> Vec<(String, i32)> {
    topics.iter().flat_map(|t| t.partitions.iter().map(|p| (t.name.clone(), p.partition))).collect()
}

fn positions(wanted: &[Wanted]) -> Vec<(String, i32, i64)> {
    wanted.iter().map(|w| (w.topic.clone(), w.partition, w.offset)).collect()
}

#[test]
fn a_session_answers_only_what_moved_and_keeps_positions() {
    let s = FetchSessions::new(10);
    let (ctx, wanted) =
        s.begin(0, INITIAL_EPOCH, vec![want("a", 0, 5), want("a", 1, 7), want("b", 0, 0)], &[]).unwrap();
    let Context::New(id) = ctx else { panic!("{ctx:?}") };
    assert!(id > 0);
    assert_eq!(wanted.len(), 3);
    // The first answer is whole.
    let first = s.finish(ctx, answer(&[("a", 0, 5), ("a", 1, 7), ("b", 0, 0)]));
    assert_eq!(sent(&first).len(), 3);

    // Epoch 1 names only a-0 (moved) and forgets b-0: the session reads a-0 and a-1.
    let (ctx, wanted) = s.begin(id, 1, vec![want("a", 0, 6)], &[("b".into(), 0)]).unwrap();
    assert_eq!(ctx, Context::Incremental(id));
    assert_eq!(positions(&wanted), [("a".into(), 0, 6), ("a".into(), 1, 7)]);
    // Only a-1's high watermark moved.
    let second = s.finish(ctx, answer(&[("a", 0, 5), ("a", 1, 9)]));
    assert_eq!(sent(&second), [("a".to_string(), 1)]);
    // Nothing moved: an empty answer.
    let (ctx, _) = s.begin(id, 2, Vec::new(), &[]).unwrap();
    assert!(s.finish(ctx, answer(&[("a", 0, 5), ("a", 1, 9)])).is_empty());
    // An error is always sent.
    let (ctx, _) = s.begin(id, 3, Vec::new(), &[]).unwrap();
    let mut errored = answer(&[("a", 0, 5), ("a", 1, 9)]);
    errored[0].partitions[0].error_code = 6;
    assert_eq!(sent(&s.finish(ctx, errored)), [("a".to_string(), 0)]);
}

#[test]
fn wrong_epochs_unknown_ids_and_closing() {
    let s = FetchSessions::new(10);
    let (ctx, _) = s.begin(0, INITIAL_EPOCH, vec![want("a", 0, 0)], &[]).unwrap();
    let id = ctx.session_id();
    assert_eq!(s.begin(id, 2, Vec::new(), &[]).err(), Some(E::InvalidFetchSessionEpoch.code()));
    assert_eq!(s.begin(id + 1, 1, Vec::new(), &[]).err(), Some(E::FetchSessionIdNotFound.code()));
    assert_eq!(s.begin(0, 1, Vec::new(), &[]).err(), Some(E::FetchSessionIdNotFound.code()));
    assert!(s.begin(id, 1, Vec::new(), &[]).is_ok());
    // Epoch -1 closes it; the request is answered whole, without a session.
    let (ctx, wanted) = s.begin(id, FINAL_EPOCH, vec![want("a", 0, 3)], &[]).unwrap();
    assert_eq!((ctx, wanted.len()), (Context::Sessionless, 1));
    assert!(s.is_empty());
    assert_eq!(s.begin(id, 2, Vec::new(), &[]).err(), Some(E::FetchSessionIdNotFound.code()));
    // Without sessions (session 0, epoch -1): whole answers.
    let (ctx, _) = s.begin(0, FINAL_EPOCH, vec![want("a", 0, 3)], &[]).unwrap();
    assert_eq!(ctx, Context::Sessionless);
    assert_eq!(sent(&s.finish(ctx, answer(&[("a", 0, 3)]))).len(), 1);
    // A new full request naming an open session replaces it.
    let (ctx, _) = s.begin(0, INITIAL_EPOCH, vec![want("a", 0, 0)], &[]).unwrap();
    let (again, _) = s.begin(ctx.session_id(), INITIAL_EPOCH, vec![want("a", 0, 0)], &[]).unwrap();
    assert_ne!(again.session_id(), ctx.session_id());
    assert_eq!(s.len(), 1);
}

#[test]
fn epochs_wrap_to_one() {
    assert_eq!(next_epoch(1), 2);
    assert_eq!(next_epoch(i32::MAX), 1);
}

#[test]
fn full_caches_make_no_session_until_one_is_idle_long_enough() {
    let s = FetchSessions::new(1);
    let (first, _) = s.begin(0, INITIAL_EPOCH, vec![want("a", 0, 0)], &[]).unwrap();
    assert!(matches!(first, Context::New(_)));
    let (second, _) = s.begin(0, INITIAL_EPOCH, vec![want("a", 0, 0)], &[]).unwrap();
    assert_eq!(second, Context::Sessionless, "the only slot is in use");
    s.sessions.lock().values_mut().for_each(|x| x.last_used -= EVICTION_IDLE);
    let (third, _) = s.begin(0, INITIAL_EPOCH, vec![want("a", 0, 0)], &[]).unwrap();
    assert!(matches!(third, Context::New(id) if id != first.session_id()));
    assert_eq!(s.len(), 1);
    // No slots: no sessions at all.
    let none = FetchSessions::new(0);
    assert_eq!(none.begin(0, INITIAL_EPOCH, Vec::new(), &[]).unwrap().0, Context::Sessionless);
}
