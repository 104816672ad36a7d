//! An administrator's session: a random token in an `HttpOnly`, `SameSite=Strict` cookie, kept
//! by its SHA-256, and a CSRF token derived from it that every request of the session carries
//! in a header (`X-Rowgate-Csrf`). The pair is the administrator's credential on every service
//! (`http::identify`): a cookie alone — what a browser attaches to another site's request —
//! identifies no one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::{header, HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};

/// The session cookie.
pub const COOKIE: &str = "rowgate_dashboard";
/// The header a session's requests carry its CSRF token in.
pub const CSRF_HEADER: &str = "x-rowgate-csrf";
/// How long a session lasts.
pub const LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

pub use crate::accounts::store::{random_token as new_token, token_hash};

/// The CSRF token of a session: only who can read the cookie's token (the page, told at sign-in)
/// can know it.
pub fn csrf_of(token: &str) -> String {
    crate::hex(&Sha256::digest(format!("rowgate-dashboard-csrf:{token}").as_bytes()))
}

/// The session tokens a request's cookies carry (a cookie of a sibling domain may come too).
fn cookie_tokens(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .filter(|t| !t.is_empty())
}

/// The session token a request's cookies carry (the first).
pub fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    cookie_tokens(headers).next()
}

/// The session token of a request that carries both a cookie and the CSRF token that goes with
/// it; `Some(Err)` for a CSRF token that goes with none of its cookies.
pub fn credential(headers: &HeaderMap) -> Option<Result<&str, ()>> {
    let csrf = headers.get(CSRF_HEADER)?.to_str().ok()?;
    cookie_token(headers)?;
    let matching = cookie_tokens(headers)
        .find(|token| bool::from(subtle::ConstantTimeEq::ct_eq(csrf_of(token).as_bytes(), csrf.as_bytes())));
    Some(matching.ok_or(()))
}

/// The `Set-Cookie` that starts a session (`Secure` when the request came over HTTPS).
pub fn set_cookie(token: &str, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let value = format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        LIFETIME.as_secs()
    );
    HeaderValue::from_str(&value).expect("a token is URL-safe base64")
}

/// The `Set-Cookie` that ends one.
pub fn clear_cookie() -> HeaderValue {
    HeaderValue::from_static("rowgate_dashboard=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

/// Failed sign-ins a client address may make in [`LOGIN_WINDOW`].
const LOGIN_FAILURES: u32 = 10;
const LOGIN_WINDOW: Duration = Duration::from_secs(15 * 60);
/// Addresses remembered at most: beyond it, those whose window has passed are forgotten.
const LOGIN_CLIENTS: usize = 10_000;

/// Sign-ins per client address: past [`LOGIN_FAILURES`] attempts that did not succeed in a
/// window, refused until it ends (also a right password: guessing must not learn which one
/// was). An attempt counts before its password is checked, so a burst of them in parallel
/// gets no more than the rest.
#[derive(Default)]
pub struct LoginLimit {
    attempts: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl LoginLimit {
    /// Counts an attempt of `client`, if it may make one now; the seconds until it may, if not.
    pub fn attempt(&self, client: IpAddr) -> Result<(), u64> {
        let client = crate::client_key(client);
        let mut attempts = self.attempts.lock().unwrap_or_else(|e| e.into_inner());
        if attempts.len() >= LOGIN_CLIENTS {
            attempts.retain(|_, (_, since)| since.elapsed() < LOGIN_WINDOW);
        }
        let entry = attempts.entry(client).or_insert((0, Instant::now()));
        if entry.1.elapsed() >= LOGIN_WINDOW {
            *entry = (0, Instant::now());
        }
        if entry.0 >= LOGIN_FAILURES {
            return Err((LOGIN_WINDOW.saturating_sub(entry.1.elapsed())).as_secs() + 1);
        }
        entry.0 += 1;
        Ok(())
    }

    /// Forgets `client`'s attempts (it signed in).
    pub fn succeeded(&self, client: IpAddr) {
        self.attempts.lock().unwrap_or_else(|e| e.into_inner()).remove(&crate::client_key(client));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_without_its_csrf_token_is_no_credential() {
        let token = new_token();
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, format!("theme=dark; {COOKIE}={token}").parse().unwrap());
        assert_eq!(credential(&headers), None);
        headers.insert(CSRF_HEADER, HeaderValue::from_static("guess"));
        assert_eq!(credential(&headers), Some(Err(())));
        headers.insert(CSRF_HEADER, csrf_of(&token).parse().unwrap());
        assert_eq!(credential(&headers), Some(Ok(token.as_str())));
    }

    #[test]
    fn ten_attempts_close_the_door_for_the_window() {
        let limit = LoginLimit::default();
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        for _ in 0..LOGIN_FAILURES {
            assert!(limit.attempt(client).is_ok());
        }
        assert!(limit.attempt(client).is_err());
        assert!(limit.attempt("192.0.2.2".parse().unwrap()).is_ok());
        limit.succeeded(client);
        assert!(limit.attempt(client).is_ok());
    }
}
