//! Tests of `connection`: version choice against canned ApiVersions answers,
//! the handshake's fallback, and the bounds on a response (size, time,
//! correlation id), against fake servers on threads.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::protocol::Encodable;

use super::*;

const SEGLOG: &[(i16, i16, i16)] = &[(0, 3, 8), (1, 4, 11), (2, 1, 5), (3, 0, 8), (18, 0, 3), (22, 0, 1)];

#[test]
fn each_api_gets_the_highest_version_both_sides_speak() {
    let v = Versions::negotiate(SEGLOG);
    assert_eq!(v.get(ApiKey::Produce), Some(8));
    assert_eq!(v.get(ApiKey::Fetch), Some(11));
    assert_eq!(v.get(ApiKey::ListOffsets), Some(5));
    assert_eq!(v.get(ApiKey::Metadata), Some(8));
    assert_eq!(v.get(ApiKey::ApiVersions), Some(3));
    assert_eq!(v.get(ApiKey::InitProducerId), Some(1));
    // Not served: absent, not guessed.
    assert_eq!(v.get(ApiKey::FindCoordinator), None);
    assert_eq!(v.get(ApiKey::CreateTopics), None);
}

#[test]
fn a_newer_broker_is_spoken_to_at_the_versions_this_client_implements() {
    // Kafka 4.1's ranges.
    let kafka = [(0, 3, 13), (1, 4, 18), (2, 1, 10), (3, 0, 13), (18, 0, 4), (22, 0, 6), (10, 0, 6)];
    let v = Versions::negotiate(&kafka);
    assert_eq!(v.get(ApiKey::Produce), Some(9));
    assert_eq!(v.get(ApiKey::Fetch), Some(12));
    assert_eq!(v.get(ApiKey::ListOffsets), Some(7));
    assert_eq!(v.get(ApiKey::Metadata), Some(12));
    assert_eq!(v.get(ApiKey::ApiVersions), Some(3));
    assert_eq!(v.get(ApiKey::InitProducerId), Some(4));
    assert_eq!(v.get(ApiKey::FindCoordinator), Some(3));
}

#[test]
fn ranges_that_do_not_meet_give_no_version() {
    // A broker that only speaks Fetch by topic id (13+), and Produce below v3.
    let v = Versions::negotiate(&[(1, 13, 18), (0, 0, 2), (3, 0, 0)]);
    assert_eq!(v.get(ApiKey::Fetch), None);
    assert_eq!(v.get(ApiKey::Produce), None);
    assert_eq!(v.get(ApiKey::Metadata), None, "Metadata v0 is below what this client implements");
}

/// (api key, version, correlation id) of the next request, or None at EOF.
fn read_request(s: &mut TcpStream) -> Option<(i16, i16, i32)> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut body).ok()?;
    Some((
        i16::from_be_bytes([body[0], body[1]]),
        i16::from_be_bytes([body[2], body[3]]),
        i32::from_be_bytes([body[4], body[5], body[6], body[7]]),
    ))
}

/// A response frame: size, correlation id (header v0), body.
fn frame(correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i32(4 + body.len() as i32);
    out.put_i32(correlation_id);
    out.put_slice(body);
    out.to_vec()
}

fn api_versions(error: i16, ranges: &[(i16, i16, i16)], version: i16) -> Vec<u8> {
    let r = ApiVersionsResponse::default().with_error_code(error).with_api_keys(
        ranges
            .iter()
            .map(|&(k, lo, hi)| {
                ApiVersion::default().with_api_key(k).with_min_version(lo).with_max_version(hi)
            })
            .collect(),
    );
    let mut buf = BytesMut::new();
    r.encode(&mut buf, version).expect("encodes");
    buf.to_vec()
}

/// A fake broker on a thread, serving one connection with `serve`.
fn fake(serve: impl FnOnce(TcpStream) + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    thread::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            serve(s);
        }
    });
    addr
}

/// Answers ApiVersions with SEGLOG's ranges, then hands the stream on.
fn handshake_then(then: impl FnOnce(TcpStream) + Send + 'static) -> String {
    fake(move |mut s| {
        let Some((_, v, c)) = read_request(&mut s) else { return };
        let _ = s.write_all(&frame(c, &api_versions(0, SEGLOG, v)));
        then(s);
    })
}

fn quick() -> ClientConfig {
    ClientConfig {
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_millis(500),
        ..ClientConfig::default()
    }
}

#[test]
fn the_handshake_falls_back_to_the_version_an_unsupported_version_answer_names() {
    let (tx, rx) = mpsc::channel();
    let addr = fake(move |mut s| {
        while let Some((key, version, c)) = read_request(&mut s) {
            let _ = tx.send((key, version));
            // As Kafka: v0 body with UNSUPPORTED_VERSION for what it does not serve.
            let answer = if version > 2 {
                api_versions(errors::UNSUPPORTED_VERSION, &[(18, 0, 2)], 0)
            } else {
                api_versions(0, SEGLOG, version)
            };
            if s.write_all(&frame(c, &answer)).is_err() {
                return;
            }
        }
    });
    let conn = Connection::connect(&addr, &quick()).expect("connects");
    assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![(18, 3), (18, 2)]);
    assert_eq!(conn.versions().get(ApiKey::Produce), Some(8));
}

#[test]
fn a_broker_without_an_api_gets_unsupported_version_naming_it() {
    let addr = handshake_then(drop);
    let conn = Connection::connect(&addr, &quick()).expect("connects");
    let e = conn.version(ApiKey::FindCoordinator).expect_err("not served");
    assert_eq!(e.kafka_code(), Some(errors::UNSUPPORTED_VERSION));
    assert!(e.to_string().contains("FindCoordinator"), "{e}");
}

#[test]
fn a_huge_response_frame_is_an_error_not_an_allocation() {
    let addr = fake(|mut s| {
        let _ = read_request(&mut s);
        // 2 GiB - 1 announced, nothing sent.
        let _ = s.write_all(&i32::MAX.to_be_bytes());
        thread::sleep(Duration::from_secs(2));
    });
    let e = match Connection::connect(&addr, &quick()) {
        Err(e) => e,
        Ok(_) => panic!("a 2 GiB frame was accepted"),
    };
    assert!(matches!(&e, Error::Io(io) if io.kind() == io::ErrorKind::InvalidData), "{e:?}");
    assert!(e.to_string().contains("frame size 2147483647"), "{e}");
}

#[test]
fn a_frame_under_the_limit_grows_as_bytes_arrive_and_a_short_one_is_a_cut() {
    let addr = fake(|mut s| {
        let _ = read_request(&mut s);
        // 900 MiB announced (under the 1 GiB bound), 10 bytes sent, then closed.
        let _ = s.write_all(&(900i32 << 20).to_be_bytes());
        let _ = s.write_all(&[0u8; 10]);
    });
    let e = match Connection::connect(&addr, &quick()) {
        Err(e) => e,
        Ok(_) => panic!("a cut frame was accepted"),
    };
    assert!(matches!(&e, Error::Io(io) if io.kind() == io::ErrorKind::UnexpectedEof), "{e:?}");
    assert!(e.to_string().contains("after 10 bytes"), "{e}");
}

#[test]
fn a_wrong_correlation_id_breaks_the_connection() {
    let addr = fake(|mut s| {
        if let Some((_, v, c)) = read_request(&mut s) {
            let _ = s.write_all(&frame(c + 7, &api_versions(0, SEGLOG, v)));
        }
        thread::sleep(Duration::from_millis(200));
    });
    let e = match Connection::connect(&addr, &quick()) {
        Err(e) => e,
        Ok(_) => panic!("a wrong correlation id was accepted"),
    };
    assert!(e.to_string().contains("correlation id 7, expected 0"), "{e}");
}

#[test]
fn a_silent_broker_times_out_and_the_connection_is_not_reused() {
    let addr = handshake_then(|mut s| {
        let _ = read_request(&mut s);
        thread::sleep(Duration::from_secs(2));
    });
    let mut conn = Connection::connect(&addr, &quick()).expect("connects");
    let request = MetadataRequest::default().with_topics(None);
    let e = conn.send(&request).expect_err("no answer");
    assert!(matches!(e, Error::Timeout(500, _)), "{e:?}");
    assert!(conn.is_broken());
    let again = conn.send(&request).expect_err("broken");
    assert!(again.to_string().contains("an earlier request on it failed"), "{again}");
}
