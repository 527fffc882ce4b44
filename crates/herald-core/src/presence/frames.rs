//! The `presence` frames, encoded once per change as the WebSocket frame's text
//! (`{"presence":{...}}`); the other transports take its body ([`frame_body`]): the SSE
//! `presence` event's data, a long-poll answer's `presence` entry. Their shapes are
//! herald-proto's [`herald_proto::reply::PresenceFrame`].

use bytes::Bytes;

use super::{Member, MemberChange};
use crate::name::ChannelName;

/// What comes before a frame's body.
const START: &[u8] = b"{\"presence\":";

/// The body of a frame made here: `{"channel":...}` without the `{"presence":` envelope.
pub fn frame_body(frame: &Bytes) -> Bytes {
    if frame.starts_with(START) && frame.len() > START.len() {
        frame.slice(START.len()..frame.len() - 1)
    } else {
        frame.clone()
    }
}

/// Whether a frame made here is a `members` list (not a join or leave). A channel name holds no
/// `"`, so the first `","event":"` is the frame's event.
pub fn is_members_frame(frame: &[u8]) -> bool {
    const EVENT: &[u8] = b"\",\"event\":\"";
    frame
        .windows(EVENT.len())
        .position(|w| w == EVENT)
        .is_some_and(|at| frame[at + EVENT.len()..].starts_with(b"members\""))
}

fn string(buf: &mut Vec<u8>, s: &str) {
    // Writing a string to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *buf, s);
}

fn start(channel: &ChannelName, event: &str, capacity: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(capacity + 64);
    buf.extend_from_slice(START);
    buf.extend_from_slice(b"{\"channel\":");
    string(&mut buf, channel.public());
    buf.extend_from_slice(b",\"event\":\"");
    buf.extend_from_slice(event.as_bytes());
    buf.push(b'"');
    buf
}

fn member(buf: &mut Vec<u8>, user: &str, data: &str) {
    buf.extend_from_slice(b"\"user\":");
    string(buf, user);
    buf.extend_from_slice(b",\"data\":");
    buf.extend_from_slice(data.as_bytes());
}

/// `{"presence":{"channel":C,"event":"members","members":[{"user":U,"data":{...}},...]}}`.
pub fn members_frame(channel: &ChannelName, members: &[Member]) -> Bytes {
    let size: usize = members
        .iter()
        .map(|m| m.user.len() + m.data.len() + 24)
        .sum();
    let mut buf = start(channel, "members", size);
    buf.extend_from_slice(b",\"members\":[");
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        buf.push(b'{');
        member(&mut buf, &m.user, &m.data);
        buf.push(b'}');
    }
    buf.extend_from_slice(b"]}}");
    Bytes::from(buf)
}

/// `{"presence":{"channel":C,"event":"join","user":U,"data":{...}}}` or
/// `{"presence":{"channel":C,"event":"leave","user":U}}`.
pub(super) fn change_frame(channel: &ChannelName, change: &MemberChange) -> Bytes {
    let mut buf = match change {
        MemberChange::Added { user, data } => {
            let mut buf = start(channel, "join", user.len() + data.len());
            buf.push(b',');
            member(&mut buf, user, data);
            buf
        }
        MemberChange::Removed { user } => {
            let mut buf = start(channel, "leave", user.len());
            buf.extend_from_slice(b",\"user\":");
            string(&mut buf, user);
            buf
        }
    };
    buf.extend_from_slice(b"}}");
    Bytes::from(buf)
}
