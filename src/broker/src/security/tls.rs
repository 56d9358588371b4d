//! TLS with rustls, configured by Kafka's `ssl.*` keys with PEM stores:
//! the key and certificate chain from `ssl.keystore.location` (one PEM file
//! holding both) or inline in `ssl.keystore.key` and
//! `ssl.keystore.certificate.chain`; the trusted CAs from
//! `ssl.truststore.location` or inline `ssl.truststore.certificates`;
//! `ssl.client.auth` (none, requested, required); `ssl.enabled.protocols`
//! (TLSv1.2, TLSv1.3). The same keys make the client side of a broker's
//! connection to another broker (`ssl.endpoint.identification.algorithm`:
//! `https` checks the peer's name, empty does not).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};
use seglog_core::error::{Error, Result};

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// A listener's keys: its own (`listener.name.<l>.ssl.x`) over the broker's.
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

fn invalid(msg: String) -> Error {
    Error::InvalidConfig(msg)
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(key: &str, path: &str) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::Io(std::io::Error::new(e.kind(), format!("{key}: cannot read {path}: {e}"))))
}

fn pem_only(get: Lookup, key: &str) -> Result<()> {
    match get(key) {
        Some(t) if !t.eq_ignore_ascii_case("PEM") => Err(invalid(format!(
            "{key}={t}: only PEM stores are read (convert a JKS or PKCS12 store with keytool and openssl)"
        ))),
        _ => Ok(()),
    }
}

fn certificates(what: &str, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>> {
    let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| invalid(format!("{what}: unreadable PEM certificates: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(format!("{what}: no PEM certificate in it")));
    }
    Ok(certs)
}

/// The key and certificate chain, if the listener has a keystore.
fn keystore(get: Lookup) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>> {
    pem_only(get, "ssl.keystore.type")?;
    if get("ssl.key.password").is_some_and(|p| !p.is_empty()) {
        return Err(invalid(
            "ssl.key.password: encrypted private keys are not read; give the key unencrypted (openssl pkcs8 \
             -topk8 -nocrypt) in a file only the broker can read"
                .into(),
        ));
    }
    let (what, pem_chain, pem_key) = match (get("ssl.keystore.location"), get("ssl.keystore.key")) {
        (Some(path), None) => {
            let data = read("ssl.keystore.location", &path)?;
            (format!("ssl.keystore.location {path}"), data.clone(), data)
        }
        (None, Some(key)) => {
            let chain = get("ssl.keystore.certificate.chain").ok_or_else(|| {
                invalid("ssl.keystore.key is set without ssl.keystore.certificate.chain".into())
            })?;
            ("ssl.keystore.certificate.chain".to_string(), chain.into_bytes(), key.into_bytes())
        }
        (Some(_), Some(_)) => {
            return Err(invalid(
                "ssl.keystore.location and ssl.keystore.key are both set; give the key one way".into(),
            ))
        }
        (None, None) => return Ok(None),
    };
    let chain = certificates(&what, &pem_chain)?;
    let key = PrivateKeyDer::from_pem_slice(&pem_key).map_err(|e| {
        invalid(format!("{what}: no unencrypted PEM private key (PKCS#8, PKCS#1 or SEC1) in it: {e}"))
    })?;
    Ok(Some((chain, key)))
}

/// The trusted CAs, if the listener has a truststore.
fn truststore(get: Lookup) -> Result<Option<Arc<RootCertStore>>> {
    pem_only(get, "ssl.truststore.type")?;
    let (what, pem) =
        match (get("ssl.truststore.location"), get("ssl.truststore.certificates")) {
            (Some(path), None) => {
                (format!("ssl.truststore.location {path}"), read("ssl.truststore.location", &path)?)
            }
            (None, Some(certs)) => ("ssl.truststore.certificates".to_string(), certs.into_bytes()),
            (Some(_), Some(_)) => return Err(invalid(
                "ssl.truststore.location and ssl.truststore.certificates are both set; give the CAs one way"
                    .into(),
            )),
            (None, None) => return Ok(None),
        };
    let mut roots = RootCertStore::empty();
    for cert in certificates(&what, &pem)? {
        roots.add(cert).map_err(|e| invalid(format!("{what}: a certificate is not a usable CA: {e}")))?;
    }
    Ok(Some(Arc::new(roots)))
}

fn versions(get: Lookup) -> Result<Vec<&'static rustls::SupportedProtocolVersion>> {
    let text = get("ssl.enabled.protocols").unwrap_or_else(|| "TLSv1.2,TLSv1.3".into());
    let mut out = Vec::new();
    for v in text.split(',').map(str::trim).filter(|v| !v.is_empty()) {
        match v {
            "TLSv1.3" => out.push(&rustls::version::TLS13),
            "TLSv1.2" => out.push(&rustls::version::TLS12),
            other => {
                return Err(invalid(format!(
                    "ssl.enabled.protocols: {other} is not served; TLSv1.2 and TLSv1.3 are"
                )))
            }
        }
    }
    if out.is_empty() {
        return Err(invalid("ssl.enabled.protocols: no protocol left".into()));
    }
    Ok(out)
}

pub fn client_auth(value: Option<&str>) -> Result<ClientAuth> {
    match value.map(str::trim) {
        None | Some("") | Some("none") => Ok(ClientAuth::None),
        Some("requested") => Ok(ClientAuth::Requested),
        Some("required") => Ok(ClientAuth::Required),
        Some(other) => {
            Err(invalid(format!("ssl.client.auth: expected required, requested or none, got {other:?}")))
        }
    }
}

/// The server side of a TLS listener; `auth` is the listener's
/// `ssl.client.auth` (a SASL_SSL listener's is `none` unless set on it).
pub fn server_config(listener: &str, get: Lookup, auth: ClientAuth) -> Result<Arc<ServerConfig>> {
    let (chain, key) = keystore(get)?.ok_or_else(|| {
        invalid(format!(
            "listener {listener} uses TLS but has no keystore: set ssl.keystore.location (a PEM file with the key \
             and its certificate chain) or ssl.keystore.key and ssl.keystore.certificate.chain"
        ))
    })?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions(get)?)
        .map_err(|e| invalid(format!("listener {listener}: {e}")))?;
    let builder = match auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Requested | ClientAuth::Required => {
            let roots = truststore(get)?.ok_or_else(|| {
                invalid(format!(
                    "listener {listener} has ssl.client.auth={} but no truststore to check client certificates \
                     with: set ssl.truststore.location or ssl.truststore.certificates",
                    if auth == ClientAuth::Required { "required" } else { "requested" }
                ))
            })?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
            let verifier = match auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            builder.with_client_cert_verifier(
                verifier.build().map_err(|e| invalid(format!("listener {listener}: {e}")))?,
            )
        }
    };
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| invalid(format!("listener {listener}: the keystore's key and certificate: {e}")))?;
    Ok(Arc::new(config))
}

/// The client side of a connection to another broker's TLS listener: its
/// CAs from the truststore, this broker's certificate if it has a keystore.
pub fn client_config(listener: &str, get: Lookup) -> Result<Arc<ClientConfig>> {
    let roots = truststore(get)?.ok_or_else(|| {
        invalid(format!(
            "inter-broker listener {listener} uses TLS but has no truststore to check other brokers with: set \
             ssl.truststore.location or ssl.truststore.certificates"
        ))
    })?;
    let verify_names = get("ssl.endpoint.identification.algorithm").is_none_or(|a| !a.trim().is_empty());
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider())
        .build()
        .map_err(|e| invalid(format!("listener {listener}: {e}")))?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&versions(get)?)
        .map_err(|e| invalid(format!("listener {listener}: {e}")))?;
    let builder = if verify_names {
        builder.with_webpki_verifier(verifier)
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)))
    };
    let config = match keystore(get)? {
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| invalid(format!("listener {listener}: the keystore's key and certificate: {e}")))?,
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// `ssl.endpoint.identification.algorithm=` (empty): the peer's chain is
/// checked against the CAs, its name is not.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForNameContext {
                ..
            })) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
