//! How codes reach phones: Supabase Auth's Send SMS hook (`accounts-sms-hook`), an HTTP endpoint
//! of the operator's that gets `{user, sms: {otp, phone, sms_type}}` signed as Standard Webhooks
//! sign (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<HMAC-SHA256>` with
//! `accounts-sms-hook-secret`) and sends the text through whatever provider it likes; and the
//! test numbers of `accounts-sms-test-otp`, whose fixed codes are never sent (GoTrue's
//! `SMS_TEST_OTP`).

use std::collections::HashMap;
use std::time::Duration;

use hmac::{KeyInit, Mac};

use super::gotrue::UserJson;
use super::User;

/// How long the hook has to answer.
const HOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// The phone channel's settings, made ready.
pub struct Texter {
    hook: Option<Hook>,
    /// `accounts-sms-rate-limit`: texts the server sends (test numbers' codes are not sent).
    limit: Option<super::mail::SendLimit>,
    /// Test numbers (E.164 digits) and their fixed codes.
    test_codes: HashMap<String, String>,
    http: reqwest::Client,
}

struct Hook {
    url: String,
    /// The keys of `v1,whsec_<base64>` secrets; every one signs (receivers rotate keys so).
    keys: Vec<Vec<u8>>,
}

impl Texter {
    /// The texter of `settings`; an error names a secret that does not read.
    pub fn new(settings: &crate::config::SmsSettings) -> Result<Texter, String> {
        use base64::Engine;
        let hook = match &settings.hook {
            None => None,
            Some(url) => {
                let keys = settings
                    .hook_secrets
                    .iter()
                    .map(|secret| {
                        let encoded = secret.trim().trim_start_matches("v1,").trim_start_matches("whsec_");
                        base64::engine::general_purpose::STANDARD
                            .decode(encoded)
                            .ok()
                            .filter(|key| key.len() >= 16)
                            .ok_or_else(|| {
                                "accounts-sms-hook-secret: a `v1,whsec_<base64>` secret of 16 bytes or more"
                                    .to_owned()
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Some(Hook { url: url.clone(), keys })
            }
        };
        let http = reqwest::Client::builder().timeout(HOOK_TIMEOUT).build().map_err(|e| e.to_string())?;
        let limit = settings.rate.map(super::mail::SendLimit::new);
        Ok(Texter { hook, limit, test_codes: settings.test_codes.clone(), http })
    }

    /// Whether phone numbers can be used at all: a hook sends codes, or test numbers are set.
    pub fn enabled(&self) -> bool {
        self.hook.is_some() || !self.test_codes.is_empty()
    }

    /// The code for `phone`: its test code, or six random digits (GoTrue's hash beside it).
    pub fn code_for(&self, phone: &str) -> super::by_mail::Code {
        match self.test_codes.get(phone) {
            Some(otp) => super::by_mail::Code { hash: super::by_mail::hash(phone, otp), otp: otp.clone() },
            None => super::by_mail::Code::new(phone),
        }
    }

    /// Whether a text to `phone` may go now (`accounts-sms-rate-limit`); if so, it is counted.
    /// A test number's code is never sent, and never counted.
    pub fn reserve(&self, phone: &str) -> bool {
        self.test_codes.contains_key(phone) || self.limit.as_ref().is_none_or(|limit| limit.take())
    }

    /// Sends `otp` to `phone` (of `user`) for `sms_type` (`confirmation`, `phone_change`),
    /// unless the number is a test number; a reason for the log, if it fails.
    pub async fn send(&self, user: &User, phone: &str, otp: &str, sms_type: &str) -> Result<(), String> {
        if self.test_codes.contains_key(phone) {
            return Ok(());
        }
        self.post(user, phone, otp, sms_type).await
    }

    /// The hook's request; the failure's reason, if it fails.
    async fn post(&self, user: &User, phone: &str, otp: &str, sms_type: &str) -> Result<(), String> {
        let Some(hook) = &self.hook else { return Err("no SMS hook is configured".into()) };
        let payload = serde_json::json!({
            "user": UserJson::of(user),
            "sms": {"otp": otp, "phone": phone, "sms_type": sms_type},
        })
        .to_string();
        let id = format!("msg_{}", crate::uuid_v4());
        let timestamp = super::unix_now().to_string();
        let signatures = hook
            .keys
            .iter()
            .map(|key| signature(key, &id, &timestamp, &payload))
            .collect::<Vec<_>>()
            .join(" ");
        let answer = self
            .http
            .post(&hook.url)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", &timestamp)
            .header("webhook-signature", signatures)
            .body(payload)
            .send()
            .await
            .map_err(|e| format!("the SMS hook did not answer: {e}"))?;
        let status = answer.status();
        // A hook refuses with an error status, or with `{"error": ...}` (Supabase's hooks' form).
        let body: serde_json::Value =
            answer.text().await.ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
        match (status.is_success(), body.get("error")) {
            (true, None | Some(serde_json::Value::Null)) => Ok(()),
            (_, Some(e)) if !e.is_null() => {
                Err(format!("the SMS hook answered {} with an error: {e}", status.as_u16()))
            }
            _ => Err(format!("the SMS hook answered {}", status.as_u16())),
        }
    }
}

/// Standard Webhooks' signature of a message: `v1,` and base64 of HMAC-SHA256 over
/// `id.timestamp.payload`.
fn signature(key: &[u8], id: &str, timestamp: &str, payload: &str) -> String {
    use base64::Engine;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(format!("{id}.{timestamp}.{payload}").as_bytes());
    format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
}

#[cfg(test)]
mod tests {
    use super::signature;

    #[test]
    fn hooks_are_signed_as_standard_webhooks_sign() {
        // Standard Webhooks' own example: secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw, msg_p5jXN8AQM9LWM0D4loKWxJek,
        // timestamp 1614265330, payload {"test": 2432232314}.
        use base64::Engine;
        let key =
            base64::engine::general_purpose::STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", r#"{"test": 2432232314}"#),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }
}
