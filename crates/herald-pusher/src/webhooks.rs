//! Webhooks in Pusher's format: what herald-hooks asks of Pusher for an endpoint whose format
//! is `pusher` ([`herald_hooks::pusher`] writes the events, the body and the signature): the
//! Pusher name of a Herald channel (the reverse of [`crate::channel_map`]; a channel with no
//! Pusher name is not told) and the app's Pusher key and secret, which sign the request
//! (`X-Pusher-Key`, `X-Pusher-Signature`).

use std::sync::Arc;

use async_trait::async_trait;
use herald_core::tenant::AppId;
use herald_core::ChannelName;
use herald_hooks::pusher::{PusherKey, PusherWebhooks};

use crate::channel_map::pusher_name;
use crate::credentials::service::PusherCredentials;

/// [`PusherWebhooks`] over an app's Pusher credentials.
pub struct PusherHookFormat {
    credentials: Arc<PusherCredentials>,
}

impl PusherHookFormat {
    /// Signs with the credentials `credentials` holds.
    pub fn new(credentials: Arc<PusherCredentials>) -> Self {
        PusherHookFormat { credentials }
    }
}

#[async_trait]
impl PusherWebhooks for PusherHookFormat {
    fn channel_name(&self, channel: &str) -> Option<String> {
        channel_pusher_name(channel)
    }

    async fn signing_key(&self, app: &AppId) -> Result<Option<PusherKey>, String> {
        let set = self
            .credentials
            .by_app(app)
            .await
            .map_err(|e| e.to_string())?;
        Ok(set.map(|set| PusherKey {
            key: set.key.clone(),
            secret: String::from_utf8_lossy(set.secret()).into_owned(),
        }))
    }
}

/// The Pusher name of an app's channel `channel` (as the app names it), if it has one.
fn channel_pusher_name(channel: &str) -> Option<String> {
    pusher_name(&ChannelName::parse(channel).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_get_their_pusher_names_back() {
        assert_eq!(channel_pusher_name("orders").as_deref(), Some("orders"));
        assert_eq!(
            channel_pusher_name("presence-room").as_deref(),
            Some("presence-room")
        );
        // The topic encoding of a Pusher name with `,` decodes back to it.
        let encoded = crate::channel_map::herald_channel("a,b").unwrap();
        assert_eq!(
            channel_pusher_name(encoded.as_str()).as_deref(),
            Some("a,b")
        );
        // No Pusher name: `/` and `:`.
        assert_eq!(channel_pusher_name("rooms/1"), None);
        assert_eq!(channel_pusher_name("a:b"), None);
    }
}
