//! What Supabase Auth as an OAuth 2.1 server keeps, behind the seam each backend implements:
//! the applications registered with it (GoTrue's `auth.oauth_clients` on PostgreSQL).

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

    /// Keeps what `client` says of the client with its id (all but its id, registration and
    /// creation); the client as kept, or `None` if there is none or it was deleted.
    fn save_oauth_client(&self, client: OAuthClient) -> BoxFuture<'_, Result<Option<OAuthClient>, Error>>;

    /// Deletes the client `id` as GoTrue does (the row stays, marked deleted); whether there was
    /// one.
    fn delete_oauth_client(&self, id: String) -> BoxFuture<'_, Result<bool, Error>>;
}
