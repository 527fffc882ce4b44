//! Where a SUBSCRIBE's retained messages meet live ones (docs/design/mqtt.md, "Wildcards"):
//! each message at most once to the connection, in seq order per topic.
//!
//! A wildcard SUBSCRIBE registers its filter in the hub first, then reads the last message of
//! each matching channel from the store and queues them as retained messages
//! (`wildcards.rs`). A message committed before the registration never reaches the filter
//! live (core's filters take only the commits made after them, "Commits before a filter"):
//! the retained message read is its only way. One committed after the registration and before
//! that read reaches the outbox twice: live, and as the retained message read, in either
//! order (a commit reaches the hub after it is readable; under a burst the fan-out runs
//! behind). Without this window the client would get it twice [MQTT-4.3.3] (a QoS 2
//! subscriber too), or a live message older than the retained one after it.
//!
//! **How.** The connection's writer, which takes the outbox's frames in order, decides: for
//! each channel whose retained message a SUBSCRIBE queued, it keeps a [`Mark`]. The retained
//! message is not sent when a live one (any message not sent as retained) of its channel went
//! out since it was queued: the filter delivers the channel's messages in seq order without a
//! gap from the first, so the client has the retained one already or gets it live next.
//! Otherwise it goes, and live messages at or below it that come after it are copies (or older
//! than it) and are not sent. A channel's mark goes once that is settled: with the live
//! message before the retained one, or with the first live message above the retained one;
//! and every mark once the last retained messages were queued [`LIFETIME`] ago: the bound on
//! memory for channels that publish nothing more, far beyond the moments a commit takes to
//! reach the hub.
//!
//! **A SUBSCRIBE that repeats** a filter is sent the retained messages again [MQTT-3.8.4-3]:
//! a new mark's retained message goes even if the client had it before the window opened,
//! while a mark's floor (what went out since an earlier window) still stops late copies.
//!
//! **Cost.** Nothing on the fan-out thread; the writer of a connection with wildcard filters
//! checks one length per message while no window is open (`subscriptions.rs` keeps it beside
//! the filters' registration), one map lookup per message while one is.
//!
//! **An exact SUBSCRIBE** queues its channel's retained message the same way (read from the
//! store once its subscription is live, `retained.rs`), with a lighter mark
//! ([`RetainedWindow::queued_exact`]): its subscription skips every live message at or below
//! the channel's head it started at (core's `caught_up_to`), so no copy can follow; only a
//! newer live message written first stops the retained one (which would otherwise go out after
//! it), and the mark goes as soon as the retained message is settled.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use herald_core::message::StoredMessage;
use herald_core::{ChannelName, Epoch};

/// How long marks are kept after the last retained messages were queued (see the module doc).
pub(crate) const LIFETIME: Duration = Duration::from_secs(60);

/// One channel's place in the window.
struct Mark {
    /// The epoch of the retained message queued: a message of another is not compared.
    epoch: Epoch,
    /// Live messages at or below it are copies of what went out since a window opened.
    floor: u64,
    /// The retained message queued and not written yet.
    retained: Option<u64>,
    /// A live message was written since `retained` was queued.
    live_since: bool,
    /// Queued by an exact SUBSCRIBE, whose subscription skips live messages at or below the
    /// channel's head it started at: nothing to stop once the retained message is settled.
    exact: bool,
}

/// The marks of one connection's channels whose retained messages a wildcard SUBSCRIBE queued
/// (see the module doc).
#[derive(Default)]
pub(crate) struct RetainedWindow {
    marks: HashMap<ChannelName, Mark>,
    /// When the last retained messages were queued.
    queued_at: Option<Instant>,
}

impl RetainedWindow {
    /// Whether any channel is marked: the one check a message pays while none is.
    #[inline]
    pub(crate) fn is_open(&self) -> bool {
        !self.marks.is_empty()
    }

    /// Marks the channels of `retained`, the retained messages a SUBSCRIBE queued just now
    /// (behind whatever the outbox held).
    pub(crate) fn queued<'a>(&mut self, retained: impl IntoIterator<Item = &'a StoredMessage>) {
        for message in retained {
            let mark = self
                .marks
                .entry(message.channel.clone())
                .or_insert_with(|| Mark {
                    epoch: message.epoch.clone(),
                    floor: 0,
                    retained: None,
                    live_since: false,
                    exact: false,
                });
            if mark.epoch != message.epoch {
                mark.epoch = message.epoch.clone();
                mark.floor = 0;
            }
            mark.retained = Some(message.seq);
            mark.live_since = false;
            mark.exact = false;
        }
        if self.is_open() {
            self.queued_at = Some(Instant::now());
        }
    }

    /// Marks the channel of `retained`, the retained message an exact SUBSCRIBE queued just now
    /// (read from the store after its subscription went live at the channel's head): it goes
    /// unless a live message of the channel was written first, and its mark goes with it.
    pub(crate) fn queued_exact(&mut self, retained: &StoredMessage) {
        if self.marks.contains_key(&retained.channel) {
            // A wildcard SUBSCRIBE's mark: it keeps its floor.
            self.queued([retained]);
            return;
        }
        self.queued([retained]);
        if let Some(mark) = self.marks.get_mut(&retained.channel) {
            mark.exact = true;
        }
    }

    /// Whether live `message` (anything not sent as a retained message) goes out; records it.
    pub(crate) fn pass_live(&mut self, message: &StoredMessage) -> bool {
        if self.expired() {
            self.close();
            return true;
        }
        let Some(mark) = self.marks.get_mut(&message.channel) else {
            return true;
        };
        if mark.epoch != message.epoch {
            // The channel's log was reset: nothing to compare with.
            self.marks.remove(&message.channel);
            return true;
        }
        if message.seq <= mark.floor {
            return false;
        }
        match mark.retained {
            Some(_) => mark.live_since = true,
            // Above the retained message sent: the channel's window is over.
            None => {
                self.marks.remove(&message.channel);
            }
        }
        true
    }

    /// Whether `message`, about to go out as a retained message, does; records it. A retained
    /// message the window did not queue (another subscription's) goes as it is.
    pub(crate) fn pass_retained(&mut self, message: &StoredMessage) -> bool {
        let Some(mark) = self.marks.get_mut(&message.channel) else {
            return true;
        };
        if mark.retained != Some(message.seq) || mark.epoch != message.epoch {
            return true;
        }
        mark.retained = None;
        if mark.live_since {
            // The client has it, or gets it live next: the channel's window is over.
            self.marks.remove(&message.channel);
            return false;
        }
        if mark.exact {
            self.marks.remove(&message.channel);
            return true;
        }
        mark.floor = mark.floor.max(message.seq);
        true
    }

    /// Forgets the marks if the last retained messages were queued [`LIFETIME`] ago, and
    /// frees the room the map keeps beyond them (a parking connection's).
    pub(crate) fn shrink_to_fit(&mut self) {
        if self.expired() {
            self.close();
        }
        self.marks.shrink_to_fit();
    }

    fn expired(&self) -> bool {
        self.queued_at.is_some_and(|at| at.elapsed() >= LIFETIME)
    }

    fn close(&mut self) {
        self.marks = HashMap::new();
        self.queued_at = None;
    }

    #[cfg(test)]
    fn age_by(&mut self, by: Duration) {
        self.queued_at = self.queued_at.and_then(|at| at.checked_sub(by));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn msg(channel: &str, seq: u64) -> StoredMessage {
        let channel = ChannelName::parse(channel).unwrap();
        StoredMessage::new(
            channel,
            Epoch::new("e"),
            seq,
            None,
            0,
            Bytes::from_static(b"{}"),
        )
    }

    #[test]
    fn a_live_message_written_before_the_retained_one_stops_it() {
        let mut window = RetainedWindow::default();
        window.queued([&msg("a/b", 7), &msg("a/c", 3)]);
        assert!(window.pass_live(&msg("a/b", 7)), "live, queued before it");
        assert!(!window.pass_retained(&msg("a/b", 7)), "a copy");
        // Older than the retained message: the newer ones follow live, so it is not sent
        // ahead of them (which would skip them).
        assert!(window.pass_live(&msg("a/c", 2)));
        assert!(!window.pass_retained(&msg("a/c", 3)), "comes live next");
        assert!(!window.is_open(), "settled for both");
        assert!(window.pass_live(&msg("a/c", 3)));
        assert!(window.pass_live(&msg("a/b", 8)));
    }

    #[test]
    fn after_the_retained_message_late_live_copies_and_older_ones_are_not_sent() {
        let mut window = RetainedWindow::default();
        window.queued([&msg("a/b", 7), &msg("a/c", 3)]);
        assert!(window.pass_retained(&msg("a/b", 7)));
        assert!(
            !window.pass_live(&msg("a/b", 6)),
            "older than the retained one"
        );
        assert!(!window.pass_live(&msg("a/b", 7)), "its late live copy");
        assert!(window.pass_live(&msg("a/b", 8)));
        assert!(
            window.pass_live(&msg("a/b", 7)),
            "the channel's window is over"
        );
        assert!(window.is_open(), "a/c's retained message is still queued");
        assert!(
            window.pass_live(&msg("a/c", 4)),
            "newer than its retained one"
        );
        assert!(
            !window.pass_retained(&msg("a/c", 3)),
            "older than what went out"
        );
        assert!(!window.is_open());
        assert!(window.pass_live(&msg("x", 1)), "an unmarked channel");
    }

    #[test]
    fn a_repeated_subscribe_resends_the_retained_message_but_no_late_copy() {
        let mut window = RetainedWindow::default();
        window.queued([&msg("a/b", 7)]);
        assert!(window.pass_retained(&msg("a/b", 7)));
        // The same filter subscribed again before anything newer came [MQTT-3.8.4-3].
        window.queued([&msg("a/b", 7)]);
        assert!(!window.pass_live(&msg("a/b", 7)), "still a late copy");
        assert!(
            window.pass_retained(&msg("a/b", 7)),
            "sent again as retained"
        );
        assert!(
            window.pass_retained(&msg("a/b", 7)),
            "another subscription's"
        );
        assert!(window.pass_live(&msg("a/b", 8)));
        assert!(!window.is_open());
    }

    #[test]
    fn an_exact_subscribes_mark_goes_once_its_retained_message_is_settled() {
        let mut window = RetainedWindow::default();
        window.queued_exact(&msg("a/b", 3));
        assert!(window.pass_retained(&msg("a/b", 3)));
        assert!(!window.is_open(), "settled: its subscription skips copies");
        window.queued_exact(&msg("a/b", 3));
        assert!(window.pass_live(&msg("a/b", 9)), "newer, live, first");
        assert!(!window.pass_retained(&msg("a/b", 3)), "not sent after it");
        assert!(!window.is_open());
    }

    #[test]
    fn another_epoch_is_not_compared_and_old_marks_are_forgotten() {
        let mut window = RetainedWindow::default();
        window.queued([&msg("a/b", 7)]);
        assert!(window.pass_retained(&msg("a/b", 7)));
        let mut reset = msg("a/b", 1);
        reset.epoch = Epoch::new("another");
        assert!(window.pass_live(&reset), "the channel's log was reset");
        assert!(!window.is_open());
        window.queued([&msg("a/c", 5)]);
        assert!(window.pass_retained(&msg("a/c", 5)));
        window.shrink_to_fit();
        assert!(window.is_open(), "kept while young");
        window.age_by(LIFETIME);
        assert!(window.pass_live(&msg("a/c", 5)), "forgotten once old");
        assert!(!window.is_open());
    }
}
