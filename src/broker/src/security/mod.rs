//! Who may talk to the broker: listeners with Kafka's security protocols,
//! TLS (rustls, PEM stores), SASL (PLAIN and SCRAM-SHA-256/512) and the
//! principal each connection is served as. Every key is read for a listener
//! as Kafka reads it: `listener.name.<listener>.<key>` over `<key>`.

pub mod acl;
pub mod jaas;
pub mod listeners;
pub mod pki;
pub mod principal;
pub mod sasl;
pub mod scram;
pub mod tls;

use std::collections::BTreeMap;
use std::sync::Arc;

use seglog_core::error::{Error, Result};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::config::BrokerConfig;
use listeners::{Listener, SecurityProtocol};
use sasl::Mechanism;

/// A listener's key: its own over the broker's.
pub fn listener_key(config: &BrokerConfig, listener: &str, key: &str) -> Option<String> {
    let own = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
    config.security.get(&own).or_else(|| config.security.get(key)).cloned()
}

/// A listener's JAAS config for one SASL mechanism
/// (`listener.name.<listener>.<mechanism>.sasl.jaas.config`).
fn jaas(config: &BrokerConfig, listener: &str, mechanism: Mechanism) -> Result<Option<jaas::JaasConfig>> {
    let key = format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.name().to_ascii_lowercase()
    );
    config.security.get(&key).map(|text| jaas::parse(&key, text)).transpose()
}

fn mechanisms(key: &str, text: &str) -> Result<Vec<Mechanism>> {
    let mut out = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match Mechanism::from_name(name) {
            Some(m) => out.push(m),
            None => {
                return Err(Error::InvalidConfig(format!(
                    "{key}: {name} is not a mechanism this broker has; it has PLAIN, SCRAM-SHA-256 and \
                     SCRAM-SHA-512 (GSSAPI and OAUTHBEARER are not served)"
                )))
            }
        }
    }
    Ok(out)
}

/// What a listener asks of a connection, built at start.
pub struct ListenerSecurity {
    pub name: String,
    pub protocol: SecurityProtocol,
    pub tls: Option<TlsAcceptor>,
    /// The SASL mechanisms served (`sasl.enabled.mechanisms`).
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users and passwords (`user_<name>` in its JAAS config).
    pub plain_users: BTreeMap<String, String>,
    /// `connections.max.reauth.ms`: a SASL session's lifetime (KIP-368);
    /// 0, none.
    pub reauth_ms: u64,
    /// `ssl.principal.mapping.rules`: a client certificate's principal.
    pub principal_mapper: principal::PrincipalMapper,
}

impl ListenerSecurity {
    pub fn build(config: &BrokerConfig, listener: &Listener) -> Result<Arc<ListenerSecurity>> {
        let name = &listener.name;
        let get = |key: &str| listener_key(config, name, key);
        let tls = match listener.protocol.tls() {
            true => {
                // SASL_SSL authenticates with SASL: a client certificate is
                // asked for only if the listener itself says so.
                let own = format!("listener.name.{}.ssl.client.auth", name.to_ascii_lowercase());
                let auth = match listener.protocol {
                    SecurityProtocol::SaslSsl => config.security.get(&own).cloned(),
                    _ => get("ssl.client.auth"),
                };
                let auth = tls::client_auth(auth.as_deref())?;
                Some(TlsAcceptor::from(tls::server_config(name, &get, auth)?))
            }
            false => None,
        };
        let mut mechanisms = Vec::new();
        let mut plain_users = BTreeMap::new();
        if listener.protocol.sasl() {
            let text = get("sasl.enabled.mechanisms").unwrap_or_else(|| "GSSAPI".into());
            mechanisms = self::mechanisms("sasl.enabled.mechanisms", &text)?;
            if mechanisms.is_empty() {
                return Err(Error::InvalidConfig(format!(
                    "listener {name} uses SASL but sasl.enabled.mechanisms names no mechanism"
                )));
            }
            if mechanisms.contains(&Mechanism::Plain) {
                let j = jaas(config, name, Mechanism::Plain)?.ok_or_else(|| {
                    Error::InvalidConfig(format!(
                        "listener {name} serves PLAIN but has no users: set listener.name.{}.plain.sasl.jaas.config \
                         to PlainLoginModule required user_<name>=\"<password>\" ...;",
                        name.to_ascii_lowercase()
                    ))
                })?;
                plain_users = j.plain_users();
            }
        }
        let reauth_ms = match get("connections.max.reauth.ms") {
            Some(v) => v.trim().parse::<i64>().ok().filter(|v| *v >= 0).ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "connections.max.reauth.ms: expected a number of milliseconds (0 for none), got {v:?}"
                ))
            })? as u64,
            None => 0,
        };
        let principal_mapper =
            principal::PrincipalMapper::parse(&get("ssl.principal.mapping.rules").unwrap_or_default())?;
        Ok(Arc::new(ListenerSecurity {
            principal_mapper,
            name: name.clone(),
            protocol: listener.protocol,
            tls,
            mechanisms,
            plain_users,
            reauth_ms,
        }))
    }
}

/// How this broker connects to the others: its inter-broker listener's
/// protocol, with TLS and a SASL login where the protocol has them.
pub struct InterBroker {
    pub listener: String,
    pub tls: Option<TlsConnector>,
    pub login: Option<(Mechanism, String, String)>,
}

impl InterBroker {
    pub fn build(config: &BrokerConfig) -> Result<Arc<InterBroker>> {
        let name = config.inter_broker_listener.clone();
        if config.zookeeper_connect.is_none() {
            // A single broker connects to no other.
            return Ok(Arc::new(InterBroker { listener: name, tls: None, login: None }));
        }
        let protocol = config.listener(&name).map_or(SecurityProtocol::Plaintext, |l| l.protocol);
        let get = |key: &str| listener_key(config, &name, key);
        let tls = match protocol.tls() {
            true => Some(TlsConnector::from(tls::client_config(&name, &get)?)),
            false => None,
        };
        let login = match protocol.sasl() {
            true => {
                let text = config
                    .security
                    .get("sasl.mechanism.inter.broker.protocol")
                    .cloned()
                    .unwrap_or_else(|| "GSSAPI".into());
                let mechanism =
                    *mechanisms("sasl.mechanism.inter.broker.protocol", &text)?.first().ok_or_else(|| {
                        Error::InvalidConfig("sasl.mechanism.inter.broker.protocol is empty".into())
                    })?;
                let (user, password) =
                    jaas(config, &name, mechanism)?.and_then(|j| j.login()).ok_or_else(|| {
                        Error::InvalidConfig(format!(
                            "the inter-broker listener {name} uses {} but this broker has no login for it: set \
                             username and password in listener.name.{}.{}.sasl.jaas.config",
                            mechanism.name(),
                            name.to_ascii_lowercase(),
                            mechanism.name().to_ascii_lowercase()
                        ))
                    })?;
                Some((mechanism, user, password))
            }
            false => None,
        };
        Ok(Arc::new(InterBroker { listener: name, tls, login }))
    }
}
