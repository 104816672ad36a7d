//! A PostgreSQL `db-uri`: what tokio-postgres reads, and libpq's TLS options it does not
//! (`sslmode=verify-ca|verify-full`, `sslrootcert`, `sslcert`, `sslkey`), which rowgate applies
//! itself (`backend/postgres/tls.rs`). Both of libpq's forms: `postgres://...?sslmode=...` and
//! `host=... sslmode=...`.

use std::path::PathBuf;

/// libpq's `sslmode`, with its meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it (libpq's default, and `allow`); the certificate is not checked.
    Prefer,
    /// TLS or no connection; the certificate is not checked.
    Require,
    /// TLS, with a certificate signed by a trusted root; any host name.
    VerifyCa,
    /// TLS, with a certificate signed by a trusted root, for the host connected to.
    VerifyFull,
}

/// Where the trusted roots come from (`sslrootcert`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCerts {
    /// A PEM file of certificates.
    File(PathBuf),
    /// `system`: the well-known public roots (Mozilla's list, built into rowgate).
    System,
}

/// The TLS a connection uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsOptions {
    /// `sslmode`.
    pub mode: SslMode,
    /// `sslrootcert`; with `verify-*` and none given, `~/.postgresql/root.crt` as in libpq.
    pub root_certs: Option<RootCerts>,
    /// `sslcert` and `sslkey`: a client certificate and its key (PEM files).
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// A parsed PostgreSQL `db-uri`.
#[derive(Debug, Clone)]
pub struct PgUri {
    /// Everything but the TLS options, for tokio-postgres.
    pub config: tokio_postgres::Config,
    /// The TLS options.
    pub tls: TlsOptions,
}

/// The options rowgate takes out of the URI before tokio-postgres reads it.
const TLS_KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

impl PgUri {
    /// Parses `text`; a message for `db-uri` if it does not parse or its TLS options do not go
    /// together.
    pub fn parse(text: &str) -> Result<PgUri, String> {
        let (rest, options) = if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            split_url(text)
        } else {
            split_key_values(text)?
        };
        let mut config: tokio_postgres::Config = rest.parse().map_err(|e| format!("{e}"))?;
        let get = |key: &str| options.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let root_certs = get("sslrootcert").filter(|v| !v.is_empty()).map(|v| match v {
            "system" => RootCerts::System,
            path => RootCerts::File(PathBuf::from(path)),
        });
        let mode = match get("sslmode") {
            None | Some("prefer" | "allow") => SslMode::Prefer,
            Some("disable") => SslMode::Disable,
            // As libpq: a root certificate given makes `require` check the chain.
            Some("require") if root_certs.is_some() => SslMode::VerifyCa,
            Some("require") => SslMode::Require,
            Some("verify-ca") => SslMode::VerifyCa,
            Some("verify-full") => SslMode::VerifyFull,
            Some(other) => return Err(format!("invalid sslmode {other:?}")),
        };
        // As libpq: the public roots vouch for any host's name, so only a full check means anything.
        let mode = match (&root_certs, get("sslmode")) {
            (Some(RootCerts::System), None) => SslMode::VerifyFull,
            (Some(RootCerts::System), Some(_)) if mode != SslMode::VerifyFull => {
                return Err("sslrootcert=system needs sslmode=verify-full".into())
            }
            _ => mode,
        };
        let client_cert = match (get("sslcert"), get("sslkey")) {
            (None, None) => None,
            (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
            _ => return Err("sslcert and sslkey go together".into()),
        };
        config.ssl_mode(match mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            _ => tokio_postgres::config::SslMode::Require,
        });
        let root_certs = root_certs.or_else(|| {
            let verify = matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull);
            let home = std::env::var_os("HOME").filter(|_| verify)?;
            Some(RootCerts::File(PathBuf::from(home).join(".postgresql/root.crt")))
        });
        Ok(PgUri { config, tls: TlsOptions { mode, root_certs, client_cert } })
    }
}

/// A URL's query without the TLS options, and them, percent-decoded.
fn split_url(text: &str) -> (String, Vec<(String, String)>) {
    let Some((base, query)) = text.split_once('?') else { return (text.to_owned(), Vec::new()) };
    let (mut kept, mut taken) = (Vec::new(), Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let key = pair.split('=').next().unwrap_or_default();
        match TLS_KEYS.contains(&key) {
            true => taken.extend(form_urlencoded::parse(pair.as_bytes()).map(|(k, v)| (k.into(), v.into()))),
            false => kept.push(pair),
        }
    }
    match kept.is_empty() {
        true => (base.to_owned(), taken),
        false => (format!("{base}?{}", kept.join("&")), taken),
    }
}

/// libpq's `key=value` form without the TLS options, and them. A value may be single-quoted,
/// with `\'` and `\\` inside.
fn split_key_values(text: &str) -> Result<(String, Vec<(String, String)>), String> {
    let (mut kept, mut taken) = (String::new(), Vec::new());
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(format!("missing \"=\" after {key:?} in connection info string"));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        let quoted = chars.next_if_eq(&'\'').is_some();
        loop {
            match chars.next() {
                Some('\\') => value.extend(chars.next()),
                Some('\'') if quoted => break,
                Some(c) if !quoted && c.is_whitespace() => break,
                Some(c) => value.push(c),
                None if quoted => return Err("unterminated quoted string in connection info string".into()),
                None => break,
            }
        }
        if TLS_KEYS.contains(&key.as_str()) {
            taken.push((key, value));
        } else {
            let escaped = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push_str(&format!("{key}='{escaped}' "));
        }
    }
    Ok((kept, taken))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls(uri: &str) -> TlsOptions {
        PgUri::parse(uri).unwrap_or_else(|e| panic!("{uri}: {e}")).tls
    }

    #[test]
    fn libpq_modes_from_both_forms() {
        assert_eq!(tls("postgres://u@h/db").mode, SslMode::Prefer);
        assert_eq!(tls("postgres://u@h/db?sslmode=disable").mode, SslMode::Disable);
        assert_eq!(tls("postgres://u@h/db?sslmode=require&application_name=x").mode, SslMode::Require);
        let full = tls("postgresql://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem");
        assert_eq!(full.mode, SslMode::VerifyFull);
        assert_eq!(full.root_certs, Some(RootCerts::File("/etc/ca.pem".into())));
        assert_eq!(tls("host=h user=u sslmode=verify-ca sslrootcert='/a b/ca.pem'").mode, SslMode::VerifyCa);
        assert_eq!(tls("host=h sslmode=require sslrootcert=/ca.pem").mode, SslMode::VerifyCa);
        assert_eq!(tls("host=h sslrootcert=system").mode, SslMode::VerifyFull);
        assert!(PgUri::parse("host=h sslmode=require sslrootcert=system").is_err());
        assert!(PgUri::parse("host=h sslmode=sometimes").is_err());
        assert!(PgUri::parse("host=h sslcert=/c.pem").is_err());
    }

    #[test]
    fn the_rest_reaches_tokio_postgres() {
        let uri =
            PgUri::parse("postgres://ann:pw@db.example.com:6543/app?sslmode=verify-full&connect_timeout=3")
                .unwrap();
        assert_eq!(uri.config.get_user(), Some("ann"));
        assert_eq!(uri.config.get_ports(), [6543]);
        assert_eq!(uri.config.get_connect_timeout(), Some(&std::time::Duration::from_secs(3)));
        let kv = PgUri::parse("host=h password='it\\'s' sslmode=require dbname = app").unwrap();
        assert_eq!(kv.config.get_password(), Some(&b"it's"[..]));
        assert_eq!(kv.config.get_dbname(), Some("app"));
        assert_eq!(kv.config.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
    }
}
