//! What the accounts need of the database they live in: one trait, implemented by each backend
//! (`backend::postgres::accounts`: schema `rowgate`'s tables behind SECURITY DEFINER
//! functions; `backend::sqlite::accounts`: tables in the SQLite file). Each operation is one
//! transaction.

use futures_util::future::BoxFuture;
use sha2::Digest;

use super::REFRESH_LIFETIME;
use crate::error::Error;

/// A user account.
#[derive(Debug, Clone)]
pub struct User {
    /// A UUID.
    pub id: String,
    /// The address, as signed up with.
    pub email: String,
    /// When the account was created, as the database writes a timestamp.
    pub created_at: String,
}

/// The accounts' storage.
pub trait AccountStore: Send + Sync {
    /// A new account with its first session (refresh token), or `None` if the address is taken.
    fn create(
        &self,
        id: String,
        email: String,
        password_hash: String,
        now: i64,
    ) -> BoxFuture<'_, Result<Option<(User, String)>, Error>>;

    /// The account of an address (any case) and its password hash.
    fn by_email(&self, email: String) -> BoxFuture<'_, Result<Option<(User, String)>, Error>>;

    /// An account by id.
    fn user(&self, id: String) -> BoxFuture<'_, Result<Option<User>, Error>>;

    /// A new session of `user_id`: its refresh token.
    fn new_session(&self, user_id: String, now: i64) -> BoxFuture<'_, Result<String, Error>>;

    /// Rotation in one transaction: `token` is used up and a successor stored, whose secret is
    /// `successor` (derived from `token`, so the same every time). One used within the last
    /// `reuse` seconds (a retry whose answer was lost, another tab) gets the same successor
    /// again; one used before that revokes all of its user's (it may have been stolen).
    /// `None`: refused.
    fn rotate(
        &self,
        token: String,
        successor: String,
        now: i64,
        reuse: i64,
    ) -> BoxFuture<'_, Result<Option<(User, String)>, Error>>;

    /// Revokes every refresh token of `user_id`.
    fn logout(&self, user_id: String) -> BoxFuture<'_, Result<(), Error>>;
}

/// A new refresh token's secret: 32 random bytes, base64url.
pub fn random_token() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(crate::random_bytes::<32>())
}

/// How a token is stored: its SHA-256, in hex.
pub fn token_hash(token: &str) -> String {
    crate::hex(&sha2::Sha256::digest(token.as_bytes()))
}

/// When a refresh token issued at `now` expires.
pub fn expires(now: i64) -> i64 {
    now + REFRESH_LIFETIME.as_secs() as i64
}
