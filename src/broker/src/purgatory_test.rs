use std::sync::atomic::{AtomicI64, Ordering};

use super::*;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Polls `f` once.
async fn poll_once<F: std::future::Future>(mut f: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx))).await
}

#[test]
fn a_watch_on_one_partition_is_not_woken_by_another() {
    let p = Arc::new(Purgatory::default());
    rt().block_on(async {
        let a = p.watch([("t", 0)]);
        for _ in 0..100 {
            p.changed("t", 1);
            p.changed("u", 0);
        }
        assert_eq!(p.wakeups.get(), 0);
        let waiting = a.changed();
        tokio::pin!(waiting);
        assert!(poll_once(waiting.as_mut()).await.is_pending());
        p.changed("t", 0);
        assert_eq!(p.wakeups.get(), 1);
        waiting.await;
    });
}

#[test]
fn a_change_before_the_wait_is_not_lost_and_a_watch_ends_when_dropped() {
    let p = Arc::new(Purgatory::default());
    rt().block_on(async {
        let w = p.watch([("t", 0), ("t", 1), ("t", 0)]);
        assert_eq!((p.watching("t", 0), p.watching("t", 1)), (1, 1));
        assert_eq!(p.parked.get(), 1);
        p.changed("t", 1);
        w.changed().await;
        drop(w);
        assert_eq!((p.watching("t", 0), p.watching("t", 1)), (0, 0));
        assert_eq!(p.parked.get(), 0);
        assert!(p.watchers.lock().is_empty());
        p.changed("t", 0);
        assert_eq!(p.wakeups.get(), 1);
    });
}

#[test]
fn waits_for_a_high_watermark_complete_in_the_order_of_their_offsets() {
    // Three acks=all-style waits, each for the high watermark to pass its offset,
    // parked in offset order; the high watermark moves past the first two, then the
    // third: they complete in that order, and the third only at the second move.
    let p = Arc::new(Purgatory::default());
    let hw = Arc::new(AtomicI64::new(0));
    let done = Arc::new(parking_lot::Mutex::new(Vec::new()));
    rt().block_on(async {
        let mut tasks = Vec::new();
        for end in [10, 20, 30] {
            let watch = p.watch([("t", 0)]);
            let (hw, done) = (hw.clone(), done.clone());
            tasks.push(tokio::spawn(async move {
                while hw.load(Ordering::Acquire) < end {
                    watch.changed().await;
                }
                done.lock().push(end);
            }));
        }
        tokio::task::yield_now().await;
        hw.store(25, Ordering::Release);
        p.changed("t", 0);
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        assert_eq!(*done.lock(), vec![10, 20]);
        hw.store(30, Ordering::Release);
        p.changed("t", 0);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*done.lock(), vec![10, 20, 30]);
    });
}
