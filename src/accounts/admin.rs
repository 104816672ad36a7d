//! GoTrue's admin API for a token whose role is an administrator's (`service_role`, as
//! supabase-js's `auth.admin` sends the service key): `/admin/users` listed a page at a time,
//! created, read, changed (ban, confirm, metadata, password, role) and deleted.

use http::{header, Method, StatusCode};
use serde_json::Value;

use super::by_mail::Mailing;
use super::gotrue::{self, fail, internal, store_failed, validation, Answer};
use super::mail::Template;
use super::store::{NewUser, OneTime, Updated, UserChanges};
use super::user::email_exists;
use super::{metadata, strong_enough, unix_now, valid_email, Accounts, Caller, Credentials};

/// The roles GoTrue lets administer users (`GOTRUE_JWT_ADMIN_ROLES`' default).
const ADMIN_ROLES: [&str; 2] = ["service_role", "supabase_admin"];

/// A page holds this many users unless `per_page` says otherwise (GoTrue's default)...
const PER_PAGE: u64 = 50;
/// ...and at most this many.
const MAX_PER_PAGE: u64 = 1000;

/// The administrator a request's bearer token names, or GoTrue's refusal.
pub(super) fn admin(credentials: Credentials) -> Result<Caller, Answer> {
    let caller = super::user::bearer(credentials)?;
    match ADMIN_ROLES.contains(&caller.role.as_str()) {
        true => Ok(caller),
        false => Err(fail(StatusCode::FORBIDDEN, "not_admin", "User not allowed")),
    }
}

/// A page of a list the admin API answers (`?page=&per_page=`, GoTrue's pagination).
pub(super) struct Page {
    page: u64,
    per_page: u64,
}

impl Page {
    /// The page `query` asks for: the first of 50 unless it says otherwise.
    pub(super) fn of(query: &str) -> Result<Page, Answer> {
        let number = |name: &str| -> Result<Option<u64>, Answer> {
            match form_urlencoded::parse(query.as_bytes()).find(|(k, _)| k == name) {
                None => Ok(None),
                Some((_, v)) if v.is_empty() => Ok(None),
                Some((_, v)) => v.parse::<u64>().map(Some).map_err(|e| {
                    validation(&format!("Bad Pagination Parameters: strconv.ParseUint: parsing {v:?}: {e}"))
                }),
            }
        };
        let page = number("page")?.unwrap_or(1).max(1);
        let per_page = number("per_page")?.unwrap_or(PER_PAGE);
        if per_page == 0 || per_page > MAX_PER_PAGE {
            return Err(validation(&format!(
                "Bad Pagination Parameters: per_page must be 1 to {MAX_PER_PAGE}"
            )));
        }
        Ok(Page { page, per_page })
    }

    /// How many items a page holds.
    pub(super) fn per_page(&self) -> u64 {
        self.per_page
    }

    /// How many items come before the page.
    pub(super) fn offset(&self) -> u64 {
        (self.page - 1).saturating_mul(self.per_page)
    }

    /// The page's `body`, of `total` items in all, with GoTrue's `X-Total-Count` and `Link`
    /// (`next`, `last`) headers (supabase-js reads them); `path` is the list's.
    pub(super) fn answer(&self, body: String, path: &str, total: u64) -> Answer {
        let (page, per_page) = (self.page, self.per_page);
        let pages = total.div_ceil(per_page);
        let link = |page: u64| format!("<{path}?page={page}&per_page={per_page}>");
        let mut links = String::new();
        if pages > page {
            links.push_str(&format!("{}; rel=\"next\", ", link(page + 1)));
        }
        links.push_str(&format!("{}; rel=\"last\"", link(pages)));
        let mut answer = Answer::ok(body);
        answer.headers.push((header::LINK, links));
        answer.headers.push((header::HeaderName::from_static("x-total-count"), total.to_string()));
        answer
    }
}

impl Accounts {
    /// `/admin/users[/id]`; `path` is the request's path (for the pagination links).
    pub(super) async fn admin(
        &self,
        method: &Method,
        path: &str,
        id: &str,
        query: &str,
        body: &[u8],
    ) -> Result<Answer, Answer> {
        if id.is_empty() {
            return match *method {
                Method::GET => self.list_users(path, query).await,
                Method::POST => self.create_user(body).await,
                _ => Err(fail(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "Method not allowed")),
            };
        }
        let (id, factors) = match id.split_once('/') {
            Some((id, rest)) => (id, Some(rest)),
            None => (id, None),
        };
        if !is_uuid(id) {
            return Err(fail(StatusCode::NOT_FOUND, "validation_failed", "user_id must be an UUID"));
        }
        let not_found = || fail(StatusCode::NOT_FOUND, "user_not_found", "User not found");
        if let Some(rest) = factors {
            let user = self.store.user(id.to_owned()).await.map_err(store_failed)?.ok_or_else(not_found)?;
            return match (method, rest.split('/').collect::<Vec<_>>().as_slice()) {
                (&Method::GET, ["factors"]) => Ok(Answer::ok(user.factors)),
                (&Method::DELETE, ["factors", factor]) => {
                    match self
                        .store
                        .unenroll_factor(user.id, factor.to_string(), true)
                        .await
                        .map_err(store_failed)?
                    {
                        Some(_) => Ok(Answer::ok(serde_json::json!({"id": factor}).to_string())),
                        None => Err(fail(StatusCode::NOT_FOUND, "mfa_factor_not_found", "Factor not found")),
                    }
                }
                (&Method::GET, ["passkeys"]) if self.passkeys_enabled => self.list_passkeys(&user.id).await,
                (&Method::DELETE, ["passkeys", passkey]) if self.passkeys_enabled => {
                    self.delete_passkey(&user.id, passkey).await
                }
                _ => Err(fail(StatusCode::NOT_FOUND, "not_found", "Not found")),
            };
        }
        match *method {
            Method::GET => {
                let user =
                    self.store.user(id.to_owned()).await.map_err(store_failed)?.ok_or_else(not_found)?;
                Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(&user))))
            }
            Method::PUT => {
                let changes = self.admin_changes(body).await?;
                match self.store.update(id.to_owned(), changes).await.map_err(store_failed)? {
                    Updated::Done(user) => Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(&user)))),
                    Updated::NotFound => Err(not_found()),
                    Updated::Taken => Err(email_exists()),
                }
            }
            Method::DELETE => {
                match self.store.delete(id.to_owned(), soft_delete(body)?).await.map_err(store_failed)? {
                    true => Ok(Answer::ok("{}".into())),
                    false => Err(not_found()),
                }
            }
            _ => Err(fail(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "Method not allowed")),
        }
    }

    /// `GET /admin/users?page=&per_page=`: newest first, with GoTrue's `X-Total-Count` and
    /// `Link` (`next`, `last`) headers, which supabase-js reads.
    async fn list_users(&self, path: &str, query: &str) -> Result<Answer, Answer> {
        let page = Page::of(query)?;
        let (users, total) = self.store.list(page.offset(), page.per_page()).await.map_err(store_failed)?;
        let body = serde_json::json!({
            "users": users.iter().map(|u| serde_json::to_value(gotrue::UserJson::of(u)).unwrap_or_default()).collect::<Vec<_>>(),
            "aud": "authenticated",
        });
        Ok(page.answer(body.to_string(), path, total))
    }

    /// `POST /admin/users`: an account made by an administrator, with an address or a phone
    /// (`email_confirm`, `phone_confirm` confirm them); without a password it gets a random one
    /// (the user signs in by other means).
    async fn create_user(&self, body: &[u8]) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let email = text("email").map(valid_email).transpose()?;
        let phone = text("phone").map(valid_phone).transpose()?;
        if email.is_none() && phone.is_none() {
            return Err(validation("Cannot create a user without either an email or phone"));
        }
        let password_hash = match (text("password"), text("password_hash")) {
            (Some(_), Some(_)) => {
                return Err(validation("Only a password or a password hash should be provided"))
            }
            (None, Some(hash)) if hash.starts_with("$argon2") || hash.starts_with("$2") => hash.to_owned(),
            (None, Some(_)) => return Err(validation("Invalid password hash: Argon2 or bcrypt expected")),
            (Some(password), None) => {
                strong_enough(password)?;
                self.hashing.hash(password.to_owned()).await.ok_or_else(internal)?
            }
            (None, None) => self.hashing.hash(super::store::random_token()).await.ok_or_else(internal)?,
        };
        let id = match text("id") {
            Some(id) if !is_uuid(id) => return Err(validation("ID must conform to the uuid v4 format")),
            Some("00000000-0000-0000-0000-000000000000") => {
                return Err(validation("ID cannot be a nil uuid"))
            }
            Some(id) => id.to_lowercase(),
            None => crate::uuid_v4(),
        };
        let providers: Vec<&str> = [email.as_ref().map(|_| "email"), phone.as_ref().map(|_| "phone")]
            .into_iter()
            .flatten()
            .collect();
        let app_metadata = super::store::merged(
            &serde_json::json!({"provider": providers[0], "providers": providers}).to_string(),
            &metadata(v.get("app_metadata"))?.unwrap_or_else(|| "{}".into()),
        );
        let new = NewUser {
            id,
            email: email.clone(),
            phone,
            password_hash: Some(password_hash),
            user_metadata: metadata(v.get("user_metadata"))?.unwrap_or_else(|| "{}".into()),
            app_metadata,
            confirmed: v.get("email_confirm").and_then(Value::as_bool).unwrap_or(false),
            phone_confirmed: v.get("phone_confirm").and_then(Value::as_bool).unwrap_or(false),
            role: text("role").unwrap_or("authenticated").to_owned(),
            banned_until: ban(text("ban_duration"))?.flatten(),
            ..Default::default()
        };
        match self.store.create(new, false, unix_now()).await.map_err(store_failed)? {
            Some((user, _)) => Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(&user)))),
            None if email.is_some() => Err(email_exists()),
            None => Err(fail(
                StatusCode::UNPROCESSABLE_ENTITY,
                "phone_exists",
                "Phone number already registered by another user",
            )),
        }
    }

    /// `POST /invite` `{email, data}`: an account made for `email`, which is mailed a link that
    /// signs it in (the user then sets a password with `PUT /user`).
    pub(super) async fn invite(&self, body: &[u8], redirect: Option<&str>) -> Result<Answer, Answer> {
        self.can_mail()?;
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let email = valid_email(v.get("email").and_then(Value::as_str).unwrap_or(""))?;
        let redirect = self.mail.links.redirect(redirect);
        let user = self.invited(&email, metadata(v.get("data"))?).await?;
        self.send_code(
            &user,
            Mailing {
                kind: OneTime::Confirmation,
                template: Template::Invite,
                verify_type: "invite",
                to: &email,
                redirect: &redirect,
                interval: 0,
                pkce: None,
            },
        )
        .await?;
        let user = self.store.user(user.id.clone()).await.map_err(store_failed)?.unwrap_or(user);
        Ok(Answer::ok(gotrue::to_json(&gotrue::UserJson::of(&user))))
    }

    /// The account an invitation to `email` is for: made now, or one not yet confirmed.
    async fn invited(&self, email: &str, data: Option<String>) -> Result<super::User, Answer> {
        if let Some((user, _)) = self.store.by_email(email.to_owned()).await.map_err(store_failed)? {
            return match user.email_confirmed_at {
                None => Ok(user),
                Some(_) => Err(email_exists()),
            };
        }
        let new = NewUser {
            id: crate::uuid_v4(),
            email: Some(email.to_owned()),
            user_metadata: data.unwrap_or_else(|| "{}".into()),
            app_metadata: r#"{"provider":"email","providers":["email"]}"#.into(),
            role: "authenticated".into(),
            invited: true,
            ..Default::default()
        };
        let created = self.store.create(new, false, unix_now()).await.map_err(store_failed)?;
        created.map(|(u, _)| u).ok_or_else(email_exists)
    }

    /// `POST /admin/generate_link` `{type, email, password, data, new_email, redirect_to}`: the
    /// link (and code) a mail of `type` would carry, made without sending anything — for an
    /// application that sends its own mail. The user, with `action_link`, `email_otp`,
    /// `hashed_token`, `redirect_to` and `verification_type` beside its fields.
    pub(super) async fn generate_link(&self, body: &[u8]) -> Result<Answer, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let email = valid_email(text("email").unwrap_or(""))?;
        let redirect = self.mail.links.redirect(text("redirect_to"));
        let data = metadata(v.get("data"))?;
        let found = self.store.by_email(email.clone()).await.map_err(store_failed)?.map(|(u, _)| u);
        let kind = text("type").unwrap_or("");
        let (user, one_time, verification, to) = match (kind, found) {
            ("signup", Some(_)) => return Err(email_exists()),
            ("signup", None) => {
                let password =
                    text("password").ok_or_else(|| validation("Signup requires a valid password"))?;
                strong_enough(password)?;
                let new = NewUser {
                    id: crate::uuid_v4(),
                    email: Some(email.clone()),
                    password_hash: Some(self.hashing.hash(password.to_owned()).await.ok_or_else(internal)?),
                    user_metadata: data.unwrap_or_else(|| "{}".into()),
                    app_metadata: r#"{"provider":"email","providers":["email"]}"#.into(),
                    role: "authenticated".into(),
                    ..Default::default()
                };
                let created = self.store.create(new, false, unix_now()).await.map_err(store_failed)?;
                let (user, _) = created.ok_or_else(email_exists)?;
                (user, OneTime::Confirmation, "signup", email.clone())
            }
            ("invite", _) => {
                (self.invited(&email, data).await?, OneTime::Confirmation, "invite", email.clone())
            }
            ("magiclink" | "recovery", None) => {
                return Err(fail(StatusCode::NOT_FOUND, "user_not_found", "User with this email not found"))
            }
            ("magiclink", Some(user)) => (user, OneTime::Recovery, "magiclink", email.clone()),
            ("recovery", Some(user)) => (user, OneTime::Recovery, "recovery", email.clone()),
            ("email_change_new" | "email_change_current", Some(user)) => {
                if kind == "email_change_current" && !self.mail.secure_email_change {
                    return Err(validation("Enable secure email change to generate link for current email"));
                }
                let new_email = valid_email(text("new_email").unwrap_or(""))?;
                if self.store.by_email(new_email.clone()).await.map_err(store_failed)?.is_some() {
                    return Err(email_exists());
                }
                match kind {
                    "email_change_new" => (user, OneTime::EmailChange, "email_change", new_email),
                    _ => {
                        // The change is recorded by its new address's code (which this link is
                        // not); the link confirms it from the current address.
                        self.issue_code(&user, OneTime::EmailChange, &new_email, 0, false).await?;
                        let current = user.email.clone().unwrap_or_default();
                        (user, OneTime::EmailChangeCurrent, "email_change", current)
                    }
                }
            }
            ("email_change_new" | "email_change_current", None) => {
                return Err(fail(StatusCode::NOT_FOUND, "user_not_found", "User with this email not found"))
            }
            _ => {
                return Err(validation(
                    "Invalid link type: signup, invite, magiclink, recovery, email_change_current or email_change_new",
                ))
            }
        };
        let code = self.issue_code(&user, one_time, &to, 0, false).await?;
        let user = self.store.user(user.id.clone()).await.map_err(store_failed)?.unwrap_or(user);
        let mut answer = serde_json::to_value(gotrue::UserJson::of(&user)).map_err(|_| internal())?;
        if let Value::Object(fields) = &mut answer {
            fields.insert(
                "action_link".into(),
                self.mail.links.verify_url(&code.hash, verification, &redirect).into(),
            );
            fields.insert("email_otp".into(), code.otp.into());
            fields.insert("hashed_token".into(), code.hash.into());
            fields.insert("redirect_to".into(), redirect.into());
            fields.insert("verification_type".into(), verification.into());
        }
        Ok(Answer::ok(answer.to_string()))
    }

    /// The changes `PUT /admin/users/{id}` asks for.
    async fn admin_changes(&self, body: &[u8]) -> Result<UserChanges, Answer> {
        let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
        let text = |k: &str| v.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let password_hash = match text("password") {
            Some(p) => {
                strong_enough(p)?;
                Some(self.hashing.hash(p.to_owned()).await.ok_or_else(internal)?)
            }
            None => None,
        };
        let email = text("email").map(valid_email).transpose()?;
        let confirm_email = v.get("email_confirm").and_then(Value::as_bool).unwrap_or(false);
        Ok(UserChanges {
            // Confirming an anonymous user's new address makes it a permanent one (GoTrue).
            is_anonymous: (email.is_some() && confirm_email).then_some(false),
            email,
            phone: text("phone").map(valid_phone).transpose()?,
            password_hash,
            user_metadata: metadata(v.get("user_metadata"))?,
            app_metadata: metadata(v.get("app_metadata"))?,
            confirm_email,
            banned_until: ban(text("ban_duration"))?,
            role: text("role").map(str::to_owned),
            unproved: false,
        })
    }
}

/// `DELETE /admin/users/{id}`'s `{"should_soft_delete": true}` (no body: a hard delete).
fn soft_delete(body: &[u8]) -> Result<bool, Answer> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(false);
    }
    let v: Value = serde_json::from_slice(body).map_err(|_| gotrue::bad_json())?;
    match v.get("should_soft_delete") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(soft)) => Ok(*soft),
        Some(_) => Err(gotrue::bad_json()),
    }
}

/// `ban_duration` as GoTrue takes it: a Go duration (`24h`, `1h30m`, `0.5h`) from now, or
/// `none` to lift a ban. `None`: not given.
fn ban(duration: Option<&str>) -> Result<Option<Option<i64>>, Answer> {
    let Some(d) = duration else { return Ok(None) };
    if d == "none" {
        return Ok(Some(None));
    }
    let seconds = go_duration(d).ok_or_else(|| {
        validation(&format!("invalid format for ban duration: time: invalid duration {d:?}"))
    })?;
    Ok(Some(Some(unix_now().saturating_add(seconds as i64))))
}

/// A Go duration string (numbers with units `ns us µs ms s m h`), in whole seconds; `None` if
/// it is not one, is negative, or is longer than Go's longest.
fn go_duration(text: &str) -> Option<u64> {
    match text {
        "" => return None,
        "0" => return Some(0),
        _ => {}
    }
    let mut rest = text;
    let mut seconds = 0f64;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_end..];
        seconds += number * scale;
    }
    // Go's durations end at about 292 years (nanoseconds in an i64), and so do these.
    (seconds.is_finite() && seconds <= 9_223_372_036.0).then_some(seconds as u64)
}

/// A phone number as GoTrue takes one: E.164 digits, spaces, dashes, brackets and `+` dropped.
pub(super) fn valid_phone(phone: &str) -> Result<String, Answer> {
    let digits: String = phone.chars().filter(|c| !matches!(c, ' ' | '-' | '(' | ')' | '+')).collect();
    let ok = (2..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    match ok {
        true => Ok(digits),
        false => Err(validation("Invalid phone number format (E.164 required)")),
    }
}

/// Whether `text` is a UUID (`8-4-4-4-12` hex digits).
pub(super) fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::{go_duration, is_uuid, valid_phone};

    #[test]
    fn ban_durations_are_read_as_go_writes_them() {
        assert_eq!(go_duration("24h"), Some(86_400));
        assert_eq!(go_duration("1h30m"), Some(5_400));
        assert_eq!(go_duration("0.5h"), Some(1_800));
        assert_eq!(go_duration("1500ms"), Some(1));
        assert_eq!(go_duration("0"), Some(0));
        for bad in ["", "24", "h", "1d", "-1h", "1h-", "1e9h", "3000000h"] {
            assert_eq!(go_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn phones_are_e164_digits() {
        assert_eq!(valid_phone("+1 (555) 010-9999").ok(), Some("15550109999".into()));
        assert!(valid_phone("0555").is_err());
        assert!(valid_phone("12345678901234567").is_err());
        assert!(valid_phone("+1 555 abc").is_err());
    }

    #[test]
    fn user_ids_are_uuids() {
        assert!(is_uuid("9b2f6c1e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"));
        assert!(!is_uuid("9b2f6c1e1c2d4e5f8a9b0c1d2e3f4a5b"));
        assert!(!is_uuid("../../etc"));
    }
}
