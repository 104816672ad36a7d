//! What the request log shows of a request: its URI, with the credentials some clients must
//! put in a query string (a WebSocket's `apikey`, a signed URL's `token`) replaced.

/// Query parameters that carry credentials (realtime's socket, the dashboard's on it, signed
/// storage URLs), whose values never reach the log.
const SECRET_PARAMETERS: [&str; 5] = ["apikey", "token", "access_token", "refresh_token", "rowgate_csrf"];

/// `uri` as the log shows it: credentials in its query replaced by `REDACTED`.
pub fn uri(uri: &http::Uri) -> String {
    let Some(query) = uri.query() else { return uri.to_string() };
    let secret = |pair: &str| {
        let name = pair.split('=').next().unwrap_or_default();
        SECRET_PARAMETERS.iter().any(|s| name.eq_ignore_ascii_case(s))
    };
    let shown: Vec<String> = query
        .split('&')
        .map(|pair| match secret(pair) {
            true => format!("{}=REDACTED", pair.split('=').next().unwrap_or_default()),
            false => pair.to_owned(),
        })
        .collect();
    format!("{}?{}", uri.path(), shown.join("&"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_in_a_query_never_reach_the_log() {
        let logged = |u: &str| super::uri(&u.parse().unwrap());
        assert_eq!(
            logged("/realtime/v1/websocket?apikey=eyJ.secret&vsn=1.0.0"),
            "/realtime/v1/websocket?apikey=REDACTED&vsn=1.0.0"
        );
        assert_eq!(
            logged("/storage/v1/object/sign/b/k.png?TOKEN=abc&download"),
            "/storage/v1/object/sign/b/k.png?TOKEN=REDACTED&download"
        );
        assert_eq!(
            logged("/realtime/v1/websocket?vsn=1.0.0&rowgate_csrf=ac0d73b7"),
            "/realtime/v1/websocket?vsn=1.0.0&rowgate_csrf=REDACTED"
        );
        assert_eq!(logged("/todos?select=id&id=eq.1"), "/todos?select=id&id=eq.1");
        assert_eq!(logged("/todos"), "/todos");
    }
}
