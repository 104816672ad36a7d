//! `rowgate cache install|uninstall`: what tells every rowgate which tables changed (logical
//! decoding's publication or triggers) and the DDL event triggers.

use tokio_postgres::{Client, GenericClient};

use crate::backend::postgres::apikey::message;

const INSTALL_SQL: &str = include_str!("install.sql");
const INSTALL_DDL_SQL: &str = include_str!("install_ddl.sql");
const UNINSTALL_SQL: &str = include_str!("uninstall.sql");

/// Running instances flush (a table may be watched only now, or differently) when the change
/// commits, and not a moment later: they learn of a switch to or from logical decoding with it.
const FLUSH: &str = "NOTIFY rowgate_cache, '*';";

/// Sets up change reporting, and as a superuser the DDL event triggers; returns a summary to
/// print. A superuser on PostgreSQL 14 or later with `wal_level = logical` gets logical decoding (the
/// `rowgate_cache` publication, triggers on unlogged tables only) unless `triggers` is set;
/// otherwise every table gets the change triggers. Idempotent; concurrent runs wait for each
/// other.
pub async fn install(client: &Client, triggers: bool) -> Result<String, String> {
    let row = client
        .query_one(
            // pgoutput sends logical decoding messages from PostgreSQL 14 on.
            "SELECT rolsuper, current_setting('wal_level') = 'logical'
                    AND current_setting('server_version_num')::int >= 140000
             FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .map_err(message)?;
    let (superuser, wal_logical): (bool, bool) = (row.get(0), row.get(1));
    let logical = superuser && wal_logical && !triggers;
    let ddl = if superuser { INSTALL_DDL_SQL } else { "" };
    let publication = if logical {
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'rowgate_cache') THEN \
         CREATE PUBLICATION rowgate_cache FOR ALL TABLES; END IF; END $$;"
    } else {
        "DROP PUBLICATION IF EXISTS rowgate_cache;"
    };
    let guard = crate::backend::postgres::refuse_functions_owned_elsewhere(
        "rowgate",
        &["cache_notify", "cache_keys", "cache_watch", "cache_ddl"],
    );
    client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock(7317002); {guard} {publication} {INSTALL_SQL} {ddl} {FLUSH} COMMIT;"
        ))
        .await
        .map_err(message)?;
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE t.tgname IS NOT NULL),
                    count(*) FILTER (WHERE t.tgname IS NULL AND (NOT $1 OR c.relpersistence = 'u'))
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             LEFT JOIN pg_trigger t ON t.tgrelid = c.oid AND t.tgname = 'rowgate_cache'
             WHERE c.relkind IN ('r', 'p') AND c.relpersistence <> 't'
               AND n.nspname NOT IN ('pg_catalog', 'information_schema')
               AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'",
            &[&logical],
        )
        .await
        .map_err(message)?;
    let (watched, unwatched): (i64, i64) = (row.get(0), row.get(1));
    let mut summary = if logical {
        format!(
            "changes are read by logical decoding (publication rowgate_cache, all tables; the role of \
             db-uri-replication (or db-uri-direct, db-uri) needs REPLICATION, and each instance takes one \
             replication slot); \
             {watched} unlogged table(s) watched by triggers"
        )
    } else {
        let mut s = format!("watching {watched} table(s) for changes with triggers");
        if !superuser {
            s.push_str(" (logical decoding needs a superuser to install)");
        } else if !wal_logical && !triggers {
            s.push_str(
                " (with wal_level = logical, changes would be read from the WAL, at less cost to writes)",
            );
        }
        s
    };
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
    Ok(summary)
}

/// Removes the publication, triggers and event triggers.
pub async fn uninstall(client: &Client) -> Result<String, String> {
    client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock(7317002); {UNINSTALL_SQL} {FLUSH} COMMIT;"
        ))
        .await
        .map_err(message)?;
    Ok("removed the cache's triggers; running instances flush and stop caching".into())
}

/// Where realtime's event trigger says the publication changed.
pub const REALTIME_CHANNEL: &str = "rowgate_realtime";

/// The tables whose changes realtime may send: the publication `supabase_realtime`'s.
pub async fn published(
    client: &impl GenericClient,
) -> Result<crate::realtime::Published, tokio_postgres::Error> {
    let all: Option<bool> = client
        .query_opt(
            "SELECT puballtables FROM pg_catalog.pg_publication WHERE pubname = 'supabase_realtime'",
            &[],
        )
        .await?
        .map(|r| r.get(0));
    if all == Some(true) {
        return Ok(crate::realtime::Published::All);
    }
    let rows = client
        .query(
            "SELECT schemaname::text, tablename::text FROM pg_catalog.pg_publication_tables WHERE pubname = 'supabase_realtime'",
            &[],
        )
        .await?;
    Ok(crate::realtime::Published::Tables(
        rows.iter().map(|r| crate::schema::QualifiedName { schema: r.get(0), name: r.get(1) }).collect(),
    ))
}

/// `rowgate realtime install`: what realtime needs of the database — the publication
/// `supabase_realtime` (created empty, as Supabase's is: add tables to it), the REPLICATION
/// attribute for `replication_role` (the role of `db-uri-replication`, which opens the
/// replication connection; never the authenticator by default: a replication connection reads
/// past every grant and policy), and as a superuser an event trigger that tells running
/// instances when the publication changes. Idempotent; returns a summary to print.
pub async fn install_realtime(client: &Client, replication_role: Option<&str>) -> Result<String, String> {
    let row = client
        .query_one(
            "SELECT rolsuper, current_setting('wal_level') FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await
        .map_err(message)?;
    let (superuser, wal_level): (bool, String) = (row.get(0), row.get(1));
    let replication = match replication_role {
        Some(role) if superuser => {
            let mut sql = String::from("ALTER ROLE ");
            crate::backend::push_ident(&mut sql, role);
            sql.push_str(" REPLICATION;");
            sql
        }
        _ => String::new(),
    };
    let trigger = if superuser {
        format!(
            "CREATE SCHEMA IF NOT EXISTS rowgate;
             CREATE OR REPLACE FUNCTION rowgate.realtime_ddl() RETURNS event_trigger
             LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
             BEGIN PERFORM pg_notify('{REALTIME_CHANNEL}', ''); END $$;
             DROP EVENT TRIGGER IF EXISTS rowgate_realtime_ddl;
             CREATE EVENT TRIGGER rowgate_realtime_ddl ON ddl_command_end
               WHEN TAG IN ('CREATE PUBLICATION', 'ALTER PUBLICATION', 'DROP PUBLICATION')
               EXECUTE FUNCTION rowgate.realtime_ddl();"
        )
    } else {
        String::new()
    };
    let guard = crate::backend::postgres::refuse_functions_owned_elsewhere("rowgate", &["realtime_ddl"]);
    client
        .batch_execute(&format!(
            "BEGIN; SELECT pg_advisory_xact_lock(7317003); {guard}
             DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'supabase_realtime') THEN
               CREATE PUBLICATION supabase_realtime; END IF; END $$;
             {trigger}
             {replication}
             NOTIFY {REALTIME_CHANNEL};
             COMMIT;"
        ))
        .await
        .map_err(message)?;
    let tables: i64 = client
        .query_one("SELECT count(*) FROM pg_publication_tables WHERE pubname = 'supabase_realtime'", &[])
        .await
        .map_err(message)?
        .get(0);
    let mut summary = format!(
        "publication supabase_realtime has {tables} table(s): add the tables whose changes realtime sends with \
         ALTER PUBLICATION supabase_realtime ADD TABLE <table>"
    );
    match (replication_role, superuser) {
        (Some(role), true) => summary.push_str(&format!(
            "; {role} may open the replication connection (REPLICATION): point db-uri-replication at it"
        )),
        (Some(role), false) => summary.push_str(&format!(
            "; not a superuser: give {role} REPLICATION yourself (ALTER ROLE {role} REPLICATION)"
        )),
        (None, _) => summary.push_str(
            "; the change feed needs a login role with REPLICATION in db-uri-replication (not the authenticator): \
             CREATE ROLE rowgate_replicator LOGIN REPLICATION PASSWORD '...', or run again with --replication-role",
        ),
    }
    match superuser {
        true => summary.push_str("; publication changes reach running instances at once (event trigger)"),
        false => summary.push_str(&format!("; NOTIFY {REALTIME_CHANNEL} after changing the publication")),
    }
    if wal_level != "logical" {
        summary.push_str(&format!(
            "; wal_level is {wal_level}: realtime needs wal_level = logical (ALTER SYSTEM SET wal_level = logical, then restart PostgreSQL)"
        ));
    }
    Ok(summary)
}
