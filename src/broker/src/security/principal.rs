//! The principal of a TLS client, as Kafka's default principal builder names
//! it: `User:` and the subject of the client's certificate in RFC 2253 form
//! (`CN=alice,OU=eng,O=Example,C=GB`, most specific first), as Java's
//! `X500Principal.getName()` writes it.

use x509_parser::der_parser::oid::Oid;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The principal of a connection that proved no identity.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// RFC 2253's keywords, as Java writes them; other attributes are written
/// as their dotted OID with the value's DER in hex (`1.2.3=#0c03616263`).
fn keyword(oid: &Oid) -> Option<&'static str> {
    Some(match oid.to_id_string().as_str() {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The subject of a DER certificate in RFC 2253 form; `None` if the
/// certificate does not parse (rustls has already checked it, so it does).
pub fn subject(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let mut rdns = Vec::new();
    for rdn in cert.subject().iter() {
        let mut parts = Vec::new();
        for attr in rdn.iter() {
            let part = match (keyword(attr.attr_type()), attr.as_str()) {
                (Some(k), Ok(v)) => format!("{k}={}", escape(v)),
                _ => {
                    let value = attr.attr_value();
                    let mut der = vec![value.header.tag().0 as u8];
                    let data = value.data;
                    if data.len() < 128 {
                        der.push(data.len() as u8);
                    } else {
                        let len = (data.len() as u32).to_be_bytes();
                        let skip = len.iter().take_while(|b| **b == 0).count();
                        der.push(0x80 | (4 - skip) as u8);
                        der.extend_from_slice(&len[skip..]);
                    }
                    der.extend_from_slice(data);
                    let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
                    format!("{}=#{hex}", attr.attr_type().to_id_string())
                }
            };
            parts.push(part);
        }
        rdns.push(parts.join("+"));
    }
    rdns.reverse();
    Some(rdns.join(","))
}

/// `User:<subject>` of the client's first certificate, or ANONYMOUS.
pub fn from_certificates(certs: Option<&[rustls::pki_types::CertificateDer<'_>]>) -> String {
    match certs.and_then(|c| c.first()).and_then(|c| subject(c.as_ref())) {
        Some(s) => format!("User:{s}"),
        None => ANONYMOUS.to_string(),
    }
}
