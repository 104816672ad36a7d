//! What a role may read of a table, for realtime (`TableAccess`): its columns by the grants,
//! whether row-level security decides its rows, and whether the policies that decide them can
//! read more of the caller than its role — if none can, every caller of the role sees the same
//! rows, and one check serves them all.

use crate::backend::postgres::{db_error, Db};
use crate::error::Error;
use crate::realtime::TableAccess;
use crate::schema::QualifiedName;

/// Per role and table: whether rows are decided row by row (RLS on, the role neither
/// bypasses it nor owns the table unforced, and no policy lets it read every row — a
/// permissive `USING (true)` of its own or PUBLIC's, with no restrictive one); whether a SELECT policy may read anything of the
/// caller beyond its role; and the columns the role may read (with USAGE on the schema), in table
/// order. A policy counts as reading only the row (and the role: `current_user`) when every
/// function and operator it calls is built in and immutable, and it has no subquery, no cast
/// through a type's text form, no row comparison and no subscript (any of which can run code of
/// the database's own, or read other tables under their own policies); anything else — `auth.uid()`,
/// `current_setting(...)`, `now()` — is taken to read the caller's claims.
const SQL: &str = "\
SELECT c.relrowsecurity
         AND NOT coalesce((SELECT r.rolbypassrls OR r.rolsuper FROM pg_roles r WHERE r.rolname = $1), false)
         AND (c.relforcerowsecurity OR pg_get_userbyid(c.relowner) <> $1)
         AND NOT (EXISTS (SELECT 1 FROM pg_catalog.pg_policy p
                          WHERE p.polrelid = c.oid AND p.polcmd IN ('r', '*') AND p.polpermissive
                            AND pg_get_expr(p.polqual, p.polrelid) = 'true'
                            AND (0::oid = ANY (p.polroles)
                                 OR EXISTS (SELECT 1 FROM unnest(p.polroles) AS r (oid)
                                            WHERE r.oid <> 0 AND pg_has_role($1, r.oid, 'MEMBER'))))
                  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_policy p
                                  WHERE p.polrelid = c.oid AND p.polcmd IN ('r', '*') AND NOT p.polpermissive)),
       EXISTS (
         SELECT 1 FROM pg_catalog.pg_policy p
         WHERE p.polrelid = c.oid AND p.polcmd IN ('r', '*') AND p.polqual IS NOT NULL
           AND (p.polqual::text ~ '\\{(SUBLINK|COERCEVIAIO|ROWCOMPAREEXPR|SUBSCRIPTINGREF|PARAM|ARRAYCOERCEEXPR|CONVERTROWTYPEEXPR) '
                OR EXISTS (SELECT 1
                           FROM regexp_matches(p.polqual::text, ':(?:funcid|opfuncid) ([0-9]+)', 'g') m
                           LEFT JOIN pg_catalog.pg_proc f ON f.oid = m[1]::oid
                           WHERE f.oid IS NULL OR f.oid >= 16384 OR f.provolatile <> 'i')
                OR EXISTS (SELECT 1
                           FROM regexp_matches(p.polqual::text, ':opno ([0-9]+)', 'g') m
                           LEFT JOIN pg_catalog.pg_operator o ON o.oid = m[1]::oid
                           LEFT JOIN pg_catalog.pg_proc f ON f.oid = o.oprcode
                           WHERE f.oid IS NULL OR f.oid >= 16384 OR f.provolatile <> 'i'))),
       coalesce(array_agg(a.attname::text ORDER BY a.attnum)
                FILTER (WHERE has_schema_privilege($1, n.oid, 'USAGE')
                                AND has_column_privilege($1, c.oid, a.attnum, 'SELECT')), '{}')
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = $2 AND c.relname = $3 AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)
GROUP BY c.oid";

/// What `role` may read of `table`, asked on a pooled connection (the catalog answers whatever
/// role the session holds).
pub async fn table_access(db: &Db, role: &str, table: &QualifiedName) -> Result<TableAccess, Error> {
    let mut conn = db.get_as_server().await?;
    let rows = conn
        .query_text(SQL, &[role.to_owned(), table.schema.clone(), table.name.clone()])
        .await
        .map_err(|e| db_error(e, false))?;
    Ok(match rows.into_iter().next() {
        Some(row) => {
            let by_row: bool = row.get(0);
            let reads_claims: bool = row.get(1);
            TableAccess { columns: row.get(2), by_claims: by_row && reads_claims, by_row }
        }
        None => TableAccess { columns: Vec::new(), by_claims: false, by_row: false },
    })
}

/// Per relation of a schema `role` may use (`USAGE`), which of reading, inserting, updating and
/// deleting its grants allow (a grant on some columns counts). PostgREST describes a relation
/// the role has any privilege on, with every method; the role's grants decide each here.
const USABLE_RELATIONS: &str = "\
SELECT c.relname::text,
       has_table_privilege($1, c.oid, 'SELECT') OR has_any_column_privilege($1, c.oid, 'SELECT'),
       has_table_privilege($1, c.oid, 'INSERT') OR has_any_column_privilege($1, c.oid, 'INSERT'),
       has_table_privilege($1, c.oid, 'UPDATE') OR has_any_column_privilege($1, c.oid, 'UPDATE'),
       has_table_privilege($1, c.oid, 'DELETE')
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $2 AND c.relkind IN ('v', 'r', 'm', 'f', 'p') AND NOT c.relispartition
  AND has_schema_privilege($1, n.oid, 'USAGE')";

/// The functions of a schema `role` may execute.
const USABLE_FUNCTIONS: &str = "\
SELECT p.oid FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = $2 AND has_function_privilege($1, p.oid, 'EXECUTE')
  AND has_schema_privilege($1, n.oid, 'USAGE')";

/// What `role` may use of `schema`; a role that does not exist is PostgreSQL's own 42704, as
/// any request it made would be.
pub async fn usable(db: &Db, role: &str, schema: &str) -> Result<crate::openapi::Usable, Error> {
    let mut conn = db.get_as_server().await?;
    let params = [role.to_owned(), schema.to_owned()];
    let relations = conn.query_text(USABLE_RELATIONS, &params).await.map_err(|e| db_error(e, false))?;
    let functions = conn.query_text(USABLE_FUNCTIONS, &params).await.map_err(|e| db_error(e, false))?;
    let mut usable = crate::openapi::Usable::default();
    for row in relations {
        let grants = crate::openapi::Grants {
            read: row.get(1),
            insert: row.get(2),
            update: row.get(3),
            delete: row.get(4),
        };
        usable.relations.insert(QualifiedName { schema: schema.to_owned(), name: row.get(0) }, grants);
    }
    usable.functions = functions.iter().map(|row| row.get(0)).collect();
    Ok(usable)
}
