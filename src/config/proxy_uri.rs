//! `openapi-server-proxy-uri`: where clients reach the API when a proxy serves it elsewhere.

/// A checked `http(s)://host[:port][/path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyUri {
    /// `http` or `https`.
    pub scheme: String,
    /// The host, as written (an IPv6 address in brackets).
    pub host: String,
    /// The port, or the scheme's.
    pub port: u16,
    /// The path, `/` when none.
    pub path: String,
}

impl ProxyUri {
    /// Parses `text`; PostgREST's message for anything else.
    pub fn parse(text: &str) -> Result<ProxyUri, String> {
        let malformed =
            || "Malformed proxy uri, a correct example: https://example.com:8443/basePath".to_owned();
        let (scheme, rest) = text.split_once("://").ok_or_else(malformed)?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(malformed()),
        };
        if rest.contains(['?', '#', '@']) {
            return Err(malformed());
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !p.contains(']') => (h, p.parse::<u16>().map_err(|_| malformed())?),
            _ => (authority, default_port),
        };
        let valid_host = !host.is_empty()
            && (host.starts_with('[') && host.ends_with(']')
                || host.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')));
        if !valid_host {
            return Err(malformed());
        }
        Ok(ProxyUri { scheme, host: host.to_owned(), port, path: path.to_owned() })
    }

    /// The URL again, without a default port: what OpenAPI 3's `servers` lists.
    pub fn url(&self) -> String {
        let default = matches!((self.scheme.as_str(), self.port), ("http", 80) | ("https", 443));
        let port = if default { String::new() } else { format!(":{}", self.port) };
        format!("{}://{}{}{}", self.scheme, self.host, port, self.path.trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_postgrest_examples() {
        let p = ProxyUri::parse("https://postgrest.com:8080/openapi.json").unwrap();
        assert_eq!(
            (p.scheme.as_str(), p.host.as_str(), p.port, p.path.as_str()),
            ("https", "postgrest.com", 8080, "/openapi.json")
        );
        let p = ProxyUri::parse("http://example.com").unwrap();
        assert_eq!((p.port, p.path.as_str()), (80, "/"));
        assert_eq!(p.url(), "http://example.com");
        assert_eq!(
            ProxyUri::parse("https://api.example.com/v1/").unwrap().url(),
            "https://api.example.com/v1"
        );
        for bad in ["ftp://example.com", "example.com", "http://", "http://host:port", "http://a b/"] {
            assert!(ProxyUri::parse(bad).is_err(), "{bad}");
        }
    }
}
