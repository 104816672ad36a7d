//! `pocketbase`: whether PocketBase's API is served at `/api/`.

use super::{invalid, ConfigError, PlatformArgs};

/// PocketBase's API (docs/pocketbase.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PocketBaseSettings {
    /// Served at `/api/`.
    pub enabled: bool,
}

impl PocketBaseSettings {
    /// On by default on an SQLite file, as `pocketbase serve` is, unless the REST API itself is
    /// at `/api` (beside static files); asked for there, it is an error rather than a shadow.
    pub(super) fn from_args(
        a: &PlatformArgs,
        f: &PlatformArgs,
        sqlite: bool,
        api_prefix: &str,
    ) -> Result<PocketBaseSettings, ConfigError> {
        let taken = api_prefix == "/api" || api_prefix.starts_with("/api/");
        let enabled = a.pocketbase.or(f.pocketbase).unwrap_or(sqlite && !taken);
        if enabled && taken {
            return Err(invalid(
                "pocketbase",
                format!("PocketBase's API is at /api, where api-prefix {api_prefix} puts the REST API: give the REST API another prefix"),
            ));
        }
        Ok(PocketBaseSettings { enabled })
    }
}
