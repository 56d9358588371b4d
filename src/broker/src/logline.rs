//! One structured line per event worth an operator's attention (a connection
//! closed for bad input, a slow request), in logfmt on stderr.

use std::fmt::Display;
use std::io::Write;

use seglog_core::clock::now_ms;

/// Writes `ts=… level=… event=… key=value …`; values with spaces or quotes are quoted.
pub fn log(level: &str, event: &str, fields: &[(&str, &dyn Display)]) {
    let mut line = format!("seglog-broker ts={} level={level} event={event}", now_ms());
    for (k, v) in fields {
        let v = v.to_string();
        if v.is_empty() || v.contains([' ', '"', '=']) {
            line.push_str(&format!(" {k}={v:?}"));
        } else {
            line.push_str(&format!(" {k}={v}"));
        }
    }
    line.push('\n');
    // A log line that cannot be written is not worth failing a request for.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
