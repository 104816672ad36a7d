//! What another front door — PocketBase's API at `/api/` — asks of the accounts, answered as
//! data: the same sign-up and password sign-in as `/auth/v1`'s (their limits, hooks and
//! checks), given as GoTrue's status and JSON for the door to reshape; a new access token for
//! a live session; an account as GoTrue shows it.

use std::net::IpAddr;

use http::StatusCode;
use serde_json::{json, Value};

use super::gotrue::{to_json, UserJson};
use super::{unix_now, Accounts, TOKEN_LIFETIME};

/// A request of another door's.
pub enum Asked<'a> {
    /// A sign-in with an address and a password.
    SignIn {
        /// The address.
        email: &'a str,
        /// The password.
        password: &'a str,
    },
    /// A new account, with its user metadata (`data`).
    SignUp {
        /// The address.
        email: &'a str,
        /// The password.
        password: &'a str,
        /// Its `user_metadata`.
        data: Value,
    },
}

impl Accounts {
    /// `asked`, from `client`, as `/auth/v1` answers it: GoTrue's status and JSON (a session,
    /// a user, or an error's `error_code` and `msg`).
    pub async fn ask(&self, asked: Asked<'_>, client: IpAddr) -> (StatusCode, Value) {
        let answer = match asked {
            Asked::SignIn { email, password } => {
                let body = json!({ "email": email, "password": password }).to_string();
                self.login(body.as_bytes(), client).await
            }
            Asked::SignUp { email, password, data } => {
                let body = json!({ "email": email, "password": password, "data": data }).to_string();
                self.signup(body.as_bytes(), client, None).await
            }
        };
        let answer = answer.unwrap_or_else(|refused| refused);
        let body = answer.body.and_then(|b| serde_json::from_str(&b).ok()).unwrap_or(Value::Null);
        (answer.status, body)
    }

    /// A new access token with the verified `claims` of one the caller holds, while its session
    /// lives (not signed out, not expired) and its account is there and not banned; with the
    /// account as GoTrue shows it.
    pub async fn reissue(&self, claims: &Value) -> Option<(String, Value)> {
        let user_id = claims.get("sub")?.as_str()?;
        let session = claims.get("session_id")?.as_str()?;
        let user = self.store.user(user_id.to_owned()).await.ok()??;
        if user.is_banned {
            return None;
        }
        let live = self.store.sessions(user_id.to_owned()).await.ok()?;
        if !live.iter().any(|s| s.id == session) {
            return None;
        }
        let now = unix_now();
        let mut claims = claims.clone();
        claims["iat"] = json!(now);
        claims["exp"] = json!(now + TOKEN_LIFETIME.as_secs() as i64);
        let token = self.keys.sign(&claims).ok()?;
        Some((token, serde_json::from_str(&to_json(&UserJson::of(&user))).ok()?))
    }

    /// The account `id` as GoTrue shows it, if there is one.
    pub async fn account(&self, id: &str) -> Option<Value> {
        let user = self.store.user(id.to_owned()).await.ok()??;
        serde_json::from_str(&to_json(&UserJson::of(&user))).ok()
    }
}
