//! How the accounts reach phones (`accounts-sms-*`), named after GoTrue's settings: the Send SMS
//! hook (HOOK_SEND_SMS_URI and _SECRETS), test numbers (SMS_TEST_OTP), SMS_AUTOCONFIRM,
//! SMS_MAX_FREQUENCY, SMS_OTP_EXP and RATE_LIMIT_SMS_SENT.

use std::collections::HashMap;

use super::{either, invalid, ConfigError, Rate, ServeArgs};

/// The accounts' phone channel.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SmsSettings {
    /// `accounts-sms-hook`: the URL codes are posted to.
    pub hook: Option<String>,
    /// `accounts-sms-hook-secret`: `v1,whsec_<base64>` secrets, `|`-separated.
    pub hook_secrets: Vec<String>,
    /// `accounts-sms-test-otp`: test numbers (E.164 digits) and their fixed codes.
    pub test_codes: HashMap<String, String>,
    /// `accounts-sms-autoconfirm`.
    pub autoconfirm: bool,
    /// `accounts-sms-interval`, in seconds.
    pub interval: u64,
    /// `accounts-sms-otp-expiry`, in seconds.
    pub otp_expiry: u64,
    /// `accounts-sms-rate-limit`: texts the server sends; `None` when `off`.
    pub rate: Option<Rate>,
}

impl SmsSettings {
    /// The settings from the flags and variables `a`, then the file `f`, then the defaults.
    pub(super) fn from_args(a: &ServeArgs, f: &ServeArgs) -> Result<SmsSettings, ConfigError> {
        let hook = either(&a.accounts_sms_hook, &f.accounts_sms_hook).filter(|h| !h.trim().is_empty());
        if let Some(url) = &hook {
            let parsed =
                url::Url::parse(url).map_err(|e| invalid("accounts-sms-hook", format!("{url:?}: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(invalid("accounts-sms-hook", format!("{url:?}: an http or https URL")));
            }
        }
        let hook_secrets: Vec<String> = either(&a.accounts_sms_hook_secret, &f.accounts_sms_hook_secret)
            .map(|s| s.split('|').map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect())
            .unwrap_or_default();
        if hook.is_some() && hook_secrets.is_empty() {
            return Err(invalid(
                "accounts-sms-hook-secret",
                "the hook's secret (`v1,whsec_<base64>`) is needed".into(),
            ));
        }
        let mut test_codes = HashMap::new();
        for pair in either(&a.accounts_sms_test_otp, &f.accounts_sms_test_otp).unwrap_or_default().split(',')
        {
            let pair = pair.trim();
            if pair.is_empty() {
                continue;
            }
            let (phone, code) = pair
                .split_once('=')
                .filter(|(p, c)| {
                    !p.trim().is_empty()
                        && c.trim().len() >= 6
                        && c.trim().bytes().all(|b| b.is_ascii_digit())
                })
                .ok_or_else(|| {
                    invalid(
                        "accounts-sms-test-otp",
                        format!("{pair:?}: PHONE=CODE, a code of 6 digits or more"),
                    )
                })?;
            let phone: String = phone.trim().trim_start_matches('+').chars().filter(|c| *c != ' ').collect();
            test_codes.insert(phone, code.trim().to_owned());
        }
        Ok(SmsSettings {
            hook,
            hook_secrets,
            test_codes,
            autoconfirm: either(&a.accounts_sms_autoconfirm, &f.accounts_sms_autoconfirm).unwrap_or(false),
            interval: either(&a.accounts_sms_interval, &f.accounts_sms_interval).unwrap_or(60),
            otp_expiry: either(&a.accounts_sms_otp_expiry, &f.accounts_sms_otp_expiry).unwrap_or(60),
            rate: match either(&a.accounts_sms_rate_limit, &f.accounts_sms_rate_limit).as_deref() {
                Some("off") => None,
                rate => Some(
                    Rate::parse(rate.unwrap_or("30/h")).map_err(|e| invalid("accounts-sms-rate-limit", e))?,
                ),
            },
        })
    }
}
