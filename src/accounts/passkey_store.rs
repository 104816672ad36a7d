//! What the passkeys keep, behind the seam each backend implements: the credentials users sign
//! in with (Supabase's `auth.webauthn_credentials` on PostgreSQL) and the ceremonies begun
//! (`auth.webauthn_challenges`), each used once.

use futures_util::future::BoxFuture;

use crate::error::Error;

/// A user's passkey: its id (a UUID), name, times (RFC 3339) and the credential as
/// `accounts/webauthn.rs` keeps it (JSON text).
#[derive(Debug, Clone)]
pub struct Passkey {
    pub id: String,
    pub user_id: String,
    pub friendly_name: String,
    pub created_at: String,
    pub last_used_at: Option<String>,
    pub credential: String,
}

/// A passkey to add: its id, the credential's id (base64url: what an assertion names) and the
/// credential.
#[derive(Debug, Clone)]
pub struct NewPasskey {
    pub id: String,
    pub credential_id: String,
    pub credential: String,
    pub friendly_name: String,
}

/// How adding a passkey ended.
#[derive(Debug, Clone)]
pub enum PasskeyAdded {
    Done(Passkey),
    /// The user has as many as one may.
    TooMany,
    /// That credential is registered already.
    Exists,
}

/// What a ceremony is for: a passkey's registration by a signed-in user, or a sign-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ceremony {
    Registration,
    Authentication,
}

impl Ceremony {
    /// GoTrue's `challenge_type`.
    pub fn name(self) -> &'static str {
        match self {
            Ceremony::Registration => "registration",
            Ceremony::Authentication => "authentication",
        }
    }
}

/// Where passkeys and their ceremonies are kept.
pub trait PasskeyStore: Send + Sync {
    /// Keeps what the ceremony `id` (of `user_id`, for a registration) must remember, until
    /// `expires_at` (seconds since the epoch); expired ones go.
    fn begin_ceremony(
        &self,
        id: String,
        kind: Ceremony,
        user_id: Option<String>,
        state: String,
        expires_at: i64,
    ) -> BoxFuture<'_, Result<(), Error>>;

    /// Takes (uses up) the ceremony `id` of that kind and user: what it kept, and when it
    /// expires. `None` if there is none, or it was taken.
    fn take_ceremony(
        &self,
        id: String,
        kind: Ceremony,
        user_id: Option<String>,
    ) -> BoxFuture<'_, Result<Option<(String, i64)>, Error>>;

    /// The user's passkeys, oldest first.
    fn passkeys(&self, user_id: String) -> BoxFuture<'_, Result<Vec<Passkey>, Error>>;

    /// Adds a passkey, unless the user has `max` already or the credential is registered.
    fn add_passkey(
        &self,
        user_id: String,
        passkey: NewPasskey,
        max: i64,
    ) -> BoxFuture<'_, Result<PasskeyAdded, Error>>;

    /// The passkey whose credential has the id `credential_id` (base64url).
    fn passkey_by_credential(&self, credential_id: String) -> BoxFuture<'_, Result<Option<Passkey>, Error>>;

    /// Records a sign-in with the passkey `id`: its credential's new state, and when.
    fn passkey_used(&self, id: String, credential: String) -> BoxFuture<'_, Result<(), Error>>;

    /// Renames the user's passkey `id`; `None` if the user has no such passkey.
    fn rename_passkey(
        &self,
        user_id: String,
        id: String,
        friendly_name: String,
    ) -> BoxFuture<'_, Result<Option<Passkey>, Error>>;

    /// Deletes the user's passkey `id`; whether there was one.
    fn delete_passkey(&self, user_id: String, id: String) -> BoxFuture<'_, Result<bool, Error>>;
}
