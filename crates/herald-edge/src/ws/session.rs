//! One WebSocket connection's state and its commands: who the client is, what it is subscribed
//! to, and the replies. Every reply goes through the connection's outbox, so replies and channel
//! messages reach the client in the order they were produced.

use std::sync::Arc;

use bytes::Bytes;
use herald_core::auth::Client;
use herald_core::engine::SubscribeRequest;
use herald_core::hub::Subscription;
use herald_core::log::ReadFrom;
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::usage::ConnectionGuard;
use herald_core::{ChannelName, Cursor, Epoch, ErrorCode, HeraldError};
use herald_proto::command::{self, ClientFrame, Command};
use herald_proto::frame;
use herald_proto::reply::{
    AckReply, ConnectReply, Pong, PublishReply, SubscribeReply, UnsubscribeReply,
};

use crate::Edge;

/// Most messages one `history` command returns.
const MAX_HISTORY: usize = 1000;

pub struct Session {
    edge: Arc<Edge>,
    outbox: Arc<Outbox>,
    client: Option<Client>,
    subscriptions: Subscriptions,
    /// Counts the connection in its app's usage while authenticated.
    counted: Option<ConnectionGuard>,
}

impl Session {
    pub fn new(
        edge: Arc<Edge>,
        outbox: Arc<Outbox>,
        client: Option<Client>,
        counted: Option<ConnectionGuard>,
    ) -> Self {
        Session {
            edge,
            outbox,
            client,
            subscriptions: Subscriptions::default(),
            counted,
        }
    }

    /// Opens the inbox of a connection that authenticated at the upgrade with a device token.
    pub async fn start(&mut self) {
        if self.client.as_ref().is_some_and(|c| c.device.is_some()) {
            if let Err(e) = self.open_inbox().await {
                self.send_error(None, &e);
            }
        }
    }

    /// Subscribes the connection to its device's inbox (`$app` and `$device`) from the
    /// device's acknowledged cursor: an unsolicited `subscribe` reply for each, then what the
    /// device missed, then live pushes.
    async fn open_inbox(&mut self) -> Result<(), HeraldError> {
        let client = self.client()?.clone();
        let inbox = self.edge.inbox.clone();
        let plan = inbox.plan(&client).await?;
        let starts = [plan.cursor.app.clone(), plan.cursor.device.clone()];
        for (i, since) in starts.into_iter().enumerate() {
            let log = &plan.logs[i];
            if self.subscriptions.contains(log) {
                continue;
            }
            let catchup = inbox.subscribe(&plan, i, since, &self.outbox).await?;
            let o = &catchup.outcome;
            let reply = frame::reply(
                None,
                "subscribe",
                &SubscribeReply {
                    channel: log.public().into(),
                    seq: o.seq,
                    epoch: o.epoch.as_str().into(),
                    recovered: o.recovered,
                },
            );
            let sub = catchup.go_live(Some(OutFrame::Control(reply)));
            self.subscriptions.insert(log.clone(), sub);
        }
        Ok(())
    }

    /// The server's transports.
    pub fn edge(&self) -> &Arc<Edge> {
        &self.edge
    }

    /// The connection's outbound queue.
    pub fn outbox(&self) -> &Arc<Outbox> {
        &self.outbox
    }

    /// When the client's token expires (seconds since the Unix epoch), if it does.
    pub fn expires(&self) -> Option<u64> {
        self.client.as_ref().and_then(|c| c.expires)
    }

    fn send(&self, bytes: Bytes) {
        self.outbox.push(OutFrame::Control(bytes));
    }

    fn send_error(&self, id: Option<u64>, e: &HeraldError) {
        self.send(frame::error(id, e));
    }

    pub fn reject_binary(&self) {
        self.send_error(
            None,
            &HeraldError::bad_request("binary frames are not supported; send JSON text frames"),
        );
    }

    /// Handles one text frame.
    pub async fn handle(&mut self, text: &str) {
        let parsed = match ClientFrame::parse(text) {
            Ok(f) => f,
            Err(e) => return self.send_error(e.id, &e.error),
        };
        let id = parsed.id;
        if let Err(e) = self.dispatch(id, parsed.command).await {
            self.send_error(id, &e);
        }
    }

    async fn dispatch(&mut self, id: Option<u64>, command: Command) -> Result<(), HeraldError> {
        match command {
            Command::Connect(c) => self.connect(id, c).await,
            Command::Subscribe(s) => self.subscribe(id, s).await,
            Command::Unsubscribe(u) => self.unsubscribe(id, u),
            Command::Publish(p) => self.publish(id, p).await,
            Command::History(h) => self.history(id, h).await,
            Command::Ack(a) => self.ack(id, a).await,
            Command::Ping => {
                self.send(frame::reply(id, "pong", &Pong {}));
                Ok(())
            }
        }
    }

    fn client(&self) -> Result<&Client, HeraldError> {
        match &self.client {
            Some(c) => Ok(c),
            None => Err(HeraldError::new(
                ErrorCode::Unauthorized,
                "send {\"connect\":{\"token\":\"...\"}} first",
            )),
        }
    }

    /// Authenticates the connection, or refreshes its token. A refresh must name the same `sub`;
    /// subscriptions the new token no longer allows are dropped and listed in the reply.
    async fn connect(&mut self, id: Option<u64>, c: command::Connect) -> Result<(), HeraldError> {
        let client = self.edge.authenticate(c.token.as_deref())?;
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
        self.send(frame::reply(
            id,
            "connect",
            &ConnectReply {
                sub: client.sub.as_str().into(),
                expires: client.expires,
                unsubscribed: revoked.iter().map(|c| c.public().into()).collect(),
            },
        ));
        let device = client.device.is_some();
        self.client = Some(client);
        if device {
            self.open_inbox().await?;
        }
        Ok(())
    }

    async fn ack(&mut self, id: Option<u64>, a: command::Ack) -> Result<(), HeraldError> {
        let client = self.client()?;
        let Some(device) = client.device.clone() else {
            return Err(HeraldError::forbidden(
                "only a connection with a device token can acknowledge pushes",
            ));
        };
        let app = client.app.clone();
        let kind = herald_push::inbox::LogKind::parse(&a.channel)?;
        let upto = Cursor {
            epoch: Epoch::new(a.epoch.as_deref().unwrap_or("")),
            seq: a.seq,
        };
        self.edge.inbox.ack(&app, &device, kind, upto).await?;
        self.send(frame::reply(
            id,
            "ack",
            &AckReply {
                channel: a.channel.as_str().into(),
                seq: a.seq,
            },
        ));
        Ok(())
    }

    async fn subscribe(
        &mut self,
        id: Option<u64>,
        s: command::Subscribe,
    ) -> Result<(), HeraldError> {
        let client = self.client()?;
        let channel = client.app.parse_channel(&s.channel)?;
        client.check_subscribe(channel.public())?;
        if self.subscriptions.contains(&channel) {
            return Err(HeraldError::new(
                ErrorCode::AlreadySubscribed,
                format!("already subscribed to {channel:?}"),
            ));
        }
        if self.subscriptions.len() >= self.edge.settings.max_subscriptions {
            return Err(HeraldError::new(
                ErrorCode::TooManySubscriptions,
                format!(
                    "at most {} subscriptions per connection",
                    self.edge.settings.max_subscriptions
                ),
            ));
        }
        let request = SubscribeRequest {
            since: s.since.map(|since| Cursor {
                epoch: Epoch::new(since.epoch.as_deref().unwrap_or("")),
                seq: since.seq,
            }),
            last: s.last,
            replay_retained_if_lost: false,
        };
        let catchup = self
            .edge
            .engine
            .subscribe(&channel, &self.outbox, &request)
            .await?;
        let o = &catchup.outcome;
        let reply = frame::reply(
            id,
            "subscribe",
            &SubscribeReply {
                channel: channel.public().into(),
                seq: o.seq,
                epoch: o.epoch.as_str().into(),
                recovered: o.recovered,
            },
        );
        let sub = catchup.go_live(Some(OutFrame::Control(reply)));
        self.subscriptions.insert(channel, sub);
        Ok(())
    }

    fn unsubscribe(&mut self, id: Option<u64>, u: command::Unsubscribe) -> Result<(), HeraldError> {
        let channel = self.client()?.app.parse_channel(&u.channel)?;
        let Some(sub) = self.subscriptions.remove(&channel) else {
            return Err(HeraldError::new(
                ErrorCode::NotSubscribed,
                format!("not subscribed to {channel:?}"),
            ));
        };
        self.edge.engine.unsubscribe(&channel, &sub);
        self.send(frame::reply(
            id,
            "unsubscribe",
            &UnsubscribeReply {
                channel: channel.public().into(),
            },
        ));
        Ok(())
    }

    async fn publish(&mut self, id: Option<u64>, p: command::Publish) -> Result<(), HeraldError> {
        let client = self.client()?;
        let channel = client.app.parse_channel(&p.channel)?;
        client.check_publish(channel.public())?;
        let app = client.app.clone();
        let publisher = &self.edge.publisher;
        let message = publisher.message(&app, p.id, p.data.get().as_bytes())?;
        let appended = publisher.publish(&app, &channel, vec![message]).await?;
        let Some(a) = appended.first() else {
            return Err(HeraldError::new(
                ErrorCode::Internal,
                "nothing was appended",
            ));
        };
        self.send(frame::reply(
            id,
            "publish",
            &PublishReply {
                channel: channel.public().into(),
                duplicate: a.duplicate,
                epoch: a.message.epoch.as_str().into(),
                id: a.message.id().into(),
                seq: a.message.seq,
                time: a.message.time,
            },
        ));
        Ok(())
    }

    async fn history(&mut self, id: Option<u64>, h: command::History) -> Result<(), HeraldError> {
        let client = self.client()?;
        let channel = client.app.parse_channel(&h.channel)?;
        client.check_subscribe(channel.public())?;
        let limit = h.limit.unwrap_or(100);
        if limit == 0 || limit > MAX_HISTORY {
            return Err(HeraldError::bad_request(format!(
                "history limit must be 1 to {MAX_HISTORY}"
            )));
        }
        let slice = self
            .edge
            .engine
            .read(&channel, ReadFrom::After(h.since.unwrap_or(0)), limit)
            .await?;
        self.send(frame::reply_json(
            id,
            "history",
            &herald_core::frames::history(&slice, false),
        ));
        Ok(())
    }

    /// Drops every subscription.
    pub fn close(&mut self) {
        for (channel, sub) in std::mem::take(&mut self.subscriptions).0 {
            self.edge.engine.unsubscribe(&channel, &sub);
        }
    }
}

/// A connection's subscriptions, as a vector sorted by channel name: a few bytes per entry and
/// no hash table for the many connections that hold one or two.
#[derive(Default)]
struct Subscriptions(Vec<(ChannelName, Arc<Subscription>)>);

impl Subscriptions {
    fn find(&self, channel: &ChannelName) -> Result<usize, usize> {
        self.0.binary_search_by(|(c, _)| c.cmp(channel))
    }

    fn contains(&self, channel: &ChannelName) -> bool {
        self.find(channel).is_ok()
    }

    fn len(&self) -> usize {
        self.0.len()
    }

    fn keys(&self) -> impl Iterator<Item = &ChannelName> {
        self.0.iter().map(|(c, _)| c)
    }

    fn insert(&mut self, channel: ChannelName, sub: Arc<Subscription>) {
        match self.find(&channel) {
            Ok(at) => self.0[at].1 = sub,
            Err(at) => {
                // Most connections hold one subscription: room for exactly one at first, the
                // usual doubling after that.
                if self.0.capacity() == 0 {
                    self.0.reserve_exact(1);
                }
                self.0.insert(at, (channel, sub))
            }
        }
    }

    fn remove(&mut self, channel: &ChannelName) -> Option<Arc<Subscription>> {
        self.find(channel).ok().map(|at| self.0.remove(at).1)
    }
}
