//! The principal of a TLS client, as Kafka's default principal builder names
//! it: `User:` and the subject of the client's certificate in RFC 2253 form
//! (`CN=alice,OU=eng,O=Example,C=GB`, most specific first), as Java's
//! `X500Principal.getName()` writes it, mapped by `ssl.principal.mapping.rules`.

use seglog_core::error::{Error, Result};

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

/// One of `ssl.principal.mapping.rules`.
#[derive(Debug)]
enum Rule {
    /// The subject as it is.
    Default,
    /// `RULE:pattern/replacement/[LU]`: a subject the pattern matches whole
    /// becomes the replacement (with `$n` groups), in lower or upper case.
    Replace { pattern: regex::Regex, replacement: String, case: Option<char> },
}

/// `ssl.principal.mapping.rules`: the first rule that applies names the
/// principal; a subject no rule applies to is refused.
#[derive(Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

/// A Java replacement (`$1`, `\$`) in the regex crate's syntax (`${1}`, `$$`).
fn replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// Splits at the first `/` not escaped by a backslash.
fn until_slash(s: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '/' if !escaped => return Some((&s[..i], &s[i + 1..])),
            _ => escaped = false,
        }
    }
    None
}

impl PrincipalMapper {
    pub fn parse(text: &str) -> Result<PrincipalMapper> {
        let bad = |why: String| Error::InvalidConfig(format!("ssl.principal.mapping.rules: {why}"));
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = until_slash(after)
                    .ok_or_else(|| bad(format!("a rule without its replacement: {rest:?}")))?;
                let (repl, after) =
                    until_slash(after).ok_or_else(|| bad(format!("a rule not ended by '/': {rest:?}")))?;
                let (case, after) = match after.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &after[1..]),
                    _ => (None, after),
                };
                let pattern = regex::Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| bad(format!("pattern {pattern:?}: {e}")))?;
                rules.push(Rule::Replace { pattern, replacement: replacement(repl), case });
                rest = after;
            } else {
                return Err(bad(format!("expected DEFAULT or RULE:pattern/replacement/[LU], got {rest:?}")));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',').or_else(|| rest.strip_prefix('\n')) {
                Some(after) => rest = after.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(bad(format!("expected ',' between rules, got {rest:?}"))),
            }
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(PrincipalMapper { rules })
    }

    /// The principal's name for `subject`, or `None` when no rule applies.
    pub fn map(&self, subject: &str) -> Option<String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Some(subject.to_string()),
                Rule::Replace { pattern, replacement, case } => {
                    if !pattern.is_match(subject) {
                        continue;
                    }
                    let name = pattern.replace(subject, replacement.as_str()).into_owned();
                    return Some(match case {
                        Some('L') => name.to_lowercase(),
                        Some('U') => name.to_uppercase(),
                        _ => name,
                    });
                }
            }
        }
        None
    }

    /// The principal of a client that showed `certs` (`Err` with the subject
    /// when no rule applies to it).
    pub fn principal(
        &self,
        certs: Option<&[rustls::pki_types::CertificateDer<'_>]>,
    ) -> std::result::Result<String, String> {
        match certs.and_then(|c| c.first()).and_then(|c| subject(c.as_ref())) {
            Some(s) => self.map(&s).map(|name| format!("User:{name}")).ok_or(s),
            None => Ok(ANONYMOUS.to_string()),
        }
    }
}

#[cfg(test)]
#[path = "principal_test.rs"]
mod tests;
