//! Mail to users, through the SMTP server `smtp-*` names (lettre): the templates of each kind
//! (built in, or files in `accounts-mail-templates`) with GoTrue's variables, and the server's
//! limit on how many go out (`accounts-mail-rate-limit`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lettre::message::{header::ContentType, Mailbox};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::config::{Rate, SmtpSettings, SmtpTls};

/// What a mail is for; each has its template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Template {
    Confirmation,
    Invite,
    Recovery,
    MagicLink,
    EmailChange,
    Reauthentication,
}

impl Template {
    const ALL: [Template; 6] = [
        Template::Confirmation,
        Template::Invite,
        Template::Recovery,
        Template::MagicLink,
        Template::EmailChange,
        Template::Reauthentication,
    ];

    /// Its file in `accounts-mail-templates` (GoTrue's names).
    fn file(self) -> &'static str {
        match self {
            Template::Confirmation => "confirmation.html",
            Template::Invite => "invite.html",
            Template::Recovery => "recovery.html",
            Template::MagicLink => "magic_link.html",
            Template::EmailChange => "email_change.html",
            Template::Reauthentication => "reauthentication.html",
        }
    }

    /// The built-in subject and body.
    fn built_in(self) -> (&'static str, &'static str) {
        match self {
            Template::Confirmation => (
                "Confirm your address",
                "<h2>Confirm your address</h2>\n<p><a href=\"{{ .ConfirmationURL }}\">Confirm {{ .Email }}</a></p>\n\
                 <p>Or enter this code: {{ .Token }}</p>\n",
            ),
            Template::Invite => (
                "You are invited",
                "<h2>You are invited</h2>\n<p>You are invited to {{ .SiteURL }}.</p>\n\
                 <p><a href=\"{{ .ConfirmationURL }}\">Accept the invitation</a></p>\n\
                 <p>Or enter this code: {{ .Token }}</p>\n",
            ),
            Template::Recovery => (
                "Reset your password",
                "<h2>Reset your password</h2>\n<p><a href=\"{{ .ConfirmationURL }}\">Choose a new password</a></p>\n\
                 <p>Or enter this code: {{ .Token }}</p>\n<p>If you did not ask for this, ignore this mail.</p>\n",
            ),
            Template::MagicLink => (
                "Your sign-in link",
                "<h2>Sign in</h2>\n<p><a href=\"{{ .ConfirmationURL }}\">Sign in as {{ .Email }}</a></p>\n\
                 <p>Or enter this code: {{ .Token }}</p>\n",
            ),
            Template::Reauthentication => (
                "Confirm it is you",
                "<h2>Confirm it is you</h2>\n<p>Enter this code: {{ .Token }}</p>\n\
                 <p>If you did not ask for this, change your password.</p>\n",
            ),
            Template::EmailChange => (
                "Confirm your new address",
                "<h2>Confirm your new address</h2>\n\
                 <p><a href=\"{{ .ConfirmationURL }}\">Change {{ .Email }} to {{ .NewEmail }}</a></p>\n\
                 <p>Or enter this code: {{ .Token }}</p>\n",
            ),
        }
    }
}

/// The values a template may name.
pub struct Vars<'a> {
    pub confirmation_url: &'a str,
    pub token: &'a str,
    pub token_hash: &'a str,
    pub site_url: &'a str,
    pub redirect_to: &'a str,
    pub email: &'a str,
    pub new_email: &'a str,
    /// The user's metadata, as JSON.
    pub data: &'a str,
}

/// Why a mail did not go out.
#[derive(Debug)]
pub enum MailError {
    /// Past `accounts-mail-rate-limit`.
    OverLimit,
    /// The SMTP server refused it, or could not be reached.
    Failed(String),
}

/// The accounts' mail.
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    /// Subject and body of each template.
    templates: HashMap<Template, (String, String)>,
    limit: Option<SendLimit>,
}

/// How many messages (mails, texts) a server sends: a fixed window of `rate.count` per
/// `rate.period`.
pub(super) struct SendLimit {
    rate: Rate,
    window: Mutex<(Instant, u32)>,
}

impl SendLimit {
    pub(super) fn new(rate: Rate) -> SendLimit {
        SendLimit { rate, window: Mutex::new((Instant::now(), 0)) }
    }

    /// Whether another message may go now; if so, it is counted.
    pub(super) fn take(&self) -> bool {
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        if window.0.elapsed() >= self.rate.period {
            *window = (Instant::now(), 0);
        }
        if window.1 >= self.rate.count {
            return false;
        }
        window.1 += 1;
        true
    }
}

impl Mailer {
    /// The mailer `smtp` describes, with the templates of `templates` (a directory) where it has
    /// them, sending at most `rate`.
    pub fn new(smtp: &SmtpSettings, templates: Option<&Path>, rate: Option<Rate>) -> Result<Mailer, String> {
        let tls = || TlsParameters::new(smtp.host.clone()).map_err(|e| format!("smtp-host: {e}"));
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&smtp.host)
            .port(smtp.port)
            .timeout(Some(Duration::from_secs(10)));
        builder = match smtp.tls {
            SmtpTls::StartTls => builder.tls(Tls::Required(tls()?)),
            SmtpTls::Tls => builder.tls(Tls::Wrapper(tls()?)),
            SmtpTls::Off => builder.tls(Tls::None),
        };
        if let Some((user, pass)) = &smtp.credentials {
            builder = builder.credentials(Credentials::new(user.clone(), pass.clone()));
        }
        let address = smtp.sender.parse().map_err(|e| format!("smtp-sender {:?}: {e}", smtp.sender))?;
        let from = Mailbox::new(smtp.sender_name.clone(), address);
        let mut loaded = HashMap::new();
        for t in Template::ALL {
            let (subject, body) = t.built_in();
            let custom = match templates {
                Some(dir) => match std::fs::read_to_string(dir.join(t.file())) {
                    Ok(text) => Some(text),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => {
                        return Err(format!("accounts-mail-templates: {}: {e}", dir.join(t.file()).display()))
                    }
                },
                None => None,
            };
            let (subject, body) = match custom {
                Some(text) => (title(&text).unwrap_or(subject).to_owned(), text),
                None => (subject.to_owned(), body.to_owned()),
            };
            loaded.insert(t, (subject, body));
        }
        Ok(Mailer { transport: builder.build(), from, templates: loaded, limit: rate.map(SendLimit::new) })
    }

    /// Sends `template` to `to`, its variables `vars`.
    pub async fn send(&self, template: Template, to: &str, vars: &Vars<'_>) -> Result<(), MailError> {
        if self.limit.as_ref().is_some_and(|limit| !limit.take()) {
            return Err(MailError::OverLimit);
        }
        let (subject, body) = &self.templates[&template];
        let to: Mailbox = to.parse().map_err(|e| MailError::Failed(format!("the address {to:?}: {e}")))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(render(subject, vars, false))
            .header(ContentType::TEXT_HTML)
            .body(render(body, vars, true))
            .map_err(|e| MailError::Failed(e.to_string()))?;
        self.transport.send(message).await.map(drop).map_err(|e| MailError::Failed(e.to_string()))
    }
}

/// A template's `<title>`, its subject when it has one.
fn title(html: &str) -> Option<&str> {
    let start = html.find("<title>")? + "<title>".len();
    let end = start + html[start..].find("</title>")?;
    Some(html[start..end].trim()).filter(|t| !t.is_empty())
}

/// `text` with each `{{ .Name }}` replaced by its value (HTML-escaped in a body); names it does
/// not know are left as they are.
fn render(text: &str, vars: &Vars<'_>, html: bool) -> String {
    let mut out = String::with_capacity(text.len() + 256);
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        let name = after[..close].trim();
        let value = match name {
            ".ConfirmationURL" => Some(vars.confirmation_url),
            ".Token" => Some(vars.token),
            ".TokenHash" => Some(vars.token_hash),
            ".SiteURL" => Some(vars.site_url),
            ".RedirectTo" => Some(vars.redirect_to),
            ".Email" => Some(vars.email),
            ".NewEmail" => Some(vars.new_email),
            ".Data" => Some(vars.data),
            _ => None,
        };
        match value {
            Some(v) if html => escape_into(&mut out, v),
            Some(v) => out.push_str(v),
            None => out.push_str(&rest[open..open + 2 + close + 2]),
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{render, title, Vars};

    #[test]
    fn templates_take_gotrues_variables() {
        let vars = Vars {
            confirmation_url: "https://api.example.com/auth/v1/verify?token=ab&type=signup",
            token: "123456",
            token_hash: "ab",
            site_url: "https://example.com",
            redirect_to: "https://example.com/welcome",
            email: "ann@example.com",
            new_email: "",
            data: r#"{"name":"<Ann>"}"#,
        };
        assert_eq!(
            render(
                r#"<a href="{{ .ConfirmationURL }}">{{.Token}}</a> {{ .Data }} {{ .Unknown }} {{"#,
                &vars,
                true
            ),
            "<a href=\"https://api.example.com/auth/v1/verify?token=ab&amp;type=signup\">123456</a> \
             {&quot;name&quot;:&quot;&lt;Ann&gt;&quot;} {{ .Unknown }} {{"
        );
        assert_eq!(render("Welcome {{ .Email }}", &vars, false), "Welcome ann@example.com");
        assert_eq!(title("<html><title> Hi there </title>"), Some("Hi there"));
        assert_eq!(title("<p>no title</p>"), None);
    }
}
