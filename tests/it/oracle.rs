//! Differential test: every request of `tests/oracle/requests.txt`, sent to rowgate, must get
//! the answer PostgREST 12.0.2 gave on the same fixture (recorded in
//! `tests/oracle/postgrest-12.0.2.jsonl` by `tests/oracle/capture.py`): status, the headers
//! clients read, and the body (as JSON when it is JSON, else byte for byte).
//!
//! Differences that are on purpose are listed in [`deliberate_difference`], each with its reason
//! (docs/compatibility.md explains them to users).

use serde_json::Value;

use crate::support::{harness, send_to};

const TRANSCRIPT: &str = include_str!("../oracle/postgrest-12.0.2.jsonl");

/// Why rowgate answers a recorded request differently, if it does so on purpose.
fn deliberate_difference(entry: &Value) -> Option<&'static str> {
    let headers = request_headers(entry);
    let has = |name: &str, value: &str| {
        headers.iter().any(|(k, v)| k.eq_ignore_ascii_case(name) && v.contains(value))
    };
    let code = serde_json::from_str::<Value>(entry["body"].as_str().unwrap_or(""))
        .ok()
        .and_then(|b| b.get("code").and_then(Value::as_str).map(str::to_owned));
    if entry["status"] == 415 {
        return Some("an unacceptable Accept is 406 PGRST107, as in PostgREST 12.0.3 and later");
    }
    let path = entry["path"].as_str().unwrap_or("");
    if path == "/" {
        return Some(
            "the OpenAPI document is PostgREST 16's (int32 formats, no GET for volatile functions), \
             with methods by the caller's grants: openapi.rs and docs/openapi.md",
        );
    }
    if path.starts_with("/items/") {
        return Some("an invalid path is 404 PGRST125, as in PostgREST 13, not an empty object");
    }
    if code.as_deref() == Some("42P01") || (entry["status"] == 404 && entry["body"] == "{}") {
        return Some("an unknown table is 404 PGRST205 with a suggestion, as in PostgREST 13");
    }
    if entry["path"].as_str().is_some_and(|p| p.contains("geo+json")) || has("accept", "application/geo+json")
    {
        return Some("the fixture has no PostGIS; GeoJSON is tested in geo.rs, where PostGIS is installed");
    }
    if path.starts_with("/rpc/items_cheaper_than") && path.contains("order=price") {
        return Some("PostgREST 12.0.2 fails to order a function's rows (42703); rowgate orders them");
    }
    if path.starts_with("/rpc/project_stats")
        && (path.contains("project_id=eq") || path.contains("projects("))
    {
        return Some(
            "PostgREST 12.0.2 calls a RETURNS TABLE result 'record' and cannot filter it; rowgate can",
        );
    }
    if path.contains("order=projects(nope)") {
        return Some(
            "an unknown column of a related order names the relation, not PostgREST's internal alias",
        );
    }
    if has("prefer", "timezone=Invalid/Zone") {
        return Some(
            "an unknown time zone is PostgreSQL's 400 22023, as in PostgREST 16, which no longer checks it itself",
        );
    }
    let message = serde_json::from_str::<Value>(entry["body"].as_str().unwrap_or(""))
        .ok()
        .and_then(|b| b.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_default();
    if code.as_deref() == Some("PGRST301")
        && (message.starts_with("JWT expired")
            || message.starts_with("JWT not")
            || message.starts_with("JWT issued"))
    {
        return Some("a token whose claims refuse it is PGRST303, as in PostgREST 13");
    }
    if code.as_deref() == Some("PGRST301") && message.starts_with("JWSError") {
        return Some("a token that does not decode or verify is described in PostgREST 13's words");
    }
    if headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("authorization") && v.trim().eq_ignore_ascii_case("bearer"))
    {
        return Some("a bearer scheme with no token is 401 PGRST301 'Empty JWT is sent in Authorization header', as in PostgREST 13");
    }
    if code.as_deref() == Some("PGRST116") && message.starts_with("JSON object requested") {
        return Some("a singular answer of other than one row is 'Cannot coerce the result to a single JSON object', as in PostgREST 13");
    }
    if code.as_deref() == Some("PGRST204") && message.starts_with("Column '") {
        return Some("an unknown write column is 'Could not find the 'x' column of 'y' in the schema cache', as in PostgREST 13");
    }
    if code.as_deref() == Some("PGRST200") && path.contains('!') {
        return Some("PGRST200's details name the hint it searched with, as in PostgREST 13");
    }
    if code.as_deref() == Some("22023") && message.starts_with("role") && message.ends_with("does not exist")
    {
        return Some("a token's role that does not exist is 401, as in PostgREST 13.0.1");
    }
    if code.as_deref() == Some("PGRST106") {
        return Some(
            "an unknown schema is 'Invalid schema: X' with the exposed ones as hint, as in PostgREST 13.0.7",
        );
    }
    if path == "/articles?id=fts.cat" {
        return Some(
            "full-text search on a column that is no tsvector goes through to_tsvector, as in PostgREST 13: \
             on an integer that is 'function to_tsvector(integer) does not exist'",
        );
    }
    if path.contains("on_conflict=nope") {
        return Some("an unknown on_conflict column is PGRST204 like every unknown write column, not 42703");
    }
    if entry["method"] != "GET" && path.contains("or=(") {
        return Some(
            "a write's representation holds every row it changed; PostgREST filters it again by or=",
        );
    }
    None
}

#[test]
fn requests_match_postgrest_12() {
    let (compared, failures) = replay(&harness().base);
    assert!(compared > 300, "only {compared} requests compared");
    assert!(
        failures.is_empty(),
        "{} of {compared} requests differ from PostgREST 12.0.2:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Sends the recorded requests (but those answered differently on purpose) to the rowgate at
/// `base`: how many were compared, and what differed.
pub fn replay(base: &str) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut compared = 0;
    for line in TRANSCRIPT.lines().filter(|l| !l.trim().is_empty()) {
        let entry: Value = serde_json::from_str(line).expect("transcript line");
        if deliberate_difference(&entry).is_some() {
            continue;
        }
        compared += 1;
        let method = entry["method"].as_str().unwrap_or("GET");
        let path = entry["sent_path"].as_str().unwrap_or("/");
        let headers = request_headers(&entry);
        let header_refs: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let got = send_to(base, method, path, &header_refs, entry["request_body"].as_str());
        let want_status = entry["status"].as_u64().unwrap_or(0) as u16;
        let mut problems = Vec::new();
        if got.status != want_status {
            problems.push(format!("status {} (want {want_status})", got.status));
        }
        for name in ["content-range", "preference-applied", "location"] {
            let want = entry["headers"][name].as_str();
            if got.header(name) != want {
                problems.push(format!("{name} {:?} (want {want:?})", got.header(name)));
            }
        }
        let want_type = entry["headers"]["content-type"].as_str().unwrap_or("");
        if want_status < 400 && got.header("content-type").unwrap_or("") != want_type {
            problems.push(format!("content-type {:?} (want {want_type:?})", got.header("content-type")));
        }
        let want_body = entry["body"].as_str().unwrap_or("");
        // A plan is the plan of rowgate's statement, not PostgREST's: status and type only.
        let is_plan = want_type.starts_with("application/vnd.pgrst.plan");
        if !is_plan && !bodies_match(&got.body, want_body) {
            problems.push(format!("body\n      got:  {}\n      want: {}", clip(&got.body), clip(want_body)));
        }
        if !problems.is_empty() {
            failures.push(format!("{method} {path} {header_refs:?}: {}", problems.join("; ")));
        }
    }
    (compared, failures)
}

/// The recorded request headers, as (name, value) pairs.
fn request_headers(entry: &Value) -> Vec<(String, String)> {
    entry["request_headers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|pair| Some((pair.get(0)?.as_str()?.to_owned(), pair.get(1)?.as_str()?.to_owned())))
        .collect()
}

/// JSON bodies are compared as values (key order aside), anything else byte for byte. Parse
/// errors (PGRST100) match on their code only: their message and details name a position and
/// the expected tokens the way Parsec's backtracking does, which rowgate follows closely but
/// not byte for byte. PGRST200 and PGRST202 match without their hint (a fuzzy suggestion).
fn bodies_match(got: &str, want: &str) -> bool {
    match (serde_json::from_str::<Value>(got), serde_json::from_str::<Value>(want)) {
        (Ok(g), Ok(w)) if w["code"] == "PGRST100" => g["code"] == w["code"],
        // "Perhaps you meant ...": PostgREST's fuzzy-set suggestion and rowgate's edit distance
        // can pick differently (or not at all) for a name that exists nowhere.
        (Ok(mut g), Ok(mut w)) if w["code"] == "PGRST202" || w["code"] == "PGRST200" => {
            g["hint"] = Value::Null;
            w["hint"] = Value::Null;
            g == w
        }
        (Ok(g), Ok(w)) => g == w,
        _ => got == want,
    }
}

fn clip(s: &str) -> String {
    if s.len() > 400 {
        format!("{}…", &s[..s.char_indices().nth(400).map_or(s.len(), |(i, _)| i)])
    } else {
        s.to_owned()
    }
}
