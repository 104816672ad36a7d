//! What `rowgate apikey create` needs whatever the backend: a new key, and a lifetime read
//! from `30d`-style text. (The key stores themselves are the backends'.)

use base64::Engine;

/// A `rowgate apikey` command.
pub enum KeyCommand {
    /// Create the key store.
    Install,
    /// Create a key (printed once; only its hash is stored).
    Create {
        /// The role requests with the key run as.
        role: String,
        /// A name to list and revoke it by.
        name: String,
        /// Lifetime in seconds.
        expires: Option<u64>,
        /// Extra claims for `request.jwt.claims`.
        claims: serde_json::Map<String, serde_json::Value>,
    },
    /// List the keys (never the keys themselves).
    List,
    /// Revoke keys by id, name or the key itself.
    Revoke {
        /// Id, name or key.
        which: String,
    },
}

/// A new key: `rg_` and 32 random bytes, base64url. Printed once, never stored.
pub fn generate() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness available: {e}"))?;
    Ok(format!("rg_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)))
}

/// `30d`, `12h`, `15m`, `90s`, `2w` → seconds.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().map_err(|_| format!("invalid duration {text:?}: expected e.g. 30d, 12h, 15m"))?;
    let scale = match unit {
        "s" | "" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(format!("invalid duration {text:?}: the unit must be s, m, h, d or w")),
    };
    n.checked_mul(scale).ok_or_else(|| format!("invalid duration {text:?}: too long"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30d"), Ok(2_592_000));
        assert_eq!(parse_duration("12h"), Ok(43_200));
        assert_eq!(parse_duration("90"), Ok(90));
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("h").is_err());
    }

    #[test]
    fn keys_are_random_and_long() {
        let (a, b) = (generate().unwrap(), generate().unwrap());
        assert_ne!(a, b);
        assert!(a.starts_with("rg_") && a.len() == 46, "{a}");
    }
}
