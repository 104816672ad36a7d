//! `jwt-jwks-url`: the identity provider's key set, fetched at start-up and refreshed in the
//! background (every `jwt-jwks-refresh` seconds, and early — at most every ten seconds — when a
//! token names a `kid` rowgate does not know, as providers rotate keys).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Authenticator;
use crate::config::jwt_secret as keys;

/// The shortest time between two fetches.
const MIN_INTERVAL: Duration = Duration::from_secs(10);

/// Starts the refresh task for `auth` if `url` is set.
pub fn spawn_refresh(auth: Arc<Authenticator>, url: Option<String>, every: Duration) {
    let Some(url) = url else { return };
    tokio::spawn(async move {
        let client = match reqwest::Client::builder().timeout(Duration::from_secs(10)).build() {
            Ok(c) => c,
            Err(e) => return tracing::error!(error = %e, "cannot build the JWKS client"),
        };
        let mut last = None::<Instant>;
        loop {
            if let Some(at) = last {
                // Wait for the period, or for an early request, but never less than MIN_INTERVAL.
                let _ = tokio::time::timeout(every, auth.refresh.notified()).await;
                let since = at.elapsed();
                if since < MIN_INTERVAL {
                    tokio::time::sleep(MIN_INTERVAL - since).await;
                }
            }
            last = Some(Instant::now());
            match fetch(&client, &url).await {
                Ok(keys) => {
                    tracing::info!(%url, keys = keys.len(), "JWKS loaded");
                    auth.remote.store(Arc::new(keys));
                }
                // Keep the keys we have: a provider outage must not log everybody out.
                Err(e) => tracing::error!(%url, error = %e, "fetching the JWKS failed"),
            }
        }
    });
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<keys::VerificationKey>, String> {
    let response = client.get(url).send().await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("status {}", response.status()));
    }
    let text = response.text().await.map_err(|e| e.to_string())?;
    keys::parse(&text, false)
}
