//! `rowgate accounts install`: Supabase Auth's tables in schema `auth` and rowgate's functions
//! over them in schema `rowgate` (accounts.sql, with the auth helpers storage shares), callable
//! by the serving role only; and the dashboard's administrators (dashboard.sql), usable by it
//! alone.

use tokio_postgres::Client;

/// The SQL `rowgate accounts install` runs.
const INSTALL_SQL: &str = include_str!("accounts.sql");
/// Supabase's `auth.uid()` and its kin, which the policies of its schemas use.
const AUTH_HELPERS_SQL: &str = include_str!("auth_helpers.sql");
/// The passkeys' tables and functions.
const PASSKEYS_SQL: &str = include_str!("passkeys.sql");
/// The OAuth server's tables and functions.
const OAUTH_SERVER_SQL: &str = include_str!("oauth_server.sql");

/// The functions the serving role may call, by signature: no one else may.
const FUNCTIONS: &str = "rowgate.account_create(text, text, text, text, jsonb, jsonb, boolean, boolean, text, bigint, text, text, boolean, boolean, boolean),
  rowgate.account_by_email(text), rowgate.account_by_phone(text), rowgate.account_by_id(text), rowgate.account_sign_in(text, text, text, text, text, text),
  rowgate.account_rotate(text, text, bigint, bigint, bigint, text),
  rowgate.account_rotate(text, text, bigint, bigint, bigint),
  rowgate.account_create(text, text, text, text, jsonb, jsonb, boolean, boolean, text, bigint, text, text, boolean, boolean),
  rowgate.account_update(text, text, text, text, jsonb, jsonb, boolean, boolean, bigint, boolean, text, boolean),
  rowgate.account_list(bigint, bigint), rowgate.account_count(), rowgate.account_delete(text, boolean),
  rowgate.account_logout(text, text, text), rowgate.account_sessions(text), rowgate.account_issue(text, text, text, text, bigint),
  rowgate.account_redeem(text, text, text, bigint),
  rowgate.account_factor_enroll(text, text, text, text, text, boolean, bigint), rowgate.account_factor_challenge(text, text, text, text),
  rowgate.account_factor_challenged(text, text, text), rowgate.account_factor_verify(text, text, text, text, text, text),
  rowgate.account_factor_unenroll(text, text, boolean),
  rowgate.account_flow_start(text, text, text, text, text, text), rowgate.account_flow_code(text, text),
  rowgate.account_flow_take(text),
  rowgate.account_link_identity(text, text, text, boolean, jsonb, text, jsonb, jsonb, boolean, boolean),
  rowgate.account_attach_identity(text, text, text, text, boolean, jsonb),
  rowgate.account_detach_identity(text, text),
  rowgate.passkey_begin(text, text, text, text, bigint), rowgate.passkey_take(text, text, text),
  rowgate.passkey_list(text), rowgate.passkey_add(text, text, text, text, text, bigint),
  rowgate.passkey_by_credential(text), rowgate.passkey_used(text, text),
  rowgate.passkey_rename(text, text, text), rowgate.passkey_delete(text, text),
  rowgate.oauth_client_add(text, text, text, text, text, text, text, text, text, text),
  rowgate.oauth_client_get(text), rowgate.oauth_client_list(bigint, bigint),
  rowgate.oauth_client_save(text, text, text, text, text, text, text), rowgate.oauth_client_secret(text, text),
  rowgate.oauth_client_delete(text),
  rowgate.oauth_authorization_begin(text, text, text, text, text, text, text, text, text, bigint),
  rowgate.oauth_authorization_get(text), rowgate.oauth_authorization_claim(text, text),
  rowgate.oauth_authorization_decide(text, text, text), rowgate.oauth_code_take(text, text),
  rowgate.oauth_consent_get(text, text), rowgate.oauth_grants(text), rowgate.oauth_grant_revoke(text, text)";

/// Creates (or updates) the accounts' tables and functions and lets `role` call the functions;
/// nothing else may (the tables hold password hashes).
pub async fn install(client: &Client, role: &str) -> Result<(), String> {
    let role = format!("\"{}\"", role.replace('"', "\"\""));
    let grants = format!(
        "REVOKE ALL ON FUNCTION {FUNCTIONS} FROM PUBLIC;
         GRANT USAGE ON SCHEMA rowgate TO {role};
         GRANT EXECUTE ON FUNCTION {FUNCTIONS} TO {role};
         {}",
        super::dashboard::grants(&role)
    );
    let dashboard = super::dashboard::INSTALL_SQL;
    client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock(7317002); {AUTH_HELPERS_SQL} {INSTALL_SQL} {PASSKEYS_SQL} {OAUTH_SERVER_SQL} {dashboard} {grants} COMMIT;"
        ))
        .await
        .map_err(super::apikey::message)
}
