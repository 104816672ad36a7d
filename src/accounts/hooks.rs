//! Supabase Auth's hooks: the custom access token hook, which decides a token's claims, and the
//! before-user-created hook, which may refuse an account before it is made. Each is a
//! PostgreSQL function taking GoTrue's event and answering as GoTrue's hooks do, or on SQLite a
//! SELECT (`AccountStore::run_hook`).

use std::net::IpAddr;

use http::StatusCode;
use serde_json::Value;

use super::gotrue::{self, fail, internal, Answer};
use super::store::{Hook, NewUser};
use super::{Accounts, User};

impl Accounts {
    /// Runs `hook` of `kind` on `event`: its answer, or the refusal it says (`{"error":
    /// {"http_code", "message"}}`, that status and message), or 500 if it could not run.
    async fn run_hook(&self, kind: Hook, hook: &str, event: Value) -> Result<Value, Answer> {
        let name = match kind {
            Hook::CustomAccessToken => "custom access token",
            Hook::BeforeUserCreated => "before-user-created",
        };
        let output = self.store.run_hook(kind, hook.to_owned(), event.to_string()).await.map_err(|e| {
            tracing::error!(error = %e, "the {name} hook failed");
            fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unexpected_failure",
                &format!("Error running the {name} hook"),
            )
        })?;
        let output: Value = serde_json::from_str(&output).unwrap_or(Value::Null);
        if let Some(error) = output.get("error") {
            let status = error
                .get("http_code")
                .and_then(Value::as_u64)
                .and_then(|c| StatusCode::from_u16(c as u16).ok())
                .filter(|s| s.is_client_error() || s.is_server_error())
                .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let message = error.get("message").and_then(Value::as_str).unwrap_or("Refused by a hook");
            return Err(fail(status, "unexpected_failure", message));
        }
        Ok(output)
    }

    /// The claims the custom access token hook makes of `claims` (GoTrue's event: `user_id`,
    /// `claims`, `authentication_method`; its answer: `{"claims"}`). What says who and which
    /// session the token is for stays rowgate's.
    pub(super) async fn hooked_claims(
        &self,
        hook: &str,
        user: &User,
        claims: &gotrue::Claims<'_>,
    ) -> Result<Value, Answer> {
        let ours = serde_json::to_value(claims).map_err(|_| internal())?;
        let event = serde_json::json!({
            "user_id": user.id,
            "claims": ours,
            "authentication_method": claims.amr.first().map_or("password", |a| a.method),
        });
        let output = self.run_hook(Hook::CustomAccessToken, hook, event).await?;
        let Some(Value::Object(mut hooked)) = output.get("claims").cloned() else {
            tracing::error!(output = %output, "the custom access token hook answered no claims object");
            return Err(fail(
                StatusCode::INTERNAL_SERVER_ERROR,
                "unexpected_failure",
                "The custom access token hook answered no claims",
            ));
        };
        for key in ["sub", "exp", "iat", "session_id", "aal", "amr", "is_anonymous"] {
            if let Some(v) = ours.get(key) {
                hooked.insert(key.into(), v.clone());
            }
        }
        Ok(Value::Object(hooked))
    }

    /// The before-user-created hook's say on `new`, a sign-up from `client` (GoTrue's event:
    /// `metadata` and the `user` about to be made): refused, or let through.
    pub(super) async fn before_user_created(&self, new: &NewUser, client: IpAddr) -> Result<(), Answer> {
        let Some(hook) = &self.before_user_created_hook else { return Ok(()) };
        let now = crate::storage::time::iso(std::time::SystemTime::now());
        let metadata =
            |text: &str| serde_json::from_str::<Value>(text).unwrap_or_else(|_| serde_json::json!({}));
        let event = serde_json::json!({
            "metadata": {"uuid": crate::uuid_v4(), "time": now, "name": "before-user-created", "ip_address": client.to_string()},
            "user": {
                "id": new.id, "aud": "authenticated", "role": new.role,
                "email": new.email.as_deref().unwrap_or(""), "phone": new.phone.as_deref().unwrap_or(""),
                "app_metadata": metadata(&new.app_metadata), "user_metadata": metadata(&new.user_metadata),
                "identities": [], "created_at": now, "updated_at": now, "is_anonymous": new.is_anonymous,
            },
        });
        self.run_hook(Hook::BeforeUserCreated, hook, event).await.map(drop)
    }
}
