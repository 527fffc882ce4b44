//! A [`Tenancy`] for unit tests that keeps only usage figures, in memory, adding them as the
//! stores do, and refuses writes while told to fail. Every other call answers "none": the
//! tests that use it check usage writing and secret sealing, not the registry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use herald_core::log::StoreError;
use herald_core::revoked::TokenRevocation;
use herald_core::tenancy::{App, AppLimits, KeyInfo, Tenancy, Usage};
use herald_core::tenant::AppId;

/// Usage figures in memory, refusing writes while `failing`.
#[derive(Default)]
pub(crate) struct UsageOnly {
    stored: Mutex<HashMap<AppId, Usage>>,
    /// While set, `add_usage` fails as a store that cannot write.
    pub(crate) failing: AtomicBool,
}

#[async_trait]
impl Tenancy for UsageOnly {
    async fn create_app(&self, _: &App) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn apps(&self) -> Result<Vec<App>, StoreError> {
        Ok(vec![])
    }
    async fn app(&self, _: &AppId) -> Result<Option<App>, StoreError> {
        Ok(None)
    }
    async fn set_limits(&self, _: &AppId, _: AppLimits) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn delete_app(&self, _: &AppId) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn add_key(&self, _: &KeyInfo) -> Result<(), StoreError> {
        Ok(())
    }
    async fn remove_key(&self, _: &AppId, _: &str) -> Result<bool, StoreError> {
        Ok(false)
    }
    async fn keys(&self) -> Result<Vec<KeyInfo>, StoreError> {
        Ok(vec![])
    }
    async fn add_usage(&self, app: &AppId, counted: Usage) -> Result<(), StoreError> {
        if self.failing.load(Ordering::Relaxed) {
            return Err(StoreError::failed("refused"));
        }
        let mut stored = self.stored.lock().unwrap();
        let u = stored.entry(app.clone()).or_default();
        u.published += counted.published;
        u.deliveries += counted.deliveries;
        u.acks += counted.acks;
        u.peak_connections = u.peak_connections.max(counted.peak_connections);
        Ok(())
    }
    async fn usage(&self, app: &AppId) -> Result<Usage, StoreError> {
        Ok(self
            .stored
            .lock()
            .unwrap()
            .get(app)
            .copied()
            .unwrap_or_default())
    }
    async fn revoke_tokens(&self, _: &TokenRevocation) -> Result<(), StoreError> {
        Ok(())
    }
    async fn token_revocations(&self) -> Result<Vec<TokenRevocation>, StoreError> {
        Ok(vec![])
    }
}
