//! The protocol-neutral client session: who the client is, what it is subscribed to, and the
//! operations every transport offers (authorise, subscribe within the per-connection limit and
//! the client's permissions, open the device inbox, unsubscribe, publish, ack, history), each
//! written once. Transports are adapters: they parse their wire format, call the session, and
//! encode what it returns. [`ClientSession`] is the state of a connection that takes commands
//! (WebSocket); [`open`] holds the steps the query-string streams (SSE, long-poll, Meteor) take
//! when they open, which the session takes too.
//!
//! A session is a compact value (no boxes, no stored futures): an idle connection holds it as
//! it is.

mod many;
mod observe;
pub mod open;
mod parked;
mod set;
mod user;

use std::sync::Arc;

use herald_core::auth::Client;
use herald_core::engine::SubscribeRequest;
use herald_core::lifecycle::{DisconnectReason, Transport};
use herald_core::limits::{Admission, CommandBudget};
use herald_core::live::Registration;
use herald_core::log::Appended;
use herald_core::log::{LogSlice, ReadFrom};
use herald_core::outbox::Outbox;
use herald_core::pattern::PatternSet;
use herald_core::usage::ConnectionGuard;
use herald_core::{ChannelName, Cursor, ErrorCode, HeraldError, Retain, SessionHold};
use herald_push::inbox::LogKind;

use crate::Edge;
pub use many::{SubscribeAsk, MAX_SUBSCRIBES_TOGETHER};
pub use open::{authorise, check_limit, register, Confirm, Opened, PresenceAsk, Wanted};
use parked::ParkedClient;
pub use parked::ParkedSession;
use set::SubscriptionSet;

/// The transport a [`ClientSession`] made with [`ClientSession::new`] registers as (its
/// lifecycle events name it): Herald's WebSocket. Other transports whose connections take
/// commands (MQTT) say theirs with [`ClientSession::new_for`].
const SESSION_TRANSPORT: Transport = Transport::WebSocket;

/// Most messages one history request returns.
pub const MAX_HISTORY: usize = 1000;

/// One client connection's session. Dropping it unsubscribes everything it holds.
pub struct ClientSession {
    edge: Arc<Edge>,
    outbox: Arc<Outbox>,
    client: Option<Client>,
    subscriptions: SubscriptionSet,
    /// Counts the connection in its app's usage while authenticated.
    counted: Option<ConnectionGuard>,
    /// The connection's place among the live clients while authenticated (revocations reach
    /// it there).
    registered: Option<Registration>,
    /// What the connection may still send under the per-connection command limit.
    commands: CommandBudget,
    /// What the connection's lifecycle events name as its transport.
    transport: Transport,
}

impl ClientSession {
    /// A WebSocket connection's session writing to `outbox`, with the client authorised at
    /// connect time (if any) and its usage count.
    pub fn new(
        edge: Arc<Edge>,
        outbox: Arc<Outbox>,
        client: Option<Client>,
        counted: Option<ConnectionGuard>,
    ) -> Self {
        ClientSession::new_for(SESSION_TRANSPORT, edge, outbox, client, counted)
    }

    /// A session of a connection over `transport` (what its lifecycle events name), writing to
    /// `outbox`, with the client authorised at connect time (if any) and its usage count.
    pub fn new_for(
        transport: Transport,
        edge: Arc<Edge>,
        outbox: Arc<Outbox>,
        client: Option<Client>,
        counted: Option<ConnectionGuard>,
    ) -> Self {
        let registered = client
            .as_ref()
            .map(|c| register(&edge, c, &outbox, transport));
        ClientSession {
            edge,
            outbox,
            client,
            subscriptions: SubscriptionSet::default(),
            counted,
            registered,
            commands: CommandBudget::default(),
            transport,
        }
    }

    /// The transport the connection registers as.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// Counts one command against the connection's command limit.
    pub fn admit_command(&mut self) -> Admission {
        self.commands.admit(self.edge.limits.command_rate())
    }

    /// Whether the session may be parked: only with a fresh command budget, which its parked
    /// form does not keep.
    pub fn may_park(&self) -> bool {
        self.commands.is_fresh(self.edge.limits.command_rate())
    }

    /// The session in its parked form (see [`ParkedSession`]), still subscribed and
    /// registered.
    pub fn park(mut self) -> ParkedSession {
        let client = self.client.take().map(|client| {
            let registered = match self.registered.take() {
                Some(registered) => registered,
                // Not reached: a session with a client is registered.
                None => register(&self.edge, &client, &self.outbox, self.transport),
            };
            ParkedClient::new(client, registered.park())
        });
        ParkedSession {
            edge: self.edge.clone(),
            outbox: self.outbox.clone(),
            client,
            counted: self.counted.take(),
            subscriptions: self.subscriptions.park(),
        }
        // Dropping what is left of `self` leaves nothing: it holds no client, registration or
        // subscription any more.
    }

    /// The session of a parked WebSocket connection again, with a fresh command budget.
    pub fn revive(parked: ParkedSession) -> ClientSession {
        ClientSession::revive_for(SESSION_TRANSPORT, parked)
    }

    /// The session of a parked connection over `transport` again (the transport its session
    /// was made for: a parked session does not keep it, its parked record's type says it),
    /// with a fresh command budget.
    pub fn revive_for(transport: Transport, mut parked: ParkedSession) -> ClientSession {
        let (client, registered) = match parked.take_client() {
            Some((client, registered)) => {
                let registered = registered.revive(parked.edge.live.clone(), client.app.clone());
                (Some(client), Some(registered))
            }
            None => (None, None),
        };
        ClientSession {
            edge: parked.edge.clone(),
            outbox: parked.outbox.clone(),
            client,
            subscriptions: SubscriptionSet::revive(std::mem::take(&mut parked.subscriptions)),
            counted: parked.counted.take(),
            registered,
            commands: CommandBudget::default(),
            transport,
        }
    }

    /// The server's transports.
    pub fn edge(&self) -> &Arc<Edge> {
        &self.edge
    }

    /// The connection's outbound queue.
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// The authorised client, or the error a command sent before authorising (or after a
    /// revocation closed the connection) gets.
    pub fn client(&self) -> Result<&Client, HeraldError> {
        match &self.client {
            // Commands read in the same batch as a revocation are refused, not run.
            Some(_) if self.outbox.closed().is_some_and(|r| r.code() == "revoked") => Err(
                HeraldError::new(ErrorCode::Unauthorized, "this connection was revoked"),
            ),
            Some(c) => Ok(c),
            None => Err(HeraldError::new(
                ErrorCode::Unauthorized,
                "send {\"connect\":{\"token\":\"...\"}} first",
            )),
        }
    }

    /// Whether the client has a device token (and so an inbox).
    pub fn is_device(&self) -> bool {
        self.client.as_ref().is_some_and(|c| c.device.is_some())
    }

    /// When the client's token expires (seconds since the Unix epoch), if it does.
    pub fn expires(&self) -> Option<u64> {
        self.client.as_ref().and_then(|c| c.expires)
    }

    /// Authorises the connection with `token`, or refreshes its token: a refresh must name the
    /// same `sub`, app and device. Subscriptions the new token no longer allows are dropped and
    /// returned.
    pub fn authorise(&mut self, token: Option<&str>) -> Result<Vec<ChannelName>, HeraldError> {
        let client = authorise(&self.edge, token)?;
        if let Some(current) = &self.client {
            if (!current.sub.is_empty() && current.sub != client.sub)
                || current.app != client.app
                || current.device != client.device
            {
                return Err(HeraldError::forbidden(format!(
                    "this connection belongs to {:?}; a new connect may only refresh its token",
                    current.sub
                )));
            }
        }
        if self.counted.is_none() {
            self.counted = Some(self.edge.usage.connect(&client.app)?);
        }
        let revoked: Vec<ChannelName> = self
            .subscriptions
            .keys()
            .filter(|ch| {
                !herald_push::logs::is_push_log(ch.as_str())
                    && client.check_subscribe(ch.public()).is_err()
            })
            .cloned()
            .collect();
        for channel in &revoked {
            if let Some(sub) = self.subscriptions.remove(channel) {
                self.edge.engine.unsubscribe(channel, &sub);
            }
        }
        // The same place, matching the new token from now on (a refresh is no new connection).
        match &mut self.registered {
            Some(registered) => {
                open::refresh(
                    &self.edge,
                    registered,
                    &client,
                    &self.outbox,
                    self.transport,
                );
            }
            None => {
                let registered = register(&self.edge, &client, &self.outbox, self.transport);
                self.registered = Some(registered);
            }
        }
        self.client = Some(client);
        Ok(revoked)
    }

    /// Subscribes to the device's inbox (`$app` and `$device`) from the device's acknowledged
    /// cursor, leaving out logs already held.
    pub async fn open_inbox(&mut self, confirm: Confirm<'_>) -> Result<(), HeraldError> {
        let client = self.client()?;
        let plan = self.edge.inbox.plan(client).await?;
        let held = &mut self.subscriptions;
        let mut opened: [Option<Opened>; 2] = [None, None];
        let mut n = 0;
        let result = open::open_inbox(
            &self.edge,
            &plan,
            [None, None],
            &self.outbox,
            |log| held.contains(log),
            confirm,
            |o| {
                opened[n] = Some(o);
                n += 1;
            },
        )
        .await;
        for o in opened.into_iter().flatten() {
            held.insert(o.name, o.subscription);
        }
        result
    }

    /// Ends the subscriptions to the device's inbox logs the session holds (for a transport
    /// whose client can close its inbox: MQTT's UNSUBSCRIBE from `$device`).
    pub fn close_inbox(&mut self) {
        let logs: Vec<ChannelName> = self
            .subscriptions
            .keys()
            .filter(|ch| herald_push::logs::is_push_log(ch.as_str()))
            .cloned()
            .collect();
        for log in &logs {
            if let Some(sub) = self.subscriptions.remove(log) {
                self.edge.engine.unsubscribe(log, &sub);
            }
        }
    }

    /// Subscribes to `channel` (a client's name for it) within the client's permissions and the
    /// per-connection limit.
    pub async fn subscribe(
        &mut self,
        channel: &str,
        request: &SubscribeRequest,
        presence: &PresenceAsk<'_>,
        confirm: Confirm<'_>,
    ) -> Result<Opened, HeraldError> {
        let client = self.client()?;
        let name = client.app.parse_channel(channel)?;
        client.check_subscribe(name.public())?;
        self.check_room_for(&name)?;
        let opened = open::open_channel(
            &self.edge,
            client,
            &self.outbox,
            &name,
            request,
            presence,
            confirm,
        )
        .await?;
        self.subscriptions
            .insert(opened.name.clone(), opened.subscription.clone());
        Ok(opened)
    }

    /// Subscribes to `name` (a full channel name of the client's app) with a grant for exactly
    /// that channel in place of the token's patterns, within the per-connection limit: for a
    /// protocol whose client proved by the protocol's own rule that it may read the channel (a
    /// Pusher channel signature, a Pusher public channel). `user`, when given, is the user id
    /// the client proved by that rule too (a Pusher presence signature over its
    /// `channel_data`): on a presence channel its member is known by it in place of the
    /// client's `sub`, with `presence.member` as its data.
    pub async fn subscribe_granted(
        &mut self,
        name: &ChannelName,
        request: &SubscribeRequest,
        presence: &PresenceAsk<'_>,
        user: Option<&str>,
        confirm: Confirm<'_>,
    ) -> Result<Opened, HeraldError> {
        let client = self.client()?;
        if !client.app.owns_plain_channel(name.as_str()) {
            return Err(HeraldError::forbidden(format!(
                "{:?} is not a channel of this connection's app",
                name.public()
            )));
        }
        self.check_room_for(name)?;
        let mut granted = client.clone();
        granted.subscribe = PatternSet::new(&[name.public()]);
        if let Some(user) = user {
            granted.sub = user.to_owned();
            granted.user_info = None;
        }
        let opened = open::open_channel(
            &self.edge,
            &granted,
            &self.outbox,
            name,
            request,
            presence,
            confirm,
        )
        .await?;
        self.subscriptions
            .insert(opened.name.clone(), opened.subscription.clone());
        Ok(opened)
    }

    /// Refuses a new subscription to `name` if the session holds one already or is at the
    /// per-connection limit.
    fn check_room_for(&self, name: &ChannelName) -> Result<(), HeraldError> {
        self.check_room_beside(name, false, 0)
    }

    /// [`Self::check_room_for`] with `opening` more channels about to be held too (subscribes
    /// run together, [`Self::subscribe_all`]), `name` among them if `among_opening`.
    fn check_room_beside(
        &self,
        name: &ChannelName,
        among_opening: bool,
        opening: usize,
    ) -> Result<(), HeraldError> {
        if among_opening || self.subscriptions.contains(name) {
            return Err(HeraldError::new(
                ErrorCode::AlreadySubscribed,
                format!("already subscribed to {name:?}"),
            ));
        }
        check_limit(
            &self.edge,
            Wanted::OneMore {
                held: self.subscriptions.len() + opening,
            },
        )
    }

    /// Whether the session holds a subscription to `name` (a full channel name).
    pub fn is_subscribed(&self, name: &ChannelName) -> bool {
        self.subscriptions.contains(name)
    }

    /// Ends the subscription to `channel`; returns its name.
    pub fn unsubscribe(&mut self, channel: &str) -> Result<ChannelName, HeraldError> {
        let channel = self.client()?.app.parse_channel(channel)?;
        let Some(sub) = self.subscriptions.remove(&channel) else {
            return Err(HeraldError::new(
                ErrorCode::NotSubscribed,
                format!("not subscribed to {channel:?}"),
            ));
        };
        self.edge.engine.unsubscribe(&channel, &sub);
        Ok(channel)
    }

    /// Publishes `data` to `channel` through the one publish rule, if the client may (what it
    /// does to the channel's retained message is read from `data`: core's `RetainRule`).
    pub async fn publish(
        &self,
        channel: &str,
        id: Option<String>,
        data: &[u8],
    ) -> Result<(ChannelName, Appended), HeraldError> {
        self.publish_with(channel, id, data, None).await
    }

    /// [`ClientSession::publish`], doing `retain` to the channel's retained message in the same
    /// store write (MQTT's RETAIN flag), whatever `data` says, and writing `hold` in it too (an
    /// MQTT persistent session's QoS 2 packet id awaiting PUBREL and the releases of earlier
    /// ones: core's [`SessionHold`]).
    pub async fn publish_retained(
        &self,
        channel: &str,
        id: Option<String>,
        data: &[u8],
        retain: Retain,
        hold: Option<SessionHold>,
    ) -> Result<(ChannelName, Appended), HeraldError> {
        self.publish_with(channel, id, data, Some((retain, hold)))
            .await
    }

    async fn publish_with(
        &self,
        channel: &str,
        id: Option<String>,
        data: &[u8],
        retain: Option<(Retain, Option<SessionHold>)>,
    ) -> Result<(ChannelName, Appended), HeraldError> {
        let client = self.client()?;
        let channel = client.app.parse_channel(channel)?;
        client.check_publish(channel.public())?;
        let publisher = &self.edge.publisher;
        let message = match retain {
            Some((retain, hold)) => {
                let mut message = publisher.message_retaining(&client.app, id, data, retain)?;
                message.hold = hold.map(Box::new);
                message
            }
            None => publisher.message(&client.app, id, data)?,
        };
        let appended = publisher
            .publish(&client.app, &channel, vec![message])
            .await?;
        match appended.into_iter().next() {
            Some(a) => Ok((channel, a)),
            None => Err(HeraldError::new(
                ErrorCode::Internal,
                "nothing was appended",
            )),
        }
    }

    /// Acknowledges the device's inbox log `log` (`$app` or `$device`) up to `upto`.
    pub async fn ack(&self, log: &str, upto: Cursor) -> Result<(), HeraldError> {
        let client = self.client()?;
        let Some(device) = client.device.as_deref() else {
            return Err(HeraldError::forbidden(
                "only a connection with a device token can acknowledge pushes",
            ));
        };
        let kind = LogKind::parse(log)?;
        self.edge.inbox.ack(&client.app, device, kind, upto).await?;
        Ok(())
    }

    /// Up to `limit` (default 100, at most [`MAX_HISTORY`]) messages of `channel` after `since`,
    /// if the client may read it.
    pub async fn history(
        &self,
        channel: &str,
        since: Option<u64>,
        limit: Option<usize>,
    ) -> Result<LogSlice, HeraldError> {
        let client = self.client()?;
        let channel = client.app.parse_channel(channel)?;
        client.check_subscribe(channel.public())?;
        let limit = limit.unwrap_or(100);
        if limit == 0 || limit > MAX_HISTORY {
            return Err(HeraldError::bad_request(format!(
                "history limit must be 1 to {MAX_HISTORY}"
            )));
        }
        self.edge
            .engine
            .read(&channel, ReadFrom::After(since.unwrap_or(0)), limit)
            .await
    }

    /// Says why the connection is about to end, for its `disconnected` lifecycle event (see
    /// [`herald_core::live::Registration::set_disconnect_reason`]: a reason its outbox was
    /// closed with comes first; without either, `closed`). Nothing for a session not
    /// authorised yet.
    pub fn set_disconnect_reason(&self, reason: DisconnectReason) {
        if let Some(registered) = &self.registered {
            registered.set_disconnect_reason(reason);
        }
    }

    /// Drops every subscription (the session stays usable).
    pub fn close(&mut self) {
        for (channel, sub) in self.subscriptions.take() {
            self.edge.engine.unsubscribe(&channel, &sub);
        }
    }
}

impl Drop for ClientSession {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_stays_small() {
        // edge + outbox + client + subscriptions + usage guard + live-client registration +
        // command budget + transport, nothing boxed: a connection that is not parked holds
        // exactly this (a parked one holds a `ParkedSession`, which keeps no transport).
        let parts = 2 * size_of::<Arc<Edge>>()
            + size_of::<Option<Client>>()
            + size_of::<Vec<(ChannelName, Arc<herald_core::hub::Subscription>)>>()
            + size_of::<Option<ConnectionGuard>>()
            + size_of::<Option<Registration>>()
            + size_of::<CommandBudget>()
            + size_of::<Transport>();
        assert_eq!(
            size_of::<ClientSession>(),
            parts.next_multiple_of(align_of::<ClientSession>())
        );
        assert!(
            size_of::<ClientSession>() <= 256,
            "{}",
            size_of::<ClientSession>()
        );
    }
}
