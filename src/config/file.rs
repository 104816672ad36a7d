//! The options below flags and `ROWGATE_*` variables: the configuration file — rowgate's TOML
//! when its name ends in `.toml`, else PostgREST's own syntax — with PostgREST's `PGRST_*`
//! variables over it.

use std::path::{Path, PathBuf};

use super::{postgrest, ConfigError, ServeArgs};

/// What the file and the `PGRST_*` variables give.
pub(super) struct Layer {
    /// The options, as rowgate's TOML file would give them.
    pub args: ServeArgs,
    /// `app.settings.*`.
    pub app_settings: Vec<(String, String)>,
    /// PostgREST options rowgate does not have.
    pub ignored: Vec<String>,
}

/// The options below flags and `ROWGATE_*` variables: the configuration file (rowgate's TOML
/// when it ends in `.toml`, else PostgREST's syntax), with PostgREST's `PGRST_*` variables
/// over it; and the `app.settings.*` and unknown PostgREST options they gave.
pub(super) fn read(path: Option<&Path>) -> Result<Layer, ConfigError> {
    let file_error = |path: &Path, reason: String| ConfigError::File { path: path.to_owned(), reason };
    let mut layers = postgrest::Read::default();
    if let Some(path) = path {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Read { path: path.to_owned(), reason: e.to_string() })?;
        layers = if path.extension().is_some_and(|e| e == "toml") {
            let mut table: toml::Table =
                toml::from_str(&text).map_err(|e| file_error(path, e.message().replace('\n', " ")))?;
            // `app.settings.name = ...` in TOML is a nested table.
            let mut app_settings = std::collections::BTreeMap::new();
            if let Some(toml::Value::Table(app)) = table.remove("app") {
                for (name, value) in app.get("settings").and_then(toml::Value::as_table).into_iter().flatten()
                {
                    let text = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
                    app_settings.insert(format!("app.settings.{name}"), text);
                }
            }
            postgrest::Read { table, app_settings, ignored: Vec::new() }
        } else {
            let pairs =
                postgrest::parse(&text, |name| std::env::var(name).ok()).map_err(|e| file_error(path, e))?;
            postgrest::read(pairs).map_err(|e| file_error(path, e))?
        };
    }
    let env = postgrest::read(postgrest::from_env(std::env::vars()))
        .map_err(|e| ConfigError::File { path: "PGRST_* variables".into(), reason: e })?;
    layers.table.extend(env.table);
    layers.app_settings.extend(env.app_settings);
    layers.ignored.extend(env.ignored);
    let args = ServeArgs::from_table(layers.table).map_err(|e| {
        let path = path.map_or_else(|| PathBuf::from("PGRST_* variables"), Path::to_owned);
        ConfigError::File { path, reason: e.to_string().replace('\n', " ") }
    })?;
    Ok(Layer { args, app_settings: layers.app_settings.into_iter().collect(), ignored: layers.ignored })
}
