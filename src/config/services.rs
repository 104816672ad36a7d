//! `accounts-*` and `storage-*`: Supabase Auth's endpoints at `/auth/v1` and Storage's at
//! `/storage/v1`. (Both sign with `jwt-secret`, which `Config::load` checks is then an HMAC
//! secret.)

use std::path::PathBuf;

use super::{either, invalid, ConfigError, Rate, ServeArgs};

/// How the built-in accounts run (`accounts-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountsSettings {
    /// `accounts-enabled`.
    pub enabled: bool,
    /// `accounts-refresh-reuse-interval`, in seconds.
    pub refresh_reuse_interval: u64,
    /// `accounts-signup-enabled`.
    pub signup_enabled: bool,
    /// `accounts-anonymous-enabled`.
    pub anonymous_enabled: bool,
    /// `accounts-signup-rate-limit`: per client; `None` when `off`.
    pub signup_rate_limit: Option<Rate>,
    /// `smtp-*` and the settings of mail's links.
    pub mail: super::mail::MailSettings,
    /// `accounts-hook-custom-access-token`.
    pub access_token_hook: Option<String>,
    /// `accounts-hook-before-user-created`.
    pub before_user_created_hook: Option<String>,
    /// `accounts-signing-keys`: the first signs.
    pub signing_keys: Vec<super::signing_keys::SigningKey>,
    /// `accounts-providers`.
    pub providers: Vec<super::providers::Provider>,
    /// `accounts-manual-linking`.
    pub manual_linking: bool,
    /// `accounts-passkeys-enabled`.
    pub passkeys_enabled: bool,
    /// `accounts-webauthn-rp-id` and `accounts-webauthn-rp-origins`, defaults applied.
    pub webauthn_rp_id: String,
    pub webauthn_rp_origins: Vec<String>,
    /// `accounts-oauth-server-*`.
    pub oauth_server: OAuthServerSettings,
    /// `accounts-sms-*`.
    pub sms: super::sms::SmsSettings,
}

/// How rowgate serves as an OAuth 2.1 server (`accounts-oauth-server-*`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthServerSettings {
    /// `accounts-oauth-server-enabled`.
    pub enabled: bool,
    /// `accounts-oauth-server-dynamic-registration`.
    pub dynamic_registration: bool,
    /// `accounts-oauth-server-authorization-path`.
    pub authorization_path: Option<String>,
}

impl AccountsSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<AccountsSettings, ConfigError> {
        let enabled = a.accounts_enabled.or(f.accounts_enabled).unwrap_or(false);
        let signup_rate_limit =
            match a.accounts_signup_rate_limit.as_deref().or(f.accounts_signup_rate_limit.as_deref()) {
                Some("off") => None,
                rate => Some(
                    Rate::parse(rate.unwrap_or("30/5min"))
                        .map_err(|e| invalid("accounts-signup-rate-limit", e))?,
                ),
            };
        let mail =
            super::mail::MailSettings::from_args(a, f, a.server_port.or(f.server_port).unwrap_or(3000))?;
        let site = url::Url::parse(&mail.site_url).ok();
        let webauthn_rp_id = either(&a.accounts_webauthn_rp_id, &f.accounts_webauthn_rp_id)
            .or_else(|| site.as_ref().and_then(|u| u.host_str().map(str::to_owned)))
            .unwrap_or_else(|| "localhost".into());
        let webauthn_rp_origins =
            match either(&a.accounts_webauthn_rp_origins, &f.accounts_webauthn_rp_origins) {
                Some(list) => list
                    .split(',')
                    .map(|o| o.trim().trim_end_matches('/').to_owned())
                    .filter(|o| !o.is_empty())
                    .collect(),
                None => site.iter().map(|u| u.origin().ascii_serialization()).collect(),
            };
        Ok(AccountsSettings {
            enabled,
            refresh_reuse_interval: a
                .accounts_refresh_reuse_interval
                .or(f.accounts_refresh_reuse_interval)
                .unwrap_or(10),
            signup_enabled: a.accounts_signup_enabled.or(f.accounts_signup_enabled).unwrap_or(true),
            anonymous_enabled: a.accounts_anonymous_enabled.or(f.accounts_anonymous_enabled).unwrap_or(false),
            signup_rate_limit,
            mail,
            access_token_hook: super::either(
                &a.accounts_hook_custom_access_token,
                &f.accounts_hook_custom_access_token,
            )
            .filter(|h| !h.trim().is_empty()),
            before_user_created_hook: super::either(
                &a.accounts_hook_before_user_created,
                &f.accounts_hook_before_user_created,
            )
            .filter(|h| !h.trim().is_empty()),
            signing_keys: match super::either(&a.accounts_signing_keys, &f.accounts_signing_keys) {
                Some(list) => {
                    super::signing_keys::parse(&list).map_err(|e| invalid("accounts-signing-keys", e))?
                }
                None => Vec::new(),
            },
            providers: match super::either(&a.accounts_providers, &f.accounts_providers) {
                Some(list) => super::providers::parse(&list).map_err(|e| invalid("accounts-providers", e))?,
                None => Vec::new(),
            },
            manual_linking: a.accounts_manual_linking.or(f.accounts_manual_linking).unwrap_or(false),
            passkeys_enabled: a.accounts_passkeys_enabled.or(f.accounts_passkeys_enabled).unwrap_or(false),
            webauthn_rp_id,
            webauthn_rp_origins,
            sms: super::sms::SmsSettings::from_args(a, f)?,
            oauth_server: OAuthServerSettings {
                enabled: a.accounts_oauth_server_enabled.or(f.accounts_oauth_server_enabled).unwrap_or(false),
                dynamic_registration: a
                    .accounts_oauth_server_dynamic_registration
                    .or(f.accounts_oauth_server_dynamic_registration)
                    .unwrap_or(false),
                authorization_path: either(
                    &a.accounts_oauth_server_authorization_path,
                    &f.accounts_oauth_server_authorization_path,
                )
                .filter(|p| !p.trim().is_empty()),
            },
        })
    }
}

/// How storage runs (`storage-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageSettings {
    /// `storage-enabled`.
    pub enabled: bool,
    /// `storage-dir`.
    pub dir: PathBuf,
    /// `storage-s3-url`, `storage-s3-endpoint` and `storage-s3-region`: bytes in an
    /// S3-compatible bucket rather than `storage-dir`.
    pub s3: Option<S3Settings>,
    /// `storage-file-size-limit`.
    pub file_size_limit: u64,
    /// `storage-transform-cache-size`, in bytes.
    pub transform_cache_size: u64,
}

impl StorageSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<StorageSettings, ConfigError> {
        let enabled = a.storage_enabled.or(f.storage_enabled).unwrap_or(false);
        let key = (
            either(&a.storage_s3_access_key_id, &f.storage_s3_access_key_id),
            either(&a.storage_s3_secret_access_key, &f.storage_s3_secret_access_key),
        );
        if key.0.is_some() != key.1.is_some() {
            return Err(invalid(
                "storage-s3-access-key-id",
                "storage-s3-access-key-id and storage-s3-secret-access-key go together".into(),
            ));
        }
        Ok(StorageSettings {
            enabled,
            dir: a
                .storage_dir
                .clone()
                .or_else(|| f.storage_dir.clone())
                .unwrap_or_else(|| PathBuf::from("storage")),
            s3: either(&a.storage_s3_url, &f.storage_s3_url).map(|url| S3Settings {
                url,
                endpoint: either(&a.storage_s3_endpoint, &f.storage_s3_endpoint),
                region: either(&a.storage_s3_region, &f.storage_s3_region),
                access_key_id: key.0,
                secret_access_key: key.1,
            }),
            file_size_limit: a
                .storage_file_size_limit
                .or(f.storage_file_size_limit)
                .unwrap_or(50 * 1024 * 1024),
            transform_cache_size: a
                .storage_transform_cache_size
                .or(f.storage_transform_cache_size)
                .unwrap_or(64 * 1024 * 1024),
        })
    }
}

/// Where an S3-compatible bucket keeps storage's bytes (`storage-s3-*`).
#[derive(Clone, PartialEq, Eq)]
pub struct S3Settings {
    /// `s3://bucket` or `s3://bucket/prefix`.
    pub url: String,
    /// Another service than AWS (MinIO, R2, …): its URL.
    pub endpoint: Option<String>,
    /// The bucket's region.
    pub region: Option<String>,
    /// An access key, rather than the environment's.
    pub access_key_id: Option<String>,
    /// Its secret.
    pub secret_access_key: Option<String>,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("url", &self.url)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &self.secret_access_key.as_ref().map(|_| "…"))
            .finish()
    }
}
