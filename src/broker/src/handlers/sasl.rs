//! SaslHandshake and SaslAuthenticate that reach the handlers: on a listener
//! without SASL, or on a connection already authenticated and not
//! re-authenticating. A SASL listener's exchange itself is the connection's
//! (`authentication.rs`). Kafka answers these with ILLEGAL_SASL_STATE.

use kafka_protocol::messages::{ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::Reply;

pub use crate::authentication::{AUTHENTICATE_VERSIONS, HANDSHAKE_VERSIONS};

pub fn handshake() -> Reply {
    let body = SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code());
    Reply::Message(Box::new(ResponseKind::SaslHandshake(body)))
}

pub fn authenticate() -> Reply {
    let body = SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received after successful authentication",
        )));
    Reply::Message(Box::new(ResponseKind::SaslAuthenticate(body)))
}
