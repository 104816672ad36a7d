//! `rowgate apikey`: the API-key store's commands, through the backend seam.

use std::process::ExitCode;

use clap::Subcommand;

#[derive(Subcommand)]
pub enum ApikeyAction {
    /// Create the key store (also done by the other commands).
    Install,
    /// Create a key and print it once; only its hash is stored.
    Create {
        /// The role requests with this key run as.
        #[arg(long)]
        role: String,
        /// A name to list and revoke it by.
        #[arg(long, default_value = "")]
        name: String,
        /// Lifetime, e.g. 90d, 12h, 30m.
        #[arg(long)]
        expires: Option<String>,
        /// Extra claims (a JSON object) for request.jwt.claims.
        #[arg(long)]
        claims: Option<String>,
    },
    /// List the keys (never the keys themselves).
    List,
    /// Revoke keys by id, name or the key itself.
    Revoke {
        /// Id, name or key.
        which: String,
    },
}

/// Runs `action` on the key store of the database `db_uri` names.
pub async fn run(db_uri: Option<String>, action: ApikeyAction) -> ExitCode {
    use rowgate::apikey::admin::{parse_duration, KeyCommand};
    let Some(uri) = db_uri else {
        eprintln!("rowgate: missing db-uri: set --db-uri or ROWGATE_DB_URI");
        return ExitCode::from(2);
    };
    let command = match action {
        ApikeyAction::Install => KeyCommand::Install,
        ApikeyAction::Create { role, name, expires, claims } => {
            let expires = match expires.as_deref().map(parse_duration).transpose() {
                Ok(e) => e,
                Err(e) => {
                    eprintln!("rowgate: {e}");
                    return ExitCode::from(2);
                }
            };
            let claims = match claims.as_deref().map(serde_json::from_str::<serde_json::Value>).transpose() {
                Ok(None) => serde_json::Map::new(),
                Ok(Some(serde_json::Value::Object(m))) => m,
                _ => {
                    eprintln!("rowgate: --claims must be a JSON object");
                    return ExitCode::from(2);
                }
            };
            KeyCommand::Create { role, name, expires, claims }
        }
        ApikeyAction::List => KeyCommand::List,
        ApikeyAction::Revoke { which } => KeyCommand::Revoke { which },
    };
    let revoking = match &command {
        KeyCommand::Revoke { which } => Some(which.clone()),
        _ => None,
    };
    match rowgate::backend::Backend::apikey_admin(&uri, command).await {
        Ok(lines) => match revoking {
            Some(which) if lines.first().is_none_or(|n| n == "0") => {
                eprintln!("rowgate: no active key matches {which:?}");
                ExitCode::FAILURE
            }
            Some(_) => {
                println!("revoked {} key(s)", lines.first().map_or("0", String::as_str));
                ExitCode::SUCCESS
            }
            None => {
                lines.iter().for_each(|l| println!("{l}"));
                ExitCode::SUCCESS
            }
        },
        Err(e) => {
            eprintln!("rowgate: {e}");
            ExitCode::FAILURE
        }
    }
}
