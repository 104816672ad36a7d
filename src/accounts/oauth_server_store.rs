//! What Supabase Auth as an OAuth 2.1 server keeps, behind the seam each backend implements:
//! the applications registered with it (GoTrue's `auth.oauth_clients` on PostgreSQL), the
//! authorizations they ask users for (`auth.oauth_authorizations`), what users consented to
//! (`auth.oauth_consents`), and the sessions an application holds (`auth.sessions` with its
//! `oauth_client_id` and `scopes`).

use futures_util::future::BoxFuture;

use crate::error::Error;

/// An application registered with the server. Its id is its `client_id`; its secret is kept
/// only as a hash (`None` for a public client, which has none).
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthClient {
    pub id: String,
    /// `manual` (by an administrator) or `dynamic` (RFC 7591 registration).
    pub registration_type: String,
    /// `public` or `confidential`.
    pub client_type: String,
    /// `none`, `client_secret_basic` or `client_secret_post`.
    pub token_endpoint_auth_method: String,
    pub secret_hash: Option<String>,
    pub redirect_uris: Vec<String>,
    pub grant_types: Vec<String>,
    pub client_name: Option<String>,
    pub client_uri: Option<String>,
    pub logo_uri: Option<String>,
    /// RFC 3339, set by the store.
    pub created_at: String,
    pub updated_at: String,
}

/// What an application asked a user for at `/oauth/authorize`, and how far it got.
#[derive(Debug, Clone, PartialEq)]
pub struct Authorization {
    /// The handle the consent page is given (`authorization_id`).
    pub id: String,
    pub client_id: String,
    /// The user, once one has looked at it.
    pub user_id: Option<String>,
    pub redirect_uri: String,
    /// Space-separated.
    pub scope: String,
    pub state: Option<String>,
    pub resource: Option<String>,
    pub code_challenge: String,
    /// `s256` or `plain`.
    pub code_challenge_method: String,
    pub nonce: Option<String>,
    /// `pending`, `approved` or `denied`.
    pub status: String,
    /// Seconds since the epoch.
    pub expires_at: i64,
}

/// A user's standing consent to an application, and when it was given (RFC 3339).
#[derive(Debug, Clone)]
pub struct Grant {
    pub client: OAuthClient,
    pub scopes: Vec<String>,
    pub granted_at: String,
}

/// Where the OAuth server's records are kept.
pub trait OAuthServerStore: Send + Sync {
    /// Registers `client` (its times are the store's); the client as kept.
    fn add_oauth_client(&self, client: OAuthClient) -> BoxFuture<'_, Result<OAuthClient, Error>>;

    /// The client `id`, unless there is none or it was deleted.
    fn oauth_client(&self, id: String) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>>;

    /// A page of the clients not deleted, newest first (`limit` from `offset`), and how many
    /// there are.
    fn oauth_clients(&self, offset: u64, limit: u64)
        -> BoxFuture<'_, Result<(Vec<OAuthClient>, u64), Error>>;

    /// Keeps what `client` says of the client with its id (all but its id, registration,
    /// creation and secret); the client as kept, or `None` if there is none or it was deleted.
    fn save_oauth_client(&self, client: OAuthClient) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>>;

    /// Gives the client `id` a new secret, kept as `secret_hash`; `None` if there is no such
    /// client.
    fn set_oauth_client_secret(
        &self,
        id: String,
        secret_hash: String,
    ) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>>;

    /// Deletes the client `id` as GoTrue does (the row stays, marked deleted); whether there was
    /// one.
    fn delete_oauth_client(&self, id: String) -> BoxFuture<'_, Result<bool, Error>>;

    /// Keeps a new authorization request (pending, no user yet); expired ones go.
    fn begin_authorization(&self, authorization: Authorization) -> BoxFuture<'_, Result<(), Error>>;

    /// The authorization `id`, whatever its state.
    fn authorization(&self, id: String) -> BoxFuture<'_, Result<Option<Authorization>, Error>>;

    /// The pending, unexpired authorization `id` for `user_id`: given to that user if no one had
    /// looked at it; `None` if it is not pending, expired, or another user's.
    fn claim_authorization(
        &self,
        id: String,
        user_id: String,
    ) -> BoxFuture<'_, Result<Option<Authorization>, Error>>;

    /// Decides the pending, unexpired authorization `id` of `user_id`: approved with the code
    /// whose hash is `code_hash` (and the user's consent to its scopes kept), or denied
    /// (`None`). `None` if there was no such authorization to decide.
    fn decide_authorization(
        &self,
        id: String,
        user_id: String,
        code_hash: Option<String>,
    ) -> BoxFuture<'_, Result<Option<Authorization>, Error>>;

    /// Takes (uses up) the approved authorization of `client_id` whose code has the hash
    /// `code_hash` (another client's attempt uses nothing up).
    fn take_authorization_code(
        &self,
        code_hash: String,
        client_id: String,
    ) -> BoxFuture<'_, Result<Option<Authorization>, Error>>;

    /// The scopes `user_id` has consented to for `client_id`, unless revoked.
    fn consent(
        &self,
        user_id: String,
        client_id: String,
    ) -> BoxFuture<'_, Result<Option<Vec<String>>, Error>>;

    /// The user's standing consents, newest first, of clients not deleted.
    fn grants(&self, user_id: String) -> BoxFuture<'_, Result<Vec<Grant>, Error>>;

    /// Revokes the user's consent to `client_id` and ends the sessions that client holds for
    /// them; whether there was a consent.
    fn revoke_grant(&self, user_id: String, client_id: String) -> BoxFuture<'_, Result<bool, Error>>;

    /// A new session of `user_id` held by the application `client_id`, with the `scopes` its
    /// user granted (space-separated), signed in now by `method`; `None` if the account is gone.
    fn sign_in_client(
        &self,
        user_id: String,
        method: String,
        client_id: String,
        scopes: String,
        now: i64,
    ) -> BoxFuture<'_, Result<Option<(super::User, super::store::Started)>, Error>>;
}
