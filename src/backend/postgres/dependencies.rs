//! What each exposed relation of a PostgreSQL database reads, for the response cache: the
//! tables whose changes can change a read of it (itself, the tables under a view, the tables its
//! row-level security policies consult, inheritance children and partitions), or that nothing
//! bounds what it reads.
//!
//! Everything is derived from the catalogs, conservatively: a read is cacheable only if every
//! table it depends on carries rowgate's change trigger (`rowgate cache install`), and nothing
//! in it calls a volatile or clock-reading function, reads `request.headers` or
//! `request.cookies`, or touches a foreign table or a sequence.

use std::collections::{HashMap, HashSet};

use tokio_postgres::Transaction;

use crate::schema::{Dependencies, Reads};

/// The name of the statement-level trigger `rowgate cache install` puts on every table.
pub const TRIGGER: &str = "rowgate_cache";

const SYSTEM_SCHEMAS: &str =
    "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%' \
     AND n.nspname NOT LIKE 'pg\\_temp%'";

/// Every relation outside the system schemas: kind and whether its changes are reported.
fn relations_query() -> String {
    format!(
        "SELECT c.oid, c.relkind::text,
                -- INSERT (4), DELETE (8), UPDATE (16) and TRUNCATE (32) all reported
                coalesce((SELECT bit_or(t.tgtype::int4) & 60 = 60 FROM pg_trigger t
                          WHERE t.tgrelid = c.oid AND t.tgenabled IN ('O', 'A')
                            AND t.tgname IN ('{TRIGGER}', '{TRIGGER}_ins', '{TRIGGER}_upd', '{TRIGGER}_del')), false)
                -- or logical decoding reports it (logged tables, the publication of every change)
                OR (c.relpersistence = 'p' AND current_setting('wal_level') = 'logical'
                    AND EXISTS (SELECT 1 FROM pg_publication p WHERE p.pubname = '{TRIGGER}' AND p.puballtables
                                AND p.pubinsert AND p.pubupdate AND p.pubdelete AND p.pubtruncate))
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND {SYSTEM_SCHEMAS}"
    )
}

/// What views (by their rule) and SELECT policies (by their table) read: relations and
/// functions recorded in `pg_depend`, plus the node text to scan for built-in functions, which
/// `pg_depend` does not record; and every inheritance child and partition.
const EDGES: &str = "
SELECT r.ev_class, d.refclassid = 'pg_class'::regclass, d.refobjid, NULL::text
FROM pg_rewrite r
JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
WHERE d.refclassid IN ('pg_class'::regclass, 'pg_proc'::regclass) AND d.refobjid <> r.ev_class
UNION ALL
SELECT r.ev_class, false, 0, r.ev_action::text FROM pg_rewrite r
UNION ALL
SELECT p.polrelid, d.refclassid = 'pg_class'::regclass, d.refobjid, NULL
FROM pg_policy p
JOIN pg_depend d ON d.classid = 'pg_policy'::regclass AND d.objid = p.oid
WHERE d.refclassid IN ('pg_class'::regclass, 'pg_proc'::regclass) AND d.refobjid <> p.polrelid
  AND p.polcmd IN ('r', '*')
UNION ALL
SELECT p.polrelid, false, 0, p.polqual::text FROM pg_policy p
WHERE p.polcmd IN ('r', '*') AND p.polqual IS NOT NULL
UNION ALL
SELECT i.inhparent, true, i.inhrelid, NULL FROM pg_inherits i
UNION ALL
-- A write through a parent fires the parent's statement triggers only: a child depends on its
-- ancestors as well.
SELECT i.inhrelid, true, i.inhparent, NULL FROM pg_inherits i";

/// Functions: the given built-ins and every user function, with volatility and its body
/// (`prosrc`, or for SQL-standard bodies the node text, whose string constants are byte lists).
fn functions_query() -> String {
    format!(
        "SELECT p.oid, p.provolatile::text,
                n.nspname IN ('pg_catalog', 'information_schema') OR p.prolang IN (12, 13),
                p.proname::text,
                coalesce(p.prosrc, '') || ' ' || coalesce(to_jsonb(p) ->> 'prosqlbody', '')
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE p.oid = ANY($1) OR {SYSTEM_SCHEMAS}"
    )
}

/// The string constants of a text: node text's byte lists (`:constvalue N [ 76 0 0 0 114 ... ]`,
/// their length header included) and SQL's single-quoted literals, lower-cased.
fn constants(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, m) in text.match_indices(":constvalue ") {
        let rest = &text[at + m.len()..];
        let Some(open) = rest.find('[') else { continue };
        let Some(close) = rest[open..].find(']') else { continue };
        let bytes: Vec<u8> =
            rest[open + 1..open + close].split_whitespace().filter_map(|b| b.parse().ok()).collect();
        // A text constant's varlena header (4 bytes) comes first; the characters follow. What
        // is no text (a number's bytes) is no name.
        let chars = bytes.get(4..).unwrap_or_default();
        if let Ok(text) = std::str::from_utf8(chars) {
            let text = text.trim_end_matches('\0');
            if !text.chars().any(char::is_control) {
                found.push(text.to_ascii_lowercase());
            }
        }
    }
    let mut parts = text.split('\'');
    parts.next();
    for (i, part) in parts.enumerate() {
        if i % 2 == 0 {
            found.push(part.to_ascii_lowercase());
        }
    }
    found
}

/// Whether a text (node text or a function's body) reads `request.header(s)` or
/// `request.cookie(s)`, which the cache key leaves out — however the name is cased, since
/// PostgreSQL's settings are not.
fn reads_request_settings(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let named = |s: &str| s.contains("request.header") || s.contains("request.cookie");
    named(&lower) || constants(text).iter().any(|c| named(c))
}

/// Whether a text reads the caller's claims (`request.jwt.claims`) and may read one that
/// `keyed` (`cache-key-claims`) leaves out of the cache key: every string constant beside the
/// setting's name counts as a claim it might read (callers that differ in it would share an
/// answer otherwise).
fn reads_unkeyed_claims(text: &str, keyed: Option<&[String]>) -> bool {
    let Some(keyed) = keyed else { return false };
    let constants = constants(text);
    let reads_claims = text.to_ascii_lowercase().contains("request.jwt.claim")
        || constants.iter().any(|c| c.contains("request.jwt.claim"));
    reads_claims
        && constants
            .iter()
            .filter(|c| !c.contains("request.jwt.claim") && !c.is_empty())
            .any(|c| !keyed.iter().any(|k| k.eq_ignore_ascii_case(c)))
}

/// Built-in functions whose result changes with the clock although they are not volatile.
const CLOCK_FUNCTIONS: &[&str] = &["now", "statement_timestamp", "transaction_timestamp", "age"];

/// Whether the event trigger that flushes caches on DDL is installed.
const EVENT_TRIGGER: &str =
    "SELECT EXISTS (SELECT 1 FROM pg_event_trigger WHERE evtname = 'rowgate_cache_ddl' \
     AND evtenabled <> 'D')";

#[derive(Default)]
struct Node {
    kind: char,
    watched: bool,
    relations: Vec<u32>,
    functions: Vec<u32>,
    /// Its view definition or policies read headers, cookies or the clock.
    opaque: bool,
}

/// Computes the dependencies of the relations in `exposed` (OIDs); `keyed` is
/// `cache-key-claims` (`None`: every claim is in the cache key).
pub async fn load(
    tx: &Transaction<'_>,
    exposed: &[u32],
    keyed: Option<&[String]>,
) -> Result<Dependencies, tokio_postgres::Error> {
    let mut nodes: HashMap<u32, Node> = HashMap::new();
    for row in tx.query(&relations_query(), &[]).await? {
        let kind = row.get::<_, &str>(1).chars().next().unwrap_or('?');
        nodes.insert(row.get(0), Node { kind, watched: row.get(2), ..Node::default() });
    }
    let mut builtins: Vec<u32> = Vec::new();
    for row in tx.query(EDGES, &[]).await? {
        let Some(node) = nodes.get_mut(&row.get::<_, u32>(0)) else { continue };
        if let Some(text) = row.get::<_, Option<&str>>(3) {
            let scan = scan_node_text(text, keyed);
            node.opaque |= scan.opaque;
            builtins.extend(&scan.functions);
            node.functions.extend(scan.functions);
        } else if row.get::<_, bool>(1) {
            node.relations.push(row.get(2));
        } else {
            node.functions.push(row.get(2));
        }
    }
    builtins.sort_unstable();
    builtins.dedup();
    // oid -> (volatile or clock-reading, user function, reads what the cache key leaves out)
    let mut functions: HashMap<u32, (bool, bool, bool)> = HashMap::new();
    for row in tx.query(&functions_query(), &[&builtins]).await? {
        let volatile = row.get::<_, &str>(1) == "v" || CLOCK_FUNCTIONS.contains(&row.get::<_, &str>(3));
        let body: &str = row.get(4);
        let unkeyed = reads_request_settings(body) || reads_unkeyed_claims(body, keyed);
        functions.insert(row.get(0), (volatile, !row.get::<_, bool>(2), unkeyed));
    }
    let ddl_watched: bool = tx.query_one(EVENT_TRIGGER, &[]).await?.get(0);
    let all_tables_watched = nodes.values().all(|n| !matches!(n.kind, 'r' | 'p') || n.watched);
    let functions_cacheable = functions.values().all(|(_, user, headers)| !(*user && *headers));
    let mut deps = Dependencies {
        relations: HashMap::new(),
        all_tables_watched,
        functions_cacheable,
        self_reading: HashSet::new(),
        // PostgreSQL's change feeds see every row change.
        writes_unreported: false,
    };
    for oid in exposed {
        let (reads, self_reading) = reads_of(*oid, &nodes, &functions, &deps, ddl_watched);
        deps.relations.insert(*oid, reads);
        if self_reading {
            deps.self_reading.insert(*oid);
        }
    }
    Ok(deps)
}

/// The dependencies of one relation, following views, policies and inheritance, and whether
/// they lead back to the relation itself.
fn reads_of(
    root: u32,
    nodes: &HashMap<u32, Node>,
    functions: &HashMap<u32, (bool, bool, bool)>,
    deps: &Dependencies,
    ddl_watched: bool,
) -> (Reads, bool) {
    let mut tables = Vec::new();
    let mut any = false;
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    let mut self_reading = false;
    while let Some(oid) = stack.pop() {
        if !seen.insert(oid) {
            self_reading |= oid == root;
            continue;
        }
        let Some(node) = nodes.get(&oid) else { return (Reads::Unbounded, false) };
        if node.opaque {
            return (Reads::Unbounded, false);
        }
        match node.kind {
            'r' | 'p' if node.watched => tables.push(oid),
            // A materialized view changes on REFRESH, which the DDL event trigger reports.
            'm' if ddl_watched => tables.push(oid),
            'v' => {}
            _ => return (Reads::Unbounded, false),
        }
        for f in &node.functions {
            match functions.get(f) {
                Some((true, _, _)) => return (Reads::Unbounded, false),
                Some((false, true, _)) => match deps.function(false) {
                    Reads::Unbounded => return (Reads::Unbounded, false),
                    _ => any = true,
                },
                Some((false, false, _)) => {}
                None => return (Reads::Unbounded, false),
            }
        }
        if node.kind != 'm' {
            stack.extend(&node.relations);
        }
    }
    if any {
        return (Reads::AnyTable, false);
    }
    tables.sort_unstable();
    (Reads::Tables(tables), self_reading)
}

struct Scan {
    functions: Vec<u32>,
    opaque: bool,
}

/// The functions a node tree calls (`:funcid`, `:opfuncid`), and whether it reads the clock
/// (`CURRENT_DATE` and friends are `SQLVALUEFUNCTION` ops 0–9), a `request.header`/`cookie`
/// setting, or claims `keyed` leaves out.
fn scan_node_text(text: &str, keyed: Option<&[String]>) -> Scan {
    let mut functions = Vec::new();
    for marker in [":funcid ", ":opfuncid "] {
        for (at, _) in text.match_indices(marker) {
            let digits: String =
                text[at + marker.len()..].chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(oid) = digits.parse::<u32>() {
                if oid != 0 {
                    functions.push(oid);
                }
            }
        }
    }
    let clock = text.match_indices("{SQLVALUEFUNCTION :op ").any(|(at, m)| {
        let digits: String = text[at + m.len()..].chars().take_while(|c| c.is_ascii_digit()).collect();
        digits.parse::<u32>().is_ok_and(|op| op <= 9)
    });
    let unkeyed = reads_request_settings(text) || reads_unkeyed_claims(text, keyed);
    Scan { functions, opaque: clock || unkeyed }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How a text constant appears in node text: a varlena header, then its bytes.
    fn constant(s: &str) -> String {
        let bytes: Vec<String> = s.bytes().map(|b| b.to_string()).collect();
        format!(":constvalue {} [ {} 0 0 0 {} ]", s.len() + 4, (s.len() + 4) * 4, bytes.join(" "))
    }

    #[test]
    fn node_text_scan_finds_functions_clock_and_header_settings() {
        let s = scan_node_text("{FUNCEXPR :funcid 1299 :args <>} {OPEXPR :opno 96 :opfuncid 65 :args}", None);
        assert_eq!(s.functions, vec![1299, 65]);
        assert!(!s.opaque);
        assert!(scan_node_text("{SQLVALUEFUNCTION :op 3 :type 1184}", None).opaque);
        assert!(!scan_node_text("{SQLVALUEFUNCTION :op 11 :type 19}", None).opaque);
        assert!(scan_node_text(&constant("request.headers"), None).opaque);
        // PostgreSQL's setting names ignore case: so does the scan.
        assert!(scan_node_text(&constant("Request.Headers"), None).opaque);
        assert!(scan_node_text(&constant("REQUEST.COOKIES"), None).opaque);
        assert!(reads_request_settings("select current_setting('Request.Headers', true)::json->>'x'"));
    }

    #[test]
    fn claims_outside_the_cache_key_make_a_read_opaque() {
        let policy = format!("{} {}", constant("request.jwt.claims"), constant("tenant"));
        let keyed = ["sub".to_owned(), "role".to_owned()];
        assert!(scan_node_text(&policy, Some(&keyed)).opaque, "tenant is not in the key");
        assert!(!scan_node_text(&policy, None).opaque, "every claim is in the key");
        let keyed = ["tenant".to_owned()];
        assert!(!scan_node_text(&policy, Some(&keyed)).opaque);
        let body = "select nullif(current_setting('request.jwt.claims', true), '')::json ->> 'org'";
        assert!(reads_unkeyed_claims(body, Some(&["sub".to_owned()])));
        assert!(!reads_unkeyed_claims(body, Some(&["org".to_owned()])));
        assert!(!reads_unkeyed_claims("select 'org'", Some(&["sub".to_owned()])), "no claims read");
    }
}
