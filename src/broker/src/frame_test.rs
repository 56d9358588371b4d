use super::*;

fn run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
}

#[test]
fn a_frame_is_read_whole() {
    let mut input: &[u8] = &[0, 0, 0, 8, 0, 18, 0, 3, 0, 0, 0, 7, 99];
    let f = run(read_frame(&mut input, 1024, &Memory::default())).unwrap().bytes;
    assert_eq!(&f[..], &[0, 18, 0, 3, 0, 0, 0, 7]);
    let h = HeaderStart::peek(&f).unwrap();
    assert_eq!((h.api_key, h.api_version, h.correlation_id), (18, 3, 7));
}

#[test]
fn sizes_are_checked_before_allocating() {
    let mut huge: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
    assert!(matches!(
        run(read_frame(&mut huge, 1 << 20, &Memory::default())),
        Err(FrameError::BadSize { .. })
    ));
    let mut negative: &[u8] = &[0xff, 0xff, 0xff, 0xf0];
    assert!(matches!(
        run(read_frame(&mut negative, 1 << 20, &Memory::default())),
        Err(FrameError::BadSize { .. })
    ));
    let mut tiny: &[u8] = &[0, 0, 0, 3, 1, 2, 3];
    assert!(matches!(
        run(read_frame(&mut tiny, 1 << 20, &Memory::default())),
        Err(FrameError::BadSize { .. })
    ));
}

#[test]
fn truncation_and_clean_close_differ() {
    let mut empty: &[u8] = &[];
    assert!(matches!(run(read_frame(&mut empty, 1024, &Memory::default())), Err(FrameError::Closed)));
    let mut cut: &[u8] = &[0, 0, 0, 20, 1, 2];
    assert!(matches!(
        run(read_frame(&mut cut, 1024, &Memory::default())),
        Err(FrameError::Truncated { wanted: 20, got: 2 })
    ));
    let mut cut_size: &[u8] = &[0, 0];
    assert!(matches!(
        run(read_frame(&mut cut_size, 1024, &Memory::default())),
        Err(FrameError::Truncated { wanted: 4, got: 2 })
    ));
}

/// Polls `f` once: whatever input is already there is read, nothing waited for.
async fn poll_once<F: std::future::Future>(mut f: std::pin::Pin<&mut F>) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx))).await
}

#[test]
fn memory_is_taken_as_bytes_arrive_and_given_back_with_the_frame() {
    let memory = Memory::new(Some(1 << 20), Default::default());
    // A 300,000-byte request arriving whole: its bytes, then the room they held back.
    let body: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
    let mut input = 300_000u32.to_be_bytes().to_vec();
    input.extend_from_slice(&body);
    let mut reader: &[u8] = &input;
    let frame = run(read_frame(&mut reader, 1 << 20, &memory)).unwrap();
    assert_eq!(&frame.bytes[..], &body[..]);
    assert_eq!(memory.in_use(), 300_000);
    drop(frame);
    assert_eq!(memory.in_use(), 0);
    // A claim of 1 MiB of which 10 bytes arrive holds the first read's room, not the claim.
    let mut claim = (1u32 << 20).to_be_bytes().to_vec();
    claim.extend_from_slice(&[7; 10]);
    let (client, mut server) = tokio::io::duplex(1 << 16);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        use tokio::io::AsyncWriteExt;
        let mut client = client;
        client.write_all(&claim).await.unwrap();
        let reading = read_frame(&mut server, 1 << 20, &memory);
        tokio::pin!(reading);
        assert!(poll_once(reading.as_mut()).await.is_pending());
        assert_eq!(memory.in_use(), FIRST_READ);
        drop(client);
        assert!(matches!(reading.await, Err(FrameError::Truncated { wanted: 1048576, got: 10 })));
    });
    assert_eq!(memory.in_use(), 0);
}

#[test]
fn a_full_pool_holds_a_frame_until_room_is_given_back() {
    let memory = Memory::new(Some(100_000), Default::default());
    let frame_of = |n: u32| {
        let mut v = n.to_be_bytes().to_vec();
        v.extend(std::iter::repeat_n(1u8, n as usize));
        v
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let a = frame_of(80_000);
        let mut ra: &[u8] = &a;
        let first = read_frame(&mut ra, 1 << 20, &memory).await.unwrap();
        let b = frame_of(70_000);
        let mut rb: &[u8] = &b;
        let second = read_frame(&mut rb, 1 << 20, &memory);
        tokio::pin!(second);
        assert!(poll_once(second.as_mut()).await.is_pending());
        drop(first);
        assert_eq!(second.await.unwrap().bytes.len(), 70_000);
    });
}

#[test]
fn decoding_room_is_a_multiple_of_a_large_frame_and_refused_past_the_pool() {
    let frame_of = |n: u32| {
        let mut v = n.to_be_bytes().to_vec();
        v.extend(std::iter::repeat_n(1u8, n as usize));
        v
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let memory = Memory::new(Some(20 << 20), Default::default());
        // Small frames are not charged.
        let small = frame_of(1000);
        let mut f = read_frame(&mut &small[..], 1 << 20, &memory).await.unwrap();
        reserve_decoding(&memory, &mut f).await.unwrap();
        assert_eq!(memory.in_use(), 1000);
        drop(f);
        // 100 KiB: 100 times that, held with the frame.
        let big = frame_of(100 << 10);
        let mut f = read_frame(&mut &big[..], 1 << 20, &memory).await.unwrap();
        reserve_decoding(&memory, &mut f).await.unwrap();
        assert_eq!(memory.in_use(), DECODED_PER_BYTE * (100 << 10));
        drop(f);
        assert_eq!(memory.in_use(), 0);
        // 300 KiB would need 30 MiB decoded: more than the pool holds.
        let huge = frame_of(300 << 10);
        let mut f = read_frame(&mut &huge[..], 1 << 20, &memory).await.unwrap();
        assert_eq!(reserve_decoding(&memory, &mut f).await, Err(DECODED_PER_BYTE * (300 << 10)));
    });
}

fn rcvlowat(fd: std::os::fd::RawFd) -> i32 {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a live c_int on the stack with its size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVLOWAT,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0);
    v
}

#[test]
fn a_large_request_trickled_in_small_writes_is_read_whole_under_the_low_water_mark() {
    use std::os::fd::AsRawFd;
    use tokio::io::AsyncWriteExt;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let size = 300_000u32;
        let mut frame = size.to_be_bytes().to_vec();
        frame.extend((0..size).map(|i| (i % 251) as u8));
        let sending = frame.clone();
        let writer = tokio::spawn(async move {
            // 1,000 bytes a write, as a client writing small records does.
            for chunk in sending.chunks(1000) {
                client.write_all(chunk).await.unwrap();
                tokio::task::yield_now().await;
            }
            client
        });
        let fd = server.as_raw_fd();
        let mut low_water = LowWater::new(fd, 0);
        let mut marks = Vec::new();
        let mut awaiting = |n| {
            low_water.awaiting(n);
            marks.push(rcvlowat(fd));
        };
        let read =
            read_frame_awaiting(&mut server, 1 << 20, &Memory::default(), &mut awaiting).await.unwrap();
        assert_eq!(&read.bytes[..], &frame[4..]);
        assert_eq!(marks.first(), Some(&(64 << 10)), "raised while most of the request is owed");
        assert_eq!(marks.last(), Some(&1), "back at 1 once it is whole");
        assert!(marks.windows(2).any(|w| w[0] > 1 && w[1] < w[0]), "lowered as the tail nears: {marks:?}");
        drop(writer.await.unwrap());
    });
    let mut slack = LowWater::new(-1, 20_000);
    slack.awaiting(10_000);
    assert_eq!(slack.set, 1, "never above what is sure to come");
}
