//! Exact resume for Pusher clients that ask for it (issue 35; docs/pusher.md, "Exact resume
//! after a reconnect"): an extension of the client protocol that an unchanged Pusher client
//! never sees.
//!
//! A client opts in per subscription with fields of `pusher:subscribe`'s data that Pusher's
//! servers ignore (pusher-js lets an app add no query parameter to `/app/{key}`, so the
//! subscribe is the one place a client can ask):
//!
//! - `"herald_positions": true`: tell this channel's positions, resume from nothing;
//! - `"herald_since": {"epoch": "…", "seq": N}`: resume after this cursor (and tell
//!   positions), as Herald's WebSocket `since` does (docs/protocol.md, "Resume").
//!
//! Such a subscription is told, after each message of the channel (sent to it or not: the
//! sender's own client event is not sent, its position is), the cursor it has now:
//! `pusher_internal:herald_position` with `{"epoch","seq"}` as data, written with the event
//! in the same write. pusher-js hands a `pusher_internal:` event to no channel or global
//! listener (and drops unknown fields of an event frame, so the position cannot ride on the
//! event itself); a client reads it from `pusher.connection`'s `message` events. A
//! subscription with positions and no cursor is told the channel's position at once, after
//! its confirmation. A cursor that cannot be resumed (another epoch, ahead of the channel,
//! older than the retained history) is told as `herald:resume_failed` on the channel (data
//! `{"since","epoch","seq"}`: the cursor asked and where the channel stands), followed by that
//! position; nothing is replayed and live events follow, so the client refetches what it
//! missed.

use bytes::Bytes;
use herald_core::engine::SubscribeOutcome;
use herald_core::{ChannelName, Cursor, Epoch, StoredMessage};
use herald_edge::ws::frame::{self, Opcode};
use serde_json::{json, Map, Value};

use crate::channel_map::pusher_name;
use crate::frame::FrameError;

/// The event a position is told with.
pub const POSITION_EVENT: &str = "pusher_internal:herald_position";
/// The event a cursor that could not be resumed is told with.
pub const RESUME_FAILED_EVENT: &str = "herald:resume_failed";

/// What a `pusher:subscribe` asks of the extension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResumeAsk {
    /// `"herald_positions": true`: positions from where the channel stands.
    Positions,
    /// `"herald_since"`: resume after this cursor, then positions.
    Since(Cursor),
}

impl ResumeAsk {
    /// The ask in a subscribe's data, if it makes one (`herald_since` wins over
    /// `herald_positions`); a field of the wrong shape is refused.
    pub fn parse(data: &Map<String, Value>) -> Result<Option<ResumeAsk>, FrameError> {
        let bad = |what: &str| FrameError(format!("Invalid pusher:subscribe: {what}"));
        match data.get("herald_since") {
            None | Some(Value::Null) => {}
            Some(Value::Object(since)) => {
                let seq = since
                    .get("seq")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| bad("data.herald_since.seq must be an integer of at least 0"))?;
                let epoch = match since.get("epoch") {
                    None | Some(Value::Null) => "",
                    Some(Value::String(epoch)) => epoch.as_str(),
                    Some(_) => return Err(bad("data.herald_since.epoch must be a string")),
                };
                return Ok(Some(ResumeAsk::Since(Cursor {
                    epoch: Epoch::new(epoch),
                    seq,
                })));
            }
            Some(_) => {
                return Err(bad(
                    "data.herald_since must be an object {\"epoch\": string, \"seq\": integer}",
                ))
            }
        }
        match data.get("herald_positions") {
            None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(None),
            Some(Value::Bool(true)) => Ok(Some(ResumeAsk::Positions)),
            Some(_) => Err(bad("data.herald_positions must be true or false")),
        }
    }

    /// The cursor to resume after, if any.
    pub fn since(&self) -> Option<&Cursor> {
        match self {
            ResumeAsk::Positions => None,
            ResumeAsk::Since(cursor) => Some(cursor),
        }
    }

    /// The frames that follow the subscription's confirmation of `channel` (its Pusher name),
    /// given what the subscribe found: where the channel stands when no cursor was given, the
    /// failure and where the channel stands when the cursor was not resumed, nothing when it
    /// was (the replay's positions follow).
    pub(crate) fn after_confirmation(
        &self,
        channel: &str,
        outcome: &SubscribeOutcome,
    ) -> Vec<Bytes> {
        let here = position(channel, &outcome.epoch, outcome.seq);
        match self {
            ResumeAsk::Positions => vec![here],
            ResumeAsk::Since(_) if outcome.recovered => Vec::new(),
            ResumeAsk::Since(since) => vec![resume_failed(channel, since, outcome), here],
        }
    }
}

/// `pusher_internal:herald_position` for `channel`: the client has been sent everything up to
/// `seq` of `epoch`.
pub fn position(channel: &str, epoch: &Epoch, seq: u64) -> Bytes {
    let data = json!({ "epoch": epoch.as_str(), "seq": seq });
    Bytes::from(
        json!({ "event": POSITION_EVENT, "channel": channel, "data": data.to_string() })
            .to_string(),
    )
}

/// `herald:resume_failed` for `channel`: `since` was not resumed; the channel stands at the
/// outcome's position, and live events follow from there.
pub fn resume_failed(channel: &str, since: &Cursor, outcome: &SubscribeOutcome) -> Bytes {
    let data = json!({
        "since": { "epoch": since.epoch.as_str(), "seq": since.seq },
        "epoch": outcome.epoch.as_str(),
        "seq": outcome.seq,
    });
    Bytes::from(
        json!({ "event": RESUME_FAILED_EVENT, "channel": channel, "data": data.to_string() })
            .to_string(),
    )
}

/// Appends `message`'s position as a WebSocket text frame to `out` (nothing for a channel
/// with no Pusher name).
pub(crate) fn push_position(out: &mut Vec<u8>, message: &StoredMessage) {
    if let Some(channel) = pusher_name(&message.channel) {
        let text = position(&channel, &message.epoch, message.seq);
        frame::encode(out, Opcode::Text, &text);
    }
}

/// The channels of a connection whose subscriptions asked for positions (full Herald names):
/// two words and nothing allocated for a connection that never asked.
#[derive(Debug, Default)]
pub(crate) struct Positioned(Option<Box<[ChannelName]>>);

impl Positioned {
    /// Whether `channel`'s messages are followed by their position.
    pub(crate) fn wants(&self, channel: &ChannelName) -> bool {
        self.0.as_ref().is_some_and(|c| c.contains(channel))
    }

    /// Whether any channel is.
    pub(crate) fn any(&self) -> bool {
        self.0.is_some()
    }

    pub(crate) fn add(&mut self, channel: ChannelName) {
        if self.wants(&channel) {
            return;
        }
        let mut channels = self.0.take().map(Vec::from).unwrap_or_default();
        channels.push(channel);
        self.0 = Some(channels.into_boxed_slice());
    }

    pub(crate) fn remove(&mut self, channel: &ChannelName) {
        if !self.wants(channel) {
            return;
        }
        let mut channels = self.0.take().map(Vec::from).unwrap_or_default();
        channels.retain(|c| c != channel);
        self.0 = (!channels.is_empty()).then(|| channels.into_boxed_slice());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(data: Value) -> Result<Option<ResumeAsk>, FrameError> {
        ResumeAsk::parse(data.as_object().unwrap())
    }

    #[test]
    fn a_subscribe_asks_for_positions_or_a_resume() {
        assert_eq!(ask(json!({ "channel": "news" })), Ok(None));
        assert_eq!(ask(json!({ "herald_positions": false })), Ok(None));
        assert_eq!(
            ask(json!({ "herald_positions": true })),
            Ok(Some(ResumeAsk::Positions))
        );
        let since = ResumeAsk::Since(Cursor {
            epoch: Epoch::new("6bb9f23a"),
            seq: 41,
        });
        assert_eq!(
            ask(json!({ "herald_since": { "epoch": "6bb9f23a", "seq": 41 } })),
            Ok(Some(since.clone()))
        );
        assert_eq!(
            ask(
                json!({ "herald_positions": true, "herald_since": { "epoch": "6bb9f23a", "seq": 41 } })
            ),
            Ok(Some(since))
        );
        // An epoch left out is "the channel's current one", as in Herald's `since`.
        assert_eq!(
            ask(json!({ "herald_since": { "seq": 0 } })),
            Ok(Some(ResumeAsk::Since(Cursor::default())))
        );
        for bad in [
            json!({ "herald_since": "6bb9f23a:41" }),
            json!({ "herald_since": { "seq": -1 } }),
            json!({ "herald_since": { "epoch": 7, "seq": 1 } }),
            json!({ "herald_positions": "yes" }),
        ] {
            assert!(ask(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn positioned_channels_are_added_once_and_removed() {
        let news = ChannelName::parse("news").unwrap();
        let other = ChannelName::parse("other").unwrap();
        let mut set = Positioned::default();
        assert!(!set.wants(&news));
        set.add(news.clone());
        set.add(news.clone());
        assert!(set.wants(&news) && !set.wants(&other));
        set.remove(&news);
        assert!(!set.wants(&news));
        assert!(set.0.is_none(), "nothing held once empty");
        assert_eq!(size_of::<Positioned>(), 2 * size_of::<usize>());
    }

    #[test]
    fn what_follows_a_confirmation() {
        let outcome = |recovered| SubscribeOutcome {
            epoch: Epoch::new("e1"),
            seq: 9,
            recovered,
        };
        let here = r#"{"channel":"news","data":"{\"epoch\":\"e1\",\"seq\":9}","event":"pusher_internal:herald_position"}"#;
        assert_eq!(
            ResumeAsk::Positions.after_confirmation("news", &outcome(false)),
            vec![Bytes::from(here)]
        );
        let since = ResumeAsk::Since(Cursor {
            epoch: Epoch::new("e0"),
            seq: 3,
        });
        assert!(since.after_confirmation("news", &outcome(true)).is_empty());
        let told = since.after_confirmation("news", &outcome(false));
        assert_eq!(told.len(), 2);
        let failed: Value = serde_json::from_slice(&told[0]).unwrap();
        assert_eq!(failed["event"], RESUME_FAILED_EVENT);
        assert_eq!(failed["channel"], "news");
        let data: Value = serde_json::from_str(failed["data"].as_str().unwrap()).unwrap();
        assert_eq!(
            data,
            json!({ "since": { "epoch": "e0", "seq": 3 }, "epoch": "e1", "seq": 9 })
        );
        assert_eq!(told[1], Bytes::from(here));
    }
}
