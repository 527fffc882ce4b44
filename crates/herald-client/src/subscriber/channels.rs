//! The channels a subscriber follows, across connections: each one's position, the frames that
//! open a connection (`connect` with the token, then one `subscribe` per channel resuming from
//! its position, asking for presence where the user did, sent in batches: [`super::batch`]),
//! and what each server frame means for them (a presence channel's member list follows its
//! `presence` frames). No sockets here: the [`Subscriber`](super::Subscriber) feeds it frames
//! and acts on the [`Flow`] it answers.

use std::collections::{HashMap, VecDeque};

use herald_proto::command::{self, ClientFrame, Command};
use herald_proto::reply::{
    ConnectReply, MessageEntry, PresenceEvent, PresenceFrame, ServerBody, SubscribeReply,
};
use serde_json::value::RawValue;

use super::batch::Batching;
use super::events::{Event, Lost, Position, Presence, PresenceMember, Request, Stopped};
use crate::types::{Connected, Message, Subscribed};
use crate::ws::Frame;
use crate::ServerError;

/// `disconnect` codes after which reconnecting and resuming is the documented remedy.
const RESUMABLE_DISCONNECTS: [&str; 2] = ["shutdown", "slow_consumer"];

/// One channel the user asked for.
#[derive(Debug, Clone)]
pub(super) struct Channel {
    pub(super) name: String,
    /// Where it stands; `None` until the first subscribe reply when no position was given.
    pub(super) at: Option<Position>,
    /// Ask for the newest message first when subscribing without a position.
    pub(super) last: bool,
    /// Ask for the channel's `presence` frames.
    pub(super) presence: bool,
    /// The member data the subscribe gives (used when the token has no `user_info`).
    pub(super) member: Option<Box<RawValue>>,
    /// With `presence`: the members, in the order they joined, once the first `members` frame
    /// came; kept from the last connection until the next one lists them again.
    pub(super) members: Option<Vec<PresenceMember>>,
    /// The position the current connection's `subscribe` resumed from, until its reply.
    resuming: Option<Position>,
}

impl Channel {
    pub(super) fn new(name: String, at: Option<Position>, last: bool) -> Channel {
        Channel {
            name,
            at,
            last,
            presence: false,
            member: None,
            members: None,
            resuming: None,
        }
    }

    /// Applies a `presence` frame to the member list; the event to report.
    fn apply(&mut self, frame: PresenceFrame<'_>) -> Option<Presence> {
        let channel = self.name.clone();
        let member = |user: &str, data: Option<&RawValue>| PresenceMember {
            user: user.to_owned(),
            data: data
                .and_then(|d| serde_json::from_str(d.get()).ok())
                .unwrap_or_else(|| serde_json::json!({})),
        };
        match frame.event {
            PresenceEvent::Members => {
                let members: Vec<PresenceMember> = frame
                    .members
                    .unwrap_or_default()
                    .iter()
                    .map(|m| member(&m.user, Some(&m.data)))
                    .collect();
                self.members = Some(members.clone());
                Some(Presence::Members { channel, members })
            }
            PresenceEvent::Join => {
                let joined = member(frame.user.as_deref()?, frame.data.as_deref());
                let list = self.members.get_or_insert_with(Vec::new);
                list.retain(|m| m.user != joined.user);
                list.push(joined.clone());
                Some(Presence::Join {
                    channel,
                    member: joined,
                })
            }
            PresenceEvent::Leave => {
                let user = frame.user?.into_owned();
                if let Some(list) = self.members.as_mut() {
                    list.retain(|m| m.user != user);
                }
                Some(Presence::Leave { channel, user })
            }
        }
    }
}

/// What to do after a frame.
#[derive(Debug)]
pub(super) enum Flow {
    /// Keep reading.
    Continue,
    /// The connection is over; a reconnect fixes it.
    Lost(Lost),
    /// Stop for good.
    Stop(Stopped),
}

/// Every channel's state, and what each request id of the current connection was for.
#[derive(Debug)]
pub(super) struct Channels {
    pub(super) list: Vec<Channel>,
    pending: HashMap<u64, Request>,
    /// Whether `token_expired` is fixed by reconnecting (a token supplier gives a fresh token).
    renews_tokens: bool,
    /// Whether the opening frames go in batches, and those not yet answered.
    batching: Batching,
    /// Commands of a batch the server refused, to send again one a message.
    resend: Vec<String>,
}

impl Channels {
    pub(super) fn new(list: Vec<Channel>, renews_tokens: bool) -> Channels {
        Channels {
            list,
            pending: HashMap::new(),
            renews_tokens,
            batching: Batching::default(),
            resend: Vec::new(),
        }
    }

    /// The members of `channel`, when it asked for presence and was listed.
    pub(super) fn members(&self, channel: &str) -> Option<&[PresenceMember]> {
        self.list
            .iter()
            .find(|c| c.name == channel)
            .and_then(|c| c.members.as_deref())
    }

    /// The position of `channel`.
    pub(super) fn position(&self, channel: &str) -> Option<&Position> {
        self.list
            .iter()
            .find(|c| c.name == channel)
            .and_then(|c| c.at.as_ref())
    }

    /// The frames to send on a new connection, remembering what each request id is for:
    /// `connect` (with a token), then one `subscribe` per channel, resuming from its position
    /// if it has one.
    pub(super) fn opening(&mut self, token: Option<String>) -> Vec<ClientFrame> {
        let mut frames = Vec::new();
        self.pending.clear();
        let mut id = 0;
        if let Some(token) = token {
            id += 1;
            frames.push(ClientFrame {
                id: Some(id),
                command: Command::Connect(command::Connect { token: Some(token) }),
            });
            self.pending.insert(id, Request::Connect);
        }
        for channel in &mut self.list {
            id += 1;
            frames.push(ClientFrame {
                id: Some(id),
                command: Command::Subscribe(command::Subscribe {
                    channel: channel.name.clone(),
                    since: channel.at.as_ref().map(Position::since),
                    last: (channel.last && channel.at.is_none()).then_some(true),
                    presence: channel.presence.then_some(true),
                    member: channel.member.clone(),
                }),
            });
            channel.resuming = channel.at.clone();
            self.pending
                .insert(id, Request::Subscribe(channel.name.clone()));
        }
        frames
    }

    /// The text messages that open a new connection: [`Channels::opening`]'s commands, in
    /// batches unless this connection's server cannot take them.
    pub(super) fn opening_messages(&mut self, token: Option<String>) -> Vec<String> {
        let frames = self.opening(token);
        self.batching.new_connection();
        self.batching.plan(&frames)
    }

    /// Commands to send again, one a message, because the server refused their batch.
    pub(super) fn take_resend(&mut self) -> Vec<String> {
        std::mem::take(&mut self.resend)
    }

    /// The connection closed with close code `code`.
    pub(super) fn closed_with(&mut self, code: u16) {
        self.batching.closed_with(code);
    }

    /// Reads one server frame: messages move their channel's position; what the caller should
    /// see goes to `events`.
    pub(super) fn handle(&mut self, frame: Frame, events: &mut VecDeque<Event>) -> Flow {
        let Ok(parsed) = frame.parse() else {
            events.push_back(Event::Other(frame));
            return Flow::Continue;
        };
        if let Some(id) = parsed.id {
            self.batching.answered(id);
        }
        if let ServerBody::Message(entry) = parsed.body {
            if let Some(channel) = self.list.iter_mut().find(|c| c.name == entry.channel) {
                channel.at = Some(Position::new(entry.epoch.as_ref(), entry.seq));
            }
            events.push_back(Event::Message(owned_message(entry)));
            return Flow::Continue;
        }
        let request = parsed.id.and_then(|id| self.pending.remove(&id));
        match parsed.body {
            ServerBody::Error(e) if parsed.id.is_none() && self.refused_batch(&e) => Flow::Continue,
            ServerBody::Error(e) => Flow::Stop(Stopped::Refused {
                request: request.unwrap_or(Request::Other),
                error: ServerError::from(&e),
            }),
            ServerBody::Disconnect(e) => {
                let error = ServerError::from(&e);
                if RESUMABLE_DISCONNECTS.contains(&e.code.as_ref())
                    || (self.renews_tokens && e.code == "token_expired")
                {
                    Flow::Lost(Lost::Disconnected(error))
                } else {
                    Flow::Stop(Stopped::Disconnected(error))
                }
            }
            ServerBody::Subscribe(reply) => {
                events.push_back(Event::Subscribed(owned_subscribed(&reply)));
                self.subscribed(&reply, events);
                Flow::Continue
            }
            ServerBody::Connect(reply) => {
                events.push_back(Event::Connected(owned_connected(reply)));
                Flow::Continue
            }
            ServerBody::Pong(_) => Flow::Continue,
            ServerBody::Presence(presence) => {
                let channel = self
                    .list
                    .iter_mut()
                    .find(|c| c.name == presence.channel && c.presence);
                if let Some(event) = channel.and_then(|c| c.apply(presence)) {
                    events.push_back(Event::Presence(event));
                }
                Flow::Continue
            }
            _ => {
                events.push_back(Event::Other(frame.clone()));
                Flow::Continue
            }
        }
    }

    /// Whether `error` (without an id) is a server's refusal of a batch: then its commands are
    /// to be sent again, one a message ([`Channels::take_resend`]).
    fn refused_batch(&mut self, error: &herald_proto::reply::ErrorBody<'_>) -> bool {
        match self.batching.refused(error) {
            Some(again) => {
                self.resend.extend(again);
                true
            }
            None => false,
        }
    }

    /// Notes a subscribe reply: a plain subscribe starts from the reply's newest seq; a resume
    /// the server could not make exactly is reported, and continues from there too.
    fn subscribed(&mut self, reply: &SubscribeReply<'_>, events: &mut VecDeque<Event>) {
        let Some(channel) = self.list.iter_mut().find(|c| c.name == reply.channel) else {
            return;
        };
        let resumed = channel.resuming.take();
        if resumed.is_some() && reply.recovered {
            return;
        }
        let now = Position::new(reply.epoch.as_ref(), reply.seq);
        if let Some(after) = resumed {
            events.push_back(Event::ResumeInexact {
                channel: channel.name.clone(),
                after,
                now: now.clone(),
            });
        }
        channel.at = Some(now);
    }
}

fn owned_message(m: MessageEntry<'_>) -> Message {
    Message {
        channel: m.channel.into_owned(),
        seq: m.seq,
        epoch: m.epoch.into_owned(),
        id: m.id.into_owned(),
        time: m.time,
        data: m.data,
    }
}

fn owned_subscribed(reply: &SubscribeReply<'_>) -> Subscribed {
    Subscribed {
        channel: reply.channel.to_string(),
        seq: reply.seq,
        epoch: reply.epoch.to_string(),
        recovered: reply.recovered,
    }
}

fn owned_connected(reply: ConnectReply<'_>) -> Connected {
    Connected {
        sub: reply.sub.into_owned(),
        expires: reply.expires,
        unsubscribed: reply
            .unsubscribed
            .into_iter()
            .map(|c| c.into_owned())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// `news` and `chat/1`, both resuming after seq 41 of the current epoch.
    fn resuming() -> Channels {
        let at = Some(Position::in_current_epoch(41));
        Channels::new(
            vec![
                Channel::new("news".into(), at.clone(), false),
                Channel::new("chat/1".into(), at, false),
            ],
            false,
        )
    }

    fn frame(text: &str) -> Frame {
        Frame::from_text(text)
    }

    fn json_of(frame: &ClientFrame) -> Value {
        serde_json::to_value(frame).unwrap()
    }

    fn feed(channels: &mut Channels, text: &str) -> (Flow, Vec<Event>) {
        let mut events = VecDeque::new();
        let flow = channels.handle(frame(text), &mut events);
        (flow, events.into())
    }

    #[test]
    fn opening_frames_follow_the_protocol() {
        let frames = resuming().opening(Some("t".into()));
        assert_eq!(json_of(&frames[0]), json!({"connect":{"token":"t"},"id":1}));
        assert_eq!(
            json_of(&frames[2]),
            json!({"id":3,"subscribe":{"channel":"chat/1","since":{"seq":41}}})
        );
        assert_eq!(frames.len(), 3);
        let mut anon = Channels::new(
            vec![
                Channel::new("news".into(), None, true),
                Channel::new("chat/1".into(), None, true),
            ],
            false,
        );
        let frames = anon.opening(None);
        assert_eq!(
            json_of(&frames[0]),
            json!({"id":1,"subscribe":{"channel":"news","last":true}})
        );
    }

    #[test]
    fn messages_are_events_and_move_the_position() {
        let mut c = resuming();
        c.opening(Some("t".into()));
        let sub =
            r#"{"id":2,"subscribe":{"channel":"news","seq":41,"epoch":"e","recovered":true}}"#;
        let (flow, events) = feed(&mut c, sub);
        assert!(matches!(flow, Flow::Continue));
        assert!(
            matches!(&events[..], [Event::Subscribed(s)] if s.channel == "news" && s.recovered),
            "{events:?}"
        );
        let entry =
            r#"{"channel":"news","seq":42,"epoch":"e","id":"e-42","time":7,"data":{"b":1,"a":2}}"#;
        let (flow, events) = feed(&mut c, &format!(r#"{{"message":{entry}}}"#));
        assert!(matches!(flow, Flow::Continue));
        let [Event::Message(m)] = &events[..] else {
            panic!("{events:?}")
        };
        assert_eq!(
            serde_json::to_string(m).unwrap(),
            entry,
            "the server's bytes"
        );
        assert_eq!(c.position("news"), Some(&Position::new("e", 42)));
        let (_, events) = feed(&mut c, r#"{"pong":{}}"#);
        assert!(events.is_empty(), "{events:?}");
    }

    #[test]
    fn an_error_reply_stops_naming_the_request() {
        let mut c = resuming();
        c.opening(Some("t".into()));
        let e = r#"{"id":3,"error":{"code":"forbidden","message":"no"}}"#;
        let (flow, _) = feed(&mut c, e);
        let Flow::Stop(stopped) = flow else {
            panic!("{flow:?}")
        };
        assert_eq!(
            stopped.to_string(),
            "subscribe to \"chat/1\" failed: no (forbidden)"
        );
        let e = r#"{"id":1,"error":{"code":"unauthorized","message":"bad token"}}"#;
        let (flow, _) = feed(&mut c, e);
        assert!(
            matches!(
                flow,
                Flow::Stop(Stopped::Refused {
                    request: Request::Connect,
                    ..
                })
            ),
            "{flow:?}"
        );
    }

    #[test]
    fn the_next_connection_resumes_after_the_last_message_received() {
        let mut c = Channels::new(
            vec![
                Channel::new("news".into(), None, true),
                Channel::new("chat/1".into(), None, true),
            ],
            false,
        );
        c.opening(None);
        let mut events = Vec::new();
        for text in [
            r#"{"id":1,"subscribe":{"channel":"news","seq":7,"epoch":"e1","recovered":false}}"#,
            r#"{"id":2,"subscribe":{"channel":"chat/1","seq":0,"epoch":"","recovered":false}}"#,
            r#"{"message":{"channel":"news","seq":8,"epoch":"e1","id":"a","time":1,"data":1}}"#,
        ] {
            let (flow, more) = feed(&mut c, text);
            assert!(matches!(flow, Flow::Continue));
            events.extend(more);
        }
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::ResumeInexact { .. })),
            "a plain subscribe is not a resume"
        );
        let again = c.opening(None);
        assert_eq!(
            json_of(&again[0]),
            json!({"id":1,"subscribe":{"channel":"news","since":{"seq":8,"epoch":"e1"}}})
        );
        assert_eq!(
            json_of(&again[1]),
            json!({"id":2,"subscribe":{"channel":"chat/1","since":{"seq":0,"epoch":""}}})
        );
    }

    #[test]
    fn a_resume_the_server_could_not_make_is_reported_and_moves_on() {
        let mut c = resuming();
        c.opening(Some("t".into()));
        let reply =
            r#"{"id":2,"subscribe":{"channel":"news","seq":90,"epoch":"e2","recovered":false}}"#;
        let (_, events) = feed(&mut c, reply);
        let [Event::Subscribed(_), Event::ResumeInexact {
            channel,
            after,
            now,
        }] = &events[..]
        else {
            panic!("{events:?}")
        };
        assert_eq!(
            (channel.as_str(), after, now),
            (
                "news",
                &Position::in_current_epoch(41),
                &Position::new("e2", 90)
            )
        );
        let again = c.opening(Some("t".into()));
        assert_eq!(
            json_of(&again[1]),
            json!({"id":2,"subscribe":{"channel":"news","since":{"seq":90,"epoch":"e2"}}})
        );
    }

    #[test]
    fn shutdown_and_slow_consumer_reconnect_other_disconnects_stop() {
        for (renews_tokens, code, reconnects) in [
            (false, "shutdown", true),
            (false, "slow_consumer", true),
            (false, "token_expired", false),
            (true, "token_expired", true),
            (true, "revoked", false),
        ] {
            let mut c = Channels::new(Vec::new(), renews_tokens);
            let text = format!(r#"{{"disconnect":{{"code":"{code}","message":"m"}}}}"#);
            let (flow, _) = feed(&mut c, &text);
            match flow {
                Flow::Lost(Lost::Disconnected(e)) if reconnects => assert_eq!(e.code, code),
                Flow::Stop(Stopped::Disconnected(e)) if !reconnects => assert_eq!(e.code, code),
                other => panic!("{code} (token supplier: {renews_tokens}): {other:?}"),
            }
        }
    }

    #[test]
    fn presence_frames_keep_the_member_list_and_a_new_subscribe_relists_it() {
        let mut room = Channel::new("room-1".into(), None, false);
        room.presence = true;
        room.member = Some(RawValue::from_string(r#"{"name":"Ada"}"#.into()).unwrap());
        let mut c = Channels::new(vec![room], false);
        let frames = c.opening(None);
        assert_eq!(
            json_of(&frames[0]),
            json!({"id":1,"subscribe":{"channel":"room-1","presence":true,"member":{"name":"Ada"}}})
        );
        assert_eq!(c.members("room-1"), None, "not listed yet");
        let member = |user: &str, data: Value| PresenceMember {
            user: user.into(),
            data,
        };
        for text in [
            r#"{"presence":{"channel":"room-1","event":"members","members":[{"user":"ada","data":{"name":"Ada"}}]}}"#,
            r#"{"presence":{"channel":"room-1","event":"join","user":"bob","data":{}}}"#,
            r#"{"presence":{"channel":"room-1","event":"join","user":"cy","data":{"n":1}}}"#,
            r#"{"presence":{"channel":"room-1","event":"leave","user":"bob"}}"#,
            r#"{"presence":{"channel":"other","event":"leave","user":"cy"}}"#,
        ] {
            feed(&mut c, text);
        }
        assert_eq!(
            c.members("room-1").unwrap(),
            [
                member("ada", json!({"name":"Ada"})),
                member("cy", json!({"n":1}))
            ]
        );
        // A reconnect's members list replaces what the last connection left.
        let (_, events) = feed(
            &mut c,
            r#"{"presence":{"channel":"room-1","event":"members","members":[{"user":"dee","data":{}}]}}"#,
        );
        assert_eq!(c.members("room-1").unwrap(), [member("dee", json!({}))]);
        assert!(
            matches!(&events[..], [Event::Presence(Presence::Members { channel, members })]
                if channel == "room-1" && members.len() == 1),
            "{events:?}"
        );
        let (_, events) = feed(
            &mut c,
            r#"{"presence":{"channel":"room-1","event":"leave","user":"dee"}}"#,
        );
        assert!(
            matches!(&events[..], [Event::Presence(Presence::Leave { user, .. })] if user == "dee"),
            "{events:?}"
        );
        assert_eq!(c.members("room-1").unwrap(), []);
    }

    #[test]
    fn frames_it_does_not_handle_are_passed_on_as_sent() {
        let mut c = resuming();
        for text in ["not json", r#"{"unsubscribe":{"channel":"news"}}"#] {
            let (flow, events) = feed(&mut c, text);
            assert!(matches!(flow, Flow::Continue));
            assert!(
                matches!(&events[..], [Event::Other(f)] if f.text() == text),
                "{events:?}"
            );
        }
    }
}
