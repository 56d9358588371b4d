//! A SASL listener's gate: until a connection is authenticated only
//! ApiVersions, SaslHandshake and SaslAuthenticate are served (anything else
//! closes it, as Kafka does), and once authenticated with
//! `connections.max.reauth.ms` set, its session must be renewed (KIP-368)
//! before it ends or the connection is closed at its next request.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;

use crate::frame::HeaderStart;
use crate::response::Response;
use crate::security::sasl::{Authenticator, Mechanism, Step};
use crate::security::ListenerSecurity;
use crate::server::Shared;

/// What to do with a frame the gate looked at.
pub enum Gate {
    /// An ordinary request of an authenticated connection (or ApiVersions).
    Serve,
    /// Answer this and read on.
    Reply(Response),
    /// Answer this, then close (a refused authentication).
    ReplyAndClose(Response, String),
    Close(String),
}

/// SaslHandshake v0–v1 and SaslAuthenticate v0–v2.
pub const HANDSHAKE_VERSIONS: (i16, i16) = (0, 1);
pub const AUTHENTICATE_VERSIONS: (i16, i16) = (0, 2);

/// A connection's SASL state.
pub struct Authentication {
    listener: Arc<ListenerSecurity>,
    /// The mechanism chosen and its exchange in progress; `raw` after a v0
    /// handshake, whose tokens come without Kafka's request framing.
    exchange: Option<(Mechanism, Authenticator, bool)>,
    /// `User:<name>` once authenticated.
    principal: Option<String>,
    mechanism: Option<Mechanism>,
    /// When the session ends, if `connections.max.reauth.ms` is set.
    expires: Option<Instant>,
    /// Whether the client speaks SaslAuthenticate v1+ and so can re-authenticate.
    renewable: bool,
    /// Exchanges completed on this connection (re-authentications too).
    completed: u64,
}

impl Authentication {
    pub fn new(listener: Arc<ListenerSecurity>) -> Authentication {
        Authentication {
            listener,
            exchange: None,
            principal: None,
            mechanism: None,
            expires: None,
            renewable: false,
            completed: 0,
        }
    }

    pub fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    pub fn completed(&self) -> u64 {
        self.completed
    }

    fn reauthenticating(&self) -> bool {
        self.principal.is_some()
    }

    /// Looks at one frame of the connection.
    pub fn gate(&mut self, shared: &Shared, frame: &Bytes) -> Gate {
        if let Some((_, _, true)) = &self.exchange {
            return self.raw_token(shared, frame);
        }
        let Some(start) = HeaderStart::peek(frame) else {
            return Gate::Close("a request shorter than its header during authentication".into());
        };
        let key = start.api_key;
        if key == ApiKey::SaslHandshake as i16 {
            return self.handshake(frame, start.api_version);
        }
        if key == ApiKey::SaslAuthenticate as i16 && self.exchange.is_some() {
            return self.authenticate(shared, frame, start.api_version);
        }
        match (&self.principal, self.expires) {
            (Some(_), Some(end)) if Instant::now() >= end => Gate::Close(format!(
                "its session of connections.max.reauth.ms={} ended without re-authentication",
                self.listener.reauth_ms
            )),
            (Some(_), _) => Gate::Serve,
            (None, _) if key == ApiKey::ApiVersions as i16 => Gate::Serve,
            (None, _) => Gate::Close(format!(
                "request of API key {key} before SASL authentication (only ApiVersions, SaslHandshake and \
                 SaslAuthenticate are served until then)"
            )),
        }
    }

    fn handshake(&mut self, frame: &Bytes, version: i16) -> Gate {
        let (header, request) =
            match decode::<SaslHandshakeRequest>(frame, ApiKey::SaslHandshake, version, HANDSHAKE_VERSIONS) {
                Ok(decoded) => decoded,
                Err(reason) => return Gate::Close(reason),
            };
        let enabled: Vec<StrBytes> =
            self.listener.mechanisms.iter().map(|m| StrBytes::from_static_str(m.name())).collect();
        let answer = |code: i16| {
            let body =
                SaslHandshakeResponse::default().with_error_code(code).with_mechanisms(enabled.clone());
            Response::encoded(
                header.correlation_id,
                ApiKey::SaslHandshake.response_header_version(version),
                &body,
                version,
            )
        };
        if self.reauthenticating() && (!self.renewable || self.exchange.is_some()) {
            return reply(answer(ResponseError::IllegalSaslState.code()));
        }
        let asked = request.mechanism.as_str();
        let chosen = Mechanism::from_name(asked).filter(|m| self.listener.mechanisms.contains(m));
        let Some(mechanism) = chosen else {
            let why = format!(
                "mechanism {asked:?} is not enabled on listener {} ({})",
                self.listener.name,
                self.listener.mechanisms.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ")
            );
            return match answer(ResponseError::UnsupportedSaslMechanism.code()) {
                Ok(r) => Gate::ReplyAndClose(r, why),
                Err(e) => Gate::Close(e.to_string()),
            };
        };
        if self.mechanism.is_some_and(|m| m != mechanism) {
            return Gate::Close(format!(
                "SASL mechanism changed from {} to {} during re-authentication",
                self.mechanism.map_or("", |m| m.name()),
                mechanism.name()
            ));
        }
        self.exchange = Some((mechanism, Authenticator::new(mechanism), version == 0));
        reply(answer(0))
    }

    fn step(&mut self, shared: &Shared, token: &[u8]) -> Result<(Vec<u8>, bool), (String, String)> {
        let reauthenticating = self.reauthenticating();
        let Some((mechanism, authenticator, _)) = self.exchange.as_mut() else {
            return Err(("Unexpected SASL token".into(), "a token with no exchange".into()));
        };
        let mechanism = *mechanism;
        match authenticator.step(
            token,
            &self.listener.plain_users,
            |u, m| shared.scram_credential(u, m),
            reauthenticating,
        ) {
            Step::Continue(reply) => Ok((reply, false)),
            Step::Failed { told, why } => {
                self.exchange = None;
                Err((told, why))
            }
            Step::Done(reply, user) => {
                self.exchange = None;
                let principal = format!("User:{user}");
                if let Some(before) = &self.principal {
                    if *before != principal {
                        return Err((
                            format!("Cannot change principals during re-authentication from {before}: {principal}"),
                            "a different principal on re-authentication".into(),
                        ));
                    }
                }
                self.principal = Some(principal);
                self.mechanism = Some(mechanism);
                self.completed += 1;
                self.expires = (self.listener.reauth_ms > 0)
                    .then(|| Instant::now() + Duration::from_millis(self.listener.reauth_ms));
                Ok((reply, true))
            }
        }
    }

    fn authenticate(&mut self, shared: &Shared, frame: &Bytes, version: i16) -> Gate {
        let (header, request) = match decode::<SaslAuthenticateRequest>(
            frame,
            ApiKey::SaslAuthenticate,
            version,
            AUTHENTICATE_VERSIONS,
        ) {
            Ok(decoded) => decoded,
            Err(reason) => return Gate::Close(reason),
        };
        self.renewable = version >= 1;
        let encode = |body: SaslAuthenticateResponse| {
            Response::encoded(
                header.correlation_id,
                ApiKey::SaslAuthenticate.response_header_version(version),
                &body,
                version,
            )
        };
        match self.step(shared, &request.auth_bytes) {
            Ok((token, done)) => {
                let lifetime = match (done, self.expires) {
                    (true, Some(_)) => self.listener.reauth_ms as i64,
                    _ => 0,
                };
                let body = SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(token))
                    .with_session_lifetime_ms(lifetime)
                    .with_error_message(None);
                reply(encode(body))
            }
            Err((told, why)) => {
                let body = SaslAuthenticateResponse::default()
                    .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                    .with_error_message(Some(StrBytes::from_string(told)));
                match encode(body) {
                    Ok(r) => Gate::ReplyAndClose(r, format!("authentication failed: {why}")),
                    Err(e) => Gate::Close(e.to_string()),
                }
            }
        }
    }

    /// A token after a v0 handshake: the frame is the token, the answer a
    /// frame of the server's token; a failure closes the connection.
    fn raw_token(&mut self, shared: &Shared, frame: &Bytes) -> Gate {
        match self.step(shared, frame) {
            // Every token is answered, PLAIN's empty one too (a frame of size 0).
            Ok((token, _)) => Gate::Reply(Response::bytes(Bytes::from(token))),
            Err((_, why)) => Gate::Close(format!("authentication failed: {why}")),
        }
    }
}

/// A SASL request's header and body, at a version served; or why the
/// connection is closed.
fn decode<R: Decodable>(
    frame: &Bytes,
    key: ApiKey,
    version: i16,
    (lo, hi): (i16, i16),
) -> Result<(RequestHeader, R), String> {
    let name = crate::handlers::api_name(key);
    if !(lo..=hi).contains(&version) {
        return Err(format!("{name} v{version} is not served ({lo} to {hi})"));
    }
    let mut body = frame.clone();
    let header = RequestHeader::decode(&mut body, key.request_header_version(version))
        .map_err(|_| format!("a malformed {name} header"))?;
    let request = R::decode(&mut body, version).map_err(|_| format!("a malformed {name} request"))?;
    Ok((header, request))
}

fn reply(r: anyhow::Result<Response>) -> Gate {
    match r {
        Ok(r) => Gate::Reply(r),
        Err(e) => Gate::Close(format!("encoding a SASL response: {e}")),
    }
}
