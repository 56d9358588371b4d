//! Certificates for trying TLS on one machine (`seglog cluster --secure`):
//! a CA made for the occasion and a broker certificate it signs for the
//! given hosts, written as the PEM files the `ssl.*` keys read. Not for
//! production: the CA's key is thrown away, so nothing else can be signed.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use seglog_core::error::{Error, Result};

/// Where the files are: `ca.pem` (the CA's certificate, a truststore) and
/// `broker.pem` (the broker's key and certificate chain, a keystore).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pki {
    pub ca: PathBuf,
    pub broker: PathBuf,
}

fn failed(what: &str) -> impl FnOnce(rcgen::Error) -> Error + '_ {
    move |e| Error::InvalidConfig(format!("generating {what}: {e}"))
}

fn write(path: &Path, text: &str, private: bool) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true).mode(if private { 0o600 } else { 0o644 });
    let mut f = options.open(path).map_err(Error::at(path))?;
    f.write_all(text.as_bytes()).map_err(Error::at(path))?;
    f.sync_all().map_err(Error::at(path))
}

/// A new CA and a broker certificate for `hosts` (names or IP addresses),
/// written to `dir`.
pub fn generate(dir: &Path, hosts: &[String]) -> Result<Pki> {
    std::fs::create_dir_all(dir).map_err(Error::at(dir))?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(failed("the CA"))?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, "seglog local CA");
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate().map_err(failed("the CA's key"))?;
    let ca = ca_params.self_signed(&ca_key).map_err(failed("the CA"))?;

    let mut params = CertificateParams::new(hosts.to_vec()).map_err(failed("the broker certificate"))?;
    params.distinguished_name.push(DnType::CommonName, hosts.first().map_or("seglog", String::as_str));
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().map_err(failed("the broker's key"))?;
    let cert = params.signed_by(&key, &ca, &ca_key).map_err(failed("the broker certificate"))?;

    let pki = Pki { ca: dir.join("ca.pem"), broker: dir.join("broker.pem") };
    write(&pki.ca, &ca.pem(), false)?;
    write(&pki.broker, &format!("{}{}{}", key.serialize_pem(), cert.pem(), ca.pem()), true)?;
    Ok(pki)
}

#[cfg(test)]
#[path = "pki_test.rs"]
mod tests;
