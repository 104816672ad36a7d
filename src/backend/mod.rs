//! The databases rowgate serves, each in a folder of its own: `postgres` and `sqlite` own
//! everything specific to them (dialect, connections, catalog, transactions, change feed).

pub mod postgres;
pub mod sqlite;

/// SQL text with its parameters, all sent as text (as PostgREST binds them), so that the
/// database's own input functions judge them: `id=eq.abc` on an integer column is
/// PostgreSQL's own 22P02.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The SQL, with `$1`... (PostgreSQL) or `?1`... (SQLite) placeholders.
    pub text: String,
    /// The parameter values, in placeholder order.
    pub params: Vec<String>,
}

/// Appends `name` as a quoted identifier (both dialects quote with `"`).
pub fn push_ident(sql: &mut String, name: &str) {
    sql.push('"');
    for c in name.chars() {
        if c == '"' {
            sql.push('"');
        }
        sql.push(c);
    }
    sql.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_quoted_and_escaped() {
        let mut s = String::new();
        push_ident(&mut s, "Order \"Items\"");
        assert_eq!(s, "\"Order \"\"Items\"\"\"");
    }
}
