//! Named listeners, as Kafka configures them: `listeners` and
//! `advertised.listeners` (`NAME://host:port,...`), each name's security
//! protocol from `listener.security.protocol.map`, and the listener brokers
//! use among themselves (`inter.broker.listener.name`, or
//! `security.inter.broker.protocol` naming a protocol whose name is its
//! listener's).

use std::collections::BTreeMap;
use std::fmt;

use seglog_core::error::{Error, Result};

/// Kafka's security protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        Self::ALL.into_iter().find(|p| p.name().eq_ignore_ascii_case(name.trim()))
    }

    pub fn tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(self, SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One listener: its name (upper case, as Kafka keeps it), where it binds or
/// what it advertises, and its security protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
    pub protocol: SecurityProtocol,
}

impl Listener {
    /// `NAME://host:port`, as Kafka writes an endpoint.
    pub fn endpoint(&self) -> String {
        format!("{}://{}", self.name, self.address())
    }

    /// `host:port`, with an IPv6 host in brackets.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Kafka's default `listener.security.protocol.map`: each protocol's name
/// is a listener name of that protocol.
pub fn default_protocol_map() -> BTreeMap<String, SecurityProtocol> {
    SecurityProtocol::ALL.iter().map(|p| (p.name().to_string(), *p)).collect()
}

/// `NAME:PROTOCOL[,NAME:PROTOCOL...]`.
pub fn parse_protocol_map(key: &str, value: &str) -> Result<BTreeMap<String, SecurityProtocol>> {
    let mut map = BTreeMap::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let parsed = pair.split_once(':').and_then(|(name, protocol)| {
            let name = name.trim();
            (!name.is_empty()).then_some(())?;
            Some((name.to_ascii_uppercase(), SecurityProtocol::from_name(protocol)?))
        });
        match parsed {
            Some((name, protocol)) => {
                map.insert(name, protocol);
            }
            None => {
                return Err(Error::InvalidConfig(format!(
                "{key}: expected NAME:PROTOCOL pairs with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, \
                     SASL_SSL, got {pair:?}"
            )))
            }
        }
    }
    Ok(map)
}

/// One endpoint of `listeners` or `advertised.listeners`: `NAME://host:port`,
/// or a bare `host:port`, which is a PLAINTEXT listener. An empty host binds
/// every interface.
pub fn parse_endpoint(key: &str, text: &str, map: &BTreeMap<String, SecurityProtocol>) -> Result<Listener> {
    let text = text.trim();
    let (name, address) = match text.split_once("://") {
        Some((name, address)) => (name.trim().to_ascii_uppercase(), address),
        None => ("PLAINTEXT".to_string(), text),
    };
    let bad = || Error::InvalidConfig(format!("{key}: expected NAME://HOST:PORT, got {text:?}"));
    let (host, port) = address.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.trim().parse().map_err(|_| bad())?;
    let host = host.trim().trim_start_matches('[').trim_end_matches(']').to_string();
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(bad());
    }
    let protocol = *map.get(&name).ok_or_else(|| {
        Error::InvalidConfig(format!(
            "{key}: no security protocol defined for listener {name} (listener.security.protocol.map has {})",
            map.keys().cloned().collect::<Vec<_>>().join(", ")
        ))
    })?;
    Ok(Listener { name, host, port, protocol })
}

/// A comma-separated endpoint list, each name once.
pub fn parse_endpoints(
    key: &str,
    value: &str,
    map: &BTreeMap<String, SecurityProtocol>,
) -> Result<Vec<Listener>> {
    let mut out: Vec<Listener> = Vec::new();
    for text in value.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let l = parse_endpoint(key, text, map)?;
        if out.iter().any(|o| o.name == l.name) {
            return Err(Error::InvalidConfig(format!(
                "{key}: each listener must have a different name; {} is given twice in {value:?}",
                l.name
            )));
        }
        out.push(l);
    }
    if out.is_empty() {
        return Err(Error::InvalidConfig(format!("{key}: no listener given")));
    }
    Ok(out)
}

/// Checks the listeners together, as Kafka does at start: distinct ports
/// (port 0 aside), every advertised name a listener's, none advertised on
/// 0.0.0.0, and the inter-broker listener among them.
pub fn check(listeners: &[Listener], advertised: &[Listener], inter_broker: &str) -> Result<()> {
    for (i, l) in listeners.iter().enumerate() {
        if l.port != 0 && listeners[..i].iter().any(|o| o.port == l.port && o.host == l.host) {
            return Err(Error::InvalidConfig(format!(
                "listeners: {} and another listener both bind {}",
                l.name,
                l.address()
            )));
        }
    }
    for a in advertised {
        if !listeners.iter().any(|l| l.name == a.name) {
            return Err(Error::InvalidConfig(format!(
                "advertised.listeners: {} is not a listener in listeners ({})",
                a.name,
                names(listeners)
            )));
        }
        if a.host == "0.0.0.0" || a.host == "::" {
            return Err(Error::InvalidConfig(format!(
                "advertised.listeners: {} advertises the meta-address {}; clients cannot connect to it",
                a.name, a.host
            )));
        }
    }
    if !listeners.iter().any(|l| l.name == inter_broker) {
        return Err(Error::InvalidConfig(format!(
            "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid \
             options based on currently configured listeners are {}",
            names(listeners)
        )));
    }
    Ok(())
}

fn names(listeners: &[Listener]) -> String {
    listeners.iter().map(|l| l.name.as_str()).collect::<Vec<_>>().join(",")
}
