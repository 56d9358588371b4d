//! Connection limits, as Kafka's acceptor keeps them: `max.connections`
//! open connections in all (when they are all taken the broker stops
//! accepting until one closes, so the kernel's backlog holds the newcomers),
//! and `max.connections.per.ip` from any one address, with
//! `max.connections.per.ip.overrides` per host (a connection over its
//! address's limit is closed as soon as it is accepted); and
//! `listener.name.<listener>.max.connections`, a listener's own bound, under
//! which that listener alone stops accepting.
//!
//! Kafka leaves `max.connections` unbounded by default; here it defaults to
//! three quarters of the file descriptors the process may open, so that
//! connections alone can never take the descriptors the log's files need.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::Arc;

use parking_lot::Mutex;
use seglog_core::error::{Error, Result};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::BrokerConfig;

pub struct ConnectionQuotas {
    /// One permit per connection `max.connections` allows.
    slots: Arc<Semaphore>,
    max: usize,
    /// Per listener (its name in upper case) with a bound of its own: the
    /// bound and its permits.
    listeners: HashMap<String, (usize, Arc<Semaphore>)>,
    per_ip: usize,
    overrides: HashMap<IpAddr, usize>,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// A place under `max.connections` and the listener's own bound.
pub struct Slot {
    _broker: OwnedSemaphorePermit,
    _listener: Option<OwnedSemaphorePermit>,
}

/// An accepted connection's place in the limits, given back when it closes.
pub struct Admitted {
    _slot: Slot,
    ip: IpAddr,
    quotas: Arc<ConnectionQuotas>,
}

/// A connection over its address's limit.
#[derive(Debug, PartialEq, Eq)]
pub struct OverIpLimit(pub usize);

impl ConnectionQuotas {
    /// The limits of `config`; `descriptors` is the process's limit on open
    /// files, from which the default of `max.connections` is taken.
    pub fn new(config: &BrokerConfig, descriptors: u64) -> Result<Arc<ConnectionQuotas>> {
        let max = config.max_connections.unwrap_or_else(|| default_max_connections(descriptors));
        let mut overrides = HashMap::new();
        for (host, limit) in &config.max_connections_per_ip_overrides {
            for ip in resolve(host)? {
                overrides.insert(ip.to_canonical(), *limit);
            }
        }
        let mut listeners = HashMap::new();
        for (key, value) in &config.security {
            let Some(name) =
                key.strip_prefix("listener.name.").and_then(|k| k.strip_suffix(".max.connections"))
            else {
                continue;
            };
            let name = name.to_ascii_uppercase();
            if !config.listeners.iter().any(|l| l.name.eq_ignore_ascii_case(&name)) {
                return Err(Error::InvalidConfig(format!("{key}: there is no listener {name}")));
            }
            let bound =
                value.trim().parse::<u32>().ok().filter(|&n| n <= i32::MAX as u32).ok_or_else(|| {
                    Error::InvalidConfig(format!(
                        "{key}: expected an integer from 0 to 2147483647, got {value:?}"
                    ))
                })? as usize;
            listeners.insert(name, (bound, Arc::new(Semaphore::new(bound.min(Semaphore::MAX_PERMITS)))));
        }
        Ok(Arc::new(ConnectionQuotas {
            slots: Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS))),
            max,
            listeners,
            per_ip: config.max_connections_per_ip,
            overrides,
            open: Mutex::new(HashMap::new()),
        }))
    }

    /// The bound in effect on `listener`: its own, or `max.connections`.
    pub fn max(&self, listener: &str) -> usize {
        self.listeners.get(&listener.to_ascii_uppercase()).map_or(self.max, |(n, _)| (*n).min(self.max))
    }

    fn listener_slots(&self, listener: &str) -> Option<Arc<Semaphore>> {
        self.listeners.get(&listener.to_ascii_uppercase()).map(|(_, s)| s.clone())
    }

    /// A free slot for a connection to `listener`, now if there is one.
    pub fn try_slot(&self, listener: &str) -> Option<Slot> {
        let own = match self.listener_slots(listener) {
            Some(s) => Some(s.try_acquire_owned().ok()?),
            None => None,
        };
        let broker = self.slots.clone().try_acquire_owned().ok()?;
        Some(Slot { _broker: broker, _listener: own })
    }

    /// A slot for a connection to `listener`, once one is free (`None` only
    /// if the slots were closed, which they never are).
    pub async fn slot(&self, listener: &str) -> Option<Slot> {
        let own = match self.listener_slots(listener) {
            Some(s) => Some(s.acquire_owned().await.ok()?),
            None => None,
        };
        let broker = self.slots.clone().acquire_owned().await.ok()?;
        Some(Slot { _broker: broker, _listener: own })
    }

    /// Takes a place for a connection from `ip`, holding `slot`; refused when
    /// the address already has as many as its limit allows.
    pub fn admit(self: &Arc<Self>, ip: IpAddr, slot: Slot) -> std::result::Result<Admitted, OverIpLimit> {
        // An IPv4 client of a dual-stack listener counts as its IPv4 address.
        let ip = ip.to_canonical();
        let limit = self.overrides.get(&ip).copied().unwrap_or(self.per_ip);
        let mut open = self.open.lock();
        let n = open.entry(ip).or_insert(0);
        if *n >= limit {
            if *n == 0 {
                open.remove(&ip);
            }
            return Err(OverIpLimit(limit));
        }
        *n += 1;
        Ok(Admitted { _slot: slot, ip, quotas: self.clone() })
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut open = self.quotas.open.lock();
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Three quarters of the descriptors the process may open.
pub fn default_max_connections(descriptors: u64) -> usize {
    usize::try_from(descriptors / 4 * 3).unwrap_or(usize::MAX).max(1)
}

/// The addresses of an override's host: an IP address as it is, a name as
/// the resolver gives it (as Kafka resolves them when the config is read).
fn resolve(host: &str) -> Result<Vec<IpAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
    let found = (host, 0)
        .to_socket_addrs()
        .map_err(|e| Error::InvalidConfig(format!("max.connections.per.ip.overrides: host {host:?}: {e}")))?;
    Ok(found.map(|a| a.ip()).collect())
}

/// Raises the process's soft limit on open files to its hard limit (as the
/// JVM does at start) and returns the limit then in effect.
pub fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write the one struct on the
    // stack, alive for the calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit = raised;
            }
        }
    }
    if limit.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        limit.rlim_cur
    }
}

#[cfg(test)]
#[path = "connection_quotas_test.rs"]
mod tests;
