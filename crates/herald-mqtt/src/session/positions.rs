//! Where a persistent session stands in each channel it follows: the last message of the
//! channel every message up to which was acknowledged (PUBACK at QoS 1, PUBREC at QoS 2) or
//! sent at QoS 0 (or not sent at all: expired, its own message under No Local, too large for
//! the client). Messages of a channel reach a connection in seq order without gaps (exact
//! resume), so the position is the seq before the oldest message still awaiting its
//! acknowledgement, or the last message handled when none awaits one. A message waiting for
//! the Receive Maximum's window awaits its acknowledgement too.

use herald_core::{ChannelName, Epoch};

/// One channel's position and the messages awaiting acknowledgement.
#[derive(Debug)]
struct Track {
    epoch: Epoch,
    /// The last seq handled (sent, skipped, or waiting for the window).
    last: u64,
    /// Seqs handled and not acknowledged yet, oldest first.
    awaiting: Vec<u64>,
    /// The position last reported.
    reported: u64,
}

impl Track {
    fn position(&self) -> u64 {
        self.awaiting
            .first()
            .map_or(self.last, |&oldest| oldest - 1)
    }

    /// The position if it moved since last reported.
    fn moved(&mut self) -> Option<(Epoch, u64)> {
        let now = self.position();
        (now != self.reported).then(|| {
            self.reported = now;
            (self.epoch.clone(), now)
        })
    }
}

/// A session's positions, by channel.
#[derive(Debug, Default)]
pub(crate) struct Positions(Vec<(ChannelName, Track)>);

impl Positions {
    fn find(&self, channel: &ChannelName) -> Result<usize, usize> {
        self.0.binary_search_by(|(c, _)| c.cmp(channel))
    }

    /// Follows `channel` from `epoch`/`seq` (where its subscription starts: the stored
    /// position it resumes from, or where the channel stood); replaces what was followed.
    pub(crate) fn follow(&mut self, channel: &ChannelName, epoch: &Epoch, seq: u64) {
        let track = Track {
            epoch: epoch.clone(),
            last: seq,
            awaiting: Vec::new(),
            reported: seq,
        };
        match self.find(channel) {
            Ok(at) => self.0[at].1 = track,
            Err(at) => self.0.insert(at, (channel.clone(), track)),
        }
    }

    /// Whether `channel` is followed.
    pub(crate) fn follows(&self, channel: &ChannelName) -> bool {
        self.find(channel).is_ok()
    }

    /// Where `channel` stands: its epoch and position (before any message is handled, where
    /// its subscription starts); `None` if it is not followed.
    pub(crate) fn at(&self, channel: &ChannelName) -> Option<(&Epoch, u64)> {
        let at = self.find(channel).ok()?;
        let track = &self.0[at].1;
        Some((&track.epoch, track.position()))
    }

    /// The channels followed, by name.
    pub(crate) fn channels(&self) -> impl Iterator<Item = &ChannelName> {
        self.0.iter().map(|(c, _)| c)
    }

    /// Stops following `channel`.
    pub(crate) fn unfollow(&mut self, channel: &ChannelName) {
        if let Ok(at) = self.find(channel) {
            self.0.remove(at);
        }
    }

    /// The message `seq` of `channel` (in `epoch`) was handled, and `awaits_ack` says whether
    /// it waits for an acknowledgement. Returns the new position if it moved.
    pub(crate) fn handled(
        &mut self,
        channel: &ChannelName,
        epoch: &Epoch,
        seq: u64,
        awaits_ack: bool,
    ) -> Option<(Epoch, u64)> {
        let at = self.find(channel).ok()?;
        let track = &mut self.0[at].1;
        if track.epoch != *epoch {
            // The channel's log was reset: a new position in the new epoch.
            track.epoch = epoch.clone();
            track.awaiting.clear();
            track.last = seq.saturating_sub(1);
            track.reported = u64::MAX;
        } else if seq <= track.last {
            return None;
        }
        track.last = seq;
        if awaits_ack {
            track.awaiting.push(seq);
        }
        track.moved()
    }

    /// The message `seq` of `channel`, just handled ([`Positions::handled`]), awaits one more
    /// acknowledgement: a v5 connection sent it as several copies (one per subscription,
    /// `crate::subscriptions`), and the position passes it once every copy is acknowledged.
    pub(crate) fn awaits_another(&mut self, channel: &ChannelName, seq: u64) {
        if let Ok(at) = self.find(channel) {
            let track = &mut self.0[at].1;
            if track.last == seq {
                track.awaiting.push(seq);
            }
        }
    }

    /// The message `seq` of `channel` was acknowledged. Returns the new position if it moved.
    pub(crate) fn acknowledged(&mut self, channel: &ChannelName, seq: u64) -> Option<(Epoch, u64)> {
        let at = self.find(channel).ok()?;
        let track = &mut self.0[at].1;
        let found = track.awaiting.iter().position(|&s| s == seq)?;
        track.awaiting.remove(found);
        track.moved()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn news() -> ChannelName {
        ChannelName::parse("news").unwrap()
    }

    #[test]
    fn the_position_stops_before_the_oldest_unacknowledged_message() {
        let (mut p, e) = (Positions::default(), Epoch::new("e"));
        p.follow(&news(), &e, 4);
        assert_eq!(p.handled(&news(), &e, 5, false), Some((e.clone(), 5)));
        assert_eq!(p.handled(&news(), &e, 6, true), None, "awaits its PUBACK");
        assert_eq!(p.handled(&news(), &e, 7, false), None, "behind 6");
        assert_eq!(p.handled(&news(), &e, 8, true), None);
        assert_eq!(p.acknowledged(&news(), 8), None, "6 still awaits");
        assert_eq!(p.acknowledged(&news(), 6), Some((e.clone(), 8)));
        assert_eq!(p.acknowledged(&news(), 6), None, "acknowledged once");
        assert_eq!(p.handled(&news(), &e, 8, false), None, "already handled");
    }

    #[test]
    fn a_message_sent_as_several_copies_is_passed_once_each_is_acknowledged() {
        let (mut p, e) = (Positions::default(), Epoch::new("e"));
        p.follow(&news(), &e, 4);
        assert_eq!(p.handled(&news(), &e, 5, true), None);
        p.awaits_another(&news(), 5);
        p.awaits_another(&news(), 4);
        assert_eq!(p.acknowledged(&news(), 5), None, "one copy still awaits");
        assert_eq!(p.acknowledged(&news(), 5), Some((e.clone(), 5)));
        assert_eq!(p.acknowledged(&news(), 5), None, "no third copy");
    }

    #[test]
    fn a_new_epoch_starts_again_and_an_unfollowed_channel_is_ignored() {
        let (mut p, e) = (Positions::default(), Epoch::new("e"));
        p.follow(&news(), &e, 10);
        let f = Epoch::new("f");
        assert_eq!(p.handled(&news(), &f, 1, true), Some((f.clone(), 0)));
        assert_eq!(p.acknowledged(&news(), 1), Some((f, 1)));
        p.unfollow(&news());
        assert_eq!(p.handled(&news(), &e, 11, false), None);
    }
}
