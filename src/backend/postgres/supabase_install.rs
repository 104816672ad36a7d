//! `rowgate install`: what a Supabase app needs of a PostgreSQL database, in one command run as
//! a superuser — Supabase's roles (`anon`, `authenticated`, `service_role`, and the login role
//! rowgate connects as, which may become them), their grants on schema `public` as Supabase
//! makes them (row-level security is what guards a table), then the accounts, storage,
//! realtime, webhooks and cron installs. Safe to run again: what exists is kept and said so.

use tokio_postgres::Client;

use super::apikey::message;

/// Supabase's roles a request runs as, and their attributes: `service_role` bypasses
/// row-level security, as the service key's requests do on Supabase.
const API_ROLES: [(&str, &str); 3] = [
    ("anon", "NOLOGIN NOINHERIT"),
    ("authenticated", "NOLOGIN NOINHERIT"),
    ("service_role", "NOLOGIN NOINHERIT BYPASSRLS"),
];

pub(super) fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Installs everything for the login role `role` (created, without a password, if missing), and
/// gives `replication_role` REPLICATION for realtime's feed; the lines saying what was done.
pub async fn install(c: &Client, role: &str, replication_role: Option<&str>) -> Result<Vec<String>, String> {
    let superuser: bool = c
        .query_one("SELECT rolsuper FROM pg_roles WHERE rolname = current_user", &[])
        .await
        .map_err(message)?
        .get(0);
    if !superuser {
        return Err("rowgate install needs a superuser (it creates roles, one with BYPASSRLS)".into());
    }
    let mut done = Vec::new();
    let exists = |name: &str| {
        let name = name.to_owned();
        async move {
            c.query_one("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", &[&name])
                .await
                .map(|r| r.get::<_, bool>(0))
                .map_err(message)
        }
    };
    // Roles are the cluster's: an install into another database at the same moment may make one
    // between the look and the CREATE, and that one is kept too.
    let create = |name: &str, attributes: &str| {
        let sql = format!("CREATE ROLE {} {attributes}", quoted(name));
        async move {
            match c.batch_execute(&sql).await {
                Ok(()) => Ok(true),
                Err(e) if e.as_db_error().is_some_and(|d| d.code().code() == "42710") => Ok(false),
                Err(e) => Err(message(e)),
            }
        }
    };
    for (name, attributes) in API_ROLES {
        if !exists(name).await? && create(name, attributes).await? {
            done.push(format!("role {name}: created ({attributes})"));
        } else {
            done.push(format!("role {name}: exists, kept"));
        }
    }
    if !exists(role).await? && create(role, "LOGIN NOINHERIT").await? {
        done.push(format!(
            "role {role}: created (LOGIN NOINHERIT, no password yet: ALTER ROLE {} PASSWORD '...')",
            quoted(role)
        ));
    } else {
        done.push(format!("role {role}: exists, kept"));
    }
    let grant = format!("GRANT anon, authenticated, service_role TO {}", quoted(role));
    if let Err(e) = c.batch_execute(&grant).await {
        // Another install granting the same at the same moment: the second time finds it done.
        if e.as_db_error().is_none_or(|d| d.code().code() != "23505") {
            return Err(message(e));
        }
        c.batch_execute(&grant).await.map_err(message)?;
    }
    done.push(format!("role {role} may become anon, authenticated and service_role"));
    // Supabase's grants: every API role may use what is in `public` (now and later); a table's
    // row-level security decides what each caller sees of it.
    c.batch_execute(
        "GRANT USAGE ON SCHEMA public TO anon, authenticated, service_role;
         GRANT ALL ON ALL TABLES IN SCHEMA public TO anon, authenticated, service_role;
         GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO anon, authenticated, service_role;
         GRANT ALL ON ALL ROUTINES IN SCHEMA public TO anon, authenticated, service_role;
         ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON TABLES TO anon, authenticated, service_role;
         ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON SEQUENCES TO anon, authenticated, service_role;
         ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT ALL ON ROUTINES TO anon, authenticated, service_role;",
    )
    .await
    .map_err(message)?;
    done.push(
        "schema public: anon, authenticated and service_role may use its tables, now and later (as on \
         Supabase): enable row-level security on each table and write its policies"
            .into(),
    );
    super::accounts_install::install(c, role).await?;
    done.push(format!(
        "accounts: auth.users and its kin, auth.uid(), auth.role(), auth.jwt(); role {role} may use them"
    ));
    super::storage::install(c, role).await?;
    done.push("storage: storage.buckets and storage.objects, row-level security on (no policies yet)".into());
    let realtime = super::changes::install::install_realtime(c, replication_role).await?;
    done.push(format!("realtime: {realtime}"));
    super::net::install(c, role).await?;
    done.push(
        "webhooks: net.http_get/post/delete and supabase_functions.http_request, sent by rowgate".into(),
    );
    super::cron::install(c, role).await?;
    done.push(
        "cron: cron.schedule and cron.unschedule, cron.job and cron.job_run_details, run by rowgate".into(),
    );
    Ok(done)
}
