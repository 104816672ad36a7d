//! The options of `rowgate serve` as they arrive: CLI flags, `ROWGATE_*` variables and TOML
//! keys, all optional; [`Config::load`](super::Config::load) merges and checks them.

use std::path::PathBuf;

use clap::Args;
use serde::Deserialize;

use super::{ErrorVerbosity, LogLevel, OpenApiMode, OpenApiVersion, TxEnd};

/// Options of `rowgate serve`, each a CLI flag with an environment variable and, with the
/// same kebab-case name, a key of the TOML file (unknown keys are an error). Every field is
/// optional here; defaults are applied in [`Config::load`].
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServeArgs {
    /// TOML config file; CLI flags and ROWGATE_* variables override its keys.
    #[arg(long, env = "ROWGATE_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// PostgreSQL connection URI of the authenticator role (PostgREST `db-uri`), or
    /// `sqlite:PATH` [default: sqlite:rowgate.db].
    #[arg(long = "db-uri", env = "ROWGATE_DB_URI", value_name = "URI")]
    pub db_uri: Option<String>,
    /// Access rules for an SQLite database (TOML; see docs/sqlite.md); without it no caller
    /// may read any table.
    #[arg(long = "db-rules", env = "ROWGATE_DB_RULES", value_name = "FILE")]
    pub db_rules: Option<PathBuf>,
    /// SQLite commit durability: `full` (each commit on disk before it is acknowledged) or
    /// `normal` (WAL's usual: an OS crash or power loss may undo the last commits; PocketBase's
    /// setting) [default: full].
    #[arg(long = "db-sqlite-synchronous", env = "ROWGATE_DB_SQLITE_SYNCHRONOUS", value_name = "MODE")]
    pub db_sqlite_synchronous: Option<String>,
    /// Built-in user accounts at /auth/v1 (Supabase Auth's endpoints; needs an HMAC jwt-secret;
    /// on PostgreSQL, `rowgate accounts install` first) [default: false].
    #[arg(long = "accounts-enabled", env = "ROWGATE_ACCOUNTS_ENABLED", value_name = "BOOL")]
    pub accounts_enabled: Option<bool>,
    /// Seconds during which a refresh token just used may be used again (a retry, another tab)
    /// and gets the same successor again, as GoTrue's reuse interval; after that, reuse revokes all
    /// of the user's refresh tokens [default: 10].
    #[arg(
        long = "accounts-refresh-reuse-interval",
        env = "ROWGATE_ACCOUNTS_REFRESH_REUSE_INTERVAL",
        value_name = "SECONDS"
    )]
    pub accounts_refresh_reuse_interval: Option<u64>,
    /// Whether anyone may sign up at /auth/v1/signup (false: accounts are made by other means,
    /// and a sign-up answers GoTrue's 422 `signup_disabled`) [default: true].
    #[arg(long = "accounts-signup-enabled", env = "ROWGATE_ACCOUNTS_SIGNUP_ENABLED", value_name = "BOOL")]
    pub accounts_signup_enabled: Option<bool>,
    /// Whether a sign-up with neither an address nor a phone makes an anonymous user (GoTrue's
    /// `signInAnonymously`; false: 422 `anonymous_provider_disabled`) [default: false].
    #[arg(
        long = "accounts-anonymous-enabled",
        env = "ROWGATE_ACCOUNTS_ANONYMOUS_ENABLED",
        value_name = "BOOL"
    )]
    pub accounts_anonymous_enabled: Option<bool>,
    /// Keys the accounts sign access tokens with instead of `jwt-secret`: comma-separated P-256
    /// (ES256) or RSA (RS256) private keys in PEM, or JWK sets (the Supabase CLI's
    /// signing_keys.json), each inline or `@FILE`; the first signs, all are published at
    /// /auth/v1/.well-known/jwks.json and trusted [default: none].
    #[arg(long = "accounts-signing-keys", env = "ROWGATE_ACCOUNTS_SIGNING_KEYS", value_name = "KEYS")]
    pub accounts_signing_keys: Option<String>,
    /// Providers users may sign in with, one per line or `;`-separated: `NAME [issuer=URL |
    /// authorize-url=URL token-url=URL userinfo-url=URL] client-id=ID secret=SECRET [scopes=a,b]
    /// [audiences=a,b] [response-mode=form_post]`, the secret inline or `@FILE` (neither issuer
    /// nor endpoints needed for google, apple, gitlab, linkedin_oidc, slack_oidc, github,
    /// discord); register `accounts-external-url` + `/auth/v1/callback` with the provider
    /// [default: none].
    #[arg(long = "accounts-providers", env = "ROWGATE_ACCOUNTS_PROVIDERS", value_name = "PROVIDERS")]
    pub accounts_providers: Option<String>,
    /// Whether signed-in users may add identities at providers to their accounts and remove them
    /// (`/user/identities`, supabase-js's `linkIdentity`), GoTrue's manual linking [default: false].
    #[arg(long = "accounts-manual-linking", env = "ROWGATE_ACCOUNTS_MANUAL_LINKING", value_name = "BOOL")]
    pub accounts_manual_linking: Option<bool>,
    /// Whether users may register passkeys and sign in with them (`/passkeys`, GoTrue's
    /// experimental passkeys) [default: false].
    #[arg(
        long = "accounts-passkeys-enabled",
        env = "ROWGATE_ACCOUNTS_PASSKEYS_ENABLED",
        value_name = "BOOL"
    )]
    pub accounts_passkeys_enabled: Option<bool>,
    /// Whether rowgate is an OAuth 2.1 server to other applications, as Supabase Auth's OAuth
    /// server: clients registered at `/admin/oauth/clients` [default: false].
    #[arg(
        long = "accounts-oauth-server-enabled",
        env = "ROWGATE_ACCOUNTS_OAUTH_SERVER_ENABLED",
        value_name = "BOOL"
    )]
    pub accounts_oauth_server_enabled: Option<bool>,
    /// The page of the site (a path on `accounts-site-url`) where users consent to an
    /// application's request: `/oauth/authorize` sends the browser there with
    /// `?authorization_id=` [default: none; an authorization then fails with `server_error`].
    #[arg(
        long = "accounts-oauth-server-authorization-path",
        env = "ROWGATE_ACCOUNTS_OAUTH_SERVER_AUTHORIZATION_PATH",
        value_name = "PATH"
    )]
    pub accounts_oauth_server_authorization_path: Option<String>,
    /// Whether anyone may register an OAuth client (RFC 7591, `/oauth/clients/register`)
    /// [default: false].
    #[arg(
        long = "accounts-oauth-server-dynamic-registration",
        env = "ROWGATE_ACCOUNTS_OAUTH_SERVER_DYNAMIC_REGISTRATION",
        value_name = "BOOL"
    )]
    pub accounts_oauth_server_dynamic_registration: Option<bool>,
    /// The domain WebAuthn second factors and passkeys are bound to (the relying party's id)
    /// [default: the host of `accounts-site-url`].
    #[arg(long = "accounts-webauthn-rp-id", env = "ROWGATE_ACCOUNTS_WEBAUTHN_RP_ID", value_name = "DOMAIN")]
    pub accounts_webauthn_rp_id: Option<String>,
    /// The origins whose pages may use WebAuthn second factors and passkeys, comma-separated
    /// (`https://app.example.com`) [default: the origin of `accounts-site-url`].
    #[arg(
        long = "accounts-webauthn-rp-origins",
        env = "ROWGATE_ACCOUNTS_WEBAUTHN_RP_ORIGINS",
        value_name = "URLS"
    )]
    pub accounts_webauthn_rp_origins: Option<String>,
    /// Supabase's custom access token hook: on PostgreSQL a function `schema.function(event jsonb)
    /// returns jsonb` (or GoTrue's `pg-functions://postgres/schema/function`) that returns the
    /// token's claims; on SQLite a SELECT of one JSON object of claims to add, with parameters
    /// `:user_id` and `:claims` [default: none].
    #[arg(
        long = "accounts-hook-custom-access-token",
        env = "ROWGATE_ACCOUNTS_HOOK_CUSTOM_ACCESS_TOKEN",
        value_name = "HOOK"
    )]
    pub accounts_hook_custom_access_token: Option<String>,
    /// Supabase's before-user-created hook, which may refuse a sign-up: on PostgreSQL a function
    /// `schema.function(event jsonb) returns jsonb` answering `{}` or `{"error": {"http_code",
    /// "message"}}`; on SQLite a SELECT of a refusal's message (NULL: let through), with
    /// parameters `:email` and `:user_metadata` [default: none].
    #[arg(
        long = "accounts-hook-before-user-created",
        env = "ROWGATE_ACCOUNTS_HOOK_BEFORE_USER_CREATED",
        value_name = "HOOK"
    )]
    pub accounts_hook_before_user_created: Option<String>,
    /// Whether sign-ups and new addresses are taken without a confirmation by mail (GoTrue's
    /// autoconfirm) [default: true without `smtp-host`, false with it].
    #[arg(long = "accounts-autoconfirm", env = "ROWGATE_ACCOUNTS_AUTOCONFIRM", value_name = "BOOL")]
    pub accounts_autoconfirm: Option<bool>,
    /// The application's URL: where links in mail lead after verifying, when the request names
    /// no allowed `redirect_to` (GoTrue's SITE_URL) [default: http://localhost:3000].
    #[arg(long = "accounts-site-url", env = "ROWGATE_ACCOUNTS_SITE_URL", value_name = "URL")]
    pub accounts_site_url: Option<String>,
    /// The URL clients reach rowgate at, which links in mail point to (`<URL>/auth/v1/verify`;
    /// GoTrue's API_EXTERNAL_URL) [default: http://localhost:<server-port>].
    #[arg(long = "accounts-external-url", env = "ROWGATE_ACCOUNTS_EXTERNAL_URL", value_name = "URL")]
    pub accounts_external_url: Option<String>,
    /// Where else `redirect_to` may lead, comma-separated URLs or globs (`*` within a name or
    /// path segment, `**` across them; GoTrue's URI_ALLOW_LIST) [default: none].
    #[arg(long = "accounts-redirect-urls", env = "ROWGATE_ACCOUNTS_REDIRECT_URLS", value_name = "URLS")]
    pub accounts_redirect_urls: Option<String>,
    /// A directory of mail templates replacing the built-in ones: `confirmation.html`,
    /// `recovery.html`, `magic_link.html`, `email_change.html`, `invite.html`, each with
    /// GoTrue's variables (`{{ .ConfirmationURL }}`, `{{ .Token }}`, ...) [default: none].
    #[arg(long = "accounts-mail-templates", env = "ROWGATE_ACCOUNTS_MAIL_TEMPLATES", value_name = "DIR")]
    pub accounts_mail_templates: Option<PathBuf>,
    /// Seconds before another mail of the same kind goes to the same user (GoTrue's
    /// SMTP_MAX_FREQUENCY) [default: 60].
    #[arg(long = "accounts-mail-interval", env = "ROWGATE_ACCOUNTS_MAIL_INTERVAL", value_name = "SECONDS")]
    pub accounts_mail_interval: Option<u64>,
    /// How many mails the server sends, `COUNT/PERIOD`, or `off` (GoTrue's RATE_LIMIT_EMAIL_SENT)
    /// [default: 30/h].
    #[arg(long = "accounts-mail-rate-limit", env = "ROWGATE_ACCOUNTS_MAIL_RATE_LIMIT", value_name = "RATE")]
    pub accounts_mail_rate_limit: Option<String>,
    /// Whether an email change also needs the current address's confirmation, besides the new
    /// one's (GoTrue's MAILER_SECURE_EMAIL_CHANGE_ENABLED) [default: true].
    #[arg(
        long = "accounts-secure-email-change",
        env = "ROWGATE_ACCOUNTS_SECURE_EMAIL_CHANGE",
        value_name = "BOOL"
    )]
    pub accounts_secure_email_change: Option<bool>,
    /// Whether changing one's password takes a code mailed by `GET /auth/v1/reauthenticate`, as
    /// the `nonce` of `PUT /auth/v1/user` (GoTrue's SECURITY_UPDATE_PASSWORD_REQUIRE_REAUTHENTICATION)
    /// [default: false].
    #[arg(
        long = "accounts-secure-password-change",
        env = "ROWGATE_ACCOUNTS_SECURE_PASSWORD_CHANGE",
        value_name = "BOOL"
    )]
    pub accounts_secure_password_change: Option<bool>,
    /// Seconds a link or code sent by mail stays valid (GoTrue's MAILER_OTP_EXP) [default: 86400].
    #[arg(long = "accounts-otp-expiry", env = "ROWGATE_ACCOUNTS_OTP_EXPIRY", value_name = "SECONDS")]
    pub accounts_otp_expiry: Option<u64>,
    /// The URL of the Send SMS hook that texts codes to phones (Supabase's HOOK_SEND_SMS_URI):
    /// signed as Standard Webhooks sign, with `accounts-sms-hook-secret` [default: none].
    #[arg(long = "accounts-sms-hook", env = "ROWGATE_ACCOUNTS_SMS_HOOK", value_name = "URL")]
    pub accounts_sms_hook: Option<String>,
    /// The hook's secrets, `v1,whsec_<base64>`, `|`-separated (HOOK_SEND_SMS_SECRETS).
    #[arg(
        long = "accounts-sms-hook-secret",
        env = "ROWGATE_ACCOUNTS_SMS_HOOK_SECRET",
        value_name = "SECRET"
    )]
    pub accounts_sms_hook_secret: Option<String>,
    /// Test numbers and their fixed codes, never texted: `PHONE=CODE,...` (SMS_TEST_OTP)
    /// [default: none].
    #[arg(long = "accounts-sms-test-otp", env = "ROWGATE_ACCOUNTS_SMS_TEST_OTP", value_name = "LIST")]
    pub accounts_sms_test_otp: Option<String>,
    /// Whether phone numbers are taken without a code (SMS_AUTOCONFIRM) [default: false].
    #[arg(long = "accounts-sms-autoconfirm", env = "ROWGATE_ACCOUNTS_SMS_AUTOCONFIRM", value_name = "BOOL")]
    pub accounts_sms_autoconfirm: Option<bool>,
    /// Seconds before another code goes to the same number (SMS_MAX_FREQUENCY) [default: 60].
    #[arg(long = "accounts-sms-interval", env = "ROWGATE_ACCOUNTS_SMS_INTERVAL", value_name = "SECONDS")]
    pub accounts_sms_interval: Option<u64>,
    /// How many texts the server sends, `COUNT/PERIOD`, or `off` (RATE_LIMIT_SMS_SENT)
    /// [default: 30/h].
    #[arg(long = "accounts-sms-rate-limit", env = "ROWGATE_ACCOUNTS_SMS_RATE_LIMIT", value_name = "RATE")]
    pub accounts_sms_rate_limit: Option<String>,
    /// Seconds a code texted stays valid (SMS_OTP_EXP) [default: 60].
    #[arg(long = "accounts-sms-otp-expiry", env = "ROWGATE_ACCOUNTS_SMS_OTP_EXPIRY", value_name = "SECONDS")]
    pub accounts_sms_otp_expiry: Option<u64>,
    /// The SMTP server mail is sent through; unset, no mail is sent [default: none].
    #[arg(long = "smtp-host", env = "ROWGATE_SMTP_HOST", value_name = "HOST")]
    pub smtp_host: Option<String>,
    /// Its port [default: 587, or 465 with `smtp-tls = tls`].
    #[arg(long = "smtp-port", env = "ROWGATE_SMTP_PORT", value_name = "PORT")]
    pub smtp_port: Option<u16>,
    /// `starttls` (required), `tls` (from the first byte) or `off` (for a server on this
    /// machine only) [default: starttls].
    #[arg(long = "smtp-tls", env = "ROWGATE_SMTP_TLS", value_name = "MODE")]
    pub smtp_tls: Option<String>,
    /// The user name to log in to the SMTP server with [default: none].
    #[arg(long = "smtp-user", env = "ROWGATE_SMTP_USER", value_name = "NAME")]
    pub smtp_user: Option<String>,
    /// Its password (`@FILE` reads it from a file) [default: none].
    #[arg(long = "smtp-pass", env = "ROWGATE_SMTP_PASS", value_name = "PASSWORD")]
    pub smtp_pass: Option<String>,
    /// The sender's address (GoTrue's SMTP_ADMIN_EMAIL) [default: none; required with smtp-host].
    #[arg(long = "smtp-sender", env = "ROWGATE_SMTP_SENDER", value_name = "ADDRESS")]
    pub smtp_sender: Option<String>,
    /// The sender's name [default: none].
    #[arg(long = "smtp-sender-name", env = "ROWGATE_SMTP_SENDER_NAME", value_name = "NAME")]
    pub smtp_sender_name: Option<String>,
    /// How many sign-ups one client may make, `COUNT/PERIOD` as the `rate-limit-*` settings
    /// take, or `off` [default: 30/5min, GoTrue's].
    #[arg(
        long = "accounts-signup-rate-limit",
        env = "ROWGATE_ACCOUNTS_SIGNUP_RATE_LIMIT",
        value_name = "RATE"
    )]
    pub accounts_signup_rate_limit: Option<String>,
    /// Supabase Storage's API at /storage/v1 (needs an HMAC jwt-secret; on PostgreSQL,
    /// `rowgate storage install` first) [default: false].
    #[arg(long = "storage-enabled", env = "ROWGATE_STORAGE_ENABLED", value_name = "BOOL")]
    pub storage_enabled: Option<bool>,
    /// Where stored objects' bytes are kept [default: ./storage].
    #[arg(long = "storage-dir", env = "ROWGATE_STORAGE_DIR", value_name = "DIR")]
    pub storage_dir: Option<PathBuf>,
    /// Keep stored objects' bytes in this S3-compatible bucket (`s3://bucket` or
    /// `s3://bucket/prefix`) rather than in `storage-dir`; credentials as AWS's tools read them
    /// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, …).
    #[arg(long = "storage-s3-url", env = "ROWGATE_STORAGE_S3_URL", value_name = "URL")]
    pub storage_s3_url: Option<String>,
    /// The S3-compatible service's URL, when it is not AWS (MinIO, R2, Ceph, …).
    #[arg(long = "storage-s3-endpoint", env = "ROWGATE_STORAGE_S3_ENDPOINT", value_name = "URL")]
    pub storage_s3_endpoint: Option<String>,
    /// The access key of `storage-s3-url` [default: AWS_ACCESS_KEY_ID, or the instance's role].
    #[arg(long = "storage-s3-access-key-id", env = "ROWGATE_STORAGE_S3_ACCESS_KEY_ID", value_name = "ID")]
    pub storage_s3_access_key_id: Option<String>,
    /// Its secret [default: AWS_SECRET_ACCESS_KEY].
    #[arg(
        long = "storage-s3-secret-access-key",
        env = "ROWGATE_STORAGE_S3_SECRET_ACCESS_KEY",
        value_name = "KEY"
    )]
    pub storage_s3_secret_access_key: Option<String>,
    /// The bucket's region [default: AWS_REGION, or us-east-1].
    #[arg(long = "storage-s3-region", env = "ROWGATE_STORAGE_S3_REGION", value_name = "REGION")]
    pub storage_s3_region: Option<String>,
    /// The largest object any bucket takes, in bytes [default: 52428800].
    #[arg(long = "storage-file-size-limit", env = "ROWGATE_STORAGE_FILE_SIZE_LIMIT", value_name = "BYTES")]
    pub storage_file_size_limit: Option<u64>,
    /// How many bytes of transformed images are kept for reuse, and as many of decoded sources
    /// [default: 67108864].
    #[arg(
        long = "storage-transform-cache-size",
        env = "ROWGATE_STORAGE_TRANSFORM_CACHE_SIZE",
        value_name = "BYTES"
    )]
    pub storage_transform_cache_size: Option<u64>,
    /// The dashboard at /_/ (its administrators are not the application's users; the first
    /// is made by the setup link printed at start, or `rowgate admin create`) [default: true].
    #[arg(long = "dashboard-enabled", env = "ROWGATE_DASHBOARD_ENABLED", value_name = "BOOL")]
    pub dashboard_enabled: Option<bool>,
    /// PostgreSQL: the connection URI the dashboard's SQL console and table editor, and
    /// PocketBase's collections API, use (a role that may create tables) [default: db-uri].
    #[arg(long = "dashboard-db-uri", env = "ROWGATE_DASHBOARD_DB_URI", value_name = "URI")]
    pub dashboard_db_uri: Option<String>,
    /// Comma-separated addresses or networks the dashboard answers; others get 403
    /// [default: every address].
    #[arg(long = "dashboard-allowed-ips", env = "ROWGATE_DASHBOARD_ALLOWED_IPS", value_name = "LIST")]
    pub dashboard_allowed_ips: Option<String>,
    /// SQLite: where backups are written (`rowgate backup`, `backup-schedule`, the dashboard)
    /// [default: backups, beside the database file].
    #[arg(long = "backup-dir", env = "ROWGATE_BACKUP_DIR", value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
    /// SQLite: when the server takes a backup, as a cron expression in UTC (`0 3 * * *`: daily
    /// at 03:00) [default: never].
    #[arg(long = "backup-schedule", env = "ROWGATE_BACKUP_SCHEDULE", value_name = "CRON")]
    pub backup_schedule: Option<String>,
    /// How many of the newest backups in backup-dir the schedule keeps [default: 7].
    #[arg(long = "backup-keep", env = "ROWGATE_BACKUP_KEEP", value_name = "N")]
    pub backup_keep: Option<usize>,
    /// SQLite: an S3-compatible bucket (`s3://bucket/prefix`) every backup the server takes is
    /// also uploaded to, keeping the newest backup-keep there too (storage-s3-endpoint, -region
    /// and keys apply) [default: none].
    #[arg(long = "backup-s3-url", env = "ROWGATE_BACKUP_S3_URL", value_name = "URL")]
    pub backup_s3_url: Option<String>,
    /// Supabase Realtime's API at /realtime/v1: database changes, broadcast and presence over
    /// WebSockets (on PostgreSQL, `rowgate realtime install` first) [default: false].
    #[arg(long = "realtime-enabled", env = "ROWGATE_REALTIME_ENABLED", value_name = "BOOL")]
    pub realtime_enabled: Option<bool>,
    /// SQLite: comma-separated tables whose changes realtime sends (PostgreSQL: the tables of
    /// the publication `supabase_realtime`) [default: none].
    #[arg(long = "realtime-tables", env = "ROWGATE_REALTIME_TABLES", value_name = "LIST")]
    pub realtime_tables: Option<String>,
    /// Messages queued for one connection; a client that falls this far behind is told and
    /// disconnected [default: 1024].
    #[arg(long = "realtime-max-queue", env = "ROWGATE_REALTIME_MAX_QUEUE", value_name = "N")]
    pub realtime_max_queue: Option<usize>,
    /// Channels one connection may join [default: 100].
    #[arg(long = "realtime-max-channels", env = "ROWGATE_REALTIME_MAX_CHANNELS", value_name = "N")]
    pub realtime_max_channels: Option<usize>,
    /// Messages per second one connection may send, heartbeats aside; past it the channel is
    /// closed [default: 100].
    #[arg(
        long = "realtime-max-events-per-second",
        env = "ROWGATE_REALTIME_MAX_EVENTS_PER_SECOND",
        value_name = "N"
    )]
    pub realtime_max_events_per_second: Option<u32>,
    /// The largest message a client may send, in bytes [default: 1048576].
    #[arg(
        long = "realtime-max-message-size",
        env = "ROWGATE_REALTIME_MAX_MESSAGE_SIZE",
        value_name = "BYTES"
    )]
    pub realtime_max_message_size: Option<usize>,
    /// Serve the files of this directory (PocketBase's `pb_public`) under `static-prefix`.
    #[arg(long = "static-dir", env = "ROWGATE_STATIC_DIR", value_name = "DIR")]
    pub static_dir: Option<PathBuf>,
    /// Where the static files are served [default: /].
    #[arg(long = "static-prefix", env = "ROWGATE_STATIC_PREFIX", value_name = "PATH")]
    pub static_prefix: Option<String>,
    /// Where the API is served [default: /, or /api with static-dir].
    #[arg(long = "api-prefix", env = "ROWGATE_API_PREFIX", value_name = "PATH")]
    pub api_prefix: Option<String>,
    /// Comma-separated schemas to expose; the first is the default [default: public].
    #[arg(long = "db-schemas", env = "ROWGATE_DB_SCHEMAS", value_name = "LIST")]
    pub db_schemas: Option<String>,
    /// Role for requests without credentials; unset means such requests get 401 [default: none
    /// on PostgreSQL; `anon` on SQLite, where the access rules decide (an empty value refuses
    /// visitors there too)].
    #[arg(long = "db-anon-role", env = "ROWGATE_DB_ANON_ROLE", value_name = "ROLE")]
    pub db_anon_role: Option<String>,
    /// Maximum number of pooled connections [default: 10].
    #[arg(long = "db-pool", env = "ROWGATE_DB_POOL", value_name = "N")]
    pub db_pool: Option<u32>,
    /// Seconds to wait for a pooled connection before answering 504 PGRST003 [default: 10].
    #[arg(
        long = "db-pool-acquisition-timeout",
        env = "ROWGATE_DB_POOL_ACQUISITION_TIMEOUT",
        value_name = "SECONDS"
    )]
    pub db_pool_acquisition_timeout: Option<u64>,
    /// Prepare each statement once per connection and reuse it (PostgREST's option). Set it to
    /// false behind a pooler in transaction mode (PgBouncer, Supavisor): statements are then
    /// sent whole each time (unnamed) and every setting is transaction-local [default: true].
    #[arg(long = "db-prepared-statements", env = "ROWGATE_DB_PREPARED_STATEMENTS", value_name = "BOOL")]
    pub db_prepared_statements: Option<bool>,
    /// A connection URI that reaches PostgreSQL directly, not through a pooler in transaction
    /// mode, for what such a pooler cannot carry: LISTEN (schema reloads, API keys, the
    /// response cache's notifications) and the change feed (logical replication)
    /// [default: db-uri].
    #[arg(long = "db-uri-direct", env = "ROWGATE_DB_URI_DIRECT", value_name = "URI")]
    pub db_uri_direct: Option<String>,
    /// A connection URI for the change feed's replication connection (the response cache's
    /// logical decoding, realtime), as a role with REPLICATION: the authenticator needs none
    /// [default: db-uri-direct, or db-uri].
    #[arg(long = "db-uri-replication", env = "ROWGATE_DB_URI_REPLICATION", value_name = "URI")]
    pub db_uri_replication: Option<String>,
    /// Connection URIs of read replicas, comma-separated: GET and HEAD of tables, views and
    /// non-volatile functions go to one that is up and has replayed the client's last write;
    /// writes and everything else to db-uri [default: none].
    #[arg(long = "db-uri-read-replicas", env = "ROWGATE_DB_URI_READ_REPLICAS", value_name = "URIS")]
    pub db_uri_read_replicas: Option<String>,
    /// Milliseconds a read replica may lag behind the primary and still be used [default: 5000].
    #[arg(long = "db-replica-max-lag", env = "ROWGATE_DB_REPLICA_MAX_LAG", value_name = "MS")]
    pub db_replica_max_lag: Option<u64>,
    /// Hard cap on the rows a read returns [default: unlimited].
    #[arg(long = "db-max-rows", env = "ROWGATE_DB_MAX_ROWS", value_name = "N")]
    pub db_max_rows: Option<u64>,
    /// Comma-separated schemas added to search_path after the requested one [default: public].
    #[arg(long = "db-extra-search-path", env = "ROWGATE_DB_EXTRA_SEARCH_PATH", value_name = "LIST")]
    pub db_extra_search_path: Option<String>,
    /// A function called in every API request's transaction before its statement, as
    /// PostgREST's (`schema.fn` or `fn`; PostgreSQL only): it may refuse the request by raising,
    /// change settings, or set `response.headers` and `response.status`. A `pgrst.db_pre_request`
    /// set on the role in the database overrides it [default: none].
    #[arg(long = "db-pre-request", env = "ROWGATE_DB_PRE_REQUEST", value_name = "FUNCTION")]
    pub db_pre_request: Option<String>,
    /// A function whose JSON answers `GET /` instead of the generated OpenAPI description, as
    /// PostgREST's (`fn`, in the schema asked for; PostgreSQL only) [default: none].
    #[arg(long = "db-root-spec", env = "ROWGATE_DB_ROOT_SPEC", value_name = "FUNCTION")]
    pub db_root_spec: Option<String>,
    /// What `GET /` describes: follow-privileges (what the caller may use), ignore-privileges
    /// (everything exposed) or disabled (404) [default: follow-privileges].
    #[arg(long = "openapi-mode", env = "ROWGATE_OPENAPI_MODE", value_name = "MODE")]
    pub openapi_mode: Option<OpenApiMode>,
    /// The OpenAPI description declares the bearer token (JWT) security scheme
    /// [default: false].
    #[arg(long = "openapi-security-active", env = "ROWGATE_OPENAPI_SECURITY_ACTIVE", value_name = "BOOL")]
    pub openapi_security_active: Option<bool>,
    /// The URL clients reach the API at, when a proxy serves it elsewhere
    /// (`https://example.com/api`): the OpenAPI description's host, base path and servers
    /// [default: none].
    #[arg(long = "openapi-server-proxy-uri", env = "ROWGATE_OPENAPI_SERVER_PROXY_URI", value_name = "URL")]
    pub openapi_server_proxy_uri: Option<String>,
    /// Serve the API reference page at /rowgate/docs/: Swagger UI reading the API's OpenAPI
    /// description, from which requests can be tried [default: false].
    #[arg(long = "api-docs-enabled", env = "ROWGATE_API_DOCS_ENABLED", value_name = "BOOL")]
    pub api_docs_enabled: Option<bool>,
    /// The OpenAPI version `GET /` answers with: 2.0 (PostgREST's) or 3.1;
    /// `Accept: application/vnd.oai.openapi+json` asks for 3.1 either way [default: 2.0].
    #[arg(long = "openapi-version", env = "ROWGATE_OPENAPI_VERSION", value_name = "VERSION")]
    pub openapi_version: Option<OpenApiVersion>,
    /// NOTIFY channel for schema reloads [default: rowgate].
    #[arg(long = "db-channel", env = "ROWGATE_DB_CHANNEL", value_name = "NAME")]
    pub db_channel: Option<String>,
    /// Listen on db-channel for `NOTIFY rowgate, 'reload schema'` [default: true].
    #[arg(long = "db-channel-enabled", env = "ROWGATE_DB_CHANNEL_ENABLED", value_name = "BOOL")]
    pub db_channel_enabled: Option<bool>,
    /// Allow aggregate functions in `select` (count(), sum(), avg(), min(), max()) [default: false].
    #[arg(long = "db-aggregates-enabled", env = "ROWGATE_DB_AGGREGATES_ENABLED", value_name = "BOOL")]
    pub db_aggregates_enabled: Option<bool>,
    /// Answer `Accept: application/vnd.pgrst.plan` with the statement's EXPLAIN [default: false].
    #[arg(long = "db-plan-enabled", env = "ROWGATE_DB_PLAN_ENABLED", value_name = "BOOL")]
    pub db_plan_enabled: Option<bool>,
    /// commit, commit-allow-override, rollback or rollback-allow-override [default: commit].
    #[arg(long = "db-tx-end", env = "ROWGATE_DB_TX_END", value_name = "MODE")]
    pub db_tx_end: Option<TxEnd>,
    /// Refuse PATCH and DELETE without any filter, as the pg-safeupdate extension does (400
    /// `21000` "UPDATE requires a WHERE clause") [default: false].
    #[arg(long = "db-safe-updates", env = "ROWGATE_DB_SAFE_UPDATES", value_name = "BOOL")]
    pub db_safe_updates: Option<bool>,
    /// statement_timeout for request statements, in milliseconds; 0 disables it [default: 0].
    #[arg(long = "db-statement-timeout", env = "ROWGATE_DB_STATEMENT_TIMEOUT", value_name = "MS")]
    pub db_statement_timeout: Option<u64>,
    /// Address to listen on [default: 0.0.0.0; PostgREST's `!4` and `*4` mean the same].
    #[arg(long = "server-host", env = "ROWGATE_SERVER_HOST", value_name = "ADDR")]
    pub server_host: Option<String>,
    /// Port to listen on [default: 3000].
    #[arg(long = "server-port", env = "ROWGATE_SERVER_PORT", value_name = "PORT")]
    pub server_port: Option<u16>,
    /// Seconds between SIGTERM and closing the listener, during which `/ready` answers 503 and
    /// requests are still served, so a load balancer's health checks take the instance out
    /// before it stops accepting [default: 0].
    #[arg(long = "server-shutdown-delay", env = "ROWGATE_SERVER_SHUTDOWN_DELAY", value_name = "SECONDS")]
    pub server_shutdown_delay: Option<f64>,
    /// Longest accepted request target (path and query), in bytes [default: 16384].
    #[arg(long = "server-max-url-length", env = "ROWGATE_SERVER_MAX_URL_LENGTH", value_name = "BYTES")]
    pub server_max_url_length: Option<usize>,
    /// Largest accepted request body, in bytes [default: 10485760].
    #[arg(long = "server-max-body-size", env = "ROWGATE_SERVER_MAX_BODY_SIZE", value_name = "BYTES")]
    pub server_max_body_size: Option<usize>,
    /// Largest accepted request head (request line and headers), in bytes [default: 32768].
    #[arg(long = "server-max-header-size", env = "ROWGATE_SERVER_MAX_HEADER_SIZE", value_name = "BYTES")]
    pub server_max_header_size: Option<usize>,
    /// Open client connections at most; beyond it a connection is answered 503 and closed
    /// [default: 10000].
    #[arg(long = "server-max-connections", env = "ROWGATE_SERVER_MAX_CONNECTIONS", value_name = "N")]
    pub server_max_connections: Option<usize>,
    /// Seconds a client has to send a request's head, and then its body, before it is answered
    /// 408 and closed [default: 30].
    #[arg(long = "server-read-timeout", env = "ROWGATE_SERVER_READ_TIMEOUT", value_name = "SECONDS")]
    pub server_read_timeout: Option<u64>,
    /// Comma-separated addresses or networks of proxies in front of rowgate, whose
    /// `X-Forwarded-For` names the client (for rate limits and login limits) [default: none].
    #[arg(long = "server-trusted-proxies", env = "ROWGATE_SERVER_TRUSTED_PROXIES", value_name = "LIST")]
    pub server_trusted_proxies: Option<String>,
    /// Requests one client address may send: `COUNT/PERIOD` (`100/s`, `6000/min`), optionally
    /// `burst N`; beyond it 429 [default: none].
    #[arg(long = "rate-limit-client", env = "ROWGATE_RATE_LIMIT_CLIENT", value_name = "RATE")]
    pub rate_limit_client: Option<String>,
    /// Requests one API key may send, as `rate-limit-client` [default: none].
    #[arg(long = "rate-limit-api-key", env = "ROWGATE_RATE_LIMIT_API_KEY", value_name = "RATE")]
    pub rate_limit_api_key: Option<String>,
    /// Requests each role may send, all its callers together: `role=RATE, ...`, `*` for any
    /// other role, e.g. `anon=50/s, *=500/s` [default: none].
    #[arg(long = "rate-limit-roles", env = "ROWGATE_RATE_LIMIT_ROLES", value_name = "LIST")]
    pub rate_limit_roles: Option<String>,
    /// crit, error, warn, info or debug [default: error].
    #[arg(long = "log-level", env = "ROWGATE_LOG_LEVEL", value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
    /// Error bodies with `details` and `hint` (verbose) or only `code` and `message` (minimal),
    /// as PostgREST 16 [default: verbose].
    #[arg(long = "client-error-verbosity", env = "ROWGATE_CLIENT_ERROR_VERBOSITY", value_name = "MODE")]
    pub client_error_verbosity: Option<ErrorVerbosity>,
    /// A `Server-Timing` header on API answers: jwt, parse, plan, transaction and response, in
    /// milliseconds, as PostgREST's [default: false].
    #[arg(long = "server-timing-enabled", env = "ROWGATE_SERVER_TIMING_ENABLED", value_name = "BOOL")]
    pub server_timing_enabled: Option<bool>,
    /// A request header (e.g. `X-Request-Id`) sent back in its API answer, as PostgREST's
    /// [default: none].
    #[arg(long = "server-trace-header", env = "ROWGATE_SERVER_TRACE_HEADER", value_name = "NAME")]
    pub server_trace_header: Option<String>,
    /// Filters, orders and limits may name an aliased embed by its relation's name, with a
    /// `Warning` header (PostgREST 16's default); false: only by its alias [default: true].
    #[arg(
        long = "url-use-legacy-target-names",
        env = "ROWGATE_URL_USE_LEGACY_TARGET_NAMES",
        value_name = "BOOL"
    )]
    pub url_use_legacy_target_names: Option<bool>,
    /// Key(s) tokens are verified with: an HMAC secret (32+ characters), a PEM public key, a JWK
    /// or a JWKS; `@FILE` reads it from a file.
    #[arg(long = "jwt-secret", env = "ROWGATE_JWT_SECRET", value_name = "SECRET")]
    pub jwt_secret: Option<String>,
    /// The HMAC secret is base64-encoded [default: false].
    #[arg(long = "jwt-secret-is-base64", env = "ROWGATE_JWT_SECRET_IS_BASE64", value_name = "BOOL")]
    pub jwt_secret_is_base64: Option<bool>,
    /// Required audience: a token whose `aud` does not include it is refused.
    #[arg(long = "jwt-aud", env = "ROWGATE_JWT_AUD", value_name = "AUD")]
    pub jwt_aud: Option<String>,
    /// Where the role is in the claims, PostgREST's path syntax [default: .role].
    #[arg(long = "jwt-role-claim-key", env = "ROWGATE_JWT_ROLE_CLAIM_KEY", value_name = "PATH")]
    pub jwt_role_claim_key: Option<String>,
    /// URL of a JWKS (an identity provider's keys), fetched at start-up and refreshed.
    #[arg(long = "jwt-jwks-url", env = "ROWGATE_JWT_JWKS_URL", value_name = "URL")]
    pub jwt_jwks_url: Option<String>,
    /// Fetch `jwt-jwks-url` over plain http from another machine, where anyone on the way could
    /// swap the keys [default: false; https, or http to this machine, always works].
    #[arg(long = "jwt-jwks-allow-http", env = "ROWGATE_JWT_JWKS_ALLOW_HTTP", value_name = "BOOL")]
    pub jwt_jwks_allow_http: Option<bool>,
    /// Seconds between JWKS refreshes [default: 300].
    #[arg(long = "jwt-jwks-refresh", env = "ROWGATE_JWT_JWKS_REFRESH", value_name = "SECONDS")]
    pub jwt_jwks_refresh: Option<u64>,
    /// Verified tokens kept in memory; 0 turns the cache off [default: 1000].
    #[arg(long = "jwt-cache-max-entries", env = "ROWGATE_JWT_CACHE_MAX_ENTRIES", value_name = "N")]
    pub jwt_cache_max_entries: Option<u64>,
    /// Comma-separated request headers that carry an API key [default: apikey, x-api-key].
    #[arg(long = "api-key-headers", env = "ROWGATE_API_KEY_HEADERS", value_name = "LIST")]
    pub api_key_headers: Option<String>,
    /// Comma-separated roles a JWT sent as the API key (Supabase's anon and service keys) may
    /// carry; `*` for any [default: any but `authenticated`, a user's session, which is no
    /// application's key].
    #[arg(long = "api-key-jwt-roles", env = "ROWGATE_API_KEY_JWT_ROLES", value_name = "LIST")]
    pub api_key_jwt_roles: Option<String>,
    /// Refuse requests without an API key (401) [default: false].
    #[arg(long = "api-key-required", env = "ROWGATE_API_KEY_REQUIRED", value_name = "BOOL")]
    pub api_key_required: Option<bool>,
    /// Verified API keys kept in memory; 0 turns the cache off [default: 10000].
    #[arg(long = "api-key-cache-max-entries", env = "ROWGATE_API_KEY_CACHE_MAX_ENTRIES", value_name = "N")]
    pub api_key_cache_max_entries: Option<u64>,
    /// Comma-separated origins CORS allows [default: any origin].
    #[arg(
        long = "server-cors-allowed-origins",
        env = "ROWGATE_SERVER_CORS_ALLOWED_ORIGINS",
        value_name = "LIST"
    )]
    pub server_cors_allowed_origins: Option<String>,
    /// Port of the admin server (`/live`, `/ready`, `/metrics`) on admin-server-host
    /// [default: none].
    #[arg(long = "admin-server-port", env = "ROWGATE_ADMIN_SERVER_PORT", value_name = "PORT")]
    pub admin_server_port: Option<u16>,
    /// Address the admin server binds, as server-host takes one: a private one keeps the
    /// metrics off the API's network [default: server-host].
    #[arg(long = "admin-server-host", env = "ROWGATE_ADMIN_SERVER_HOST", value_name = "HOST")]
    pub admin_server_host: Option<String>,
    /// Serve GET/HEAD answers from memory, kept current by the database's change notifications
    /// (needs `rowgate cache install`) [default: false].
    #[arg(long = "cache-enabled", env = "ROWGATE_CACHE_ENABLED", value_name = "BOOL")]
    pub cache_enabled: Option<bool>,
    /// Memory bound of the response cache, in bytes [default: 67108864].
    #[arg(long = "cache-max-bytes", env = "ROWGATE_CACHE_MAX_BYTES", value_name = "BYTES")]
    pub cache_max_bytes: Option<u64>,
    /// Seconds a cached answer may live at most, as a safety net; 0 for no limit [default: 0].
    #[arg(long = "cache-ttl", env = "ROWGATE_CACHE_TTL", value_name = "SECONDS")]
    pub cache_ttl: Option<u64>,
    /// Comma-separated routes to cache, e.g. `films, rpc/search` [default: every cacheable one].
    #[arg(long = "cache-routes", env = "ROWGATE_CACHE_ROUTES", value_name = "LIST")]
    pub cache_routes: Option<String>,
    /// Comma-separated JWT claims that enter the cache key [default: all claims].
    #[arg(long = "cache-key-claims", env = "ROWGATE_CACHE_KEY_CLAIMS", value_name = "LIST")]
    pub cache_key_claims: Option<String>,
    /// `Cache-Control` of successful GET/HEAD answers by route: `route: value; ...`, `*` for
    /// every route, e.g. `films: public, max-age=60; *: no-cache`.
    #[arg(long = "cache-control", env = "ROWGATE_CACHE_CONTROL", value_name = "RULES")]
    pub cache_control: Option<String>,
    #[command(flatten)]
    #[serde(skip)]
    pub platform: super::PlatformArgs,
}
