//! Where passwords are hashed and checked: Argon2id (rowgate's own hashes, which GoTrue reads
//! too) and bcrypt (GoTrue's, in the `auth.users` of a Supabase project), on blocking threads.

use std::sync::{Arc, Mutex};

use argon2::password_hash::{PasswordHash, SaltString};
use argon2::Argon2;

/// What a login for an unknown address is checked against: it costs a full verification too,
/// so timing does not tell who is registered.
pub const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$9mX1Sx1N2Ly9rXQ4m2Wn3Cj1nDQ7q8l6zvN4KJ0kQk8";

/// Where passwords are checked: blocking threads, one check per core at a time (more only
/// share the cores), each with Argon2's working memory kept from the check before. Allocated
/// afresh, its 19 MiB came from the kernel as new pages every time, faulted in and zeroed:
/// a sixth of a login's CPU.
pub struct Hashing {
    turns: tokio::sync::Semaphore,
    memories: Mutex<Vec<Vec<argon2::Block>>>,
}

impl Default for Hashing {
    fn default() -> Hashing {
        Hashing::new()
    }
}

impl Hashing {
    /// One check per core at a time.
    pub fn new() -> Hashing {
        Hashing {
            turns: tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get())),
            memories: Mutex::new(Vec::new()),
        }
    }

    /// Whether `password` is the one `phc` (a PHC string, as stored) was made from; `None` if
    /// the check could not run.
    pub async fn verify(self: &Arc<Self>, password: String, phc: String) -> Option<bool> {
        self.with_memory(move |memory| match phc.starts_with("$2") {
            // GoTrue's own hashes: a Supabase project's users keep their passwords.
            true => bcrypt::verify(password.as_bytes(), &phc).unwrap_or(false),
            false => verify_password(password.as_bytes(), &phc, memory),
        })
        .await
    }

    /// The PHC string of a new hash of `password`; `None` if it could not be made.
    pub async fn hash(self: &Arc<Self>, password: String) -> Option<String> {
        self.with_memory(move |memory| hash_password(password.as_bytes(), memory)).await.flatten()
    }

    /// Runs `f` on a blocking thread when a turn is free, with a kept working memory.
    async fn with_memory<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Vec<argon2::Block>) -> T + Send + 'static,
    ) -> Option<T> {
        let _turn = self.turns.acquire().await.ok()?;
        let hashing = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut memory =
                hashing.memories.lock().unwrap_or_else(|e| e.into_inner()).pop().unwrap_or_default();
            let result = f(&mut memory);
            hashing.memories.lock().unwrap_or_else(|e| e.into_inner()).push(memory);
            result
        })
        .await
        .ok()
    }
}

/// Argon2's own `hash_password` (Argon2id, its default parameters, a random salt), in `memory`.
fn hash_password(password: &[u8], memory: &mut Vec<argon2::Block>) -> Option<String> {
    use argon2::password_hash::{Output, ParamsString};
    let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
    let mut salt_bytes = [0u8; argon2::password_hash::Salt::MAX_LENGTH];
    let raw_salt = salt.as_salt().decode_b64(&mut salt_bytes).ok()?;
    let argon = Argon2::default();
    let params = argon.params().clone();
    grow(memory, &params);
    let output = Output::init_with(argon2::Params::DEFAULT_OUTPUT_LEN, |out| {
        argon
            .hash_password_into_with_memory(password, raw_salt, out, &mut memory[..])
            .map_err(|_| argon2::password_hash::Error::Password)
    })
    .ok()?;
    let phc = PasswordHash {
        algorithm: argon2::Algorithm::Argon2id.ident(),
        version: Some(argon2::Version::V0x13.into()),
        params: ParamsString::try_from(&params).ok()?,
        salt: Some(salt.as_salt()),
        hash: Some(output),
    };
    Some(phc.to_string())
}

/// Makes `memory` large enough for a hash with `params`.
fn grow(memory: &mut Vec<argon2::Block>, params: &argon2::Params) {
    if memory.len() < params.block_count() {
        memory.resize(params.block_count(), argon2::Block::default());
    }
}

/// Argon2's own `verify_password`, in `memory` (grown as the hash's parameters need).
fn verify_password(password: &[u8], phc: &str, memory: &mut Vec<argon2::Block>) -> bool {
    let Ok(hash) = PasswordHash::new(phc) else { return false };
    let (Ok(algorithm), Ok(params), Some(expected), Some(salt)) =
        (argon2::Algorithm::try_from(hash.algorithm), argon2::Params::try_from(&hash), hash.hash, hash.salt)
    else {
        return false;
    };
    let version = match hash.version.map(argon2::Version::try_from) {
        None => argon2::Version::default(),
        Some(Ok(v)) => v,
        Some(Err(_)) => return false,
    };
    let mut salt_bytes = [0u8; argon2::password_hash::Salt::MAX_LENGTH];
    let Ok(salt) = salt.decode_b64(&mut salt_bytes) else { return false };
    grow(memory, &params);
    let mut out = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(password, salt, &mut out, &mut memory[..])
        .is_ok()
        // Output's comparison takes the same time wherever the bytes differ.
        && argon2::password_hash::Output::new(&out).is_ok_and(|o| o == expected)
}

#[cfg(test)]
mod tests {
    use argon2::password_hash::PasswordHasher;

    use super::*;

    #[test]
    fn a_password_is_verified_in_memory_kept_from_the_check_before() {
        let salt = SaltString::generate(&mut argon2::password_hash::rand_core::OsRng);
        let phc = Argon2::default().hash_password(b"correct horse", &salt).expect("hash").to_string();
        let mut memory = Vec::new();
        assert!(verify_password(b"correct horse", &phc, &mut memory));
        assert_eq!(memory.len(), argon2::Params::default().block_count());
        assert!(!verify_password(b"correct hors", &phc, &mut memory));
        assert!(verify_password(b"correct horse", &phc, &mut memory), "memory left by a check is reusable");
        assert!(!verify_password(b"correct horse", "not a hash", &mut memory));
    }

    #[test]
    fn a_hash_made_in_kept_memory_is_argon2s_own() {
        use argon2::password_hash::PasswordVerifier;
        let mut memory = Vec::new();
        let phc = hash_password(b"correct horse", &mut memory).expect("hash");
        assert!(phc.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{phc}");
        let parsed = PasswordHash::new(&phc).expect("a PHC string");
        assert!(Argon2::default().verify_password(b"correct horse", &parsed).is_ok());
        assert!(verify_password(b"correct horse", &phc, &mut memory));
        assert_ne!(phc, hash_password(b"correct horse", &mut memory).expect("hash"), "salted");
    }

    #[tokio::test]
    async fn a_bcrypt_hash_from_gotrue_is_checked_too() {
        let phc = bcrypt::hash("correct horse", 4).expect("hash");
        let hashing = Arc::new(Hashing::new());
        assert_eq!(hashing.verify("correct horse".into(), phc.clone()).await, Some(true));
        assert_eq!(hashing.verify("correct hors".into(), phc).await, Some(false));
    }

    #[test]
    fn the_dummy_hash_costs_a_full_verification() {
        let mut memory = Vec::new();
        assert!(!verify_password(b"anything", DUMMY_HASH, &mut memory));
        // It ran Argon2 with the default parameters, not an early return on a parse error.
        assert_eq!(memory.len(), argon2::Params::default().block_count());
    }
}
