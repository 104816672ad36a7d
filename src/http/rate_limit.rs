//! Rate limits (`rate-limit-client`, `-api-key`, `-roles`): a token bucket per client address,
//! API key or role, kept as the generic cell rate algorithm's one number per key — the time at
//! which its bucket is full again. A request beyond its bucket gets 429 with `Retry-After`.
//!
//! Memory is bounded whatever the callers: keys live in two generations of at most
//! [`GENERATION`] each, per shard; when the current one fills up, the older one is dropped, and a
//! key it held starts again with a full bucket (it had been quiet for a whole generation).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, RandomState};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::auth::Principal;
use crate::config::{Rate, RateLimits};
use crate::error::Error;

/// Keys per generation and shard.
const GENERATION: usize = 8192;

/// Shards per limit: a lock each.
const SHARDS: usize = 16;

/// The rate limits of a server, and what they refused.
pub struct RateLimiter {
    client: Option<Limit<IpAddr>>,
    api_key: Option<Limit<u64>>,
    /// Per role, as configured; `*` applies to the roles not named.
    roles: Vec<(String, Limit<Arc<str>>)>,
    started: Instant,
    hasher: RandomState,
}

/// One limit: its rate and every key's bucket.
struct Limit<K> {
    /// Nanoseconds between two requests at the steady rate.
    interval: u64,
    /// How far ahead of now a bucket's "full again" time may be and still admit a request.
    tolerance: u64,
    shards: Box<[Mutex<Generations<K>>]>,
    refused: AtomicU64,
}

/// A shard's keys: when each one's bucket is full again, in nanoseconds since the limiter began.
struct Generations<K> {
    current: HashMap<K, u64>,
    older: HashMap<K, u64>,
}

impl<K: Hash + Eq> Limit<K> {
    fn new(rate: Rate) -> Limit<K> {
        let interval = (rate.period.as_nanos() / u128::from(rate.count)).max(1) as u64;
        let shards = (0..SHARDS)
            .map(|_| Mutex::new(Generations { current: HashMap::new(), older: HashMap::new() }))
            .collect();
        Limit {
            interval,
            tolerance: interval.saturating_mul(u64::from(rate.burst) - 1),
            shards,
            refused: AtomicU64::new(0),
        }
    }

    /// Takes a token from `key`'s bucket at `now`, or says in how many nanoseconds there is one.
    fn admit(&self, shard: u64, key: K, now: u64) -> Result<(), u64> {
        let mut g = self.shards[shard as usize % SHARDS].lock().unwrap_or_else(|e| e.into_inner());
        let (full_at, current) = match g.current.get(&key) {
            Some(t) => (*t, true),
            None => (g.older.get(&key).copied().unwrap_or(now), false),
        };
        let full_at = full_at.max(now);
        if full_at - now > self.tolerance {
            drop(g);
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(full_at - now - self.tolerance);
        }
        if !current {
            g.older.remove(&key);
            if g.current.len() >= GENERATION {
                g.older = std::mem::take(&mut g.current);
            }
        }
        g.current.insert(key, full_at + self.interval);
        Ok(())
    }

    fn keys(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map_or(0, |g| g.current.len() + g.older.len())).sum()
    }
}

impl RateLimiter {
    /// The limiter of `limits`.
    pub fn new(limits: &RateLimits) -> RateLimiter {
        RateLimiter {
            client: limits.client.map(Limit::new),
            api_key: limits.api_key.map(Limit::new),
            roles: limits.roles.iter().map(|(role, rate)| (role.clone(), Limit::new(*rate))).collect(),
            started: Instant::now(),
            hasher: RandomState::new(),
        }
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_nanos() as u64
    }

    /// Admits a request from `client` (before anything else is done for it).
    pub fn admit_client(&self, client: IpAddr) -> Result<(), Error> {
        let Some(limit) = &self.client else { return Ok(()) };
        let key = crate::client_key(client);
        limit
            .admit(self.hasher.hash_one(key), key, self.now())
            .map_err(|wait| refused("client address", wait))
    }

    /// Admits a request of `principal`, sent with `api_key` if any (once it is verified).
    pub fn admit_caller(&self, principal: &Principal, api_key: Option<&str>) -> Result<(), Error> {
        if let (Some(limit), Some(key)) = (&self.api_key, api_key) {
            let hash = self.hasher.hash_one(key);
            limit.admit(hash, hash, self.now()).map_err(|wait| refused("API key", wait))?;
        }
        if self.roles.is_empty() {
            return Ok(());
        }
        let role = &*principal.role;
        let limit = (self.roles.iter().find(|(r, _)| r == role))
            .or_else(|| self.roles.iter().find(|(r, _)| r == "*"));
        if let Some((_, limit)) = limit {
            let key = principal.role.clone();
            limit.admit(self.hasher.hash_one(&key), key, self.now()).map_err(|wait| refused("role", wait))?;
        }
        Ok(())
    }

    /// The counters for `/rowgate/metrics`, in Prometheus text.
    pub fn metrics(&self, out: &mut String) {
        use std::fmt::Write;
        let roles = self.roles.iter().map(|(_, l)| (l.refused.load(Ordering::Relaxed), l.keys()));
        let (role_refused, role_keys) = roles.fold((0, 0), |(r, k), (r2, k2)| (r + r2, k + k2));
        let rows = [
            ("client", self.client.as_ref().map(|l| (l.refused.load(Ordering::Relaxed), l.keys()))),
            ("api_key", self.api_key.as_ref().map(|l| (l.refused.load(Ordering::Relaxed), l.keys()))),
            ("role", (!self.roles.is_empty()).then_some((role_refused, role_keys))),
        ];
        out.push_str(
            "# HELP rowgate_rate_limited_total Requests refused with 429 by each rate limit.\n\
             # TYPE rowgate_rate_limited_total counter\n",
        );
        for (name, counts) in rows.iter() {
            if let Some((refused, _)) = counts {
                let _ = writeln!(out, "rowgate_rate_limited_total{{limit=\"{name}\"}} {refused}");
            }
        }
        out.push_str(
            "# HELP rowgate_rate_limit_keys Client addresses, API keys or roles each limit keeps a bucket for.\n\
             # TYPE rowgate_rate_limit_keys gauge\n",
        );
        for (name, counts) in rows.iter() {
            if let Some((_, keys)) = counts {
                let _ = writeln!(out, "rowgate_rate_limit_keys{{limit=\"{name}\"}} {keys}");
            }
        }
    }
}

/// 429 RG007, with the seconds to wait.
fn refused(limit: &'static str, wait_nanos: u64) -> Error {
    Error::RateLimited { limit, retry_after: wait_nanos.div_ceil(1_000_000_000).max(1) }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn a_bucket_admits_its_burst_then_one_request_per_interval() {
        let limit = Limit::new(Rate { count: 10, period: Duration::from_secs(1), burst: 3 });
        let t0 = 5 * SECOND;
        for _ in 0..3 {
            assert_eq!(limit.admit(0, "k", t0), Ok(()));
        }
        // Three tokens taken at once: the next one is a tenth of a second away.
        assert_eq!(limit.admit(0, "k", t0), Err(SECOND / 10));
        assert_eq!(limit.admit(0, "k", t0 + SECOND / 10), Ok(()));
        assert_eq!(limit.admit(0, "k", t0 + SECOND / 10), Err(SECOND / 10));
        // Another key has its own bucket.
        assert_eq!(limit.admit(0, "other", t0), Ok(()));
        // A quiet second refills the bucket to its burst, not beyond.
        let later = t0 + 2 * SECOND;
        for _ in 0..3 {
            assert_eq!(limit.admit(0, "k", later), Ok(()));
        }
        assert!(limit.admit(0, "k", later).is_err());
        assert_eq!(limit.refused.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn memory_is_bounded_whatever_the_keys() {
        let limit = Limit::new(Rate { count: 1, period: Duration::from_secs(60), burst: 1 });
        for key in 0..(GENERATION as u64 * 5) {
            assert_eq!(limit.admit(0, key, SECOND), Ok(()));
        }
        assert!(limit.keys() <= 2 * GENERATION);
        // A key seen in either generation keeps its debt, refused or not.
        let last = GENERATION as u64 * 5 - 1;
        assert!(limit.admit(0, last, SECOND).is_err());
        let older = GENERATION as u64 * 4 - 1;
        assert!(limit.admit(0, older, SECOND).is_err());
        assert!(limit.admit(0, older, SECOND).is_err());
    }

    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(crate::client_key(a), crate::client_key(b));
        assert_ne!(crate::client_key(a), crate::client_key(other));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(crate::client_key(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }
}
