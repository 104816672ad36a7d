//! `rowgate gen types typescript`: the `Database` type `supabase gen types typescript` prints
//! for the same schemas — per schema its tables' and views' `Row`, `Insert`, `Update` and
//! `Relationships`, its functions' `Args` and `Returns`, its enums and composite types — and
//! the helper types beside it (`Tables`, `TablesInsert`, `TablesUpdate`, `Enums`,
//! `CompositeTypes`, `Constants`), so `createClient<Database>()` type-checks queries.

use std::fmt::Write;

use crate::schema::{Column, Function, FunctionResult, NamedType, Relation, RelationKind, SchemaCache};

/// The TypeScript module for `schemas`; `postgrest_version` is what supabase-js reads to
/// pick its features (`__InternalSupabase.PostgrestVersion`).
pub fn database_type(cache: &SchemaCache, schemas: &[String], postgrest_version: &str) -> String {
    let mut schemas: Vec<&String> = schemas.iter().collect();
    schemas.sort();
    schemas.dedup();
    let ts = Types { cache, schemas: &schemas };
    let mut out = String::new();
    out.push_str(
        "export type Json =\n  | string\n  | number\n  | boolean\n  | null\n  | { [key: string]: Json | undefined }\n  | Json[]\n\n",
    );
    out.push_str("export type Database = {\n");
    out.push_str("  // Allows to automatically instantiate createClient with right options\n");
    out.push_str("  // instead of createClient<Database, { PostgrestVersion: 'XX' }>(URL, KEY)\n");
    let _ =
        writeln!(out, "  __InternalSupabase: {{\n    PostgrestVersion: {}\n  }}", quote(postgrest_version));
    for schema in &schemas {
        let _ = writeln!(out, "  {}: {{", key(schema));
        write_schema(&mut out, &ts, schema);
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    let default =
        schemas.iter().find(|s| s.as_str() == "public").or(schemas.first()).map_or("public", |s| s.as_str());
    out.push_str(&helpers(default));
    out.push_str("\nexport const Constants = {\n");
    for schema in &schemas {
        let _ = writeln!(out, "  {}: {{\n    Enums: {{", key(schema));
        for t in ts.enums(schema) {
            let labels: Vec<String> = t.labels.iter().map(|l| quote(l)).collect();
            let _ = writeln!(out, "      {}: [{}],", key(&t.name.name), labels.join(", "));
        }
        out.push_str("    },\n  },\n");
    }
    out.push_str("} as const\n");
    out
}

fn write_schema(out: &mut String, ts: &Types<'_>, schema: &str) {
    let mut relations: Vec<&Relation> = ts
        .cache
        .relations
        .values()
        .filter(|r| r.name.schema == schema && !r.partition)
        .map(|r| &**r)
        .collect();
    relations.sort_by_key(|r| order(&r.name.name));
    let (views, tables): (Vec<&Relation>, Vec<&Relation>) = relations
        .into_iter()
        .partition(|r| matches!(r.kind, RelationKind::View | RelationKind::MaterializedView));
    out.push_str("    Tables: {\n");
    if tables.is_empty() {
        out.push_str("      [_ in never]: never\n");
    }
    for table in &tables {
        let _ = writeln!(out, "      {}: {{", key(&table.name.name));
        let columns = sorted(&table.columns);
        write_object(out, "Row", columns.iter().map(|c| (c.name.as_str(), false, ts.column(c))));
        write_object(
            out,
            "Insert",
            columns.iter().map(|c| (c.name.as_str(), c.nullable || c.default.is_some(), ts.column(c))),
        );
        write_object(out, "Update", columns.iter().map(|c| (c.name.as_str(), true, ts.column(c))));
        write_relationships(out, table);
        out.push_str("      }\n");
    }
    out.push_str("    }\n    Views: {\n");
    if views.is_empty() {
        out.push_str("      [_ in never]: never\n");
    }
    for view in &views {
        let _ = writeln!(out, "      {}: {{", key(&view.name.name));
        let columns = sorted(&view.columns);
        write_object(out, "Row", columns.iter().map(|c| (c.name.as_str(), false, ts.column(c))));
        let w = view.writable;
        if w.insert || w.update {
            // A view's columns are all nullable as PostgreSQL reports them.
            let optional = |c: &&Column| (c.name.clone(), format!("{} | null", ts.name(&c.data_type)));
            let fields: Vec<(String, String)> = columns.iter().map(optional).collect();
            write_object(out, "Insert", fields.iter().map(|(n, t)| (n.as_str(), true, t.clone())));
            write_object(out, "Update", fields.iter().map(|(n, t)| (n.as_str(), true, t.clone())));
        }
        write_relationships(out, view);
        out.push_str("      }\n");
    }
    out.push_str("    }\n    Functions: {\n");
    let mut names: Vec<&String> = ts
        .cache
        .functions
        .iter()
        .filter(|(q, fs)| q.schema == schema && fs.iter().any(|f| callable(&f)))
        .map(|(q, _)| &q.name)
        .collect();
    names.sort_by_key(|n| order(n));
    if names.is_empty() {
        out.push_str("      [_ in never]: never\n");
    }
    for name in names {
        let q = crate::schema::QualifiedName { schema: schema.to_owned(), name: name.clone() };
        let overloads: Vec<&Function> = ts.cache.functions[&q].iter().filter(callable).collect();
        let args: Vec<String> = overloads.iter().map(|f| ts.args(f)).collect();
        let _ = writeln!(out, "      {}: {{", key(name));
        let _ = writeln!(out, "        Args: {}", args.join(" | "));
        let _ = writeln!(out, "        Returns: {}", ts.returns(overloads[0]));
        out.push_str("      }\n");
    }
    out.push_str("    }\n    Enums: {\n");
    let enums = ts.enums(schema);
    if enums.is_empty() {
        out.push_str("      [_ in never]: never\n");
    }
    for t in enums {
        let labels: Vec<String> = t.labels.iter().map(|l| quote(l)).collect();
        let _ = writeln!(out, "      {}: {}", key(&t.name.name), labels.join(" | "));
    }
    out.push_str("    }\n    CompositeTypes: {\n");
    let composites: Vec<&NamedType> =
        ts.cache.named_types.iter().filter(|t| t.name.schema == schema && !t.attributes.is_empty()).collect();
    if composites.is_empty() {
        out.push_str("      [_ in never]: never\n");
    }
    for t in composites {
        let fields: Vec<(String, String)> =
            t.attributes.iter().map(|(n, ty)| (n.clone(), format!("{} | null", ts.name(ty)))).collect();
        let _ = writeln!(out, "      {}: {{", key(&t.name.name));
        for (n, ty) in fields {
            let _ = writeln!(out, "        {}: {ty}", key(&n));
        }
        out.push_str("      }\n");
    }
    out.push_str("    }\n");
}

/// `Name: { field: type ... }` at the table level; `optional` adds `?`.
fn write_object<'a>(out: &mut String, name: &str, fields: impl Iterator<Item = (&'a str, bool, String)>) {
    let _ = writeln!(out, "        {name}: {{");
    for (field, optional, ty) in fields {
        let _ = writeln!(out, "          {}{}: {ty}", key(field), if optional { "?" } else { "" });
    }
    out.push_str("        }\n");
}

/// Foreign keys to relations of the same schema, as supabase-js embeds by them.
fn write_relationships(out: &mut String, relation: &Relation) {
    let mut keys: Vec<&crate::schema::ForeignKey> =
        relation.foreign_keys.iter().filter(|fk| fk.target.schema == relation.name.schema).collect();
    keys.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.target.name.cmp(&b.target.name)));
    if keys.is_empty() {
        out.push_str("        Relationships: []\n");
        return;
    }
    out.push_str("        Relationships: [\n");
    for fk in keys {
        let columns: Vec<String> = fk.columns.iter().map(|c| quote(c)).collect();
        let targets: Vec<String> = fk.target_columns.iter().map(|c| quote(c)).collect();
        // One-to-one: the referencing columns are the relation's primary key or a unique key.
        let mut own: Vec<&String> = fk.columns.iter().collect();
        own.sort();
        let unique = std::iter::once(&relation.primary_key).chain(relation.unique_keys.iter()).any(|k| {
            let mut k: Vec<&String> = k.iter().collect();
            k.sort();
            !k.is_empty() && k == own
        });
        let _ = write!(
            out,
            "          {{\n            foreignKeyName: {}\n            columns: [{}]\n            isOneToOne: {unique}\n            referencedRelation: {}\n            referencedColumns: [{}]\n          }},\n",
            quote(&fk.name),
            columns.join(", "),
            quote(&fk.target.name),
            targets.join(", ")
        );
    }
    out.push_str("        ]\n");
}

fn sorted(columns: &[Column]) -> Vec<&Column> {
    let mut c: Vec<&Column> = columns.iter().collect();
    c.sort_by_key(|c| order(&c.name));
    c
}

/// supabase's order of names (JavaScript's `localeCompare`): letters before case.
fn order(name: &str) -> (String, String) {
    (name.to_lowercase(), name.to_owned())
}

/// Whether PostgREST can call the function (as supabase's generator keeps them): every input
/// argument named, or a single one.
fn callable(f: &&Function) -> bool {
    f.return_type != "trigger" && (f.args.len() <= 1 || f.args.iter().all(|a| !a.name.is_empty()))
}

/// Type names → TypeScript.
struct Types<'a> {
    cache: &'a SchemaCache,
    schemas: &'a [&'a String],
}

impl Types<'_> {
    fn enums(&self, schema: &str) -> Vec<&NamedType> {
        self.cache.named_types.iter().filter(|t| t.name.schema == schema && !t.labels.is_empty()).collect()
    }

    /// A column's type in a row: its type, `| null` when nullable.
    fn column(&self, c: &Column) -> String {
        let t = self.name(&c.data_type);
        if c.nullable {
            format!("{t} | null")
        } else {
            t
        }
    }

    /// The TypeScript type of PostgreSQL type `pg` (as `format_type` writes it).
    fn name(&self, pg: &str) -> String {
        if let Some(element) = pg.strip_suffix("[]") {
            let inner = self.name(element);
            return if inner.contains(' ') { format!("({inner})[]") } else { format!("{inner}[]") };
        }
        let bare = pg.split('(').next().unwrap_or(pg).trim();
        match bare {
            "boolean" => return "boolean".into(),
            "smallint" | "integer" | "bigint" | "real" | "double precision" | "numeric" => {
                return "number".into()
            }
            "json" | "jsonb" => return "Json".into(),
            "text"
            | "character varying"
            | "character"
            | "citext"
            | "date"
            | "time without time zone"
            | "time with time zone"
            | "timestamp without time zone"
            | "timestamp with time zone"
            | "uuid"
            | "bytea"
            | "vector" => return "string".into(),
            "void" => return "undefined".into(),
            "record" => return "Record<string, unknown>".into(),
            _ => {}
        }
        let named =
            |t: &&NamedType| t.type_name == bare && (!t.labels.is_empty() || !t.attributes.is_empty());
        if let Some(t) = self.cache.named_types.iter().find(named) {
            let section = if t.labels.is_empty() { "CompositeTypes" } else { "Enums" };
            return format!("Database[{}][\"{section}\"][{}]", quote(&t.name.schema), quote(&t.name.name));
        }
        let relation = self.cache.relations.values().find(|r| {
            self.schemas.iter().any(|s| **s == r.name.schema)
                && (r.name.name == bare || format!("{}.{}", r.name.schema, r.name.name) == bare)
        });
        if let Some(r) = relation {
            let section = match r.kind {
                RelationKind::View | RelationKind::MaterializedView => "Views",
                _ => "Tables",
            };
            return format!(
                "Database[{}][\"{section}\"][{}][\"Row\"]",
                quote(&r.name.schema),
                quote(&r.name.name)
            );
        }
        "unknown".into()
    }

    fn args(&self, f: &Function) -> String {
        if f.args.is_empty() {
            return "Record<PropertyKey, never>".into();
        }
        let fields: Vec<String> = f
            .args
            .iter()
            .map(|a| {
                format!(
                    "{}{}: {}",
                    key(&a.name),
                    if a.has_default { "?" } else { "" },
                    self.name(&a.type_name)
                )
            })
            .collect();
        format!("{{ {} }}", fields.join("; "))
    }

    fn returns(&self, f: &Function) -> String {
        let one = match &f.returns {
            FunctionResult::Void => return "undefined".into(),
            FunctionResult::Composite(q) => match self.cache.relations.get(q) {
                Some(r) => {
                    let fields: Vec<String> = sorted(&r.columns)
                        .iter()
                        .map(|c| format!("{}: {}", key(&c.name), self.column(c)))
                        .collect();
                    format!("{{ {} }}", fields.join("; "))
                }
                None => "unknown".into(),
            },
            FunctionResult::Columns(columns) => {
                let fields: Vec<String> = columns
                    .iter()
                    .map(|c| format!("{}: {}", key(&c.name), self.name(&c.data_type)))
                    .collect();
                format!("{{ {} }}", fields.join("; "))
            }
            FunctionResult::Scalar(_) => self.name(&f.return_type),
        };
        if f.returns_set {
            if one.contains(' ') && !one.starts_with('{') {
                format!("({one})[]")
            } else {
                format!("{one}[]")
            }
        } else {
            one
        }
    }
}

/// A property key: bare when it is an identifier, else quoted.
fn key(name: &str) -> String {
    let identifier = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if identifier {
        name.to_owned()
    } else {
        quote(name)
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// supabase's helper types over `Database`, defaulting to `default`'s schema.
fn helpers(default: &str) -> String {
    let mut out =
        String::from("\ntype DatabaseWithoutInternals = Omit<Database, \"__InternalSupabase\">\n\n");
    let _ = writeln!(
        out,
        "type DefaultSchema = DatabaseWithoutInternals[Extract<keyof Database, {}>]\n",
        quote(default)
    );
    // Row of a table or view, Insert and Update of a table, an enum, a composite type: by name
    // in the default schema, or `{ schema }` and a name in another.
    for (name, param, sections, part) in [
        ("Tables", "DefaultSchemaTableNameOrOptions", "Tables\"] & DefaultSchema[\"Views", Some("Row")),
        ("TablesInsert", "DefaultSchemaTableNameOrOptions", "Tables", Some("Insert")),
        ("TablesUpdate", "DefaultSchemaTableNameOrOptions", "Tables", Some("Update")),
        ("Enums", "DefaultSchemaEnumNameOrOptions", "Enums", None),
        ("CompositeTypes", "PublicCompositeTypeNameOrOptions", "CompositeTypes", None),
    ] {
        let in_schema = |s: &str| -> String {
            sections
                .split("\"] & DefaultSchema[\"")
                .map(|sec| format!("DatabaseWithoutInternals[{s}[\"schema\"]][\"{sec}\"]"))
                .collect::<Vec<_>>()
                .join(" & ")
        };
        let default_sections = format!("(DefaultSchema[\"{sections}\"])");
        let other = in_schema(param);
        let pick = |t: &str| match part {
            Some(p) => format!("({t})[Name] extends {{ {p}: infer R }} ? R : never"),
            None => format!("({t})[Name]"),
        };
        let default_pick = match part {
            Some(p) => format!("{default_sections}[{param}] extends {{ {p}: infer R }} ? R : never"),
            None => format!("{default_sections}[{param}]"),
        };
        let _ = write!(
            out,
            "export type {name}<\n  {param} extends keyof {default_sections} | {{ schema: keyof DatabaseWithoutInternals }},\n  \
             Name extends {param} extends {{ schema: keyof DatabaseWithoutInternals }}\n    ? keyof ({other})\n    : never = never,\n\
             > = {param} extends {{ schema: keyof DatabaseWithoutInternals }}\n  ? {}\n  : {param} extends keyof {default_sections}\n    ? {default_pick}\n    : never\n\n",
            pick(&other)
        );
    }
    out
}
