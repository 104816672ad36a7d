//! `accounts-providers`: the providers users may sign in with (supabase-js's
//! `signInWithOAuth({provider})` and `signInWithIdToken`): OpenID Connect ones found by their
//! issuer's discovery document, and OAuth 2.0 ones by their endpoints. One provider per line (or
//! `;`-separated): `NAME [issuer=URL | authorize-url=URL token-url=URL userinfo-url=URL]
//! client-id=ID secret=SECRET [scopes=a,b] [audiences=a,b] [response-mode=form_post]`, the secret
//! inline or `@FILE`. The providers GoTrue knows need neither: `google`, `apple`, `gitlab`,
//! `linkedin_oidc`, `slack_oidc` (OpenID Connect), `github`, `discord` (OAuth 2.0).

/// One provider.
#[derive(Clone, PartialEq, Eq)]
pub struct Provider {
    /// What clients call it (`provider=`): lowercase, as GoTrue compares them.
    pub name: String,
    /// Its issuer, without a trailing `/`: https, or http on this machine only (empty for an
    /// OAuth 2.0 provider).
    pub issuer: String,
    /// An OAuth 2.0 provider's endpoints, instead of an issuer.
    pub oauth2: Option<OAuth2>,
    pub client_id: String,
    pub secret: String,
    /// Scopes asked besides `openid`: the provider's usual ones (`email profile`; Apple's
    /// `name email`), then those configured.
    pub scopes: Vec<String>,
    /// Other audiences an ID token given to `/token?grant_type=id_token` may be for (an iOS
    /// app's bundle id, an Android client's id), besides `client_id`.
    pub audiences: Vec<String>,
    /// Whether the provider must answer by a form posted to the callback (Apple, when asked for
    /// the name or address).
    pub form_post: bool,
}

/// An OAuth 2.0 provider without OpenID Connect: where its users sign in, where codes become
/// tokens, and where a token tells who the user is (and how to read that).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth2 {
    pub authorize_url: String,
    pub token_url: String,
    pub userinfo_url: String,
    pub profile: Profile,
}

/// How a userinfo answer names the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// OpenID Connect's claims (`sub`, `email`, `email_verified`, `name`, `picture`, ...).
    Claims,
    /// GitHub's `/user`, its addresses from `/user/emails`.
    GitHub,
    /// Discord's `/users/@me`.
    Discord,
}

/// The OAuth 2.0 providers GoTrue has presets for: endpoints, usual scopes.
fn oauth2_preset(name: &str) -> Option<(OAuth2, &'static [&'static str])> {
    let endpoints = |a: &str, t: &str, u: &str, profile| OAuth2 {
        authorize_url: a.into(),
        token_url: t.into(),
        userinfo_url: u.into(),
        profile,
    };
    Some(match name {
        "github" => (
            endpoints(
                "https://github.com/login/oauth/authorize",
                "https://github.com/login/oauth/access_token",
                "https://api.github.com/user",
                Profile::GitHub,
            ),
            &["user:email"],
        ),
        "discord" => (
            endpoints(
                "https://discord.com/api/oauth2/authorize",
                "https://discord.com/api/oauth2/token",
                "https://discord.com/api/users/@me",
                Profile::Discord,
            ),
            &["email", "identify"],
        ),
        _ => return None,
    })
}

/// The OpenID Connect providers GoTrue has presets for: issuer, usual scopes, whether it answers
/// by `form_post`.
fn preset(name: &str) -> Option<(&'static str, &'static [&'static str], bool)> {
    Some(match name {
        "google" => ("https://accounts.google.com", &["email", "profile"], false),
        "apple" => ("https://appleid.apple.com", &["name", "email"], true),
        "gitlab" => ("https://gitlab.com", &["email", "profile"], false),
        "linkedin_oidc" => ("https://www.linkedin.com/oauth", &["email", "profile"], false),
        "slack_oidc" => ("https://slack.com", &["email", "profile"], false),
        _ => return None,
    })
}

impl std::fmt::Debug for Provider {
    // The secret never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("name", &self.name)
            .field("issuer", &self.issuer)
            .field("oauth2", &self.oauth2)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("audiences", &self.audiences)
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
    let (mut issuer, mut client_id, mut secret, mut scopes, mut audiences) =
        (None, None, None, Vec::new(), Vec::new());
    let mut posted = None;
    let (mut authorize, mut token, mut userinfo) = (None, None, None);
    let list =
        |value: &str| value.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect::<Vec<_>>();
    for word in words {
        let (key, value) =
            word.split_once('=').ok_or_else(|| format!("{name}: {word:?} is not key=value"))?;
        match key {
            "issuer" => issuer = Some(provider_url(&name, key, value)?),
            "authorize-url" => authorize = Some(provider_url(&name, key, value)?),
            "token-url" => token = Some(provider_url(&name, key, value)?),
            "userinfo-url" => userinfo = Some(provider_url(&name, key, value)?),
            "client-id" => client_id = Some(value.to_owned()),
            "secret" => secret = Some(super::jwt_secret::read_value(value)?.trim().to_owned()),
            "scopes" => scopes = list(value),
            "audiences" => audiences = list(value),
            "response-mode" if value == "form_post" => posted = Some(true),
            "response-mode" if value == "query" => posted = Some(false),
            _ => {
                return Err(format!(
                    "{name}: {word:?}: the keys are issuer (or authorize-url, token-url and \
                     userinfo-url), client-id, secret, scopes, audiences, response-mode (query or \
                     form_post)"
                ))
            }
        }
    }
    let missing = |what: &str| format!("{name}: {what}= is missing");
    let known = preset(&name);
    let (mut usual, form_post) = known.map_or((&["email", "profile"][..], false), |(_, s, f)| (s, f));
    let (issuer, oauth2) = match (issuer, authorize, token, userinfo) {
        (Some(issuer), None, None, None) => (issuer, None),
        (None, Some(a), Some(t), Some(u)) => {
            let oauth2 = OAuth2 { authorize_url: a, token_url: t, userinfo_url: u, profile: Profile::Claims };
            (String::new(), Some(oauth2))
        }
        (None, None, None, None) => match (known, oauth2_preset(&name)) {
            (Some((issuer, _, _)), _) => (issuer.to_owned(), None),
            (None, Some((endpoints, scopes))) => {
                usual = scopes;
                (String::new(), Some(endpoints))
            }
            (None, None) => return Err(missing("issuer")),
        },
        (Some(_), ..) => {
            return Err(format!("{name}: an issuer, or authorize-url, token-url and userinfo-url"))
        }
        _ => return Err(format!("{name}: authorize-url, token-url and userinfo-url go together")),
    };
    let mut all: Vec<String> = usual.iter().map(|s| (*s).to_owned()).collect();
    all.extend(scopes.into_iter().filter(|s| !usual.contains(&s.as_str())));
    Ok(Provider {
        issuer,
        oauth2,
        client_id: client_id.filter(|c| !c.is_empty()).ok_or_else(|| missing("client-id"))?,
        secret: secret.filter(|s| !s.is_empty()).ok_or_else(|| missing("secret"))?,
        scopes: all,
        audiences,
        form_post: posted.unwrap_or(form_post),
        name,
    })
}

/// Whether `url` names this machine (`localhost`, `127.0.0.1`, `[::1]`), the one place a URL
/// may be plain `http` where a stranger's could not.
pub fn on_this_machine(url: &url::Url) -> bool {
    matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"))
}

/// A provider's URL (`key`): what it answers decides who signs in, so it is reached over TLS
/// unless it is on this machine.
fn provider_url(name: &str, key: &str, value: &str) -> Result<String, String> {
    let url = url::Url::parse(value).map_err(|e| format!("{name}: {key} {value:?}: {e}"))?;
    match url.scheme() {
        "https" => {}
        "http" if on_this_machine(&url) => {}
        _ => return Err(format!("{name}: {key} {value:?}: https, or http on this machine only")),
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
        assert_eq!(list[0].scopes, ["email", "profile", "groups", "roles"]);
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
            ("x issuer=https://a client-id=a secret=b colour=red", "the keys are issuer"),
        ] {
            let e = parse(list).unwrap_err();
            assert!(e.contains(error), "{list}: {e}");
        }
        assert!(parse("x issuer=http://127.0.0.1:9000 client-id=a secret=b").is_ok());
        assert!(parse("x client-id=a secret=b").unwrap_err().contains("x: issuer= is missing"));
    }

    #[test]
    fn the_providers_gotrue_knows_need_no_issuer() {
        let list = parse("apple client-id=app.example.web secret=@/dev/null audiences=app.example.ios\ngoogle client-id=g secret=s")
            .unwrap_err();
        assert!(list.contains("secret= is missing"), "an empty secret file is no secret: {list}");
        let list = parse("apple client-id=app.example.web secret=jwt audiences=app.example.ios\ngoogle client-id=g secret=s")
            .unwrap();
        assert_eq!(
            (list[0].issuer.as_str(), list[0].scopes.clone(), list[0].form_post, list[0].audiences.clone()),
            (
                "https://appleid.apple.com",
                vec!["name".to_owned(), "email".to_owned()],
                true,
                vec!["app.example.ios".to_owned()]
            )
        );
        assert_eq!((list[1].issuer.as_str(), list[1].form_post), ("https://accounts.google.com", false));
    }

    #[test]
    fn oauth2_providers_name_their_endpoints_or_are_known() {
        let list = parse(
            "github client-id=g secret=s
             corp authorize-url=https://id.corp.example/authorize token-url=https://id.corp.example/token \
               userinfo-url=https://id.corp.example/userinfo client-id=c secret=s scopes=openid",
        )
        .unwrap();
        let github = list[0].oauth2.as_ref().expect("github is OAuth 2.0");
        assert_eq!(
            (github.profile, list[0].scopes.clone()),
            (super::Profile::GitHub, vec!["user:email".to_owned()])
        );
        let corp = list[1].oauth2.as_ref().expect("endpoints named");
        assert_eq!(
            (corp.profile, corp.userinfo_url.as_str()),
            (super::Profile::Claims, "https://id.corp.example/userinfo")
        );
        let e = parse("x authorize-url=https://a token-url=https://a client-id=a secret=b").unwrap_err();
        assert!(e.contains("go together"), "{e}");
        let e = parse("x issuer=https://a authorize-url=https://a client-id=a secret=b").unwrap_err();
        assert!(e.contains("an issuer, or"), "{e}");
    }
}
