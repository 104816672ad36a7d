//! PostgREST's "Perhaps you meant ..." search: a fuzzy string set as Haskell's `fuzzyset`
//! package keeps one (a port of fuzzyset.js), so that a hint names what PostgREST's would.
//! Entries and the query are compared by their character n-grams (three, then two), the
//! entries sharing grams ranked by cosine similarity; the best 50 are ranked again by their
//! normalized edit distance, and those under a minimum score dropped. An entry equal to the
//! query but for case is its match outright.

use std::collections::HashMap;

/// The entry of `entries` most like `query`, if one scores `min_score` or more (PostgREST asks
/// 0.75 of table and function names, 0.33 of parameter lists).
pub fn closest<'a>(
    query: &str,
    entries: impl IntoIterator<Item = &'a str>,
    min_score: f64,
) -> Option<&'a str> {
    let key = query.to_lowercase();
    // Later duplicates (by case) are not added, as the set keeps the first.
    let mut seen = std::collections::HashSet::new();
    let mut entries: Vec<(String, &str)> =
        entries.into_iter().map(|e| (e.to_lowercase(), e)).filter(|(k, _)| seen.insert(k.clone())).collect();
    // Ties go the same way every time (PostgREST's go by its hash map's order).
    entries.sort();
    if let Some((_, exact)) = entries.iter().find(|(k, _)| *k == key) {
        return Some(exact);
    }
    for size in [3, 2] {
        let query_grams = grams(&key, size);
        let query_norm = norm(&query_grams);
        let mut scored: Vec<(f64, usize)> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, (k, _))| {
                let entry_grams = grams(k, size);
                let dot: usize =
                    query_grams.iter().map(|(g, n)| n * entry_grams.get(g).copied().unwrap_or(0)).sum();
                (dot > 0).then(|| (dot as f64 / (query_norm * norm(&entry_grams)), i))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.truncate(50);
        let mut rescored: Vec<(f64, usize)> =
            scored.into_iter().map(|(_, i)| (edit_similarity(&key, &entries[i].0), i)).collect();
        rescored.sort_by(|a, b| b.0.total_cmp(&a.0));
        if let Some((_, i)) = rescored.into_iter().find(|(score, _)| *score >= min_score) {
            return Some(entries[i].1);
        }
    }
    None
}

/// The `size`-grams of `text`, normalized (lower case; letters, digits, spaces and commas
/// only) and enclosed in hyphens, with their counts.
fn grams(text: &str, size: usize) -> HashMap<String, usize> {
    let mut chars = vec!['-'];
    chars.extend(
        text.chars()
            .flat_map(char::to_lowercase)
            .filter(|c| c.is_alphanumeric() || c.is_whitespace() || *c == ','),
    );
    chars.push('-');
    let mut counts = HashMap::new();
    for window in chars.windows(size) {
        *counts.entry(window.iter().collect()).or_insert(0) += 1;
    }
    counts
}

fn norm(grams: &HashMap<String, usize>) -> f64 {
    (grams.values().map(|n| n * n).sum::<usize>() as f64).sqrt()
}

/// One minus the edit distance over the longer length (1 for two empty strings).
fn edit_similarity(a: &str, b: &str) -> f64 {
    let longer = a.chars().count().max(b.chars().count());
    if longer == 0 {
        return 1.0;
    }
    1.0 - super::levenshtein(a, b) as f64 / longer as f64
}

#[cfg(test)]
mod tests {
    use super::closest;

    #[test]
    fn hints_as_postgrest_finds_them() {
        assert_eq!(closest("itemz", ["items", "docs"], 0.75), Some("items"));
        assert_eq!(closest("nope", ["docs"], 0.75), None);
        assert_eq!(closest("ITEMS", ["items"], 0.75), Some("items"));
        // Parameter lists: sorted names in parentheses.
        assert_eq!(closest("(a, b, smthelse)", ["(a, b)"], 0.33), Some("(a, b)"));
        assert_eq!(closest("(a, b, c)", ["(data)"], 0.33), None);
    }
}
