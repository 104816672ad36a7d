//! `accounts-providers`: the OpenID Connect providers users may sign in with (supabase-js's
//! `signInWithOAuth({provider})` and `signInWithIdToken`), each found by its issuer's discovery
//! document. One provider per line (or `;`-separated):
//! `NAME issuer=URL client-id=ID secret=SECRET [scopes=a,b]`, the secret inline or `@FILE`.

/// One provider.
#[derive(Clone, PartialEq, Eq)]
pub struct Provider {
    /// What clients call it (`provider=`): lowercase, as GoTrue compares them.
    pub name: String,
    /// Its issuer, without a trailing `/`: https, or http on this machine only.
    pub issuer: String,
    pub client_id: String,
    pub secret: String,
    /// Scopes asked besides `openid email profile`.
    pub scopes: Vec<String>,
}

impl std::fmt::Debug for Provider {
    // The secret never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// The providers `list` describes.
pub fn parse(list: &str) -> Result<Vec<Provider>, String> {
    let mut providers: Vec<Provider> = Vec::new();
    for entry in list.split(['\n', ';']).map(str::trim).filter(|e| !e.is_empty()) {
        let provider = one(entry)?;
        if providers.iter().any(|p| p.name == provider.name) {
            return Err(format!("provider {:?} is named twice", provider.name));
        }
        providers.push(provider);
    }
    Ok(providers)
}

fn one(entry: &str) -> Result<Provider, String> {
    let mut words = entry.split_whitespace();
    let name = words.next().unwrap_or_default().to_ascii_lowercase();
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ':' | '.');
    if name.contains('=') || !name.chars().all(plain) {
        return Err(format!("{entry:?}: a provider's name comes first: letters, digits, _ - : ."));
    }
    if matches!(name.as_str(), "email" | "phone" | "anonymous") {
        return Err(format!("{name:?} is the name of a sign-in without a provider"));
    }
    let (mut issuer, mut client_id, mut secret, mut scopes) = (None, None, None, Vec::new());
    for word in words {
        let (key, value) =
            word.split_once('=').ok_or_else(|| format!("{name}: {word:?} is not key=value"))?;
        match key {
            "issuer" => issuer = Some(issuer_url(&name, value)?),
            "client-id" => client_id = Some(value.to_owned()),
            "secret" => secret = Some(super::jwt_secret::read_value(value)?.trim().to_owned()),
            "scopes" => scopes = value.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect(),
            _ => return Err(format!("{name}: unknown key {key:?} (issuer, client-id, secret, scopes)")),
        }
    }
    let missing = |what: &str| format!("{name}: {what}= is missing");
    Ok(Provider {
        issuer: issuer.ok_or_else(|| missing("issuer"))?,
        client_id: client_id.filter(|c| !c.is_empty()).ok_or_else(|| missing("client-id"))?,
        secret: secret.filter(|s| !s.is_empty()).ok_or_else(|| missing("secret"))?,
        scopes,
        name,
    })
}

/// An issuer's URL: tokens it signs decide who signs in, so it is fetched over TLS unless it is
/// on this machine.
fn issuer_url(name: &str, value: &str) -> Result<String, String> {
    let url = url::Url::parse(value).map_err(|e| format!("{name}: issuer {value:?}: {e}"))?;
    let local = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    match url.scheme() {
        "https" => {}
        "http" if local => {}
        _ => return Err(format!("{name}: issuer {value:?}: https, or http on this machine only")),
    }
    Ok(value.trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn providers_are_read_one_per_line() {
        let list = parse(
            "keycloak issuer=https://id.example.com/realms/app/ client-id=app secret=s3 scopes=groups,roles
             Google issuer=https://accounts.google.com client-id=g secret=x",
        )
        .unwrap();
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].name, "keycloak");
        assert_eq!(list[0].issuer, "https://id.example.com/realms/app");
        assert_eq!(list[0].scopes, ["groups", "roles"]);
        assert_eq!(list[1].name, "google");
        assert!(!format!("{:?}", list[0]).contains("s3"));
    }

    #[test]
    fn a_provider_without_tls_or_a_secret_is_refused() {
        for (list, error) in [
            ("x issuer=http://id.example.com client-id=a secret=b", "https, or http on this machine only"),
            ("x issuer=https://id.example.com client-id=a", "x: secret= is missing"),
            ("email issuer=https://id.example.com client-id=a secret=b", "sign-in without a provider"),
            (
                "x issuer=https://a client-id=a secret=b; x issuer=https://a client-id=a secret=b",
                "named twice",
            ),
            ("x issuer=https://a client-id=a secret=b colour=red", "unknown key"),
        ] {
            let e = parse(list).unwrap_err();
            assert!(e.contains(error), "{list}: {e}");
        }
        assert!(parse("x issuer=http://127.0.0.1:9000 client-id=a secret=b").is_ok());
    }
}
