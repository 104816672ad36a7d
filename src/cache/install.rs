//! `rowgate cache install|uninstall`: the triggers that tell every rowgate which tables changed.

use tokio_postgres::Client;

use crate::apikey::admin::message;

const INSTALL_SQL: &str = include_str!("install.sql");
const INSTALL_DDL_SQL: &str = include_str!("install_ddl.sql");
const UNINSTALL_SQL: &str = include_str!("uninstall.sql");

/// Installs the change triggers on every table, and as a superuser the DDL event triggers;
/// returns a summary to print. Idempotent; concurrent runs wait for each other.
pub async fn install(client: &Client) -> Result<String, String> {
    let superuser: bool = client
        .query_one("SELECT rolsuper FROM pg_roles WHERE rolname = current_user", &[])
        .await
        .map_err(message)?
        .get(0);
    let ddl = if superuser { INSTALL_DDL_SQL } else { "" };
    client
        .batch_execute(&format!("BEGIN; SELECT pg_advisory_xact_lock(7317002); {INSTALL_SQL} {ddl} COMMIT;"))
        .await
        .map_err(message)?;
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE t.tgname IS NOT NULL), count(*) FILTER (WHERE t.tgname IS NULL)
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             LEFT JOIN pg_trigger t ON t.tgrelid = c.oid AND t.tgname = 'rowgate_cache'
             WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
               AND n.nspname NOT IN ('pg_catalog', 'information_schema')
               AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'",
            &[],
        )
        .await
        .map_err(message)?;
    let (watched, unwatched): (i64, i64) = (row.get(0), row.get(1));
    let mut summary = format!("watching {watched} table(s) for changes");
    if unwatched > 0 {
        summary.push_str(&format!("; {unwatched} table(s) could not be watched (not their owner): answers reading them are not cached"));
    }
    if superuser {
        summary.push_str("; DDL flushes caches and new tables are watched (event triggers)");
    } else {
        summary.push_str(
            "; not a superuser, so no event triggers: after DDL, grants or policy changes, \
             NOTIFY the schema reload channel (which flushes caches), and run install again for new tables",
        );
    }
    // Running instances flush, in case a table was watched only now.
    client.batch_execute("NOTIFY rowgate_cache, '*'").await.map_err(message)?;
    Ok(summary)
}

/// Removes the triggers and event triggers.
pub async fn uninstall(client: &Client) -> Result<String, String> {
    client
        .batch_execute(&format!("BEGIN; SELECT pg_advisory_xact_lock(7317002); {UNINSTALL_SQL} COMMIT;"))
        .await
        .map_err(message)?;
    client.batch_execute("NOTIFY rowgate_cache, '*'").await.map_err(message)?;
    Ok("removed the cache's triggers; running instances flush and stop caching".into())
}
