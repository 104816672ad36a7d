//! Where an outbound request may go: never, unless `net-allow` says so, to this machine, the
//! link-local range a cloud's metadata service answers on, or addresses no server has — a
//! webhook's URL is written by whoever may create a trigger, and must not become a way to read
//! what only the server's own network can reach. Checked on every address a name resolves to,
//! when the connection is made (so a name that resolves elsewhere the second time gains
//! nothing).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

/// Ranges refused unless allowed: unspecified and "this network", loopback, link-local (the
/// metadata services of AWS, GCP and Azure at 169.254.169.254), Alibaba's metadata address,
/// multicast and reserved ranges, and their IPv6 kin (AWS's IPv6 metadata address included).
const REFUSED: [&str; 12] = [
    "0.0.0.0/8",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "100.100.100.200/32",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "fe80::/10",
    "ff00::/8",
    "fd00:ec2::254/128",
    "64:ff9b::a9fe:a9fe/128",
];

/// The addresses outbound requests may reach.
#[derive(Debug, Clone)]
pub struct AddressGuard {
    allow: Vec<IpNet>,
    deny: Vec<IpNet>,
}

impl AddressGuard {
    /// The default refusals plus `deny`, with `allow` taking precedence over both.
    pub fn new(allow: &[IpNet], deny: &[IpNet]) -> AddressGuard {
        let mut refused: Vec<IpNet> = REFUSED.iter().filter_map(|r| r.parse().ok()).collect();
        refused.extend_from_slice(deny);
        AddressGuard { allow: allow.to_vec(), deny: refused }
    }

    /// Whether a request may connect to `ip`; an IPv4 address written as IPv6 is judged as
    /// the IPv4 address it is.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.allow.iter().any(|r| r.contains(&ip)) || !self.deny.iter().any(|r| r.contains(&ip))
    }
}

/// The resolver the outbound client uses: the system's, keeping only permitted addresses.
pub(super) struct GuardedResolver(pub Arc<AddressGuard>);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let guard = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let permitted: Vec<SocketAddr> =
                found.iter().copied().filter(|a| guard.permits(a.ip())).collect();
            if permitted.is_empty() && !found.is_empty() {
                return Err(Box::new(Refused(format!(
                    "{host} resolves to {}, which outbound requests may not reach (net-allow)",
                    found[0].ip()
                ))) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(permitted.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// A refused address, as an error the client reports.
#[derive(Debug)]
pub(super) struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_link_local_and_metadata_are_refused_unless_allowed() {
        let guard = AddressGuard::new(&[], &[]);
        for refused in
            ["127.0.0.1", "169.254.169.254", "0.0.0.0", "::1", "::ffff:127.0.0.1", "fe80::1", "fd00:ec2::254"]
        {
            assert!(!guard.permits(ip(refused)), "{refused}");
        }
        for permitted in ["93.184.216.34", "10.0.0.5", "192.168.1.1", "2606:4700::1111"] {
            assert!(guard.permits(ip(permitted)), "{permitted}");
        }
        let allowed = AddressGuard::new(&["127.0.0.1/32".parse().unwrap()], &["10.0.0.0/8".parse().unwrap()]);
        assert!(allowed.permits(ip("127.0.0.1")));
        assert!(allowed.permits(ip("::ffff:127.0.0.1")));
        assert!(!allowed.permits(ip("127.0.0.2")));
        assert!(!allowed.permits(ip("10.1.2.3")));
    }
}
