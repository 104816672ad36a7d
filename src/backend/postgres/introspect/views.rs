//! Relationships through views, as PostgREST finds them: where each column of a view comes
//! from (its stored rule's target list), followed down views of views to the tables, so that
//! a view showing a table's key columns carries the table's keys.

use std::collections::HashMap;

use crate::schema::{ForeignKey, Relation, RelationKind};

/// Primary and foreign keys of the tables views read, by their columns' names: (relation,
/// kind, name, columns, target relation, target columns).
const BASE_KEYS: &str = "
SELECT con.conrelid, con.contype::text, con.conname::text,
       ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num ORDER BY k.ord),
       con.confrelid,
       ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(num, ord)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num ORDER BY k.ord)
FROM pg_constraint con
WHERE con.contype IN ('p', 'f') AND (con.conrelid = ANY($1) OR con.confrelid = ANY($1))
ORDER BY con.conrelid, con.conname";

/// The name of each column of the given relations, by attribute number.
const ATTRIBUTES: &str = "
SELECT a.attrelid, a.attnum::int4, a.attname::text FROM pg_attribute a
WHERE a.attrelid = ANY($1) AND a.attnum > 0 AND NOT a.attisdropped";

/// The `_RETURN` rules of the given views.
const VIEW_RULES: &str = "
SELECT r.ev_class, r.ev_action::text FROM pg_rewrite r
WHERE r.ev_class = ANY($1) AND r.rulename = '_RETURN'";

/// Relationships through views, as PostgREST finds them: a view column that shows a table
/// column unchanged carries that column's keys. PostgreSQL records, in the view's stored rule,
/// where each output column comes from (`resorigtbl`, `resorigcol` of the top-level target
/// list, already traced through subqueries); views of views are followed down to the tables.
/// A foreign key whose columns a relation shows, to a table whose key columns another relation
/// shows, becomes a foreign key between those two (views on either side); a view of one table
/// that shows its primary key gets that primary key.
pub(super) async fn views_relationships(
    tx: &tokio_postgres::Transaction<'_>,
    by_oid: &mut HashMap<u32, Relation>,
) -> Result<(), tokio_postgres::Error> {
    // view oid -> per view column: (relation oid, attnum) it shows, if any
    let mut origins: HashMap<u32, Vec<Option<(u32, i16)>>> = HashMap::new();
    let mut wanted: Vec<u32> = by_oid
        .iter()
        .filter(|(_, r)| matches!(r.kind, RelationKind::View | RelationKind::MaterializedView))
        .map(|(oid, _)| *oid)
        .collect();
    // Views of views, however deep (bounded, in case of a cycle through dropped objects).
    let mut asked: std::collections::HashSet<u32> = std::collections::HashSet::new();
    for _ in 0..16 {
        if wanted.is_empty() {
            break;
        }
        asked.extend(wanted.iter().copied());
        for row in tx.query(VIEW_RULES, &[&wanted]).await? {
            origins.insert(row.get(0), rule_origins(row.get(1)));
        }
        // Only views have a _RETURN rule; tables come back with nothing and are not asked again.
        let mut next: Vec<u32> =
            origins.values().flatten().flatten().map(|(t, _)| *t).filter(|t| !asked.contains(t)).collect();
        next.sort_unstable();
        next.dedup();
        wanted = next;
    }
    let direct = origins.clone();
    for cols in origins.values_mut() {
        for origin in cols.iter_mut() {
            for _ in 0..16 {
                match origin
                    .and_then(|(t, c)| direct.get(&t).map(|o| o.get(c as usize - 1).copied().flatten()))
                {
                    Some(deeper) => *origin = deeper,
                    None => break,
                }
            }
        }
    }
    origins.retain(|oid, _| by_oid.contains_key(oid));
    if origins.is_empty() {
        return Ok(());
    }
    let mut bases: Vec<u32> = origins.values().flatten().flatten().map(|(t, _)| *t).collect();
    bases.extend(by_oid.keys().copied());
    bases.sort_unstable();
    bases.dedup();
    let mut attname: HashMap<(u32, i16), String> = HashMap::new();
    for row in tx.query(ATTRIBUTES, &[&bases]).await? {
        attname.insert((row.get(0), row.get::<_, i32>(1) as i16), row.get(2));
    }
    // Which exposed relations show which base column, and under what name.
    let mut shows: HashMap<(u32, String), Vec<(u32, String)>> = HashMap::new();
    for (oid, rel) in by_oid.iter() {
        if let Some(cols) = origins.get(oid) {
            for (col, origin) in rel.columns.iter().zip(cols) {
                if let Some(base_col) = origin.and_then(|o| attname.get(&o)) {
                    shows
                        .entry((origin.unwrap().0, base_col.clone()))
                        .or_default()
                        .push((*oid, col.name.clone()));
                }
            }
        } else if matches!(
            rel.kind,
            RelationKind::Table | RelationKind::PartitionedTable | RelationKind::ForeignTable
        ) {
            for col in &rel.columns {
                shows.entry((*oid, col.name.clone())).or_default().push((*oid, col.name.clone()));
            }
        }
    }
    // The relations showing all of `cols` of `base`, with the names they show them under.
    let showing = |base: u32, cols: &[String]| -> Vec<(u32, Vec<String>)> {
        let Some(first) = cols.first().and_then(|c| shows.get(&(base, c.clone()))) else { return Vec::new() };
        first
            .iter()
            .filter_map(|(rel, _)| {
                cols.iter()
                    .map(|c| {
                        shows.get(&(base, c.clone()))?.iter().find(|(r, _)| r == rel).map(|(_, n)| n.clone())
                    })
                    .collect::<Option<Vec<String>>>()
                    .map(|names| (*rel, names))
            })
            .collect()
    };
    let mut new_fks: Vec<(u32, ForeignKey)> = Vec::new();
    let mut new_pks: Vec<(u32, Vec<String>)> = Vec::new();
    for row in tx.query(BASE_KEYS, &[&bases]).await? {
        let (base, kind, name, cols): (u32, &str, String, Vec<String>) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        if kind == "p" {
            for (rel, names) in showing(base, &cols) {
                let view = origins.get(&rel);
                // Only a view of this one table keeps its key unique.
                if view.is_some_and(|o| o.iter().flatten().all(|(t, _)| *t == base)) {
                    new_pks.push((rel, names));
                }
            }
            continue;
        }
        let (target, target_cols): (u32, Vec<String>) = (row.get(4), row.get(5));
        for (from, from_names) in showing(base, &cols) {
            for (to, to_names) in showing(target, &target_cols) {
                let plain = !origins.contains_key(&from) && !origins.contains_key(&to);
                if plain {
                    continue; // a table-to-table key, already known
                }
                let Some(target_rel) = by_oid.get(&to) else { continue };
                new_fks.push((
                    from,
                    ForeignKey {
                        name: name.clone(),
                        columns: from_names.clone(),
                        target: target_rel.name.clone(),
                        target_columns: to_names,
                    },
                ));
            }
        }
    }
    for (rel, fk) in new_fks {
        if let Some(r) = by_oid.get_mut(&rel) {
            r.foreign_keys.push(fk);
        }
    }
    for (rel, pk) in new_pks {
        if let Some(r) = by_oid.get_mut(&rel) {
            if r.primary_key.is_empty() {
                r.primary_key = pk;
            }
        }
    }
    Ok(())
}

/// Where each output column of a view comes from: the `resorigtbl` and `resorigcol` of the
/// non-junk entries of the top-level target list in the node text of its `_RETURN` rule
/// (`pg_rewrite.ev_action`), in column order; `None` for a computed column.
fn rule_origins(action: &str) -> Vec<Option<(u32, i16)>> {
    let bytes = action.as_bytes();
    let mut depth = 0i32;
    let mut i = 0;
    // The top-level Query node is at brace depth 1; nested queries are deeper.
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'{' => depth += 1,
            b'}' => depth -= 1,
            b':' if depth == 1 && action[i..].starts_with(":targetList ") => break,
            _ => {}
        }
        i += 1;
    }
    let mut out = Vec::new();
    let mut own = String::new(); // the current entry's own tokens (depth 2)
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\\' => {
                if depth == 2 {
                    own.push('_');
                }
                i += 1;
            }
            b'{' => {
                depth += 1;
                if depth == 2 {
                    own.clear();
                }
            }
            b'}' => {
                if depth == 2 {
                    let tokens: Vec<&str> = own.split_whitespace().collect();
                    let field = |name: &str| tokens.windows(2).find(|w| w[0] == name).map(|w| w[1]);
                    if field(":resjunk") != Some("true") {
                        let tbl =
                            field(":resorigtbl").and_then(|v| v.parse::<u32>().ok()).filter(|t| *t != 0);
                        let col = field(":resorigcol").and_then(|v| v.parse::<i16>().ok()).filter(|c| *c > 0);
                        out.push(tbl.zip(col));
                    }
                }
                depth -= 1;
            }
            b')' if depth == 1 => break,
            _ if depth == 2 => own.push(c as char),
            _ => {}
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::rule_origins;

    #[test]
    fn origins_come_from_the_top_level_target_list_only() {
        // Abridged node text: a subquery in the range table has its own target list, and an
        // expression column (resorigtbl 0) and a junk entry follow the table columns.
        let action = r"({QUERY :commandType 1 :rtable ({RANGETBLENTRY :subquery {QUERY :targetList ({TARGETENTRY :resno 1 :resorigtbl 99 :resorigcol 9 :resjunk false})}}) :targetList ({TARGETENTRY :expr {VAR :varno 1} :resno 1 :resname id :resorigtbl 16422 :resorigcol 1 :resjunk false} {TARGETENTRY :expr {OPEXPR :args ({VAR :varno 1})} :resno 2 :resname a\{b\} :resorigtbl 0 :resorigcol 0 :resjunk false} {TARGETENTRY :resno 3 :resname x :resorigtbl 16422 :resorigcol 7 :resjunk true}) :sortClause <>})";
        assert_eq!(rule_origins(action), vec![Some((16422, 1)), None]);
    }
}
