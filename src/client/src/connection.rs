//! One connection to one broker: TCP connect with a timeout, the ApiVersions
//! handshake (v3 first, then the version the broker's UNSUPPORTED_VERSION
//! answer names, as librdkafka does), a version per API (the highest both
//! sides speak), and requests answered in order: a size-prefixed frame, its
//! correlation id checked, bounded in size and in time.
//!
//! A connection that failed in the middle of a request (timeout, cut, a peer
//! breaking the protocol) is `broken`: the next bytes on it could be the end
//! of an old answer, so it is dropped, never reused.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::marker::PhantomData;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use seglog_core::error::{Error, Result};

use crate::config::ClientConfig;
use crate::errors::{self, network, protocol};

/// The APIs this client implements, each with the versions whose fields it
/// fills and reads. Versions above these change meaning (Fetch v13 and Produce
/// v13 name topics by id, FindCoordinator v4 batches keys), so a broker that
/// speaks more is spoken to at these.
pub const IMPLEMENTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::FindCoordinator, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    // The classic group protocol (group.rs): JoinGroup v4 brings KIP-394's
    // member-id round trip, v5 static membership; OffsetFetch v8 and
    // OffsetCommit v8+ change shape (batched groups, member epochs).
    (ApiKey::JoinGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 3),
    (ApiKey::Heartbeat, 0, 3),
    (ApiKey::LeaveGroup, 0, 3),
    (ApiKey::OffsetCommit, 2, 7),
    (ApiKey::OffsetFetch, 1, 7),
    // Group administration (admin.rs).
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
];

/// A request this client sends, with its answer's type. (The crate's own
/// `Request` trait needs its `broker` feature too, for decoding requests;
/// a client only encodes them.)
pub trait Request: Encodable + HeaderVersion {
    const KEY: i16;
    type Response: Decodable + HeaderVersion;
}

macro_rules! requests {
    ($($key:ident: $req:ident => $resp:ident),* $(,)?) => {
        $(impl Request for $req {
            const KEY: i16 = ApiKey::$key as i16;
            type Response = $resp;
        })*
    };
}

requests! {
    Produce: ProduceRequest => ProduceResponse,
    Fetch: FetchRequest => FetchResponse,
    ListOffsets: ListOffsetsRequest => ListOffsetsResponse,
    Metadata: MetadataRequest => MetadataResponse,
    ApiVersions: ApiVersionsRequest => ApiVersionsResponse,
    InitProducerId: InitProducerIdRequest => InitProducerIdResponse,
    FindCoordinator: FindCoordinatorRequest => FindCoordinatorResponse,
    CreateTopics: CreateTopicsRequest => CreateTopicsResponse,
    DeleteTopics: DeleteTopicsRequest => DeleteTopicsResponse,
    JoinGroup: JoinGroupRequest => JoinGroupResponse,
    SyncGroup: SyncGroupRequest => SyncGroupResponse,
    Heartbeat: HeartbeatRequest => HeartbeatResponse,
    LeaveGroup: LeaveGroupRequest => LeaveGroupResponse,
    OffsetCommit: OffsetCommitRequest => OffsetCommitResponse,
    OffsetFetch: OffsetFetchRequest => OffsetFetchResponse,
    ListGroups: ListGroupsRequest => ListGroupsResponse,
    DescribeGroups: DescribeGroupsRequest => DescribeGroupsResponse,
    DeleteGroups: DeleteGroupsRequest => DeleteGroupsResponse,
    OffsetForLeaderEpoch: OffsetForLeaderEpochRequest => OffsetForLeaderEpochResponse,
    SaslHandshake: SaslHandshakeRequest => SaslHandshakeResponse,
    SaslAuthenticate: SaslAuthenticateRequest => SaslAuthenticateResponse,
}

/// `request` at `version` as a frame to send: the size prefix, the request
/// header (its version as the API's) and the body. Shared by this blocking
/// connection and by the broker's replica fetcher, which sends on tokio.
pub fn encode_request<R: Request>(
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
) -> Result<BytesMut> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(client_id.clone()));
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(0);
    header
        .encode(&mut buf, R::header_version(version))
        .and_then(|_| request.encode(&mut buf, version))
        .map_err(|e| {
            Error::InvalidArgument(format!("encoding a {} v{version} request: {e}", api_name(R::KEY)))
        })?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| {
        Error::InvalidArgument(format!("a {} request of {} bytes is too large", api_name(R::KEY), buf.len()))
    })?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf)
}

/// The body of a response frame (its size prefix already read) after its
/// header, checked to answer `correlation_id`; what is wrong otherwise.
pub fn response_body<R: Request>(
    mut frame: Bytes,
    version: i16,
    correlation_id: i32,
) -> std::result::Result<Bytes, String> {
    let what = format!("a {} response", api_name(R::KEY));
    let header = ResponseHeader::decode(&mut frame, R::Response::header_version(version))
        .map_err(|e| format!("undecodable header of {what}: {e}"))?;
    if header.correlation_id != correlation_id {
        return Err(format!(
            "{what} carries correlation id {}, expected {correlation_id}",
            header.correlation_id
        ));
    }
    Ok(frame)
}

/// The response to a `R` request at `version`, from its body.
pub fn decode_response<R: Request>(
    mut body: Bytes,
    version: i16,
) -> std::result::Result<R::Response, String> {
    R::Response::decode(&mut body, version)
        .map_err(|e| format!("undecodable {} v{version} response: {e}", api_name(R::KEY)))
}

/// The version chosen per API for one broker.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Versions(BTreeMap<i16, i16>);

impl Versions {
    /// The highest version of each implemented API within the broker's
    /// `(api key, min, max)` ranges; APIs without a common version are absent.
    pub fn negotiate(broker: &[(i16, i16, i16)]) -> Versions {
        let mut chosen = BTreeMap::new();
        for &(key, lo, hi) in IMPLEMENTED {
            let key = key as i16;
            if let Some(&(_, blo, bhi)) = broker.iter().find(|(k, ..)| *k == key) {
                let top = hi.min(bhi);
                if top >= lo.max(blo) {
                    chosen.insert(key, top);
                }
            }
        }
        Versions(chosen)
    }

    pub fn get(&self, key: ApiKey) -> Option<i16> {
        self.0.get(&(key as i16)).copied()
    }
}

/// A request written and not yet answered.
#[must_use = "a written request's answer must be read (or the connection dropped)"]
pub struct InFlight<R: Request> {
    correlation_id: i32,
    version: i16,
    _request: PhantomData<fn() -> R>,
}

impl<R: Request> InFlight<R> {
    pub fn version(&self) -> i16 {
        self.version
    }
}

pub fn api_name(key: i16) -> String {
    ApiKey::try_from(key).map(|k| format!("{k:?}")).unwrap_or_else(|_| format!("API {key}"))
}

/// One broker, one TCP connection.
pub struct Connection {
    stream: TcpStream,
    addr: String,
    client_id: StrBytes,
    next_correlation: i32,
    versions: Versions,
    request_timeout: Duration,
    max_response_bytes: usize,
    broken: bool,
}

impl Connection {
    /// Connects to `addr` ("host:port") and runs the ApiVersions handshake,
    /// both within `config.connect_timeout`.
    pub fn connect(addr: &str, config: &ClientConfig) -> Result<Connection> {
        let deadline = Instant::now() + config.connect_timeout;
        let addrs: Vec<_> = addr.to_socket_addrs().map_err(|e| network(addr, "resolving", &e))?.collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
        let mut stream = None;
        for a in addrs {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                last = io::Error::new(io::ErrorKind::TimedOut, "connect timed out");
                break;
            }
            match TcpStream::connect_timeout(&a, left) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let Some(stream) = stream else { return Err(network(addr, "connecting to", &last)) };
        // Small requests go out at once (as every Kafka client sets it).
        stream.set_nodelay(true).map_err(|e| network(addr, "configuring", &e))?;
        let mut conn = Connection {
            stream,
            addr: addr.to_string(),
            client_id: StrBytes::from_string(config.client_id.clone()),
            next_correlation: 0,
            versions: Versions::default(),
            request_timeout: config.request_timeout,
            max_response_bytes: config.max_response_bytes,
            broken: false,
        };
        conn.handshake(deadline)?;
        Ok(conn)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }
    pub fn versions(&self) -> &Versions {
        &self.versions
    }
    /// Whether a request failed half-way: the connection must not be reused.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// The version to send `key` at, or UNSUPPORTED_VERSION naming both ranges.
    pub fn version(&self, key: ApiKey) -> Result<i16> {
        self.versions.get(key).ok_or_else(|| {
            let ours = IMPLEMENTED
                .iter()
                .find(|(k, ..)| *k == key)
                .map(|&(_, lo, hi)| format!("{lo} to {hi}"))
                .unwrap_or_else(|| "none".into());
            Error::Kafka {
                code: errors::UNSUPPORTED_VERSION,
                message: format!(
                    "the broker at {} does not serve {key:?} in a version this client speaks ({ours})",
                    self.addr
                ),
            }
        })
    }

    /// Sends `request` at the negotiated version and waits for its answer.
    pub fn send<R: Request>(&mut self, request: &R) -> Result<R::Response> {
        let key = ApiKey::try_from(R::KEY).map_err(|_| Error::InvalidArgument(api_name(R::KEY)))?;
        let version = self.version(key)?;
        self.send_at(request, version, Duration::ZERO)
    }

    /// Sends `request` at `version`; the answer may take `extra` longer than
    /// the request timeout (a Fetch's `max_wait_ms`).
    pub fn send_at<R: Request>(&mut self, request: &R, version: i16, extra: Duration) -> Result<R::Response> {
        let sent = self.write(request, version)?;
        self.read(sent, extra)
    }

    /// Writes `request` at `version` without waiting for its answer.
    pub fn write<R: Request>(&mut self, request: &R, version: i16) -> Result<InFlight<R>> {
        if self.broken {
            return Err(network(
                &self.addr,
                "reusing the connection to",
                &io::Error::new(io::ErrorKind::NotConnected, "an earlier request on it failed"),
            ));
        }
        let correlation_id = self.next_correlation;
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let buf = encode_request(request, version, correlation_id, &self.client_id)?;
        let written = self
            .stream
            .set_write_timeout(Some(self.request_timeout.max(Duration::from_millis(1))))
            .and_then(|_| self.stream.write_all(&buf));
        if let Err(e) = written {
            self.broken = true;
            return Err(self.io_failure(e, &format!("sending a {} request to", api_name(R::KEY))));
        }
        Ok(InFlight { correlation_id, version, _request: PhantomData })
    }

    /// Reads the answer to `sent`.
    pub fn read<R: Request>(&mut self, sent: InFlight<R>, extra: Duration) -> Result<R::Response> {
        let deadline = Instant::now() + self.request_timeout + extra;
        let body = self.read_body::<R>(sent.correlation_id, sent.version, deadline)?;
        decode_response::<R>(body, sent.version).map_err(|e| {
            self.broken = true;
            protocol(&self.addr, e)
        })
    }

    /// A response frame's body after its header, the correlation id checked.
    fn read_body<R: Request>(
        &mut self,
        correlation_id: i32,
        version: i16,
        deadline: Instant,
    ) -> Result<Bytes> {
        let what = format!("a {} response", api_name(R::KEY));
        let frame = self.read_frame(deadline, &what)?;
        response_body::<R>(Bytes::from(frame), version, correlation_id).map_err(|e| {
            self.broken = true;
            protocol(&self.addr, e)
        })
    }

    /// One size-prefixed frame, by `deadline`. The buffer grows as bytes
    /// arrive, so a peer announcing a huge frame and sending little costs little.
    fn read_frame(&mut self, deadline: Instant, what: &str) -> Result<Vec<u8>> {
        let mut size = [0u8; 4];
        self.read_exact_by(&mut size, 0, deadline, what)?;
        let size = i32::from_be_bytes(size);
        if size < 4 || size as usize > self.max_response_bytes {
            self.broken = true;
            return Err(protocol(
                &self.addr,
                format!(
                    "{what} of frame size {size}, outside 4..={} bytes (the client's response size limit)",
                    self.max_response_bytes
                ),
            ));
        }
        let size = size as usize;
        let mut buf = Vec::new();
        while buf.len() < size {
            let have = buf.len();
            let step = (size - have).min(have.max(64 << 10));
            buf.resize(have + step, 0);
            self.read_exact_by(&mut buf[have..], have, deadline, what)?;
        }
        Ok(buf)
    }

    fn read_exact_by(&mut self, buf: &mut [u8], before: usize, deadline: Instant, what: &str) -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.broken = true;
                return Err(Error::Timeout(
                    self.request_timeout.as_millis() as u64,
                    format!("waiting for {what} from {}", self.addr),
                ));
            }
            if let Err(e) = self.stream.set_read_timeout(Some(left)) {
                self.broken = true;
                return Err(network(&self.addr, "configuring", &e));
            }
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => {
                    self.broken = true;
                    let e = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("connection closed after {} bytes of {what}", before + got),
                    );
                    return Err(network(&self.addr, "reading from", &e));
                }
                Ok(n) => got += n,
                Err(e) if matches!(e.kind(), io::ErrorKind::Interrupted) => {}
                // The read timeout: the loop checks the deadline.
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) => {
                    self.broken = true;
                    return Err(self.io_failure(e, &format!("reading {what} from")));
                }
            }
        }
        Ok(())
    }

    fn io_failure(&self, e: io::Error, doing: &str) -> Error {
        if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) {
            return Error::Timeout(self.request_timeout.as_millis() as u64, format!("{doing} {}", self.addr));
        }
        network(&self.addr, doing, &e)
    }

    /// ApiVersions v3, then whatever the broker's UNSUPPORTED_VERSION answer
    /// names (or v0), until one is answered.
    fn handshake(&mut self, deadline: Instant) -> Result<()> {
        let mut version = 3;
        loop {
            let request = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("seglog-client"))
                .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
            let sent = self.write(&request, version)?;
            let body = self.read_body::<ApiVersionsRequest>(sent.correlation_id, version, deadline)?;
            let answer = decode_api_versions(body, version).map_err(|e| {
                self.broken = true;
                protocol(&self.addr, format!("undecodable ApiVersions v{version} response: {e}"))
            })?;
            match answer.error_code {
                errors::NONE => {
                    let ranges: Vec<_> =
                        answer.api_keys.iter().map(|k| (k.api_key, k.min_version, k.max_version)).collect();
                    self.versions = Versions::negotiate(&ranges);
                    return Ok(());
                }
                errors::UNSUPPORTED_VERSION if version > 0 => {
                    let theirs = answer
                        .api_keys
                        .iter()
                        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                        .map_or(0, |k| k.max_version);
                    // Always downwards, so the handshake ends.
                    version = theirs.clamp(0, version - 1);
                }
                code => {
                    return Err(errors::from_code(
                        code,
                        errors::About { api: "ApiVersions", topic: "", partition: -1, message: None },
                    ))
                }
            }
        }
    }
}

/// An ApiVersions answer to a request of `version`. A broker that does not
/// serve `version` answers UNSUPPORTED_VERSION in v0, whatever was asked
/// (Kafka's `ApiVersionsResponse.parse` falls back the same way); the error
/// code comes first in every version, so it is read before choosing.
pub fn decode_api_versions(body: Bytes, version: i16) -> std::result::Result<ApiVersionsResponse, String> {
    let code = body.get(..2).map(|b| i16::from_be_bytes([b[0], b[1]]));
    if code == Some(errors::UNSUPPORTED_VERSION) || version == 0 {
        return ApiVersionsResponse::decode(&mut body.clone(), 0).map_err(|e| e.to_string());
    }
    match ApiVersionsResponse::decode(&mut body.clone(), version) {
        Ok(r) => Ok(r),
        Err(first) => ApiVersionsResponse::decode(&mut body.clone(), 0).map_err(|_| first.to_string()),
    }
}

#[cfg(test)]
#[path = "connection_test.rs"]
mod tests;
