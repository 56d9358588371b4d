//! SASL as Kafka's brokers serve it: SaslHandshake picks a mechanism, then
//! the mechanism's tokens go back and forth (in SaslAuthenticate requests,
//! or raw after a v0 handshake) until the client is authenticated as
//! `User:<name>` or refused.

use std::collections::BTreeMap;

use subtle::ConstantTimeEq;

use super::scram::{ScramClient, ScramCredential, ScramMechanism, ScramServer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            other => ScramMechanism::from_name(other).map(Mechanism::Scram),
        }
    }
}

/// One step of an exchange.
pub enum Step {
    /// Send this token and wait for the client's next.
    Continue(Vec<u8>),
    /// Authenticated: the last token to send (empty for PLAIN) and the user.
    Done(Vec<u8>, String),
    /// Refused: what the client is told, and why (for the log).
    Failed { told: String, why: String },
}

/// The server's side of one exchange.
pub enum Authenticator {
    Plain,
    Scram(ScramServer, bool),
}

/// Kafka's answer to a failed SCRAM exchange, which names only the mechanism.
fn scram_refusal(m: ScramMechanism, reauthenticating: bool) -> String {
    let phase = if reauthenticating { "re-authentication" } else { "authentication" };
    format!(
        "Authentication failed during {phase} due to invalid credentials with SASL mechanism {}",
        m.name()
    )
}

impl Authenticator {
    pub fn new(mechanism: Mechanism) -> Authenticator {
        match mechanism {
            Mechanism::Plain => Authenticator::Plain,
            Mechanism::Scram(m) => Authenticator::Scram(ScramServer::new(m), false),
        }
    }

    /// Takes the client's next token. `plain_users` are PLAIN's;
    /// `scram` finds a user's SCRAM credential.
    pub fn step(
        &mut self,
        token: &[u8],
        plain_users: &BTreeMap<String, String>,
        scram: impl FnOnce(&str, ScramMechanism) -> Option<ScramCredential>,
        reauthenticating: bool,
    ) -> Step {
        match self {
            Authenticator::Plain => plain(token, plain_users),
            Authenticator::Scram(server, answered_first) => {
                let m = server.mechanism();
                let refused = |why: String| Step::Failed { told: scram_refusal(m, reauthenticating), why };
                if !*answered_first {
                    *answered_first = true;
                    match server.first(token, |user| scram(user, m)) {
                        Ok(reply) => Step::Continue(reply),
                        Err(why) => refused(why),
                    }
                } else {
                    match server.last(token) {
                        Ok((reply, user)) => Step::Done(reply, user),
                        Err(why) => refused(why),
                    }
                }
            }
        }
    }
}

/// PLAIN (RFC 4616): `authzid NUL user NUL password`, checked against the
/// JAAS users, with Kafka's messages.
fn plain(token: &[u8], users: &BTreeMap<String, String>) -> Step {
    let invalid = |why: &str| Step::Failed {
        told: "Authentication failed: Invalid username or password".into(),
        why: why.to_string(),
    };
    let Ok(text) = std::str::from_utf8(token) else {
        return Step::Failed {
            told: "Authentication failed due to invalid credentials with SASL mechanism PLAIN".into(),
            why: "a PLAIN token that is not UTF-8".into(),
        };
    };
    let parts: Vec<&str> = text.split('\0').collect();
    let [authz, user, password] = parts[..] else {
        return Step::Failed {
            told: "Authentication failed due to invalid credentials with SASL mechanism PLAIN".into(),
            why: "a PLAIN token without three fields".into(),
        };
    };
    if user.is_empty() {
        return Step::Failed {
            told: "Authentication failed: username not specified".into(),
            why: "no user".into(),
        };
    }
    if password.is_empty() {
        return Step::Failed {
            told: "Authentication failed: password not specified".into(),
            why: "no password".into(),
        };
    }
    if !authz.is_empty() && authz != user {
        return Step::Failed {
            told:
                "Authentication failed: Client requested an authorization id that is different from username"
                    .into(),
            why: format!("authorization id {authz:?} for user {user:?}"),
        };
    }
    match users.get(user) {
        Some(expected) if bool::from(expected.as_bytes().ct_eq(password.as_bytes())) => {
            Step::Done(Vec::new(), user.to_string())
        }
        Some(_) => invalid(&format!("a wrong password for user {user:?}")),
        None => invalid(&format!("unknown user {user:?}")),
    }
}

/// The client's side, for a broker's connection to another broker.
pub enum Login {
    Plain,
    Scram(ScramClient, u8),
}

impl Login {
    /// The login and its first token.
    pub fn start(mechanism: Mechanism, user: &str, password: &str) -> (Login, Vec<u8>) {
        match mechanism {
            Mechanism::Plain => (Login::Plain, format!("\0{user}\0{password}").into_bytes()),
            Mechanism::Scram(m) => {
                let (client, first) = ScramClient::start(m, user, password);
                (Login::Scram(client, 0), first)
            }
        }
    }

    /// Takes the server's token: `Ok(Some(next))` to send, `Ok(None)` when done.
    pub fn step(&mut self, token: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match self {
            Login::Plain => Ok(None),
            Login::Scram(client, round) => {
                *round += 1;
                match round {
                    1 => client.respond(token).map(Some),
                    _ => client.verify(token).map(|()| None),
                }
            }
        }
    }
}
