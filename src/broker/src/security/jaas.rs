//! Kafka's `sasl.jaas.config` values: one login module, its control flag,
//! then `key=value` options, ended by `;`:
//! `org.apache.kafka.common.security.plain.PlainLoginModule required
//! username="admin" password="admin-secret" user_alice="alice-secret";`.

use std::collections::BTreeMap;

use seglog_core::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JaasConfig {
    pub module: String,
    pub options: BTreeMap<String, String>,
}

fn tokens(text: &str) -> std::result::Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut s = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(e) => s.push(e),
                        None => return Err("a quoted value is not closed".into()),
                    },
                    Some(ch) => s.push(ch),
                    None => return Err("a quoted value is not closed".into()),
                }
            }
            out.push(format!("\"{s}"));
        } else if c == '=' || c == ';' {
            chars.next();
            out.push(c.to_string());
        } else {
            let mut s = String::new();
            while let Some(&ch) = chars.peek() {
                if ch.is_whitespace() || ch == '=' || ch == ';' || ch == '"' {
                    break;
                }
                s.push(ch);
                chars.next();
            }
            out.push(s);
        }
    }
    Ok(out)
}

/// Parses one `sasl.jaas.config` value (`key` names it in errors).
pub fn parse(key: &str, text: &str) -> Result<JaasConfig> {
    let bad = |why: String| {
        Error::InvalidConfig(format!("{key}: {why} (expected `LoginModule required k=\"v\" ...;`)"))
    };
    let toks = tokens(text).map_err(bad)?;
    let word = |t: &String| !t.starts_with('"') && t != "=" && t != ";";
    let mut it = toks.iter().peekable();
    let module = it.next().filter(|t| word(t)).ok_or_else(|| bad("no login module".into()))?.clone();
    match it.next().map(String::as_str) {
        Some("required" | "requisite" | "sufficient" | "optional") => {}
        other => return Err(bad(format!("the control flag is {other:?}"))),
    }
    let mut options = BTreeMap::new();
    loop {
        match it.next() {
            Some(t) if t == ";" => break,
            Some(k) if word(k) => {
                if it.next().map(String::as_str) != Some("=") {
                    return Err(bad(format!("option {k} has no value")));
                }
                let v = it.next().ok_or_else(|| bad(format!("option {k} has no value")))?;
                let v = v.strip_prefix('"').unwrap_or(v);
                options.insert(k.clone(), v.to_string());
            }
            Some(t) => return Err(bad(format!("unexpected {t:?}"))),
            None => return Err(bad("it does not end with ';'".into())),
        }
    }
    if it.next().is_some() {
        return Err(bad("it has more than one login module".into()));
    }
    Ok(JaasConfig { module, options })
}

impl JaasConfig {
    /// The PLAIN users of Kafka's default server callback: `user_<name>="<password>"`.
    pub fn plain_users(&self) -> BTreeMap<String, String> {
        self.options
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v.clone())))
            .collect()
    }

    /// The broker's own credentials for the connections it makes.
    pub fn login(&self) -> Option<(String, String)> {
        Some((self.options.get("username")?.clone(), self.options.get("password")?.clone()))
    }
}
