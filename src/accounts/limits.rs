//! How many wrong passwords logins may try, in 15-minute windows: 5 for one address from one
//! client, 50 from one client whatever the address (one client trying many accounts), 100 for
//! one address whatever the client (guesses spread over many clients). The last is the only
//! count strangers share with a user, so it never stops a client the user has logged in (or
//! signed up) from within 30 days: a stranger can lock out no one but itself, however many
//! strangers there are. A right password clears its client's count for the address. At most
//! 16 logins of one address are checked at once. A client is its IPv4 address, or its IPv6
//! /64 (the least one host is given), so that one host cannot be many clients.
//!
//! The windows are bounded in memory: addresses longer than an e-mail address can be are
//! refused before they get here, and each table keeps at most [`MAX_ENTRIES`] windows, the
//! oldest giving way.

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong passwords for one address from one client, per window.
const PAIR_FAILURES: u32 = 5;
/// Wrong passwords from one client, whatever the address, per window.
const CLIENT_FAILURES: u32 = 50;
/// Wrong passwords for one address, whatever the client, per window.
const ADDRESS_FAILURES: u32 = 100;
/// How long failures count.
const WINDOW: Duration = Duration::from_secs(15 * 60);
/// How long a client stays known for an address after a login or sign-up from it.
const KNOWN: Duration = Duration::from_secs(30 * 24 * 3600);
/// Logins of one address checked at once at most: with the failures, it bounds the guesses
/// parallel requests can make before the limit sees them.
const MAX_IN_FLIGHT: u32 = 16;
/// Passkey sign-ins one client may begin per window: each is kept until it expires.
const CLIENT_CEREMONIES: u32 = 100;
/// Texts one client may have sent per window: each costs its operator money.
const CLIENT_TEXTS: u32 = 10;
/// Windows each table keeps at most.
pub const MAX_ENTRIES: usize = 20_000;

/// Events (failures, sign-ups) since a window began.
#[derive(Clone, Copy)]
struct Window {
    count: u32,
    since: Instant,
}

/// A table of windows of `period` with at most [`MAX_ENTRIES`] of them.
struct Windows<K> {
    windows: HashMap<K, Window>,
    period: Duration,
}

impl<K> Default for Windows<K> {
    fn default() -> Self {
        Windows { windows: HashMap::new(), period: WINDOW }
    }
}

impl<K: Hash + Eq + Clone> Windows<K> {
    fn count(&self, key: &K) -> u32 {
        self.windows.get(key).filter(|w| w.since.elapsed() < self.period).map_or(0, |w| w.count)
    }

    fn add(&mut self, key: &K) {
        let period = self.period;
        if self.windows.len() >= MAX_ENTRIES && !self.windows.contains_key(key) {
            self.windows.retain(|_, w| w.since.elapsed() < period);
            if self.windows.len() >= MAX_ENTRIES {
                let oldest = self.windows.iter().min_by_key(|(_, w)| w.since).map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    self.windows.remove(&oldest);
                }
            }
        }
        let w = self.windows.entry(key.clone()).or_insert(Window { count: 0, since: Instant::now() });
        if w.since.elapsed() >= period {
            *w = Window { count: 0, since: Instant::now() };
        }
        w.count += 1;
    }

    fn clear(&mut self, key: &K) {
        self.windows.remove(key);
    }
}

#[derive(Default)]
struct Tables {
    pairs: Windows<(IpAddr, String)>,
    clients: Windows<IpAddr>,
    addresses: Windows<String>,
    in_flight: HashMap<String, u32>,
    /// When each client last logged in (or signed up) as each address.
    known: HashMap<(IpAddr, String), Instant>,
    /// Sign-ups per client, in windows of `accounts-signup-rate-limit`'s period.
    signups: Windows<IpAddr>,
    /// Passkey sign-ins begun per client.
    ceremonies: Windows<IpAddr>,
    /// Texts sent at each client's request.
    texts: Windows<IpAddr>,
}

impl Tables {
    fn known(&self, pair: &(IpAddr, String)) -> bool {
        self.known.get(pair).is_some_and(|at| at.elapsed() < KNOWN)
    }

    fn remember(&mut self, pair: (IpAddr, String)) {
        if self.known.len() >= MAX_ENTRIES && !self.known.contains_key(&pair) {
            self.known.retain(|_, at| at.elapsed() < KNOWN);
            if self.known.len() >= MAX_ENTRIES {
                let oldest = self.known.iter().min_by_key(|(_, at)| **at).map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    self.known.remove(&oldest);
                }
            }
        }
        self.known.insert(pair, Instant::now());
    }
}

/// The login limits of a server, and its sign-up limit.
#[derive(Default)]
pub struct LoginLimits {
    tables: Mutex<Tables>,
    /// Sign-ups one client may make per window.
    signups: Option<u32>,
}

/// A login being checked; when dropped it reports its outcome to the limits.
pub struct Attempt<'a> {
    limits: &'a LoginLimits,
    client: IpAddr,
    address: String,
    /// `Some(true)` for a right password, `Some(false)` for a wrong one, `None` when the
    /// password was not checked (an error, the client gone).
    pub outcome: Option<bool>,
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        self.limits.attempted(self.client, &self.address, self.outcome);
    }
}

impl LoginLimits {
    /// Limits with sign-ups limited at `rate` per client (each period a window), if given.
    pub fn new(rate: Option<crate::config::Rate>) -> LoginLimits {
        let mut tables = Tables::default();
        if let Some(rate) = rate {
            tables.signups.period = rate.period;
        }
        LoginLimits { tables: Mutex::new(tables), signups: rate.map(|r| r.count) }
    }

    /// Whether `client` may sign up now; if so, it is counted.
    pub fn sign_up(&self, client: IpAddr) -> bool {
        let Some(most) = self.signups else { return true };
        let client = crate::client_key(client);
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if t.signups.count(&client) >= most {
            return false;
        }
        t.signups.add(&client);
        true
    }

    /// Whether `client` may have another text sent now; if so, it is counted.
    pub fn text(&self, client: IpAddr) -> bool {
        let client = crate::client_key(client);
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if t.texts.count(&client) >= CLIENT_TEXTS {
            return false;
        }
        t.texts.add(&client);
        true
    }

    /// Whether `client` may begin another passkey sign-in now; if so, it is counted.
    pub fn ceremony(&self, client: IpAddr) -> bool {
        let client = crate::client_key(client);
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if t.ceremonies.count(&client) >= CLIENT_CEREMONIES {
            return false;
        }
        t.ceremonies.add(&client);
        true
    }

    /// Whether `client` may try a password for `address` (lower-cased) now; while it is
    /// checked it counts as in flight.
    pub fn attempt(&self, client: IpAddr, address: &str) -> Option<Attempt<'_>> {
        let client = crate::client_key(client);
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        let pair = (client, address.to_owned());
        let limited = t.pairs.count(&pair) >= PAIR_FAILURES
            || t.clients.count(&client) >= CLIENT_FAILURES
            || (t.addresses.count(&pair.1) >= ADDRESS_FAILURES && !t.known(&pair));
        let in_flight = t.in_flight.get(address).copied().unwrap_or(0);
        if limited || in_flight >= MAX_IN_FLIGHT {
            return None;
        }
        t.in_flight.insert(pair.1, in_flight + 1);
        Some(Attempt { limits: self, client, address: address.to_owned(), outcome: None })
    }

    /// `client` signed up as `address` (lower-cased): it is known for it, as after a login.
    pub fn signed_up(&self, client: IpAddr, address: &str) {
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        t.remember((crate::client_key(client), address.to_owned()));
    }

    /// A login let in by [`LoginLimits::attempt`] is over.
    fn attempted(&self, client: IpAddr, address: &str, outcome: Option<bool>) {
        let mut t = self.tables.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = t.in_flight.get_mut(address) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.in_flight.remove(address);
            }
        }
        let pair = (client, address.to_owned());
        match outcome {
            Some(true) => {
                t.pairs.clear(&pair);
                t.remember(pair);
            }
            Some(false) => {
                t.pairs.add(&pair);
                t.clients.add(&client);
                t.addresses.add(&pair.1);
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    fn fail(limits: &LoginLimits, c: IpAddr, address: &str) {
        limits.attempt(c, address).expect("let in").outcome = Some(false);
    }

    #[test]
    fn a_stranger_locks_out_only_itself() {
        let limits = LoginLimits::default();
        for _ in 0..PAIR_FAILURES {
            fail(&limits, client(2), "alice@example.com");
        }
        assert!(limits.attempt(client(2), "alice@example.com").is_none(), "the guesser");
        assert!(limits.attempt(client(3), "alice@example.com").is_some(), "alice, elsewhere");
        assert!(limits.attempt(client(2), "bob@example.com").is_some(), "the guesser, another address");
    }

    #[test]
    fn one_client_trying_many_addresses_and_many_clients_one_address_are_limited() {
        let limits = LoginLimits::default();
        for i in 0..CLIENT_FAILURES {
            fail(&limits, client(2), &format!("user{i}@example.com"));
        }
        assert!(limits.attempt(client(2), "fresh@example.com").is_none());
        for i in 0..ADDRESS_FAILURES {
            fail(&limits, IpAddr::from([10, 0, (i / 256) as u8, (i % 256) as u8]), "carol@example.com");
        }
        assert!(limits.attempt(client(9), "carol@example.com").is_none());
    }

    #[test]
    fn no_number_of_strangers_locks_a_user_out_of_a_client_they_used() {
        let limits = LoginLimits::default();
        limits.attempt(client(3), "erin@example.com").unwrap().outcome = Some(true);
        limits.signed_up(client(4), "erin@example.com");
        for stranger in 0..25u8 {
            for _ in 0..PAIR_FAILURES {
                if let Some(mut guess) =
                    limits.attempt(IpAddr::from([10, 1, 0, stranger]), "erin@example.com")
                {
                    guess.outcome = Some(false);
                }
            }
        }
        assert!(limits.attempt(client(3), "erin@example.com").is_some(), "where erin logged in");
        assert!(limits.attempt(client(4), "erin@example.com").is_some(), "where erin signed up");
        assert!(limits.attempt(client(5), "erin@example.com").is_none(), "a client erin never used");
    }

    #[test]
    fn an_ipv6_host_is_one_client_however_many_addresses_it_takes() {
        let limits = LoginLimits::default();
        for i in 0..PAIR_FAILURES {
            let ip: std::net::Ipv6Addr = format!("2001:db8:1:2::{:x}", i + 1).parse().unwrap();
            fail(&limits, IpAddr::V6(ip), "finn@example.com");
        }
        let next: std::net::Ipv6Addr = "2001:db8:1:2:ffff::1".parse().unwrap();
        assert!(limits.attempt(IpAddr::V6(next), "finn@example.com").is_none());
        let other: std::net::Ipv6Addr = "2001:db8:1:3::1".parse().unwrap();
        assert!(limits.attempt(IpAddr::V6(other), "finn@example.com").is_some());
        assert_eq!(crate::client_key("::ffff:10.0.0.1".parse().unwrap()), IpAddr::from([10, 0, 0, 1]));
    }

    #[test]
    fn sign_ups_are_limited_per_client() {
        let rate = crate::config::Rate::parse("2/5min").unwrap();
        let limits = LoginLimits::new(Some(rate));
        assert!(limits.sign_up(client(2)) && limits.sign_up(client(2)));
        assert!(!limits.sign_up(client(2)));
        assert!(limits.sign_up(client(3)));
        assert!(LoginLimits::new(None).sign_up(client(2)));
    }

    #[test]
    fn a_right_password_clears_its_clients_count() {
        let limits = LoginLimits::default();
        for _ in 0..PAIR_FAILURES - 1 {
            fail(&limits, client(2), "dave@example.com");
        }
        limits.attempt(client(2), "dave@example.com").unwrap().outcome = Some(true);
        fail(&limits, client(2), "dave@example.com");
        assert!(limits.attempt(client(2), "dave@example.com").is_some());
    }

    #[test]
    fn the_tables_stay_bounded() {
        let limits = LoginLimits::default();
        for i in 0..MAX_ENTRIES + 10 {
            let c = IpAddr::from([10, (i / 65_536) as u8, ((i / 256) % 256) as u8, (i % 256) as u8]);
            fail(&limits, c, &format!("u{i}@example.com"));
        }
        let t = limits.tables.lock().unwrap();
        assert!(t.pairs.windows.len() <= MAX_ENTRIES);
        assert!(t.clients.windows.len() <= MAX_ENTRIES && t.addresses.windows.len() <= MAX_ENTRIES);
        assert!(t.in_flight.is_empty());
    }
}
