use super::*;

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

#[test]
fn a_frame_is_read_whole() {
    let mut input: &[u8] = &[0, 0, 0, 8, 0, 18, 0, 3, 0, 0, 0, 7, 99];
    let f = run(read_frame(&mut input, 1024)).unwrap();
    assert_eq!(&f[..], &[0, 18, 0, 3, 0, 0, 0, 7]);
    let h = HeaderStart::peek(&f).unwrap();
    assert_eq!((h.api_key, h.api_version, h.correlation_id), (18, 3, 7));
}

#[test]
fn sizes_are_checked_before_allocating() {
    let mut huge: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
    assert!(matches!(run(read_frame(&mut huge, 1 << 20)), Err(FrameError::BadSize { .. })));
    let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xf0];
    assert!(matches!(run(read_frame(&mut negative, 1 << 20)), Err(FrameError::BadSize { .. })));
    let mut tiny: &[u8] = &[0, 0, 0, 3, 1, 2, 3];
    assert!(matches!(run(read_frame(&mut tiny, 1 << 20)), Err(FrameError::BadSize { .. })));
}

#[test]
fn truncation_and_clean_close_differ() {
    let mut empty: &[u8] = &[];
    assert!(matches!(run(read_frame(&mut empty, 1024)), Err(FrameError::Closed)));
    let mut cut: &[u8] = &[0, 0, 0, 20, 1, 2];
    assert!(matches!(run(read_frame(&mut cut, 1024)), Err(FrameError::Truncated { wanted: 20, got: 2 })));
    let mut cut_size: &[u8] = &[0, 0];
    assert!(matches!(run(read_frame(&mut cut_size, 1024)), Err(FrameError::Truncated { wanted: 4, got: 2 })));
}
