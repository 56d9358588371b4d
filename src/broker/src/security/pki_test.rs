//! Tests of `pki`.

use super::*;
use crate::config::BrokerConfig;
use crate::security::listeners::Listener;
use crate::security::ListenerSecurity;

#[test]
fn the_files_make_a_tls_listener_and_a_client_that_trusts_it() {
    let dir = tempfile::tempdir().unwrap();
    let pki = generate(dir.path(), &["127.0.0.1".into(), "localhost".into()]).unwrap();
    let mut config = BrokerConfig::default();
    config.security.insert("ssl.keystore.location".into(), pki.broker.display().to_string());
    config.security.insert("ssl.truststore.location".into(), pki.ca.display().to_string());
    let listener = Listener {
        name: "SSL".into(),
        host: "127.0.0.1".into(),
        port: 0,
        protocol: crate::security::listeners::SecurityProtocol::Ssl,
    };
    assert!(ListenerSecurity::build(&config, &listener).is_ok());
    let get = |k: &str| config.security.get(k).cloned();
    assert!(crate::security::tls::client_config("SSL", &get).is_ok());
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&pki.broker).unwrap().permissions().mode() & 0o777, 0o600);
}
