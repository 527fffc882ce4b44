//! One WebSocket connection's commands and replies, over the protocol-neutral
//! [`ClientSession`] (who the client is, what it is subscribed to). Every reply goes through the connection's outbox, so replies and channel
//! messages reach the client in the order they were produced.

use std::sync::Arc;

use bytes::Bytes;
use herald_core::auth::Client;
use herald_core::engine::{SubscribeOutcome, SubscribeRequest};
use herald_core::lifecycle::DisconnectReason;
use herald_core::limits::Admission;
use herald_core::outbox::{CloseReason, OutFrame, Outbox};
use herald_core::usage::ConnectionGuard;
use herald_core::{ChannelName, Cursor, Epoch, HeraldError};
use herald_proto::command::{self, ClientFrame, Command};
use herald_proto::frame;
use herald_proto::reply::{
    AckReply, ConnectReply, Pong, PublishReply, SubscribeReply, UnsubscribeReply,
};

use crate::session::{
    ClientSession, ParkedSession, PresenceAsk, SubscribeAsk, MAX_SUBSCRIBES_TOGETHER,
};
use crate::Edge;

/// A WebSocket connection's session: the protocol-neutral [`ClientSession`], with JSON
/// commands in and JSON replies out.
pub struct Session(ClientSession);

/// What became of a command counted against the command limit.
enum Admitted {
    /// Within the limit and parsed: run it.
    Run(ClientFrame),
    /// Refused (over the limit, or malformed), with an error sent.
    Answered,
    /// The connection is closed for going on through a whole burst of refusals.
    Closed,
}

/// The `subscribe` reply, queued ahead of a channel's catch-up.
fn subscribe_reply(
    id: Option<u64>,
) -> impl Fn(&ChannelName, &SubscribeOutcome) -> Option<OutFrame> + Sync {
    move |channel, o| {
        Some(OutFrame::Control(frame::reply(
            id,
            "subscribe",
            &SubscribeReply {
                channel: channel.public().into(),
                seq: o.seq,
                epoch: o.epoch.as_str().into(),
                recovered: o.recovered,
            },
        )))
    }
}

/// Where a `subscribe` command asks to start.
fn request(s: &command::Subscribe) -> SubscribeRequest {
    SubscribeRequest {
        since: s.since.as_ref().map(|since| Cursor {
            epoch: Epoch::new(since.epoch.as_deref().unwrap_or("")),
            seq: since.seq,
        }),
        last: s.last,
        replay_retained_if_lost: false,
    }
}

/// What a `subscribe` command asks of a presence channel.
fn presence_ask(s: &command::Subscribe) -> PresenceAsk<'_> {
    PresenceAsk {
        frames: s.presence.unwrap_or(false),
        member: s.member.as_deref().map(|m| m.get()),
    }
}

impl Session {
    pub fn new(
        edge: Arc<Edge>,
        outbox: Arc<Outbox>,
        client: Option<Client>,
        counted: Option<ConnectionGuard>,
    ) -> Self {
        Session(ClientSession::new(edge, outbox, client, counted))
    }

    /// Opens the inbox of a connection that authenticated at the upgrade with a device token.
    pub async fn start(&mut self) {
        if self.0.is_device() {
            if let Err(e) = self.0.open_inbox(&subscribe_reply(None)).await {
                self.send_error(None, &e);
            }
        }
    }

    /// Whether the session may be parked ([`ClientSession::may_park`]).
    pub fn may_park(&self) -> bool {
        self.0.may_park()
    }

    /// The session in its parked form.
    pub fn park(self) -> ParkedSession {
        self.0.park()
    }

    /// The session of a parked connection again.
    pub fn revive(parked: ParkedSession) -> Self {
        Session(ClientSession::revive(parked))
    }

    /// The server's transports.
    pub fn edge(&self) -> &Arc<Edge> {
        self.0.edge()
    }

    /// The connection's outbound queue.
    pub fn outbox(&self) -> &Arc<Outbox> {
        self.0.outbox()
    }

    /// When the client's token expires (seconds since the Unix epoch), if it does.
    pub fn expires(&self) -> Option<u64> {
        self.0.expires()
    }

    fn send(&self, bytes: Bytes) {
        self.0.outbox().push(OutFrame::Control(bytes));
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

    /// Handles the text frames read together, in order, a batch frame (a JSON array of
    /// commands, [`command::batch`]) as its commands each in a frame of its own: each command
    /// counted against the connection's command limit (malformed ones too), refused with
    /// `rate_limited` over it, and the connection closed with [`CloseReason::RateLimited`] if it
    /// goes on sending through a whole burst of refusals. Consecutive `subscribe` commands (up
    /// to [`MAX_SUBSCRIBES_TOGETHER`]) run together ([`ClientSession::subscribe_all`]): their
    /// replies may come in another order, each with its command's id.
    pub async fn handle<'a>(&mut self, texts: impl Iterator<Item = &'a str>) {
        let mut subscribes: Vec<(Option<u64>, command::Subscribe)> = Vec::new();
        'frames: for text in texts {
            match command::batch(text) {
                None => {
                    if !self.take(ClientFrame::parse(text), &mut subscribes).await {
                        return;
                    }
                }
                Some(Ok(commands)) => {
                    for text in commands {
                        if !self.take(ClientFrame::parse(text), &mut subscribes).await {
                            break 'frames;
                        }
                    }
                }
                Some(Err(error)) => {
                    let refused = Err(command::ParseError { id: None, error });
                    if !self.take(refused, &mut subscribes).await {
                        return;
                    }
                }
            }
        }
        self.subscribe_together(subscribes).await;
    }

    /// Takes one parsed command: a `subscribe` joins the run of `subscribes` (run once it is
    /// full), anything else runs after the run before it. False once the connection is closed
    /// for sending through its refusals: nothing after that command is read.
    async fn take(
        &mut self,
        parsed: Result<ClientFrame, command::ParseError>,
        subscribes: &mut Vec<(Option<u64>, command::Subscribe)>,
    ) -> bool {
        let frame = match self.admit(parsed) {
            Admitted::Run(frame) => frame,
            Admitted::Answered => return true,
            Admitted::Closed => return false,
        };
        match frame.command {
            Command::Subscribe(s) => {
                subscribes.push((frame.id, s));
                if subscribes.len() == MAX_SUBSCRIBES_TOGETHER {
                    self.subscribe_together(std::mem::take(subscribes)).await;
                }
            }
            command => {
                self.subscribe_together(std::mem::take(subscribes)).await;
                self.run(ClientFrame {
                    id: frame.id,
                    command,
                })
                .await;
            }
        }
        true
    }

    /// Counts a command against the command limit: the frame to run, or why not.
    fn admit(&mut self, parsed: Result<ClientFrame, command::ParseError>) -> Admitted {
        match self.0.admit_command() {
            Admission::Run => {}
            Admission::Refuse(wait) => {
                let id = match &parsed {
                    Ok(f) => f.id,
                    Err(e) => e.id,
                };
                let e = self.edge().limits.command_refused(wait);
                self.send_error(id, &e);
                return Admitted::Answered;
            }
            Admission::Disconnect => {
                self.edge().limits.command_flood();
                self.outbox().close(CloseReason::RateLimited);
                return Admitted::Closed;
            }
        }
        match parsed {
            Ok(frame) => Admitted::Run(frame),
            Err(e) => {
                self.send_error(e.id, &e.error);
                Admitted::Answered
            }
        }
    }

    async fn run(&mut self, frame: ClientFrame) {
        let id = frame.id;
        if let Err(e) = self.dispatch(id, frame.command).await {
            self.send_error(id, &e);
        }
    }

    /// Runs `subscribes` together (one alone as any command).
    async fn subscribe_together(&mut self, subscribes: Vec<(Option<u64>, command::Subscribe)>) {
        if subscribes.len() <= 1 {
            for (id, s) in subscribes {
                if let Err(e) = self.subscribe(id, s).await {
                    self.send_error(id, &e);
                }
            }
            return;
        }
        let requests: Vec<SubscribeRequest> = subscribes.iter().map(|(_, s)| request(s)).collect();
        let confirms: Vec<_> = subscribes
            .iter()
            .map(|(id, _)| subscribe_reply(*id))
            .collect();
        let asks: Vec<SubscribeAsk<'_>> = subscribes
            .iter()
            .zip(&requests)
            .zip(&confirms)
            .map(|(((_, s), request), confirm)| SubscribeAsk {
                channel: &s.channel,
                request,
                presence: presence_ask(s),
                confirm,
            })
            .collect();
        let results = self.0.subscribe_all(&asks).await;
        for ((id, _), result) in subscribes.iter().zip(results) {
            if let Err(e) = result {
                self.send_error(*id, &e);
            }
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

    /// Authenticates the connection, or refreshes its token; a device token then opens the
    /// inbox.
    async fn connect(&mut self, id: Option<u64>, c: command::Connect) -> Result<(), HeraldError> {
        let revoked = self.0.authorise(c.token.as_deref())?;
        let client = self.0.client()?;
        self.send(frame::reply(
            id,
            "connect",
            &ConnectReply {
                sub: client.sub.as_str().into(),
                expires: client.expires,
                unsubscribed: revoked.iter().map(|c| c.public().into()).collect(),
            },
        ));
        if self.0.is_device() {
            self.0.open_inbox(&subscribe_reply(None)).await?;
        }
        Ok(())
    }

    async fn ack(&mut self, id: Option<u64>, a: command::Ack) -> Result<(), HeraldError> {
        let upto = Cursor {
            epoch: Epoch::new(a.epoch.as_deref().unwrap_or("")),
            seq: a.seq,
        };
        self.0.ack(&a.channel, upto).await?;
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
        let request = request(&s);
        self.0
            .subscribe(
                &s.channel,
                &request,
                &presence_ask(&s),
                &subscribe_reply(id),
            )
            .await?;
        Ok(())
    }

    fn unsubscribe(&mut self, id: Option<u64>, u: command::Unsubscribe) -> Result<(), HeraldError> {
        let channel = self.0.unsubscribe(&u.channel)?;
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
        let (channel, a) = self
            .0
            .publish(&p.channel, p.id, p.data.get().as_bytes())
            .await?;
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
        let slice = self.0.history(&h.channel, h.since, h.limit).await?;
        self.send(frame::reply_json(
            id,
            "history",
            &herald_core::frames::history(&slice, false),
        ));
        Ok(())
    }

    /// Says why the connection is about to end, for its `disconnected` lifecycle event
    /// ([`ClientSession::set_disconnect_reason`]).
    pub fn set_disconnect_reason(&self, reason: DisconnectReason) {
        self.0.set_disconnect_reason(reason);
    }

    /// Drops every subscription.
    pub fn close(&mut self) {
        self.0.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_websocket_session_is_the_client_session() {
        assert_eq!(size_of::<Session>(), size_of::<ClientSession>());
    }
}
