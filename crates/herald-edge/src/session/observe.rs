//! Watching a presence channel's members without being one: for a protocol whose client
//! follows other users' presence (Pusher's watchlists). The subscription is a subscription of
//! the hub like any other (so in a cluster this node follows the channel, and the other nodes'
//! joins and leaves reach it), held in the session's set and within the per-connection limit;
//! its presence share is core's [`Presence::observe`](herald_core::presence::Presence::observe),
//! which adds no member. The channel's `members` frame comes first, then its joins and
//! leaves; no message of the channel is replayed.

use herald_core::engine::SubscribeRequest;
use herald_core::{ChannelName, ErrorCode, HeraldError};

use super::ClientSession;

impl ClientSession {
    /// Watches the members of the presence channel `name` (a full channel name of the
    /// client's app) without joining them: its `members` frame is queued now, then its joins
    /// and leaves, until the subscription ends. Refused for a channel of another app, one that
    /// is no presence channel, one the session holds already and over the per-connection limit.
    pub async fn observe_presence(&mut self, name: &ChannelName) -> Result<(), HeraldError> {
        let client = self.client()?;
        if !client.app.owns_plain_channel(name.as_str()) {
            return Err(HeraldError::forbidden(format!(
                "{:?} is not a channel of this connection's app",
                name.public()
            )));
        }
        if self
            .edge
            .engine
            .namespaces()
            .presence(name.as_str())
            .is_none()
        {
            return Err(HeraldError::new(
                ErrorCode::BadRequest,
                format!("{:?} is not a presence channel", name.public()),
            ));
        }
        self.check_room_for(name)?;
        let request = SubscribeRequest {
            since: None,
            last: Some(false),
            replay_retained_if_lost: false,
        };
        let catchup = self
            .edge
            .engine
            .subscribe(name, &self.outbox, &request)
            .await?;
        let shared = catchup.channel().clone();
        let subscription = catchup.go_live(None);
        let mut observer = self.edge.engine.presence().observe(&shared);
        observer.watch(&self.outbox).await;
        subscription.set_presence(observer);
        self.subscriptions.insert(shared, subscription);
        Ok(())
    }
}
