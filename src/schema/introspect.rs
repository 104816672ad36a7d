//! Catalog queries that build a [`SchemaCache`]. They run as the authenticator, in one
//! read-only transaction so that every query sees the same catalog snapshot.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_postgres::Client;

use super::{
    Column, ForeignKey, Function, FunctionArg, FunctionResult, QualifiedName, Relation, RelationKind,
    SchemaCache, ValueKind, Volatility, Writable,
};

const RELATIONS: &str = "
SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text, obj_description(c.oid, 'pg_class'),
       pg_relation_is_updatable(c.oid, true), c.reltype
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'v', 'm', 'f', 'p')";

const COLUMNS: &str = "
SELECT a.attrelid, a.attname::text, a.atttypid, format_type(a.atttypid, a.atttypmod),
       NOT a.attnotnull, pg_get_expr(d.adbin, d.adrelid), col_description(a.attrelid, a.attnum),
       coalesce(bt.oid, t.oid), coalesce(bt.typtype, t.typtype)::text
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type bt ON t.typtype = 'd' AND bt.oid = t.typbasetype
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attnum > 0 AND NOT a.attisdropped
  AND n.nspname = ANY($1) AND c.relkind IN ('r', 'v', 'm', 'f', 'p')
ORDER BY a.attrelid, a.attnum";

const CONSTRAINTS: &str = "
SELECT con.conrelid, con.contype::text, con.conname::text,
       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num ORDER BY k.ord),
       fn.nspname::text, fc.relname::text,
       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num ORDER BY k.ord)
FROM pg_constraint con
JOIN pg_class c ON c.oid = con.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_class fc ON fc.oid = con.confrelid
LEFT JOIN pg_namespace fn ON fn.oid = fc.relnamespace
WHERE con.contype IN ('p', 'u', 'f') AND n.nspname = ANY($1)
ORDER BY con.conrelid, con.conname";

/// The tables and views each view reads, from the dependencies of its rewrite rule.
const VIEW_DEPENDENCIES: &str = "
SELECT DISTINCT r.ev_class, dn.nspname::text, dc.relname::text
FROM pg_rewrite r
JOIN pg_class v ON v.oid = r.ev_class
JOIN pg_namespace vn ON vn.oid = v.relnamespace
JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
                AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> r.ev_class
JOIN pg_class dc ON dc.oid = d.refobjid
JOIN pg_namespace dn ON dn.oid = dc.relnamespace
WHERE vn.nspname = ANY($1) AND v.relkind IN ('v', 'm')
ORDER BY 1, 2, 3";

/// Functions with their input arguments (IN, INOUT, VARIADIC), their result type and, for
/// `RETURNS TABLE` and OUT parameters, their result columns.
const FUNCTIONS: &str = "
WITH args AS (
  SELECT p.oid, a.ord, a.t, coalesce(a.name, '') AS name, a.mode, format_type(a.t, NULL) AS type_name,
         coalesce(nullif(t.typbasetype, 0), t.oid) AS base_oid,
         coalesce(bt.typtype, t.typtype) = 'e' AS is_enum
  FROM pg_proc p
  JOIN pg_namespace n ON n.oid = p.pronamespace
  CROSS JOIN LATERAL unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]),
                            coalesce(p.proargmodes, '{}'::\"char\"[]),
                            coalesce(p.proargnames, '{}'::text[])) WITH ORDINALITY AS a(t, mode, name, ord)
  JOIN pg_type t ON t.oid = a.t
  LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
  WHERE n.nspname = ANY($1) AND p.prokind = 'f'
)
SELECT n.nspname::text, p.proname::text, obj_description(p.oid, 'pg_proc'),
       p.provolatile::text, p.proretset, p.prorettype, format_type(p.prorettype, NULL),
       ARRAY(SELECT a.name FROM args a WHERE a.oid = p.oid AND coalesce(a.mode, 'i') IN ('i', 'b', 'v')
             ORDER BY a.ord),
       ARRAY(SELECT a.type_name FROM args a WHERE a.oid = p.oid AND coalesce(a.mode, 'i') IN ('i', 'b', 'v')
             ORDER BY a.ord),
       p.pronargdefaults::int4, p.provariadic <> 0,
       rn.nspname::text, rc.relname::text,
       coalesce(nullif(rt.typbasetype, 0), rt.oid), coalesce(rbt.typtype, rt.typtype) = 'e',
       ARRAY(SELECT a.name FROM args a WHERE a.oid = p.oid AND a.mode IN ('o', 'b', 't') ORDER BY a.ord),
       ARRAY(SELECT a.type_name FROM args a WHERE a.oid = p.oid AND a.mode IN ('o', 'b', 't') ORDER BY a.ord),
       ARRAY(SELECT a.base_oid FROM args a WHERE a.oid = p.oid AND a.mode IN ('o', 'b', 't') ORDER BY a.ord),
       ARRAY(SELECT a.is_enum FROM args a WHERE a.oid = p.oid AND a.mode IN ('o', 'b', 't') ORDER BY a.ord),
       ARRAY(SELECT a.t FROM args a WHERE a.oid = p.oid AND coalesce(a.mode, 'i') IN ('i', 'b', 'v') ORDER BY a.ord),
       p.prorows::float8
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_type rt ON rt.oid = p.prorettype
LEFT JOIN pg_type rbt ON rbt.oid = rt.typbasetype
LEFT JOIN pg_class rc ON rc.oid = rt.typrelid
LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
WHERE n.nspname = ANY($1) AND p.prokind = 'f'
ORDER BY 1, 2, p.oid";

const TYPE_NAMES: &str = "
SELECT t.typname::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname = 'pg_catalog' OR n.nspname = ANY($1)";

/// SQL's spellings of built-in types, which `pg_type` knows under other names.
const SQL_TYPE_NAMES: &[&str] = &[
    "integer",
    "int",
    "smallint",
    "bigint",
    "real",
    "float",
    "double precision",
    "boolean",
    "decimal",
    "dec",
    "character",
    "character varying",
    "time with time zone",
    "time without time zone",
    "timestamp with time zone",
    "timestamp without time zone",
];

/// Loads the schema cache for `schemas` (with `extra` schemas' types usable in casts).
pub async fn load(client: &mut Client, schemas: &[String]) -> Result<SchemaCache, tokio_postgres::Error> {
    let tx = client.build_transaction().read_only(true).start().await?;
    let mut found: Vec<(u32, QualifiedName, RelationKind, Option<String>, i32, u32)> = Vec::new();
    for row in tx.query(RELATIONS, &[&schemas]).await? {
        let kind = match row.get::<_, &str>(3) {
            "r" => RelationKind::Table,
            "p" => RelationKind::PartitionedTable,
            "v" => RelationKind::View,
            "m" => RelationKind::MaterializedView,
            _ => RelationKind::ForeignTable,
        };
        found.push((
            row.get(0),
            QualifiedName { schema: row.get(1), name: row.get(2) },
            kind,
            row.get(4),
            row.get(5),
            row.get(6),
        ));
    }

    let mut columns: HashMap<u32, Vec<Column>> = HashMap::new();
    for row in tx.query(COLUMNS, &[&schemas]).await? {
        let base_oid: u32 = row.get(7);
        let base_kind: &str = row.get(8);
        columns.entry(row.get(0)).or_default().push(Column {
            name: row.get(1),
            type_oid: row.get(2),
            type_name: row.get(3),
            kind: value_kind(base_oid, base_kind == "e"),
            nullable: row.get(4),
            default: row.get(5),
            comment: row.get(6),
        });
    }
    let mut by_oid: HashMap<u32, Relation> = found
        .into_iter()
        .map(|(oid, name, kind, comment, updatable, row_type)| {
            let mut rel = Relation::new(name, kind, columns.remove(&oid).unwrap_or_default());
            rel.comment = comment;
            rel.row_type = row_type;
            // pg_relation_is_updatable: bit 1 << CMD_UPDATE (2), CMD_INSERT (3), CMD_DELETE (4).
            rel.writable = Writable {
                insert: updatable & (1 << 3) != 0,
                update: updatable & (1 << 2) != 0,
                delete: updatable & (1 << 4) != 0,
            };
            (oid, rel)
        })
        .collect();

    for row in tx.query(CONSTRAINTS, &[&schemas]).await? {
        let Some(rel) = by_oid.get_mut(&row.get::<_, u32>(0)) else { continue };
        let cols: Vec<String> = row.get(3);
        match row.get::<_, &str>(1) {
            "p" => rel.primary_key = cols,
            "u" => rel.unique_keys.push(cols),
            _ => {
                let (Some(schema), Some(name)) = (row.get(4), row.get(5)) else { continue };
                rel.foreign_keys.push(ForeignKey {
                    name: row.get(2),
                    columns: cols,
                    target: QualifiedName { schema, name },
                    target_columns: row.get(6),
                });
            }
        }
    }

    for row in tx.query(VIEW_DEPENDENCIES, &[&schemas]).await? {
        if let Some(rel) = by_oid.get_mut(&row.get::<_, u32>(0)) {
            rel.base_relations.push(QualifiedName { schema: row.get(1), name: row.get(2) });
        }
    }

    let mut functions: HashMap<QualifiedName, Vec<Function>> = HashMap::new();
    for row in tx.query(FUNCTIONS, &[&schemas]).await? {
        let name = QualifiedName { schema: row.get(0), name: row.get(1) };
        let names: Vec<String> = row.get(7);
        let types: Vec<String> = row.get(8);
        let defaults = usize::try_from(row.get::<_, i32>(9)).unwrap_or(0);
        let variadic: bool = row.get(10);
        let count = names.len();
        let oids: Vec<u32> = row.get(19);
        let args = names
            .into_iter()
            .zip(types)
            .zip(oids)
            .enumerate()
            .map(|(i, ((name, type_name), type_oid))| FunctionArg {
                name,
                type_name,
                type_oid,
                has_default: i + defaults >= count,
                variadic: variadic && i + 1 == count,
            })
            .collect();
        let return_type: String = row.get(6);
        let out_names: Vec<String> = row.get(15);
        let returns = if let (Some(schema), Some(rel)) = (row.get::<_, Option<String>>(11), row.get(12)) {
            FunctionResult::Composite(QualifiedName { schema, name: rel })
        } else if !out_names.is_empty() {
            let out_types: Vec<String> = row.get(16);
            let out_oids: Vec<u32> = row.get(17);
            let out_enums: Vec<bool> = row.get(18);
            FunctionResult::Columns(
                out_names
                    .into_iter()
                    .zip(out_types)
                    .zip(out_oids.into_iter().zip(out_enums))
                    .map(|((name, type_name), (oid, is_enum))| Column {
                        name,
                        type_name,
                        type_oid: oid,
                        kind: value_kind(oid, is_enum),
                        nullable: true,
                        default: None,
                        comment: None,
                    })
                    .collect(),
            )
        } else if return_type == "void" {
            FunctionResult::Void
        } else {
            FunctionResult::Scalar(value_kind(row.get(13), row.get(14)))
        };
        functions.entry(name.clone()).or_default().push(Function {
            name,
            comment: row.get(2),
            volatility: match row.get::<_, &str>(3) {
                "i" => Volatility::Immutable,
                "s" => Volatility::Stable,
                _ => Volatility::Volatile,
            },
            returns_set: row.get(4),
            return_type_oid: row.get(5),
            return_type,
            returns,
            rows: row.get(20),
            args,
        });
    }

    let mut type_names: std::collections::HashSet<String> =
        SQL_TYPE_NAMES.iter().map(|s| s.to_string()).collect();
    for row in tx.query(TYPE_NAMES, &[&schemas]).await? {
        type_names.insert(row.get(0));
    }
    let mut timezones = std::collections::HashSet::new();
    for row in tx.query("SELECT name FROM pg_timezone_names", &[]).await? {
        timezones.insert(row.get(0));
    }
    tx.commit().await?;

    let relations = by_oid.into_values().map(|r| (r.name.clone(), Arc::new(r))).collect();
    Ok(SchemaCache { relations, functions, type_names, timezones })
}

/// The rendering of a base type, by OID; enums render as text.
pub(crate) fn value_kind(base_oid: u32, is_enum: bool) -> ValueKind {
    match base_oid {
        21 => ValueKind::Int2,
        23 => ValueKind::Int4,
        20 => ValueKind::Int8,
        1700 => ValueKind::Numeric,
        16 => ValueKind::Bool,
        25 | 1043 | 1042 | 19 => ValueKind::Text,
        2950 => ValueKind::Uuid,
        1082 => ValueKind::Date,
        1114 => ValueKind::Timestamp,
        114 => ValueKind::Json,
        3802 => ValueKind::Jsonb,
        3614 => ValueKind::TsVector,
        _ if is_enum => ValueKind::Text,
        _ => ValueKind::Other,
    }
}
