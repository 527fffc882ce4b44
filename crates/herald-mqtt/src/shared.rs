//! Shared subscriptions (MQTT 5.0 4.8.2; `$share/{ShareName}/{filter}`, read the same way
//! from 3.1.1 clients, as Mosquitto does; docs/mqtt.md, "Shared subscriptions"): each message
//! matching a group's filter goes to **one** member session of the group.
//!
//! A group is core's ([`herald_core::hub::filters::shared`]): per app, share name and filter,
//! on this node, registered once in the filter registry, which queues each message of a
//! matching run to one member in turn (round-robin, passing over a member whose connection is
//! ending or whose outbox is full). The member sends it as any message it receives: at the
//! lower of the QoS it was published with and the QoS its subscription was granted
//! ([`crate::subscriptions::Subscriptions::get`], which counts the connection's shared
//! subscriptions with its others). The filter may be a plain topic (`$share/g/a/b`), matched
//! like a wildcard filter: a shared subscription has no position and no catch-up.
//!
//! **SUBSCRIBE** ([`subscribe`]): the ShareName rules and a malformed `$share` filter are the
//! codec's (`packet/topic.rs`: the connection closes with 0x8F Topic Filter invalid, or 0x82
//! Protocol Error for No Local on a shared subscription [MQTT-3.8.3-4]); the token's channel
//! patterns must cover the filter as for a wildcard subscription
//! ([`crate::wildcards::token_covers`], or the one channel of a plain topic), the anonymous
//! rules must allow it (both: 0x87); no retained message is sent on a shared SUBSCRIBE, as
//! MQTT 5.0 says of shared subscriptions (4.8.2).
//!
//! **A member that leaves** (its connection ends, whatever the reason) leaves its groups first
//! ([`MqttWire::leave_shared_groups`]), then hands what it had not acknowledged to the members
//! left: QoS 1 messages sent and not PUBACKed, QoS 1 and 2 messages waiting for its window or
//! still queued (those its subscription was granted QoS 1 or 2 for). A QoS 2 message sent and
//! not PUBRECed is not handed over: the client may have received it, and the standard says no
//! other client is sent it then [MQTT-4.8.2-5]. A message no member is
//! left for (in the cluster) is dropped (a persistent session does not keep it: the standard's "MAY").
//!
//! **Persistent sessions** keep their shared subscriptions as their other filters and join
//! the groups again when they resume ([`resume`]).
//!
//! **In a cluster** a group is one across the nodes (core's `shared::holders`, bus-redis's
//! `shares.rs`): each message goes to one member in the whole cluster, its owner node picked
//! by hashing the message over the nodes with members; a SUBSCRIBE is answered once this
//! node counts itself among them. A leaving member's unacknowledged messages go to a member
//! on another node when none is left on this one.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use herald_core::hub::filters::shared::{GroupHolders, GroupMembership, LeftGroup};
use herald_core::hub::Admit;
use herald_core::message::{SharedMessage, StoredMessage};
use herald_core::name::topic::filter::TopicFilter as ChannelFilter;
use herald_core::outbox::OutFrame;
use herald_core::ChannelName;
use herald_edge::session::{check_limit, Wanted};

use crate::origin;
use crate::packet::{QoS, ReasonCode, SubscriptionOptions, TopicFilter};
use crate::subscriptions::Granted;
use crate::wire::MqttWire;

/// How long a SUBSCRIBE in a cluster waits for this node to count itself among a new group's
/// holders (its announcement coming back through Redis) before it answers anyway.
const COUNTED_WAIT: Duration = Duration::from_secs(5);

/// One shared subscription of a connection.
struct Group {
    /// The filter as subscribed (`$share/{ShareName}/{filter}`).
    filter: Box<str>,
    granted: Granted,
    membership: GroupMembership,
}

/// A connection's shared subscriptions, and the messages it received through them and has not
/// acknowledged.
#[derive(Default)]
pub(crate) struct SharedGroups {
    groups: Vec<Group>,
    /// QoS 1 and 2 messages of channels a group matches, handled and not acknowledged.
    unacked: VecDeque<SharedMessage>,
}

impl SharedGroups {
    /// How many shared subscriptions the connection holds.
    pub(crate) fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether it holds none.
    pub(crate) fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Whether it holds no group and no message unacknowledged.
    pub(crate) fn is_unused(&self) -> bool {
        self.groups.is_empty() && self.unacked.is_empty()
    }

    /// The options of the shared subscriptions matching `channel`.
    pub(crate) fn matching<'a>(
        &'a self,
        channel: &'a ChannelName,
    ) -> impl Iterator<Item = Granted> + 'a {
        self.groups
            .iter()
            .filter(|g| {
                g.membership
                    .filter()
                    .is_some_and(|f| f.matches_local(channel.public()))
            })
            .map(|g| g.granted)
    }

    /// The options of the shared subscription `filter` (as subscribed), if held.
    fn get(&self, filter: &str) -> Option<Granted> {
        self.groups
            .iter()
            .find(|g| &*g.filter == filter)
            .map(|g| g.granted)
    }

    /// Keeps `message` (to go out at QoS 1 or 2) until it is acknowledged, if a shared
    /// subscription matches its channel: it is handed over should the connection end first.
    pub(crate) fn track(&mut self, message: &SharedMessage) {
        if self.is_empty() || self.matching(&message.channel).next().is_none() {
            return;
        }
        let held = self
            .unacked
            .iter()
            .any(|m| m.seq == message.seq && m.channel == message.channel);
        if !held {
            self.unacked.push_back(message.clone());
        }
    }

    /// The message `seq` of `channel` was acknowledged (PUBACK, PUBREC) or dropped.
    pub(crate) fn settled(&mut self, channel: &ChannelName, seq: u64) {
        if self.unacked.is_empty() {
            return;
        }
        if let Some(at) = self
            .unacked
            .iter()
            .position(|m| m.seq == seq && m.channel == *channel)
        {
            self.unacked.remove(at);
        }
    }
}

/// Subscribes the connection to shared subscription `filter` (`$share/{ShareName}/{filter}`,
/// valid as the codec checked it) with `granted` (what the SUBSCRIBE asked; No Local is
/// refused by the codec); the QoS granted, or the refusal.
pub(crate) async fn subscribe(
    wire: &mut MqttWire,
    filter: &str,
    options: &SubscriptionOptions,
    granted: Granted,
) -> Result<QoS, (ReasonCode, String)> {
    let (share_name, parsed) = allowed(wire, filter)?;
    let granted = Granted {
        no_local: false,
        ..granted
    };
    if wire.subscriptions.shared.get(filter).is_some() {
        // Replaced [MQTT-3.8.4-3]: new options, the same membership.
        if let Some(g) = wire
            .subscriptions
            .shared
            .groups
            .iter_mut()
            .find(|g| &*g.filter == filter)
        {
            g.granted = granted;
        }
    } else {
        check_limit(
            wire.session.edge(),
            Wanted::OneMore {
                held: wire.subscriptions.len(),
            },
        )
        .map_err(|e| (ReasonCode::QuotaExceeded, e.message))?;
        let holders = join(wire, filter, &share_name, parsed, granted);
        // In a cluster, answered once every node sends the app's messages here (as a filter),
        // and once this node counts itself among the group's holders: from then on, each
        // message goes to one member in the cluster, maybe here.
        if let Ok(app) = wire.session.client().map(|c| c.app.clone()) {
            let registry = wire.session.edge().engine.filters().clone();
            registry.feed_ready(&app).await;
        }
        if let Some(holders) = holders {
            holders.until_counted(COUNTED_WAIT).await;
        }
    }
    // A persistent session keeps it as it keeps a wildcard filter; no retained message is
    // sent on a shared subscription (MQTT 5.0 4.8.2).
    wire.session_subscribed_filter(filter, options, granted);
    Ok(granted.qos)
}

/// Joins the group of shared subscription `filter` of a resumed persistent session again, with
/// its stored options; `false` when the client may no longer subscribe to it. In a cluster,
/// the group's holders are added to `counting`: the resume waits ([`until_counted`]) until
/// this node counts itself among them before its CONNACK, as a SUBSCRIBE does before its
/// SUBACK.
pub(crate) fn resume(
    wire: &mut MqttWire,
    filter: &str,
    granted: Granted,
    counting: &mut Vec<Arc<GroupHolders>>,
) -> bool {
    let Ok((share_name, parsed)) = allowed(wire, filter) else {
        return false;
    };
    if wire.subscriptions.shared.get(filter).is_none() {
        let granted = Granted {
            no_local: false,
            ..granted
        };
        counting.extend(join(wire, filter, &share_name, parsed, granted));
    }
    true
}

/// Waits (at most [`COUNTED_WAIT`] each) until this node counts itself among each of
/// `holders`: from then on each message of their groups goes to one member in the cluster,
/// maybe here.
pub(crate) async fn until_counted(holders: &[Arc<GroupHolders>]) {
    for holders in holders {
        holders.until_counted(COUNTED_WAIT).await;
    }
}

/// Ends the connection's shared subscription `filter`; whether there was one. Its messages not
/// yet acknowledged stay with it (it holds them, and answers for them, until it ends).
pub(crate) fn unsubscribe(wire: &mut MqttWire, filter: &str) -> bool {
    let groups = &mut wire.subscriptions.shared.groups;
    let Some(at) = groups.iter().position(|g| &*g.filter == filter) else {
        return false;
    };
    groups.remove(at);
    wire.session_unsubscribed_filter(filter);
    true
}

/// Joins the group; its holders in the cluster, if it is in one.
fn join(
    wire: &mut MqttWire,
    filter: &str,
    share_name: &str,
    parsed: ChannelFilter,
    granted: Granted,
) -> Option<Arc<GroupHolders>> {
    let Ok(app) = wire.session.client().map(|c| c.app.clone()) else {
        return None;
    };
    let registry = wire.session.edge().engine.filters().clone();
    let outbox = wire.session.outbox().clone();
    // An anonymous client's deliveries are checked against its deny rules, as for filters.
    let admit = wire.anonymous.clone().map(|rules| -> Admit {
        Arc::new(move |m: &StoredMessage| rules.may_receive(&m.channel.topic()))
    });
    let membership = registry.join_group(&app, share_name, parsed, outbox, admit);
    let holders = membership.holders();
    wire.subscriptions.shared.groups.push(Group {
        filter: filter.into(),
        granted,
        membership,
    });
    holders
}

/// The share name and the filter of `filter` parsed, if the client may subscribe to it (see
/// the module doc); the refusal otherwise.
fn allowed(wire: &MqttWire, filter: &str) -> Result<(String, ChannelFilter), (ReasonCode, String)> {
    let client = wire
        .session
        .client()
        .map_err(|e| (ReasonCode::NotAuthorized, e.message))?;
    let invalid = |why: String| (ReasonCode::TopicFilterInvalid, why);
    let topic_filter = TopicFilter::new(filter).map_err(|e| invalid(e.to_string()))?;
    let Some(shared) = topic_filter.shared() else {
        return Err(invalid(format!("{filter:?} is not a shared subscription")));
    };
    let inner = shared.filter;
    let parsed = ChannelFilter::parse_any(inner).map_err(|e| invalid(e.message))?;
    let refused = |why: String| Err((ReasonCode::NotAuthorized, why));
    match &wire.anonymous {
        Some(rules) => {
            if let Some(code) = rules.may_subscribe(inner).refusal_code() {
                return Err((
                    code,
                    format!("anonymous clients may not subscribe to {inner:?}"),
                ));
            }
        }
        None if topic_filter.has_wildcards() => {
            if !crate::wildcards::token_covers(&client.subscribe, &parsed) {
                return refused(format!(
                    "the token does not allow every channel {inner:?} can match (docs/mqtt.md, \
                     \"Wildcards\" and \"Shared subscriptions\")"
                ));
            }
        }
        None => {
            // A plain topic: its one channel, as an exact subscription is checked.
            let channel = ChannelName::from_topic(inner).map_err(|e| invalid(e.message))?;
            if !client.subscribe.allows(channel.as_str()) {
                return refused(format!("the token does not allow the channel of {inner:?}"));
            }
        }
    }
    Ok((shared.share_name.to_owned(), parsed))
}

impl MqttWire {
    /// The connection ends: it leaves its groups, then hands each message it received through
    /// them and had not acknowledged to a member left (see the module doc).
    pub(crate) fn leave_shared_groups(&mut self) {
        let shared = std::mem::take(&mut self.subscriptions.shared);
        if shared.is_empty() {
            return;
        }
        let granted_at_least_once: Vec<bool> = shared
            .groups
            .iter()
            .map(|g| g.granted.qos != QoS::AtMostOnce)
            .collect();
        let left: Vec<LeftGroup> = shared
            .groups
            .into_iter()
            .map(|g| g.membership.leave())
            .collect();
        // What was queued and never handled: the messages a group granted QoS 1 or 2 for.
        let (queued, _) = self.session.outbox().take();
        let queued = queued.into_iter().filter_map(|frame| match frame {
            OutFrame::Message(m) if origin::of(&m).qos != QoS::AtMostOnce => Some(m),
            _ => None,
        });
        // A QoS 2 PUBLISH it was sent and has not answered with PUBREC stays its own: the
        // client may have it, so no other member is sent it [MQTT-4.8.2-5].
        let sent_qos2: Vec<(&ChannelName, u64)> = self
            .outbound
            .unacknowledged()
            .filter(|sent| sent.qos == QoS::ExactlyOnce)
            .map(|sent| (&sent.channel, sent.seq))
            .collect();
        let mut handed = Vec::new();
        let mut lost = 0usize;
        for message in shared.unacked.iter().cloned().chain(queued) {
            if sent_qos2.contains(&(&message.channel, message.seq)) {
                continue;
            }
            let group = left.iter().zip(&granted_at_least_once).find(|(g, qos1)| {
                **qos1
                    && g.filter()
                        .is_some_and(|f| f.matches_local(message.channel.public()))
            });
            match group {
                Some((group, _)) if group.hand_over(&message) => handed.push(message),
                Some(_) => lost += 1,
                None => {}
            }
        }
        // Another member has them now: a persistent session does not send them again when it
        // resumes (`crate::session`'s `resend.rs`).
        for message in &handed {
            for sent in self.outbound.forget(message) {
                self.qos1_acknowledged(&sent);
            }
        }
        let handed = handed.len();
        if handed + lost > 0 {
            tracing::debug!(
                client_id = self.claim.client_id(),
                handed,
                lost,
                "MQTT: a shared subscription member left; its unacknowledged messages handed over"
            );
        }
    }
}
