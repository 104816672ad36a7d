//! The `rate-limit-*` settings: how many requests one client address, one API key or one role
//! may send — `COUNT/PERIOD` (`100/s`, `6000/min`, `20/10s`, `1000/h`), refilled evenly over
//! the period, with bursts of up to `COUNT` at once unless `burst N` says otherwise — and
//! `server-trusted-proxies`, whose `X-Forwarded-For` names the client instead of them.

use std::time::Duration;

use ipnet::IpNet;

/// One limit: `count` requests per `period`, at most `burst` of them at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Requests per period.
    pub count: u32,
    /// The period.
    pub period: Duration,
    /// Requests that may arrive at once, after a quiet spell.
    pub burst: u32,
}

impl Rate {
    /// Parses `COUNT/PERIOD` with an optional ` burst N`.
    pub fn parse(text: &str) -> Result<Rate, String> {
        let bad =
            || format!("{text:?} is not COUNT/PERIOD (100/s, 6000/min, 20/10s), optionally with burst N");
        let mut words = text.split_whitespace();
        let (count, period) = words.next().and_then(|r| r.split_once('/')).ok_or_else(bad)?;
        let count: u32 = count.parse().ok().filter(|c| *c > 0).ok_or_else(bad)?;
        let (amount, unit) =
            period.split_at(period.find(|c: char| !c.is_ascii_digit()).unwrap_or(period.len()));
        let amount: u64 =
            if amount.is_empty() { 1 } else { amount.parse().ok().filter(|a| *a > 0).ok_or_else(bad)? };
        let unit = match unit {
            "s" | "sec" | "second" => 1,
            "m" | "min" | "minute" => 60,
            "h" | "hour" => 3600,
            _ => return Err(bad()),
        };
        let burst = match (words.next(), words.next(), words.next()) {
            (None, _, _) => count,
            (Some("burst"), Some(n), None) => n.parse().ok().filter(|b| *b > 0).ok_or_else(bad)?,
            _ => return Err(bad()),
        };
        Ok(Rate { count, period: Duration::from_secs(amount.saturating_mul(unit)), burst })
    }
}

/// The rate limits in force; all off by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// `rate-limit-client`: per client address (an IPv6 client's /64).
    pub client: Option<Rate>,
    /// `rate-limit-api-key`: per API key.
    pub api_key: Option<Rate>,
    /// `rate-limit-roles`: per role, by name; `*` for every role not named.
    pub roles: Vec<(String, Rate)>,
}

impl RateLimits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.client.is_some() || self.api_key.is_some() || !self.roles.is_empty()
    }
}

/// Parses `rate-limit-roles`: `role=RATE` pairs separated by commas, `*` for any other role.
pub fn parse_roles(text: &str) -> Result<Vec<(String, Rate)>, String> {
    let mut roles: Vec<(String, Rate)> = Vec::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (role, rate) = pair.split_once('=').ok_or_else(|| format!("{pair:?} is not role=RATE"))?;
        let role = role.trim();
        if role.is_empty() || roles.iter().any(|(r, _)| r == role) {
            return Err(format!("{pair:?}: the role is missing or named twice"));
        }
        roles.push((role.to_owned(), Rate::parse(rate.trim())?));
    }
    Ok(roles)
}

/// Parses `server-trusted-proxies`: addresses and networks (`10.0.0.0/8, ::1`), comma-separated.
pub fn parse_proxies(text: &str) -> Result<Vec<IpNet>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<IpNet>()
                .or_else(|_| p.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| format!("{p:?} is not an IP address or network"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_as_written() {
        let rate = |count, secs, burst| Rate { count, period: Duration::from_secs(secs), burst };
        assert_eq!(Rate::parse("100/s"), Ok(rate(100, 1, 100)));
        assert_eq!(Rate::parse("6000/min"), Ok(rate(6000, 60, 6000)));
        assert_eq!(Rate::parse("20/10s burst 5"), Ok(rate(20, 10, 5)));
        assert_eq!(Rate::parse("1000/h"), Ok(rate(1000, 3600, 1000)));
        for bad in ["", "100", "0/s", "10/0s", "10/day", "10/s burst", "10/s burst 0", "10/s x 2", "-1/s"] {
            assert!(Rate::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn roles_and_proxies() {
        let roles = parse_roles("anon=10/s, *=100/min burst 20").unwrap();
        assert_eq!(roles[0].0, "anon");
        assert_eq!(roles[1], ("*".into(), Rate { count: 100, period: Duration::from_secs(60), burst: 20 }));
        assert!(parse_roles("anon=10/s, anon=5/s").is_err());
        assert!(parse_roles("anon").is_err());
        let proxies = parse_proxies("10.0.0.0/8, ::1").unwrap();
        assert!(proxies[0].contains(&"10.1.2.3".parse::<std::net::IpAddr>().unwrap()));
        assert!(proxies[1].contains(&"::1".parse::<std::net::IpAddr>().unwrap()));
        assert!(parse_proxies("10.0.0.0/33").is_err());
    }
}
