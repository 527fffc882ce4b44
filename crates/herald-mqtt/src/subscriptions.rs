//! What one MQTT connection asked of each channel it subscribed to: the granted QoS and the
//! subscription options that change how a message goes out (Retain As Published, No Local).
//! The subscriptions themselves (the hub's registrations) are the client session's; this is the
//! MQTT side of the same set, a vector sorted by channel like the session's, a few bytes per
//! entry.
//!
//! Phase 1 subscribes exact topics only (one filter is one channel), so a message's channel
//! finds its options directly.

use herald_core::ChannelName;

use crate::packet::QoS;

/// The options of one subscription, as granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Granted {
    /// The QoS granted: the most a message goes out with.
    pub(crate) qos: QoS,
    /// v5 Retain As Published: a message keeps the RETAIN flag it was published with.
    pub(crate) retain_as_published: bool,
    /// v5 No Local: messages this client published are not sent back to it.
    pub(crate) no_local: bool,
}

/// A connection's subscriptions by channel.
#[derive(Default)]
pub(crate) struct Subscriptions(Vec<(ChannelName, Granted)>);

impl Subscriptions {
    fn find(&self, channel: &ChannelName) -> Result<usize, usize> {
        self.0.binary_search_by(|(c, _)| c.cmp(channel))
    }

    /// The options of the subscription to `channel`, if there is one.
    pub(crate) fn get(&self, channel: &ChannelName) -> Option<Granted> {
        self.find(channel).ok().map(|at| self.0[at].1)
    }

    /// Records (or replaces) the subscription to `channel`; returns whether it is new.
    pub(crate) fn insert(&mut self, channel: ChannelName, granted: Granted) -> bool {
        match self.find(&channel) {
            Ok(at) => {
                self.0[at].1 = granted;
                false
            }
            Err(at) => {
                self.0.insert(at, (channel, granted));
                true
            }
        }
    }

    /// Forgets the subscription to `channel`; returns whether there was one.
    pub(crate) fn remove(&mut self, channel: &ChannelName) -> bool {
        match self.find(channel) {
            Ok(at) => {
                self.0.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// How many subscriptions the connection holds.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(qos: QoS) -> Granted {
        Granted {
            qos,
            retain_as_published: false,
            no_local: false,
        }
    }

    #[test]
    fn a_channel_has_one_subscription_whose_options_a_resubscribe_replaces() {
        let mut subs = Subscriptions::default();
        let news = ChannelName::parse("news").expect("a channel");
        let b = ChannelName::parse("b").expect("a channel");
        assert!(subs.insert(news.clone(), granted(QoS::AtMostOnce)));
        assert!(subs.insert(b.clone(), granted(QoS::AtLeastOnce)));
        assert!(!subs.insert(news.clone(), granted(QoS::AtLeastOnce)));
        assert_eq!(subs.get(&news), Some(granted(QoS::AtLeastOnce)));
        assert_eq!(subs.len(), 2);
        assert!(subs.remove(&b));
        assert!(!subs.remove(&b));
        assert_eq!(subs.get(&b), None);
    }
}
