//! Cache channels (`cache-`, `private-cache-`, `presence-cache-`): a subscription is sent the
//! channel's last event right after its `subscription_succeeded`, or `pusher:cache_miss` when
//! there is none. The last event is the last message of the channel's log (Herald keeps every
//! channel's history, so no second store): any message, whoever published it, as the event it
//! is for every Pusher subscriber (the crate's `outbound` module). Pusher keeps a cached event 30
//! minutes; so does this, from the message's time: an older last message is a miss.

use herald_core::engine::Engine;
use herald_core::log::ReadFrom;
use herald_core::message::{now_millis, SharedMessage};
use herald_core::{ChannelName, HeraldError};

/// How long a channel's last message is its cached event, in milliseconds (Pusher's 30
/// minutes), from the message's time.
pub const CACHE_TTL_MS: i64 = 30 * 60 * 1000;

/// Whether `time` (a message's, milliseconds since the epoch) is still within the TTL at
/// `now`.
pub fn is_fresh(time: i64, now: i64) -> bool {
    now.saturating_sub(time) <= CACHE_TTL_MS
}

/// `channel`'s cached event: its last message, if it has one within the TTL.
pub(crate) async fn last_event(
    engine: &Engine,
    channel: &ChannelName,
) -> Result<Option<SharedMessage>, HeraldError> {
    let slice = engine.read(channel, ReadFrom::Tail(1), 1).await?;
    let now = now_millis();
    Ok(slice
        .messages
        .into_iter()
        .next_back()
        .filter(|m| is_fresh(m.time, now)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_cached_for_thirty_minutes_from_its_time() {
        let now = 10_000_000_000;
        assert!(is_fresh(now, now));
        assert!(is_fresh(now - CACHE_TTL_MS, now));
        assert!(!is_fresh(now - CACHE_TTL_MS - 1, now));
        // A clock that went back a little: still fresh.
        assert!(is_fresh(now + 5_000, now));
    }
}
