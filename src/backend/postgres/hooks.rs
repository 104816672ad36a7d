//! Supabase Auth's hooks as PostgreSQL functions (`accounts-hook-*`): the function a hook
//! names, and a call of it with GoTrue's event.

use tokio_postgres::types::Type;

use super::accounts::PgAccounts;
use crate::error::Error;

/// Calls the hook `hook` with `event` (JSON); its answer as JSON text (`null` for none).
pub(super) async fn run(store: &PgAccounts, hook: String, event: String) -> Result<String, Error> {
    let (schema, function) = function(&hook).map_err(Error::Unavailable)?;
    let quote = |name: &str| format!("\"{}\"", name.replace('"', "\"\""));
    let sql = format!("SELECT {}.{}($1::text::jsonb)::text", quote(schema), quote(function));
    let rows = store.query(&sql, &[(&event, Type::TEXT)]).await?;
    Ok(rows.first().and_then(|r| r.get::<_, Option<String>>(0)).unwrap_or_else(|| "null".into()))
}

/// The function a custom access token hook names: `schema.function`, or GoTrue's
/// `pg-functions://<database>/<schema>/<function>`; each a plain identifier.
pub(super) fn function(hook: &str) -> Result<(&str, &str), String> {
    let path = hook.strip_prefix("pg-functions://").map(|rest| rest.split_once('/').map_or(rest, |(_, p)| p));
    let (schema, function) = match path {
        Some(p) => p.split_once('/'),
        None => hook.split_once('.'),
    }
    .ok_or_else(|| format!("{hook:?}: schema.function or pg-functions://postgres/schema/function"))?;
    let plain = |name: &str| {
        !name.is_empty()
            && name.len() <= 63
            && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
    };
    match plain(schema) && plain(function) {
        true => Ok((schema, function)),
        false => Err(format!("{hook:?}: the schema and function must be plain identifiers")),
    }
}
