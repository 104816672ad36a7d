//! How the accounts send mail and where its links lead: `smtp-*` (the server mail goes
//! through) and the `accounts-*` settings of confirmation, recovery and magic links, named after
//! GoTrue's (SITE_URL, API_EXTERNAL_URL, URI_ALLOW_LIST, MAILER_AUTOCONFIRM, MAILER_OTP_EXP,
//! SMTP_MAX_FREQUENCY, RATE_LIMIT_EMAIL_SENT).

use std::path::PathBuf;

use super::{either, invalid, ConfigError, Rate, ServeArgs};

/// The accounts' mail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailSettings {
    /// `smtp-*`; `None`: no mail is sent.
    pub smtp: Option<SmtpSettings>,
    /// `accounts-autoconfirm`.
    pub autoconfirm: bool,
    /// `accounts-site-url`.
    pub site_url: String,
    /// `accounts-external-url`, without a trailing `/`.
    pub external_url: String,
    /// `accounts-redirect-urls`.
    pub redirect_urls: Vec<String>,
    /// `accounts-mail-templates`.
    pub templates: Option<PathBuf>,
    /// `accounts-mail-interval`, in seconds.
    pub interval: u64,
    /// `accounts-mail-rate-limit`; `None` when `off`.
    pub rate: Option<Rate>,
    /// `accounts-otp-expiry`, in seconds.
    pub otp_expiry: u64,
    /// `accounts-secure-email-change`.
    pub secure_email_change: bool,
    /// `accounts-secure-password-change`.
    pub secure_password_change: bool,
}

/// The SMTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmtpSettings {
    pub host: String,
    pub port: u16,
    pub tls: SmtpTls,
    /// User name and password, if it takes a login.
    pub credentials: Option<(String, String)>,
    /// The sender's address, and name.
    pub sender: String,
    pub sender_name: Option<String>,
}

/// How the SMTP connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpTls {
    /// STARTTLS, required.
    StartTls,
    /// TLS from the first byte.
    Tls,
    /// None: only for a server on this machine.
    Off,
}

impl MailSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults;
    /// `port` is the server's (the default external URL).
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs, port: u16) -> Result<MailSettings, ConfigError> {
        let smtp = match either(&a.smtp_host, &f.smtp_host) {
            None => None,
            Some(host) => Some(SmtpSettings::from_args(a, f, host)?),
        };
        let url = |key: &'static str, value: String| -> Result<String, ConfigError> {
            let parsed = url::Url::parse(&value).map_err(|e| invalid(key, format!("{value:?}: {e}")))?;
            match parsed.scheme() {
                "http" | "https" => Ok(value.trim_end_matches('/').to_owned()),
                other => Err(invalid(key, format!("{value:?}: an http or https URL, not {other}:"))),
            }
        };
        let site_url = url(
            "accounts-site-url",
            either(&a.accounts_site_url, &f.accounts_site_url)
                .unwrap_or_else(|| "http://localhost:3000".into()),
        )?;
        let external_url = url(
            "accounts-external-url",
            either(&a.accounts_external_url, &f.accounts_external_url)
                .unwrap_or_else(|| format!("http://localhost:{port}")),
        )?;
        let rate = match either(&a.accounts_mail_rate_limit, &f.accounts_mail_rate_limit).as_deref() {
            Some("off") => None,
            rate => Some(
                Rate::parse(rate.unwrap_or("30/h")).map_err(|e| invalid("accounts-mail-rate-limit", e))?,
            ),
        };
        Ok(MailSettings {
            autoconfirm: either(&a.accounts_autoconfirm, &f.accounts_autoconfirm).unwrap_or(smtp.is_none()),
            smtp,
            site_url,
            external_url,
            redirect_urls: either(&a.accounts_redirect_urls, &f.accounts_redirect_urls)
                .map(|list| list.split(',').map(|u| u.trim().to_owned()).filter(|u| !u.is_empty()).collect())
                .unwrap_or_default(),
            templates: either(&a.accounts_mail_templates, &f.accounts_mail_templates),
            interval: either(&a.accounts_mail_interval, &f.accounts_mail_interval).unwrap_or(60),
            rate,
            otp_expiry: either(&a.accounts_otp_expiry, &f.accounts_otp_expiry).unwrap_or(86_400),
            secure_email_change: either(&a.accounts_secure_email_change, &f.accounts_secure_email_change)
                .unwrap_or(true),
            secure_password_change: either(
                &a.accounts_secure_password_change,
                &f.accounts_secure_password_change,
            )
            .unwrap_or(false),
        })
    }
}

impl SmtpSettings {
    fn from_args(a: &ServeArgs, f: &ServeArgs, host: String) -> Result<SmtpSettings, ConfigError> {
        let tls = match either(&a.smtp_tls, &f.smtp_tls).as_deref() {
            None | Some("starttls") => SmtpTls::StartTls,
            Some("tls") => SmtpTls::Tls,
            Some("off") => SmtpTls::Off,
            Some(other) => return Err(invalid("smtp-tls", format!("{other:?}: starttls, tls or off"))),
        };
        if tls == SmtpTls::Off && !is_local(&host) {
            return Err(invalid(
                "smtp-tls",
                format!("off sends passwords and links in the clear: only for a server on this machine, not {host}"),
            ));
        }
        let sender = either(&a.smtp_sender, &f.smtp_sender).ok_or_else(|| {
            invalid("smtp-sender", "the sender's address is required with smtp-host".into())
        })?;
        let password = match either(&a.smtp_pass, &f.smtp_pass) {
            Some(p) => Some(super::jwt_secret::read_value(&p).map_err(|e| invalid("smtp-pass", e))?),
            None => None,
        };
        let credentials = match (either(&a.smtp_user, &f.smtp_user), password) {
            (Some(user), Some(pass)) => Some((user, pass.trim_end_matches(['\r', '\n']).to_owned())),
            (None, None) => None,
            _ => return Err(invalid("smtp-user", "smtp-user and smtp-pass go together".into())),
        };
        Ok(SmtpSettings {
            port: either(&a.smtp_port, &f.smtp_port).unwrap_or(if tls == SmtpTls::Tls { 465 } else { 587 }),
            host,
            tls,
            credentials,
            sender,
            sender_name: either(&a.smtp_sender_name, &f.smtp_sender_name),
        })
    }
}

/// Whether `host` is this machine.
fn is_local(host: &str) -> bool {
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
