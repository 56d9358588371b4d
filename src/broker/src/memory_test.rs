use super::*;

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

#[test]
fn room_is_taken_only_while_there_is_some_and_counted_until_given_back() {
    let memory = Memory::new(Some(1000), Gauge::default());
    let a = memory.try_reserve(600).unwrap();
    assert!(memory.try_reserve(500).is_none());
    assert_eq!(memory.in_use(), 600);
    let b = memory.try_reserve(400).unwrap();
    assert_eq!(memory.in_use(), 1000);
    drop(a);
    assert_eq!(memory.in_use(), 400);
    assert!(memory.try_reserve(600).is_some());
    drop(b);
    assert_eq!(memory.in_use(), 0);
}

#[test]
fn more_than_the_pool_takes_the_whole_pool_and_counts_what_it_holds() {
    let memory = Memory::new(Some(1000), Gauge::default());
    let big = memory.try_reserve(5000).unwrap();
    assert_eq!(memory.in_use(), 5000);
    assert!(memory.try_reserve(1).is_none());
    drop(big);
    let waited = run(memory.reserve(5000, true));
    assert_eq!(waited.bytes(), 5000);
}

#[test]
fn unpooled_room_is_counted_but_never_waits() {
    let memory = Memory::new(Some(10), Gauge::default());
    let _full = memory.try_reserve(10).unwrap();
    let small = run(memory.reserve(64, false));
    assert_eq!((small.bytes(), memory.in_use()), (64, 74));
    let unbounded = Memory::default();
    assert_eq!(unbounded.capacity(), None);
    assert!(unbounded.try_reserve(usize::MAX >> 1).is_some());
}
