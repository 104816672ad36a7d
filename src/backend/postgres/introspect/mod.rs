//! Catalog queries that build a [`SchemaCache`]. They run as the authenticator, in one
//! read-only transaction so that every query sees the same catalog snapshot.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_postgres::Client;

mod views;

use crate::schema::{
    Column, ForeignKey, Function, FunctionArg, FunctionResult, QualifiedName, Relation, RelationKind,
    SchemaCache, ValueKind, Volatility, Writable,
};

const RELATIONS: &str = "
SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text, obj_description(c.oid, 'pg_class'),
       pg_relation_is_updatable(c.oid, true), c.reltype, c.relispartition
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'v', 'm', 'f', 'p')";

const COLUMNS: &str = "
-- A domain's base type through any number of domains over domains, as PostgREST resolves it.
WITH RECURSIVE chain(oid, base) AS (
  SELECT t.oid, t.typbasetype FROM pg_type t WHERE t.typtype = 'd'
  UNION ALL
  SELECT c.oid, b.typbasetype FROM chain c JOIN pg_type b ON b.oid = c.base WHERE b.typtype = 'd'
), domain_base AS (
  SELECT c.oid, c.base FROM chain c JOIN pg_type b ON b.oid = c.base WHERE b.typtype <> 'd'
)
SELECT a.attrelid, a.attname::text, a.atttypid, format_type(a.atttypid, a.atttypmod),
       NOT (a.attnotnull OR (t.typtype = 'd' AND t.typnotnull)),
       -- The default an INSERT would use: the column's own, an identity's next value, or the
       -- domain's default.
       -- A generated column's expression is no default: nothing may be written to it.
       coalesce(CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END,
                CASE WHEN a.attidentity <> '' THEN
                  (SELECT format('nextval(%L::regclass)', format('%I.%I', sn.nspname, sq.relname))
                   FROM pg_depend dep
                   JOIN pg_class sq ON sq.oid = dep.objid AND sq.relkind = 'S'
                   JOIN pg_namespace sn ON sn.oid = sq.relnamespace
                   WHERE dep.classid = 'pg_class'::regclass AND dep.refobjid = a.attrelid
                     AND dep.refobjsubid = a.attnum AND dep.deptype = 'i') END,
                CASE WHEN t.typtype = 'd' THEN t.typdefault END),
       col_description(a.attrelid, a.attnum),
       coalesce(bt.oid, t.oid), coalesce(bt.typtype, t.typtype)::text,
       -- PostgREST's data_type, which its OpenAPI shows.
       CASE WHEN coalesce(bt.typnamespace, t.typnamespace) = 'pg_catalog'::regnamespace
            THEN format_type(coalesce(bt.oid, t.oid), NULL)
            ELSE format_type(a.atttypid, a.atttypmod) END,
       information_schema._pg_char_max_length(information_schema._pg_truetypid(a.*, t.*),
                                              information_schema._pg_truetypmod(a.*, t.*))::int4,
       coalesce((SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e
                 WHERE e.enumtypid = coalesce(bt.oid, t.oid)), '{}')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN domain_base db ON db.oid = t.oid
LEFT JOIN pg_type bt ON bt.oid = db.base
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
SELECT n.nspname::text, p.proname::text, obj_description(p.oid, 'pg_proc'),
       p.provolatile::text, p.proretset, p.prorettype, format_type(p.prorettype, NULL),
       coalesce(args.in_names, '{}'), coalesce(args.in_types, '{}'),
       p.pronargdefaults::int4, p.provariadic <> 0,
       rn.nspname::text, rc.relname::text,
       coalesce(nullif(rt.typbasetype, 0), rt.oid), coalesce(rbt.typtype, rt.typtype) = 'e',
       coalesce(args.out_names, '{}'), coalesce(args.out_types, '{}'), coalesce(args.out_oids, '{}'),
       coalesce(args.out_enums, '{}'), coalesce(args.in_oids, '{}'), p.prorows::float8,
       rc.relkind::text, coalesce(ct.names, '{}'), coalesce(ct.types, '{}'), coalesce(ct.oids, '{}'),
       coalesce(ct.enums, '{}'), p.oid
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
JOIN pg_type rt ON rt.oid = p.prorettype
LEFT JOIN pg_type rbt ON rbt.oid = rt.typbasetype
LEFT JOIN pg_class rc ON rc.oid = rt.typrelid
LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
LEFT JOIN LATERAL (
  SELECT array_agg(coalesce(a.name, '') ORDER BY a.ord) FILTER (WHERE a.input) AS in_names,
         array_agg(format_type(a.t, NULL) ORDER BY a.ord) FILTER (WHERE a.input) AS in_types,
         array_agg(a.t ORDER BY a.ord) FILTER (WHERE a.input) AS in_oids,
         array_agg(coalesce(a.name, '') ORDER BY a.ord) FILTER (WHERE a.output) AS out_names,
         array_agg(format_type(a.t, NULL) ORDER BY a.ord) FILTER (WHERE a.output) AS out_types,
         array_agg(coalesce(nullif(t.typbasetype, 0), t.oid) ORDER BY a.ord) FILTER (WHERE a.output) AS out_oids,
         array_agg(coalesce(bt.typtype, t.typtype) = 'e' ORDER BY a.ord) FILTER (WHERE a.output) AS out_enums
  FROM (SELECT u.t, u.name, u.ord, coalesce(u.mode, 'i') IN ('i', 'b', 'v') AS input,
               coalesce(u.mode, 'i') IN ('o', 'b', 't') AS output
        FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[]),
                    coalesce(p.proargmodes, '{}'::\"char\"[]),
                    coalesce(p.proargnames, '{}'::text[])) WITH ORDINALITY AS u(t, mode, name, ord)) a
  JOIN pg_type t ON t.oid = a.t
  LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
) args ON true
LEFT JOIN LATERAL (
  SELECT array_agg(at.attname::text ORDER BY at.attnum) AS names,
         array_agg(format_type(at.atttypid, at.atttypmod) ORDER BY at.attnum) AS types,
         array_agg(coalesce(nullif(t.typbasetype, 0), t.oid) ORDER BY at.attnum) AS oids,
         array_agg(coalesce(bt.typtype, t.typtype) = 'e' ORDER BY at.attnum) AS enums
  FROM pg_attribute at
  JOIN pg_type t ON t.oid = at.atttypid
  LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
  WHERE rc.relkind = 'c' AND at.attrelid = rc.oid AND at.attnum > 0 AND NOT at.attisdropped
) ct ON true
WHERE n.nspname = ANY($1) AND p.prokind = 'f'
ORDER BY 1, 2, p.oid";

/// What may set `response.headers` or `response.status`: functions whose source names them, or
/// names such a function (a helper, found by its name as a word), and the relations with a
/// trigger calling one. Read from the source text, so C and internal functions are left out; a
/// SQL-standard body (`BEGIN ATOMIC`), which keeps no source text, is assumed to.
const RESPONSE_SETTERS: &str = "
WITH RECURSIVE src AS (
  SELECT p.oid, lower(p.proname::text) AS name, lower(p.prosrc) AS body
  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
  WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND p.prolang NOT IN (12, 13)
), setters(oid, name) AS (
  SELECT oid, name FROM src WHERE strpos(body, 'response.') > 0 OR body = ''
  UNION
  SELECT s.oid, s.name FROM src s JOIN setters t
    ON strpos(s.body, t.name) > 0
   AND s.body ~ ('(^|[^a-z0-9_$])' || regexp_replace(t.name, '([^a-z0-9_])', '\\\\\\1', 'g') || '([^a-z0-9_$]|$)')
)
SELECT 'f', s.oid, NULL::text, NULL::text FROM setters s
UNION ALL
SELECT DISTINCT 'r', c.oid, n.nspname::text, c.relname::text
FROM pg_trigger t
JOIN setters s ON s.oid = t.tgfoid
JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT t.tgisinternal";

/// Media type handlers, as PostgREST finds them: domains named like a media type (or `*/*`);
/// aggregates in the exposed schemas returning one, of a relation's row type or `anyelement`;
/// and functions there returning one (not a set).
const MEDIA_HANDLERS: &str = "
WITH media_types AS (
  SELECT t.oid, lower(t.typname::text) AS media_type, b.typname = 'bytea' AS binary
  FROM pg_type t JOIN pg_type b ON b.oid = t.typbasetype
  WHERE t.typtype = 'd' AND (t.typname ~* '^[A-Za-z0-9.-]+/[A-Za-z0-9.+-]+$' OR t.typname = '*/*')
)
SELECT m.media_type, m.binary, an.nspname::text, a.relname::text, pn.nspname::text, p.proname::text, true
FROM media_types m
JOIN pg_proc p ON p.prorettype = m.oid
JOIN pg_namespace pn ON pn.oid = p.pronamespace
JOIN pg_aggregate agg ON agg.aggfnoid = p.oid
JOIN pg_type arg ON arg.oid = p.proargtypes[0]
LEFT JOIN pg_class a ON a.oid = arg.typrelid AND a.relkind IN ('r', 'v', 'm', 'f', 'p')
LEFT JOIN pg_namespace an ON an.oid = a.relnamespace
WHERE pn.nspname = ANY($1) AND p.pronargs = 1 AND (a.oid IS NOT NULL OR arg.typname = 'anyelement')
UNION ALL
SELECT m.media_type, m.binary, pn.nspname::text, p.proname::text, NULL, NULL, false
FROM media_types m
JOIN pg_proc p ON p.prorettype = m.oid
JOIN pg_namespace pn ON pn.oid = p.pronamespace
WHERE pn.nspname = ANY($1) AND NOT p.proretset AND p.prokind = 'f'";

/// PostgREST's data representations: implicit casts by a function the authenticator may call,
/// from a domain to `json` (`to json`: how answers write it), or to a domain from `text`
/// (`from text`: how filters' values are read) or from `json` (`from json`: how bodies' are);
/// with the domain's OID.
const REPRESENTATIONS: &str = "
SELECT CASE WHEN s.typtype = 'd' THEN 'to json' WHEN c.castsource = 'text'::regtype THEN 'from text'
            ELSE 'from json' END,
       CASE WHEN s.typtype = 'd' THEN c.castsource ELSE c.casttarget END,
       pn.nspname::text, p.proname::text
FROM pg_cast c
JOIN pg_type s ON s.oid = c.castsource
JOIN pg_type t ON t.oid = c.casttarget
JOIN pg_proc p ON p.oid = c.castfunc
JOIN pg_namespace pn ON pn.oid = p.pronamespace
WHERE c.castcontext = 'i' AND c.castmethod = 'f' AND has_function_privilege(c.castfunc, 'execute')
  AND ((s.typtype = 'd' AND c.casttarget = 'json'::regtype)
    OR (t.typtype = 'd' AND c.castsource IN ('text'::regtype, 'json'::regtype)))";

/// The enums and composite types (not a relation's row type) of the exposed schemas.
const NAMED_TYPES: &str = "
SELECT n.nspname::text, t.typname::text, format_type(t.oid, NULL),
       coalesce((SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_enum e
                 WHERE e.enumtypid = t.oid), '{}'),
       coalesce((SELECT array_agg(a.attname::text ORDER BY a.attnum) FROM pg_attribute a
                 WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped), '{}'),
       coalesce((SELECT array_agg(format_type(a.atttypid, NULL) ORDER BY a.attnum) FROM pg_attribute a
                 WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped), '{}')
FROM pg_type t
JOIN pg_namespace n ON n.oid = t.typnamespace
LEFT JOIN pg_class c ON c.oid = t.typrelid
WHERE n.nspname = ANY($1) AND (t.typtype = 'e' OR (t.typtype = 'c' AND c.relkind = 'c'))
ORDER BY 1, 2";

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
pub async fn load(
    client: &mut Client,
    schemas: &[String],
    keyed_claims: Option<&[String]>,
) -> Result<SchemaCache, tokio_postgres::Error> {
    let tx = client.build_transaction().read_only(true).start().await?;
    let mut found: Vec<(u32, QualifiedName, RelationKind, Option<String>, i32, u32)> = Vec::new();
    let mut partitions = std::collections::HashSet::new();
    for row in tx.query(RELATIONS, &[&schemas]).await? {
        if row.get::<_, bool>(7) {
            partitions.insert(row.get::<_, u32>(0));
        }
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
            data_type: row.get(9),
            max_length: row.get::<_, Option<i32>>(10).and_then(|n| u32::try_from(n).ok()),
            enum_values: row.get(11),
        });
    }
    let mut by_oid: HashMap<u32, Relation> = found
        .into_iter()
        .map(|(oid, name, kind, comment, updatable, row_type)| {
            let mut rel = Relation::new(name, kind, columns.remove(&oid).unwrap_or_default());
            rel.oid = oid;
            rel.partition = partitions.contains(&oid);
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

    views::views_relationships(&tx, &mut by_oid).await?;

    let mut setter_functions = std::collections::HashSet::new();
    let mut setter_relations = std::collections::HashSet::new();
    for row in tx.query(RESPONSE_SETTERS, &[]).await? {
        match row.get::<_, &str>(0) {
            "f" => setter_functions.insert(row.get::<_, u32>(1)),
            _ => setter_relations.insert(QualifiedName { schema: row.get(2), name: row.get(3) }),
        };
    }
    for rel in by_oid.values_mut() {
        // A write to a view reaches its base tables' triggers too.
        rel.sets_response = setter_relations.contains(&rel.name)
            || rel.base_relations.iter().any(|base| setter_relations.contains(base));
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
        let args: Vec<FunctionArg> = names
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
        // A composite type of its own (`CREATE TYPE ... AS`) is read as OUT parameters are: its
        // fields are the result's columns.
        let own_type = row.get::<_, Option<String>>(21).as_deref() == Some("c");
        let (out_names, out_types, out_oids, out_enums): (Vec<String>, Vec<String>, Vec<u32>, Vec<bool>) =
            match own_type {
                true => (row.get(22), row.get(23), row.get(24), row.get(25)),
                false => (row.get(15), row.get(16), row.get(17), row.get(18)),
            };
        let returns = if let (false, Some(schema), Some(rel)) =
            (own_type, row.get::<_, Option<String>>(11), row.get::<_, Option<String>>(12))
        {
            FunctionResult::Composite(QualifiedName { schema, name: rel })
        } else if !out_names.is_empty() {
            FunctionResult::Columns(
                out_names
                    .into_iter()
                    .zip(out_types)
                    .zip(out_oids.into_iter().zip(out_enums))
                    .map(|((name, type_name), (oid, is_enum))| Column {
                        name,
                        data_type: type_name.clone(),
                        type_name,
                        type_oid: oid,
                        kind: value_kind(oid, is_enum),
                        nullable: true,
                        default: None,
                        comment: None,
                        max_length: None,
                        enum_values: Vec::new(),
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
            sets_response: setter_functions.contains(&row.get::<_, u32>(26)),
            oid: row.get(26),
            args,
        });
    }

    let mut type_names: std::collections::HashSet<String> =
        SQL_TYPE_NAMES.iter().map(|s| s.to_string()).collect();
    for row in tx.query(TYPE_NAMES, &[&schemas]).await? {
        type_names.insert(row.get(0));
    }
    let mut media_handlers = Vec::new();
    for row in tx.query(MEDIA_HANDLERS, &[&schemas]).await? {
        let name = |schema: usize, name: usize| -> Option<QualifiedName> {
            Some(QualifiedName {
                schema: row.get::<_, Option<String>>(schema)?,
                name: row.get::<_, Option<String>>(name)?,
            })
        };
        let aggregate = row.get::<_, bool>(6);
        media_handlers.push(crate::schema::MediaHandler {
            media_type: row.get(0),
            binary: row.get(1),
            applies_to: name(2, 3),
            aggregate: if aggregate { name(4, 5) } else { None },
        });
    }
    let postgis = tx
        .query_opt(
            "SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace \
             WHERE e.extname = 'postgis'",
            &[],
        )
        .await?
        .map(|row| row.get(0));
    let (mut json_representations, mut text_parsers, mut json_parsers) =
        (HashMap::new(), HashMap::new(), HashMap::new());
    for row in tx.query(REPRESENTATIONS, &[]).await? {
        let function = QualifiedName { schema: row.get(2), name: row.get(3) };
        let map = match row.get::<_, &str>(0) {
            "to json" => &mut json_representations,
            "from text" => &mut text_parsers,
            _ => &mut json_parsers,
        };
        map.insert(row.get::<_, u32>(1), function);
    }
    let mut schema_comments = HashMap::new();
    for row in tx
        .query(
            "SELECT n.nspname::text, d.description FROM pg_namespace n \
             JOIN pg_description d ON d.objoid = n.oid AND d.classoid = 'pg_namespace'::regclass \
             WHERE n.nspname = ANY($1)",
            &[&schemas],
        )
        .await?
    {
        schema_comments.insert(row.get(0), row.get(1));
    }
    let mut named_types = Vec::new();
    for row in tx.query(NAMED_TYPES, &[&schemas]).await? {
        let names: Vec<String> = row.get(4);
        let types: Vec<String> = row.get(5);
        named_types.push(crate::schema::NamedType {
            name: QualifiedName { schema: row.get(0), name: row.get(1) },
            type_name: row.get(2),
            labels: row.get(3),
            attributes: names.into_iter().zip(types).collect(),
        });
    }
    let exposed: Vec<u32> = by_oid.keys().copied().collect();
    let dependencies = super::dependencies::load(&tx, &exposed, keyed_claims).await?;
    tx.commit().await?;

    let relations = by_oid.into_values().map(|r| (r.name.clone(), Arc::new(r))).collect();
    Ok(SchemaCache {
        relations,
        functions,
        type_names,
        time_zones: true,
        postgis,
        media_handlers,
        dependencies,
        json_representations,
        text_parsers,
        json_parsers,
        schema_comments,
        named_types,
    })
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
