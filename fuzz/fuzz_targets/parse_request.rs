//! Feeds arbitrary bytes to `rowgate_request::parse`: the first byte picks the method, then
//! newline-separated lines are the path, the query string and `name:value` headers.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rowgate_request::{parse, Method};

const METHODS: [Method; 7] = [
    Method::Get,
    Method::Head,
    Method::Post,
    Method::Patch,
    Method::Put,
    Method::Delete,
    Method::Options,
];

/// Header names the parser looks at, so short inputs reach them often.
const NAMES: [&str; 6] = ["prefer", "range", "accept", "accept-profile", "content-profile", "x"];

fuzz_target!(|data: &[u8]| {
    let Some((&m, rest)) = data.split_first() else {
        return;
    };
    let method = METHODS[usize::from(m) % METHODS.len()];
    let text = String::from_utf8_lossy(rest);
    let mut lines = text.split('\n');
    let path = lines.next().unwrap_or("");
    let query = lines.next().unwrap_or("");
    let headers: Vec<(&str, &str)> = lines
        .map(|l| match l.split_once(':') {
            Some((n, v)) if n.len() == 1 => {
                let i = n.bytes().next().map_or(0, usize::from) % NAMES.len();
                (NAMES[i], v)
            }
            Some((n, v)) => (n, v),
            None => ("accept", l),
        })
        .collect();
    let _ = parse(method, path, query, &headers);
});
