//! SCRAM (RFC 5802, RFC 7677) with SHA-256 and SHA-512, as Kafka runs it:
//! the credential Kafka stores (`salt=..,stored_key=..,server_key=..,iterations=..`),
//! the server's side of the exchange, and the client's (a broker's
//! connection to another broker's SASL listener).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// Kafka's SCRAM mechanisms, by their wire type in the user-credential APIs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

/// Kafka's bounds on iterations (`ScramMechanism.minIterations`, and the
/// largest AlterUserScramCredentials accepts).
pub const MIN_ITERATIONS: i32 = 4096;
pub const MAX_ITERATIONS: i32 = 16384;

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The type in DescribeUserScramCredentials and AlterUserScramCredentials.
    pub fn wire_type(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_wire_type(t: i8) -> Option<ScramMechanism> {
        Self::ALL.into_iter().find(|m| m.wire_type() == t)
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        // HMAC takes a key of any length: `new_from_slice` cannot fail.
        match self {
            ScramMechanism::Sha256 => match Hmac::<Sha256>::new_from_slice(key) {
                Ok(mut m) => {
                    m.update(data);
                    m.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            },
            ScramMechanism::Sha512 => match Hmac::<Sha512>::new_from_slice(key) {
                Ok(mut m) => {
                    m.update(data);
                    m.finalize().into_bytes().to_vec()
                }
                Err(_) => Vec::new(),
            },
        }
    }

    /// RFC 5802's Hi(): PBKDF2 with this mechanism's HMAC.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec()
            }
            ScramMechanism::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec()
            }
        }
    }
}

/// What a server keeps of a user's password for one mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl ScramCredential {
    /// From the salted password (what AlterUserScramCredentials carries).
    pub fn from_salted(m: ScramMechanism, salt: &[u8], salted: &[u8], iterations: i32) -> ScramCredential {
        let client_key = m.hmac(salted, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: m.hash(&client_key),
            server_key: m.hmac(salted, b"Server Key"),
            iterations,
        }
    }

    pub fn from_password(m: ScramMechanism, password: &str, salt: &[u8], iterations: i32) -> ScramCredential {
        let salted = m.salted_password(password.as_bytes(), salt, iterations.max(1) as u32);
        Self::from_salted(m, salt, &salted, iterations)
    }

    /// Kafka's stored form: `salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`.
    pub fn to_kafka(&self) -> String {
        format!(
            "salt={},stored_key={},server_key={},iterations={}",
            B64.encode(&self.salt),
            B64.encode(&self.stored_key),
            B64.encode(&self.server_key),
            self.iterations
        )
    }

    pub fn from_kafka(text: &str) -> Option<ScramCredential> {
        let mut salt = None;
        let mut stored = None;
        let mut server = None;
        let mut iterations = None;
        for part in text.split(',') {
            let (k, v) = part.split_once('=')?;
            match k.trim() {
                "salt" => salt = B64.decode(v.trim()).ok(),
                "stored_key" => stored = B64.decode(v.trim()).ok(),
                "server_key" => server = B64.decode(v.trim()).ok(),
                "iterations" => iterations = v.trim().parse().ok(),
                _ => {}
            }
        }
        Some(ScramCredential {
            salt: salt?,
            stored_key: stored?,
            server_key: server?,
            iterations: iterations?,
        })
    }
}

/// Random printable bytes: a nonce or a salt.
pub fn random_token(len: usize) -> String {
    let mut raw = vec![0u8; len];
    if getrandom::getrandom(&mut raw).is_err() {
        // getrandom fails only without an entropy source; refuse rather than
        // run with a predictable nonce.
        return String::new();
    }
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

/// `saslname` decoding: `=2C` is `,` and `=3D` is `=`.
fn decode_name(s: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i + 1..i + 3) {
            Some("2C") => out.push(','),
            Some("3D") => out.push('='),
            _ => return None,
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Some(out)
}

fn encode_name(s: &str) -> String {
    s.replace('=', "=3D").replace(',', "=2C")
}

/// `k=v` attributes of a SCRAM message, in order.
fn attributes(msg: &str) -> Option<Vec<(char, &str)>> {
    msg.split(',')
        .map(|part| {
            let mut c = part.chars();
            let k = c.next()?;
            (c.next()? == '=').then_some((k, &part[2..]))
        })
        .collect()
}

/// The server's side of one exchange.
pub struct ScramServer {
    mechanism: ScramMechanism,
    state: ServerState,
}

enum ServerState {
    First,
    Final { user: String, gs2: String, auth_prefix: String, nonce: String, credential: ScramCredential },
    Done,
}

/// Why an exchange failed (logged, not told to the client: Kafka tells it
/// only the mechanism, so that it learns nothing of which users exist).
pub type Failure = String;

impl ScramServer {
    pub fn new(mechanism: ScramMechanism) -> ScramServer {
        ScramServer { mechanism, state: ServerState::First }
    }

    pub fn mechanism(&self) -> ScramMechanism {
        self.mechanism
    }

    /// Takes the client-first message; answers the server-first one.
    pub fn first(
        &mut self,
        message: &[u8],
        lookup: impl FnOnce(&str) -> Option<ScramCredential>,
    ) -> Result<Vec<u8>, Failure> {
        let ServerState::First = self.state else { return Err("a client-first message out of turn".into()) };
        self.state = ServerState::Done;
        let text = std::str::from_utf8(message).map_err(|_| "a client-first message that is not UTF-8")?;
        let (gs2, bare) = match text.strip_prefix("n,") {
            Some(rest) => {
                let (authz, bare) = rest.split_once(',').ok_or("no GS2 header")?;
                (format!("n,{authz},"), bare)
            }
            None => return Err("channel binding is not supported (the GS2 header must start with n,)".into()),
        };
        // `n=<user>,r=<nonce>`, then extensions (`key=value`), of which a
        // delegation token's (`tokenauth=true`) is not served.
        let mut parts = bare.split(',');
        let user = match parts.next().and_then(|p| p.strip_prefix("n=")) {
            Some(name) => decode_name(name).ok_or("a malformed user name")?,
            None => return Err("no user name".into()),
        };
        let client_nonce = match parts.next().and_then(|p| p.strip_prefix("r=")) {
            Some(nonce) if !nonce.is_empty() => nonce,
            _ => return Err("no client nonce".into()),
        };
        if parts.any(|ext| ext == "tokenauth=true") {
            return Err("delegation tokens are not supported".into());
        }
        let gs2_authz = gs2.trim_start_matches("n,").trim_end_matches(',');
        if let Some(authz) = gs2_authz.strip_prefix("a=") {
            if decode_name(authz).as_deref() != Some(user.as_str()) {
                return Err("an authorization id other than the user".into());
            }
        }
        let credential = lookup(&user)
            .ok_or_else(|| format!("user {user:?} has no {} credential", self.mechanism.name()))?;
        let server_nonce = random_token(24);
        if server_nonce.is_empty() {
            return Err("no random source for a nonce".into());
        }
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first =
            format!("r={nonce},s={},i={}", B64.encode(&credential.salt), credential.iterations);
        let auth_prefix = format!("{bare},{server_first}");
        self.state = ServerState::Final { user, gs2, auth_prefix, nonce, credential };
        Ok(server_first.into_bytes())
    }

    /// Takes the client-final message; answers the server-final one and
    /// the authenticated user.
    pub fn last(&mut self, message: &[u8]) -> Result<(Vec<u8>, String), Failure> {
        let ServerState::Final { user, gs2, auth_prefix, nonce, credential } =
            std::mem::replace(&mut self.state, ServerState::Done)
        else {
            return Err("a client-final message out of turn".into());
        };
        let text = std::str::from_utf8(message).map_err(|_| "a client-final message that is not UTF-8")?;
        let (without_proof, proof) = text.rsplit_once(",p=").ok_or("no proof")?;
        let attrs = attributes(without_proof).ok_or("a malformed client-final message")?;
        match attrs.first() {
            Some(('c', binding)) if B64.decode(binding).ok().as_deref() == Some(gs2.as_bytes()) => {}
            _ => return Err("the channel binding does not match the GS2 header".into()),
        }
        match attrs.get(1) {
            Some(('r', n)) if *n == nonce => {}
            _ => return Err("the nonce is not the one the server sent".into()),
        }
        let proof = B64.decode(proof).map_err(|_| "a proof that is not base64")?;
        let auth_message = format!("{auth_prefix},{without_proof}");
        let m = self.mechanism;
        let signature = m.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err("a proof of the wrong length".into());
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        if !bool::from(m.hash(&client_key).ct_eq(&credential.stored_key)) {
            return Err(format!("a wrong password for user {user:?}"));
        }
        let server_signature = m.hmac(&credential.server_key, auth_message.as_bytes());
        Ok((format!("v={}", B64.encode(server_signature)).into_bytes(), user))
    }
}

/// The client's side of one exchange.
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    expected_server_signature: Vec<u8>,
}

impl ScramClient {
    /// The client and its first message.
    pub fn start(mechanism: ScramMechanism, user: &str, password: &str) -> (ScramClient, Vec<u8>) {
        Self::start_with_nonce(mechanism, user, password, random_token(24))
    }

    pub(crate) fn start_with_nonce(
        mechanism: ScramMechanism,
        user: &str,
        password: &str,
        nonce: String,
    ) -> (ScramClient, Vec<u8>) {
        let bare = format!("n={},r={nonce}", encode_name(user));
        let first = format!("n,,{bare}").into_bytes();
        let client = ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare: bare,
            nonce,
            expected_server_signature: Vec::new(),
        };
        (client, first)
    }

    /// Takes the server-first message; answers the client-final one.
    pub fn respond(&mut self, server_first: &[u8]) -> Result<Vec<u8>, Failure> {
        let text =
            std::str::from_utf8(server_first).map_err(|_| "a server-first message that is not UTF-8")?;
        let attrs = attributes(text).ok_or("a malformed server-first message")?;
        let get = |k: char| attrs.iter().find(|(a, _)| *a == k).map(|(_, v)| *v);
        let nonce = get('r')
            .filter(|n| n.starts_with(&self.nonce))
            .ok_or("the server's nonce does not extend ours")?;
        let salt = B64.decode(get('s').ok_or("no salt")?).map_err(|_| "a salt that is not base64")?;
        let iterations: u32 = get('i').and_then(|i| i.parse().ok()).ok_or("no iteration count")?;
        if !(MIN_ITERATIONS as u32..=MAX_ITERATIONS as u32 * 64).contains(&iterations) {
            return Err(format!("an iteration count of {iterations}"));
        }
        let m = self.mechanism;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        let server_key = m.hmac(&salted, b"Server Key");
        self.expected_server_signature = m.hmac(&server_key, auth_message.as_bytes());
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final message: the server knew the credential.
    pub fn verify(&self, server_final: &[u8]) -> Result<(), Failure> {
        let text =
            std::str::from_utf8(server_final).map_err(|_| "a server-final message that is not UTF-8")?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("the server refused: {e}"));
        }
        let v = text.strip_prefix("v=").ok_or("no server signature")?;
        let v =
            B64.decode(v.split(',').next().unwrap_or("")).map_err(|_| "a signature that is not base64")?;
        if bool::from(v.ct_eq(&self.expected_server_signature)) {
            Ok(())
        } else {
            Err("the server's signature is wrong: it does not know this user's credential".into())
        }
    }
}

#[cfg(test)]
#[path = "scram_test.rs"]
mod tests;
