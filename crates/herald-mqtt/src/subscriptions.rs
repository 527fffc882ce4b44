//! What one MQTT connection asked of each channel it subscribed to, and of each wildcard
//! filter: the granted QoS and the subscription options that change how a message goes out
//! (Retain As Published, No Local). The exact subscriptions themselves (the hub's
//! registrations) are the client session's; the filters' registration is core's filter
//! registry's ([`herald_core::hub::filters`]), held here. This is the MQTT side of both sets: a
//! vector sorted by channel like the session's, a few bytes per entry, and a filter string with
//! its options per wildcard subscription.
//!
//! **A copy per subscription for MQTT 5, one delivery for 3.1.1.** A message may match the
//! channel's exact subscription and several filters. Core queues it once to the connection
//! (through the exact subscription if there is one, else once for all its filters). A v5
//! connection sends it once per matching subscription ([`Subscriptions::copies`], as Mosquitto
//! 2.0 does; MQTT 5.0 3.3.4): each copy at that subscription's QoS (the lower of it and the
//! message's), with that subscription's Retain As Published and No Local, and its Subscription
//! Identifier only [MQTT-3.3.4-5]. A 3.1.1 connection sends it once ([`Subscriptions::get`]):
//! the highest QoS granted among the matching subscriptions, Retain As Published if any asked
//! for it, No Local only if all did (3.1.1 and Mosquitto's default for v3; MQTT 5.0 3.3.4 allows
//! either). Two cases keep the one delivery on v5 too: a retained message sent on SUBSCRIBE
//! (it answers that SUBSCRIBE, not the others), and a channel a shared subscription
//! (`crate::shared`) of the connection matches as well (core queues its group's message apart
//! from the connection's own, and the frame does not say which one it is).
//!
//! **Subscription Identifiers** (v5, MQTT 5.0 3.8.2.1.2): each subscription keeps the
//! identifier of the SUBSCRIBE that made (or last replaced) it. A copy carries its
//! subscription's; the one delivery carries the identifiers of every matching subscription that
//! has one ([`Subscriptions::identifiers`], [MQTT-3.3.4-3], [MQTT-3.3.4-5]).
//!
//! **Retained messages of a SUBSCRIBE** (wildcard or exact) meet live ones in a window kept
//! beside the filters' registration (`retained_window.rs`): each message goes out once, in
//! order per topic ([`Subscriptions::window_passes`]).

use std::num::NonZeroU32;
use std::sync::Arc;

use herald_core::hub::filters::{FilterRegistry, FilterSubscriber};
use herald_core::hub::Admit;
use herald_core::message::StoredMessage;
use herald_core::name::topic::filter::TopicFilter;
use herald_core::outbox::Outbox;
use herald_core::tenant::AppId;
use herald_core::ChannelName;

use crate::packet::QoS;
use crate::retained_window::RetainedWindow;
use crate::shared::SharedGroups;

/// The options of one subscription, as granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Granted {
    /// The QoS granted: the most a message goes out with.
    pub(crate) qos: QoS,
    /// v5 Retain As Published: a message keeps the RETAIN flag it was published with.
    pub(crate) retain_as_published: bool,
    /// v5 No Local: messages this client published are not sent back to it.
    pub(crate) no_local: bool,
    /// v5 Subscription Identifier of the SUBSCRIBE that made it, if it had one.
    pub(crate) identifier: Option<NonZeroU32>,
}

impl Granted {
    /// The options a SUBSCRIBE asked for, with its Subscription Identifier.
    pub(crate) fn asked(
        options: &crate::packet::SubscriptionOptions,
        identifier: Option<NonZeroU32>,
    ) -> Granted {
        Granted {
            qos: options.qos,
            retain_as_published: options.retain_as_published,
            no_local: options.no_local,
            identifier,
        }
    }

    /// What a message matching both `self` and `other` goes out with (the identifiers are
    /// gathered apart, [`Subscriptions::identifiers`]).
    fn with(self, other: Granted) -> Granted {
        Granted {
            qos: self.qos.max(other.qos),
            retain_as_published: self.retain_as_published || other.retain_as_published,
            no_local: self.no_local && other.no_local,
            identifier: self.identifier.or(other.identifier),
        }
    }
}

/// Which Subscription Identifiers a PUBLISH of a message carries (v5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// The one delivery for every matching subscription: all their identifiers.
    AllMatching,
    /// One subscription's copy: its identifier, if it has one.
    One(Option<NonZeroU32>),
}

/// A connection's subscriptions by channel, and its wildcard filters.
#[derive(Default)]
pub(crate) struct Subscriptions {
    exact: Vec<(ChannelName, Granted)>,
    /// Each wildcard subscription: its filter and options, in the order made.
    filters: Vec<(TopicFilter, Granted)>,
    /// The filters' registration in the hub, made with the first one, and their retained
    /// messages' window (boxed: a connection without a filter pays one pointer).
    registered: Option<Box<Registered>>,
    /// Its shared subscriptions (`crate::shared`).
    pub(crate) shared: SharedGroups,
}

/// What a connection with wildcard filters keeps for them beside their options, and where any
/// SUBSCRIBE's retained messages meet live ones.
struct Registered {
    /// The filters' registration in the hub, made with the first filter.
    hub: Option<FilterSubscriber>,
    /// Where SUBSCRIBEs' retained messages meet live ones (`retained_window.rs`).
    retained: RetainedWindow,
}

impl Subscriptions {
    /// Frees the room its lists keep beyond their length (a parked connection's, which keeps
    /// them as long as it is idle).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.exact.shrink_to_fit();
        self.filters.shrink_to_fit();
        let settled = self.registered.as_mut().is_some_and(|registered| {
            registered.retained.shrink_to_fit();
            registered.hub.is_none() && !registered.retained.is_open()
        });
        if settled {
            // Only an exact SUBSCRIBE's settled window: nothing left to keep.
            self.registered = None;
        }
    }

    /// Records the retained messages a wildcard SUBSCRIBE just queued, so that none of them
    /// goes out twice with a live copy ([`Subscriptions::window_passes`]).
    pub(crate) fn retained_queued<'a>(
        &mut self,
        retained: impl IntoIterator<Item = &'a StoredMessage>,
    ) {
        if let Some(registered) = &mut self.registered {
            registered.retained.queued(retained);
        }
    }

    /// Records the retained message an exact SUBSCRIBE just queued, so that it does not go out
    /// after a newer live message of its channel ([`Subscriptions::window_passes`]).
    pub(crate) fn retained_queued_exact(&mut self, retained: &StoredMessage) {
        self.registered
            .get_or_insert_with(|| {
                Box::new(Registered {
                    hub: None,
                    retained: RetainedWindow::default(),
                })
            })
            .retained
            .queued_exact(retained);
    }

    /// Whether `message`, about to go out (as a retained message if `retained`), does: not if
    /// it is a copy of one a wildcard SUBSCRIBE's retained messages sent, or met, meanwhile
    /// (`retained_window.rs`). One check while no window is open.
    pub(crate) fn window_passes(&mut self, message: &StoredMessage, retained: bool) -> bool {
        match &mut self.registered {
            Some(registered) if registered.retained.is_open() => {
                let window = &mut registered.retained;
                if retained {
                    window.pass_retained(message)
                } else {
                    window.pass_live(message)
                }
            }
            _ => true,
        }
    }

    /// The lone exact subscription (or none) of a connection that holds nothing else, which
    /// its parked form keeps inline; `None` when it holds more.
    pub(crate) fn lone(&self) -> Option<Option<(ChannelName, Granted)>> {
        let lean = self.exact.len() <= 1
            && self.filters.is_empty()
            && self
                .registered
                .as_ref()
                .is_none_or(|r| r.hub.is_none() && !r.retained.is_open())
            && self.shared.is_unused();
        lean.then(|| self.exact.first().cloned())
    }

    /// The subscriptions [`Subscriptions::lone`] gave. The list grows as a first SUBSCRIBE's
    /// does (room for four, 96 bytes), not to its length (24 bytes, jemalloc's 32-byte class):
    /// it is freed when the connection parks again, and the 32-byte class holds what parked
    /// connections keep (the claim's key, the parking slot's waker), whose slabs a wave of
    /// revived connections would leave part-used (issue 33).
    pub(crate) fn from_lone(lone: Option<(ChannelName, Granted)>) -> Self {
        let mut exact = Vec::new();
        exact.extend(lone);
        Subscriptions {
            exact,
            ..Subscriptions::default()
        }
    }

    /// Keys the exact subscription to `name`'s channel by `name` (the hub's own copy of it,
    /// which the client session's subscription holds too), so the connection keeps no copy of
    /// its own.
    pub(crate) fn share_name(&mut self, name: &ChannelName) {
        if let Ok(at) = self.find(name) {
            self.exact[at].0 = name.clone();
        }
    }

    fn find(&self, channel: &ChannelName) -> Result<usize, usize> {
        self.exact.binary_search_by(|(c, _)| c.cmp(channel))
    }

    /// The options of the exact subscription to `channel`, if there is one.
    pub(crate) fn exact(&self, channel: &ChannelName) -> Option<Granted> {
        self.find(channel).ok().map(|at| self.exact[at].1)
    }

    /// What a message of `channel` goes out with, through the channel's exact subscription and
    /// the filters that match it (see the module doc); `None` when none does.
    pub(crate) fn get(&self, channel: &ChannelName) -> Option<Granted> {
        let exact = self.exact(channel);
        if self.filters.is_empty() && self.shared.is_empty() {
            return exact;
        }
        self.filters
            .iter()
            .filter(|(f, _)| f.matches_local(channel.public()))
            .map(|(_, g)| *g)
            .chain(self.shared.matching(channel))
            .chain(exact)
            .reduce(Granted::with)
    }

    /// The subscriptions a v5 connection sends a message of `channel` through, one copy each,
    /// lowest QoS first (so a conforming client's in-order acknowledgements settle every copy
    /// of a message before it completes a QoS 2 one): the exact subscription, then the filters
    /// in the order made. `None` (no allocation) when fewer than two match, or when a shared
    /// subscription matches too (see the module doc): the message then goes out once, as
    /// [`Subscriptions::get`] says.
    pub(crate) fn copies(&self, channel: &ChannelName) -> Option<Vec<Granted>> {
        if self.filters.is_empty() {
            return None;
        }
        let mut matching = self.exact(channel).into_iter().chain(
            self.filters
                .iter()
                .filter(|(f, _)| f.matches_local(channel.public()))
                .map(|(_, g)| *g),
        );
        let (first, second) = (matching.next()?, matching.next()?);
        if self.shared.matching(channel).next().is_some() {
            return None;
        }
        let mut copies = vec![first, second];
        copies.extend(matching);
        copies.sort_by_key(|g| g.qos);
        Some(copies)
    }

    /// The Subscription Identifiers of every subscription matching `channel` (exact, wildcard,
    /// shared), ascending, each once; empty (no allocation) when none has one.
    pub(crate) fn identifiers(&self, channel: &ChannelName) -> Vec<NonZeroU32> {
        let exact = self.exact(channel);
        let mut ids: Vec<NonZeroU32> = if self.filters.is_empty() && self.shared.is_empty() {
            exact.and_then(|g| g.identifier).into_iter().collect()
        } else {
            self.filters
                .iter()
                .filter(|(f, _)| f.matches_local(channel.public()))
                .map(|(_, g)| *g)
                .chain(self.shared.matching(channel))
                .chain(exact)
                .filter_map(|g| g.identifier)
                .collect()
        };
        if ids.len() > 1 {
            ids.sort_unstable();
            ids.dedup();
        }
        ids
    }

    /// Records (or replaces) the subscription to `channel`; returns whether it is new.
    pub(crate) fn insert(&mut self, channel: ChannelName, granted: Granted) -> bool {
        match self.find(&channel) {
            Ok(at) => {
                self.exact[at].1 = granted;
                false
            }
            Err(at) => {
                self.exact.insert(at, (channel, granted));
                true
            }
        }
    }

    /// Forgets the subscription to `channel`; returns whether there was one.
    pub(crate) fn remove(&mut self, channel: &ChannelName) -> bool {
        match self.find(channel) {
            Ok(at) => {
                self.exact.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    /// Whether one of the connection's own wildcard filters (not a shared subscription's)
    /// matches `channel`: every message of it reaches the connection, so a persistent session
    /// keeps a position in it (`crate::session`).
    pub(crate) fn filter_matches(&self, channel: &ChannelName) -> bool {
        self.filters
            .iter()
            .any(|(f, _)| f.matches_local(channel.public()))
    }

    /// The options of the wildcard subscription to `filter`, if there is one.
    pub(crate) fn filter(&self, filter: &str) -> Option<Granted> {
        self.filters
            .iter()
            .find(|(f, _)| f.as_str() == filter)
            .map(|(_, g)| *g)
    }

    /// Records (or replaces the options of) the wildcard subscription to `filter`, registering
    /// it in `registry` for `app`'s channels, queued to `outbox` (what `admit` admits, if
    /// given: it is set with the first filter); returns whether it is new.
    pub(crate) fn insert_filter(
        &mut self,
        filter: TopicFilter,
        granted: Granted,
        registry: &Arc<FilterRegistry>,
        (app, outbox, admit): (&AppId, &Arc<Outbox>, Option<Admit>),
    ) -> bool {
        if let Some((_, g)) = self
            .filters
            .iter_mut()
            .find(|(f, _)| f.as_str() == filter.as_str())
        {
            *g = granted;
            return false;
        }
        let registered = self.registered.get_or_insert_with(|| {
            Box::new(Registered {
                hub: None,
                retained: RetainedWindow::default(),
            })
        });
        registered
            .hub
            .get_or_insert_with(|| registry.subscriber(app, outbox.clone(), admit))
            .add(filter.clone());
        self.filters.push((filter, granted));
        true
    }

    /// Ends the wildcard subscription to `filter`; returns whether there was one.
    pub(crate) fn remove_filter(&mut self, filter: &str) -> bool {
        let Some(at) = self.filters.iter().position(|(f, _)| f.as_str() == filter) else {
            return false;
        };
        self.filters.remove(at);
        if let Some(hub) = self.registered.as_mut().and_then(|r| r.hub.as_mut()) {
            hub.remove(filter);
        }
        true
    }

    /// How many subscriptions the connection holds, exact, wildcard and shared.
    pub(crate) fn len(&self) -> usize {
        self.exact.len() + self.filters.len() + self.shared.len()
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
            identifier: None,
        }
    }

    #[test]
    fn a_revived_lone_subscription_is_kept_as_a_first_subscribe_keeps_it() {
        // Room for four (96 bytes), as the first SUBSCRIBE's insert makes: not one (24 bytes,
        // jemalloc's 32-byte class, where parked connections keep their claim's key and their
        // slot's waker; the list is freed when the connection parks again).
        let news = ChannelName::parse("news").expect("a channel");
        let mut subscribed = Subscriptions::default();
        subscribed.insert(news.clone(), granted(QoS::AtMostOnce));
        let revived = Subscriptions::from_lone(Some((news.clone(), granted(QoS::AtMostOnce))));
        assert_eq!(revived.exact.capacity(), subscribed.exact.capacity());
        assert!(revived.exact.capacity() * size_of::<(ChannelName, Granted)>() > 32);
        assert_eq!(revived.get(&news), Some(granted(QoS::AtMostOnce)));
        assert_eq!(Subscriptions::from_lone(None).exact.capacity(), 0);
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

    fn options(qos: QoS, retain_as_published: bool, no_local: bool) -> Granted {
        Granted {
            qos,
            retain_as_published,
            no_local,
            identifier: None,
        }
    }

    #[test]
    fn a_message_matching_several_subscriptions_goes_out_once_with_the_highest_qos() {
        let registry = FilterRegistry::new();
        let app = AppId::default_app();
        let outbox = Outbox::new(1 << 20);
        let mut subs = Subscriptions::default();
        let add = |subs: &mut Subscriptions, f: &str, g: Granted| {
            let filter = TopicFilter::parse(f).unwrap();
            subs.insert_filter(filter, g, &registry, (&app, &outbox, None))
        };
        assert!(add(&mut subs, "a/+", options(QoS::AtMostOnce, false, true)));
        assert!(add(&mut subs, "a/#", options(QoS::AtLeastOnce, true, true)));
        assert!(!add(
            &mut subs,
            "a/#",
            options(QoS::AtLeastOnce, false, true)
        ));
        assert_eq!(
            subs.filter("a/#"),
            Some(options(QoS::AtLeastOnce, false, true))
        );
        assert_eq!(registry.count(&app), 4);
        let ab = ChannelName::parse("a/b").unwrap();
        assert_eq!(subs.get(&ab), Some(options(QoS::AtLeastOnce, false, true)));
        assert_eq!(subs.exact(&ab), None);
        let a = ChannelName::parse("a").unwrap();
        assert_eq!(subs.get(&a), Some(options(QoS::AtLeastOnce, false, true)));
        assert_eq!(subs.get(&ChannelName::parse("b").unwrap()), None);
        // An exact subscription counts too: No Local only if every one asked.
        subs.insert(ab.clone(), options(QoS::AtMostOnce, true, false));
        assert_eq!(subs.get(&ab), Some(options(QoS::AtLeastOnce, true, false)));
        assert!(subs.remove_filter("a/+"));
        assert!(!subs.remove_filter("a/+"));
        assert_eq!(subs.len(), 2);
        drop(subs);
        assert_eq!(registry.count(&app), 0, "dropped with the connection");
    }

    #[test]
    fn a_v5_copy_goes_through_each_matching_subscription_lowest_qos_first() {
        let registry = FilterRegistry::new();
        let app = AppId::default_app();
        let outbox = Outbox::new(1 << 20);
        let mut subs = Subscriptions::default();
        let with = |qos: QoS, n: u32| Granted {
            identifier: NonZeroU32::new(n),
            ..granted(qos)
        };
        let ab = ChannelName::parse("a/b").unwrap();
        subs.insert(ab.clone(), with(QoS::ExactlyOnce, 1));
        assert_eq!(subs.copies(&ab), None, "one subscription: one delivery");
        let add = |subs: &mut Subscriptions, f: &str, g: Granted| {
            let filter = TopicFilter::parse(f).unwrap();
            subs.insert_filter(filter, g, &registry, (&app, &outbox, None))
        };
        add(&mut subs, "a/#", with(QoS::AtLeastOnce, 2));
        add(&mut subs, "x/#", with(QoS::AtMostOnce, 3));
        add(&mut subs, "+/b", with(QoS::AtMostOnce, 4));
        assert_eq!(
            subs.copies(&ab),
            Some(vec![
                with(QoS::AtMostOnce, 4),
                with(QoS::AtLeastOnce, 2),
                with(QoS::ExactlyOnce, 1)
            ])
        );
        assert_eq!(subs.copies(&ChannelName::parse("a/c").unwrap()), None);
        assert_eq!(subs.copies(&ChannelName::parse("x/y").unwrap()), None);
    }

    #[test]
    fn a_message_carries_the_identifiers_of_every_matching_subscription() {
        let registry = FilterRegistry::new();
        let app = AppId::default_app();
        let outbox = Outbox::new(1 << 20);
        let mut subs = Subscriptions::default();
        let id = |n: u32| NonZeroU32::new(n);
        let with_id = |n: u32| Granted {
            identifier: id(n),
            ..granted(QoS::AtLeastOnce)
        };
        let ab = ChannelName::parse("a/b").unwrap();
        assert!(subs.identifiers(&ab).is_empty());
        subs.insert(ab.clone(), with_id(7));
        assert_eq!(subs.identifiers(&ab), vec![id(7).unwrap()]);
        let add = |subs: &mut Subscriptions, f: &str, g: Granted| {
            let filter = TopicFilter::parse(f).unwrap();
            subs.insert_filter(filter, g, &registry, (&app, &outbox, None))
        };
        add(&mut subs, "a/#", with_id(3));
        add(&mut subs, "a/+", granted(QoS::AtMostOnce));
        add(&mut subs, "+/b", with_id(7));
        add(&mut subs, "x/#", with_id(9));
        assert_eq!(subs.identifiers(&ab), vec![id(3).unwrap(), id(7).unwrap()]);
        // A SUBSCRIBE without one replaces the subscription's identifier with none.
        subs.insert(ab.clone(), granted(QoS::AtLeastOnce));
        subs.remove_filter("+/b");
        assert_eq!(subs.identifiers(&ab), vec![id(3).unwrap()]);
    }
}
