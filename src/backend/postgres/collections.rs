//! PocketBase's collections in PostgreSQL: each a table of the exposed schema under row-level
//! security — policies per action as its rules say (one for everyone, or one for visitors and
//! one for signed-in callers; none where only the superusers may, whom the service role's
//! bypass admits) — and a row of `rowgate.pocketbase_collections` with its definition, all
//! changed in one transaction.

use tokio_postgres::Client;

use super::db_error;
use crate::backend::collections::{
    table_statements, Access, CollectionChange, ColumnKind, TableAccess, TableChange, TableDialect,
};
use crate::backend::push_ident;
use crate::error::Error;

const SCHEMA: &str = "CREATE SCHEMA IF NOT EXISTS rowgate;
CREATE TABLE IF NOT EXISTS rowgate.pocketbase_collections (
    schema text NOT NULL,
    id text NOT NULL,
    name text NOT NULL,
    definition text NOT NULL,
    made bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (schema, id)
);";

/// The stored definitions' texts of `schema`'s collections, oldest first.
pub async fn definitions(client: &Client, schema: &str) -> Result<Vec<String>, Error> {
    let exists = client
        // Read from the catalog, which any role may: a role without rights on the `rowgate`
        // schema is refused by `to_regclass` even where no collection was ever made.
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n \
             ON n.oid = c.relnamespace WHERE n.nspname = 'rowgate' AND c.relname = 'pocketbase_collections')",
            &[],
        )
        .await
        .map_err(|e| db_error(e, false))?;
    if !exists.get::<_, bool>(0) {
        return Ok(Vec::new());
    }
    let rows = client
        .query(
            "SELECT definition FROM rowgate.pocketbase_collections WHERE schema = $1 ORDER BY made",
            &[&schema],
        )
        .await
        .map_err(|e| db_error(e, false))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Makes `change` in one transaction on `client` (a session of its own, one change at a time);
/// a visitor's policies are for `visitor` (`db-anon-role`).
pub async fn apply(
    client: &Client,
    schema: &str,
    visitor: Option<&str>,
    change: CollectionChange,
) -> Result<(), Error> {
    let statements =
        ddl(schema, visitor, &change).map_err(|e| Error::api(crate::error::code::DASHBOARD_INVALID, e))?;
    client.batch_execute("BEGIN").await.map_err(|e| db_error(e, false))?;
    let made = in_transaction(client, &statements, schema, &change).await;
    let end = if made.is_ok() { "COMMIT" } else { "ROLLBACK" };
    let ended = client.batch_execute(end).await.map_err(|e| db_error(e, false));
    made.and(ended)
}

async fn in_transaction(
    client: &Client,
    statements: &str,
    schema: &str,
    change: &CollectionChange,
) -> Result<(), Error> {
    let failed = |e| db_error(e, false);
    client.batch_execute(SCHEMA).await.map_err(failed)?;
    client.batch_execute(statements).await.map_err(failed)?;
    if matches!(change.change, TableChange::Truncate) {
        return Ok(());
    }
    match &change.definition {
        Some(definition) => client
            .execute(
                "INSERT INTO rowgate.pocketbase_collections (schema, id, name, definition) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (schema, id) DO UPDATE SET name = excluded.name, definition = excluded.definition",
                &[&schema, &change.id, &change.table, definition],
            )
            .await
            .map_err(failed)?,
        None => client
            .execute("DELETE FROM rowgate.pocketbase_collections WHERE schema = $1 AND id = $2", &[&schema, &change.id])
            .await
            .map_err(failed)?,
    };
    Ok(())
}

/// The statements of `change`'s table in `schema`, and its policies (a visitor's for `visitor`).
fn ddl(schema: &str, visitor: Option<&str>, change: &CollectionChange) -> Result<String, String> {
    let table = table_statements(&Postgres { schema }, change);
    let mut sql = String::new();
    match &change.change {
        TableChange::Create { .. } => {
            sql.push_str(&table);
            access(&mut sql, schema, visitor, &change.table, &change.access)?;
            published(&mut sql, schema, &change.table);
        }
        TableChange::Alter { from, .. } => {
            // The old policies may name columns about to go.
            unguarded(&mut sql, schema, from);
            sql.push_str(&table);
            access(&mut sql, schema, visitor, &change.table, &change.access)?;
        }
        TableChange::Drop | TableChange::Truncate => sql.push_str(&table),
    }
    Ok(sql)
}

/// PostgreSQL's way of writing a collection's table, in `schema`.
struct Postgres<'a> {
    schema: &'a str,
}

impl TableDialect for Postgres<'_> {
    fn push_table(&self, sql: &mut String, name: &str) {
        sql.push_str(&qualified(self.schema, name));
    }

    /// As a PocketBase field is stored in PostgreSQL.
    fn declaration(&self, kind: ColumnKind) -> &'static str {
        match kind {
            ColumnKind::Key => {
                "text PRIMARY KEY DEFAULT ('r' || substr(md5(random()::text || clock_timestamp()::text), 1, 14))"
            }
            ColumnKind::Text => "text NOT NULL DEFAULT ''",
            ColumnKind::Number => "double precision NOT NULL DEFAULT 0",
            ColumnKind::Bool => "boolean NOT NULL DEFAULT false",
            ColumnKind::Json => "jsonb",
            ColumnKind::Point => "jsonb NOT NULL DEFAULT '{\"lon\":0,\"lat\":0}'",
            ColumnKind::List => "jsonb NOT NULL DEFAULT '[]'",
            ColumnKind::Reference => "text",
        }
    }
}

/// The actions policies are made for, with the clause each takes.
const ACTIONS: [(&str, &str); 4] =
    [("select", "USING"), ("insert", "WITH CHECK"), ("update", "USING"), ("delete", "USING")];

/// Drops the policies rowgate made on `name`.
fn unguarded(sql: &mut String, schema: &str, name: &str) {
    let on = qualified(schema, name);
    for (action, _) in ACTIONS {
        for who in ["", "_visitor", "_signed_in"] {
            sql.push_str(&format!("DROP POLICY IF EXISTS pocketbase_{action}{who} ON {on};"));
        }
    }
}

/// Row-level security on `name`, with policies for each action as `access` says: one for
/// everyone, or one for visitors (`TO` the anonymous role) and one for signed-in callers
/// (every other role). The table is granted to every role: its policies, not its grants, say
/// who sees what, as on Supabase.
fn access(
    sql: &mut String,
    schema: &str,
    visitor: Option<&str>,
    name: &str,
    access: &TableAccess,
) -> Result<(), String> {
    let on = qualified(schema, name);
    sql.push_str(&format!(
        "ALTER TABLE {on} ENABLE ROW LEVEL SECURITY;GRANT SELECT, INSERT, UPDATE, DELETE ON {on} TO PUBLIC;"
    ));
    unguarded(sql, schema, name);
    for ((action, clause), who) in
        ACTIONS.into_iter().zip([&access.select, &access.insert, &access.update, &access.delete])
    {
        let policy = |sql: &mut String, suffix: &str, to: &str, condition: &str| {
            sql.push_str(&format!(
                "CREATE POLICY pocketbase_{action}{suffix} ON {on} FOR {action} TO {to} {clause} ({condition});"
            ));
        };
        match who {
            Access::Nobody => {}
            Access::Everyone => policy(sql, "", "PUBLIC", "true"),
            Access::Rows { visitor: for_visitor, signed_in } => {
                if let (Some(role), Some(rows)) = (visitor, for_visitor) {
                    let mut to = String::new();
                    push_ident(&mut to, role);
                    policy(sql, "_visitor", &to, &super::policy::condition(rows)?);
                }
                if let Some(rows) = signed_in {
                    let not_visitor = match visitor {
                        Some(role) => format!("current_user <> {} AND ", super::policy::literal(role)),
                        None => String::new(),
                    };
                    let condition = format!("{not_visitor}({})", super::policy::condition(rows)?);
                    policy(sql, "_signed_in", "PUBLIC", &condition);
                }
            }
        }
    }
    Ok(())
}

fn qualified(schema: &str, name: &str) -> String {
    let mut on = String::new();
    push_ident(&mut on, schema);
    on.push('.');
    push_ident(&mut on, name);
    on
}

/// The table in realtime's publication (where `rowgate realtime install` made it) and its
/// deleted rows' events carrying them whole: PocketBase's realtime covers every collection.
/// The name is checked (letters, digits, `_`) and quoted, so it is safe inside the block.
fn published(sql: &mut String, schema: &str, name: &str) {
    let on = qualified(schema, name);
    sql.push_str(&format!(
        "ALTER TABLE {on} REPLICA IDENTITY FULL;\
         DO $pb$ BEGIN IF EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'supabase_realtime' \
         AND NOT puballtables) THEN ALTER PUBLICATION supabase_realtime ADD TABLE {on}; END IF; END $pb$;"
    ));
}
