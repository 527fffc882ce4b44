//! Wildcard subscriptions (`+`, `#`; docs/design/mqtt.md, "Wildcards"): SUBSCRIBE and
//! UNSUBSCRIBE of a filter, who may make one, and the retained messages it is sent. What a
//! message matching several subscriptions goes out with is `subscriptions.rs`'s.
//!
//! A filter is registered in core's filter registry ([`herald_core::hub::filters`], through
//! [`crate::subscriptions::Subscriptions::insert_filter`]), which queues matching messages to the
//! connection's outbox as its exact subscriptions do; the filter itself is matched on the topic
//! each channel maps back to, with [MQTT-4.7.2-1]'s `$` exclusion, and never reaches an app's
//! push logs.
//!
//! **Who may.** An anonymous client as its rules say ([`crate::access::Rules::may_subscribe`]:
//! 0x87 when refused); each message reaching it through a filter is checked against the deny
//! rules ([`crate::access::Rules::may_receive`], core's per-subscriber admit), as Mosquitto
//! checks read access per delivery. A client with a token may
//! subscribe to a filter only when its token allows every channel the filter can match
//! ([`token_covers`]): one of its channel patterns must cover all the plain channels the
//! filter matches (a `*` segment for each `+`, a final `**` for `#`, and the parent level a `#`
//! also matches allowed as a channel), and one (the same or another) all the encoded ones
//! (`=` and the escaped levels: `sensors/+` needs `sensors/*` and `=sensors/*`, since
//! `sensors/living room` is the channel `=sensors/living=20room`). `**` covers every filter.
//! Anything else is refused with 0x87: never a subscription that could see a channel the token
//! does not allow.
//!
//! **Persistent sessions** keep a filter with its options (`crate::session`) and register it
//! again when the session resumes ([`resume`]); what matched it while the client was away is
//! replayed from the channels' logs (`crate::session`'s `missed.rs`, which finds the channels
//! with [`list_matching`]).
//!
//! **Retained messages.** A SUBSCRIBE that asks for them (Retain Handling 0, or 1 for a new
//! subscription) is sent the retained message (`retained.rs`) of every channel the filter
//! matches, in name order: the store's retained messages are read by the filter's prefixes, all
//! of them up to `mqtt.max_retained_per_filter` (default 10,000; among at most four times as
//! many stored retained messages looked at per prefix, those of other apps or not matching the
//! wildcards), and the first 1,000 channels of each prefix are listed for a newest message of
//! another transport (read only where the channel's newest seq is not its stored retained
//! message's). A message committed before the filter was registered never reaches it live
//! (core's filters, "Commits before a filter"; in a cluster, of what reaches the node's
//! fan-out as it is committed): it is sent only as the retained message read, with RETAIN 1,
//! or not at all. The filter is registered before they are read, so a message published
//! meanwhile may reach the outbox live and be read as a retained message too: the
//! connection's writer sends it once, and nothing older after it (`retained_window.rs`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use herald_core::engine::Engine;
use herald_core::hub::Admit;
use herald_core::log::{ChannelState, ReadFrom};
use herald_core::message::{SharedMessage, StoredMessage};
use herald_core::name::topic::filter::TopicFilter;
use herald_core::name::topic::{encode_levels, ENCODED_PREFIX};
use herald_core::pattern::{ChannelPattern, PatternSet};
use herald_core::tenant::AppId;
use herald_core::ChannelName;
use herald_edge::session::{check_limit, Wanted};

use crate::packet::{QoS, ReasonCode, RetainHandling, SubscriptionOptions};
use crate::subscriptions::Granted;
use crate::wire::MqttWire;

/// Channels listed per filter prefix to find the newest messages of other transports (which
/// the store keeps no retained message for).
const LISTED_PER_PREFIX: usize = 1000;

/// Stored retained messages read per page.
const RETAINED_PAGE: usize = 500;

/// Stored retained messages looked at per filter prefix (of other apps, or not matching the
/// filter's wildcards), per retained message a SUBSCRIBE may be sent
/// (`mqtt.max_retained_per_filter`).
const LOOKED_AT_PER_RETAINED: usize = 4;

/// Subscribes the connection to wildcard `filter` (valid, no `$share/`) with `granted` (what
/// the SUBSCRIBE asked), adding the retained messages it is sent to `after_suback` (queued once
/// the SUBACK is, `crate::inbound`); the QoS granted, or the refusal.
pub(crate) async fn subscribe(
    wire: &mut MqttWire,
    filter: &str,
    options: &SubscriptionOptions,
    granted: Granted,
    after_suback: &mut Vec<SharedMessage>,
) -> Result<QoS, (ReasonCode, String)> {
    let parsed = allowed(wire, filter)?;
    let app = wire
        .session
        .client()
        .map_err(|e| (ReasonCode::NotAuthorized, e.message))?
        .app
        .clone();
    let exists = wire.subscriptions.filter(filter).is_some();
    if !exists {
        check_limit(
            wire.session.edge(),
            Wanted::OneMore {
                held: wire.subscriptions.len(),
            },
        )
        .map_err(|e| (ReasonCode::QuotaExceeded, e.message))?;
    }
    let send_retained = match options.retain_handling {
        RetainHandling::SendAtSubscribe => true,
        RetainHandling::SendAtSubscribeIfNew => !exists,
        RetainHandling::DoNotSend => false,
    };
    register(wire, &app, parsed.clone(), granted);
    // In a cluster, answered once every node sends the app's messages to this node's filters
    // (core's `FilterRegistry::feed_ready`; at once on one node).
    let registry = wire.session.edge().engine.filters().clone();
    registry.feed_ready(&app).await;
    // A persistent session keeps the filter with its options (`crate::session`).
    wire.session_subscribed_filter(filter, options, granted);
    if send_retained {
        send_retained_messages(wire, &app, &parsed, after_suback).await;
    }
    if crate::sys::is_sys_topic(filter) {
        wire.follow_sys(filter, send_retained.then_some(after_suback));
    }
    Ok(granted.qos)
}

/// Registers wildcard `filter` of a resumed persistent session again with its stored options
/// (no retained messages; what matched it while the client was away is the session's to
/// replay, `crate::session`); `false` when the client may no longer subscribe to it.
pub(crate) fn resume(wire: &mut MqttWire, filter: &str, granted: Granted) -> bool {
    let Ok(parsed) = allowed(wire, filter) else {
        return false;
    };
    let Ok(app) = wire.session.client().map(|c| c.app.clone()) else {
        return false;
    };
    register(wire, &app, parsed, granted);
    if crate::sys::is_sys_topic(filter) {
        wire.follow_sys(filter, None);
    }
    true
}

/// Registers `filter` in the hub's filter registry for the connection (see
/// [`crate::subscriptions::Subscriptions::insert_filter`]).
fn register(wire: &mut MqttWire, app: &AppId, filter: TopicFilter, granted: Granted) {
    let registry = wire.session.edge().engine.filters().clone();
    let outbox = wire.session.outbox().clone();
    // An anonymous client's deliveries through filters are checked against its deny rules,
    // and a resuming persistent session's held back while it finds what its filters missed
    // (`crate::session`'s `missed.rs`: the gate says which channels came meanwhile).
    let rules = wire.anonymous.clone();
    let gate = wire.persist.as_ref().and_then(|p| p.resume_gate());
    let admit = (rules.is_some() || gate.is_some()).then(|| -> Admit {
        Arc::new(move |m: &StoredMessage| {
            rules
                .as_ref()
                .is_none_or(|rules| rules.may_receive(&m.channel.topic()))
                && gate.as_ref().is_none_or(|gate| gate.admit(m))
        })
    });
    wire.subscriptions
        .insert_filter(filter, granted, &registry, (app, &outbox, admit));
}

/// `filter` parsed, if the client may subscribe to it (see the module doc); the refusal
/// otherwise.
fn allowed(wire: &MqttWire, filter: &str) -> Result<TopicFilter, (ReasonCode, String)> {
    let client = wire
        .session
        .client()
        .map_err(|e| (ReasonCode::NotAuthorized, e.message))?;
    let parsed =
        TopicFilter::parse(filter).map_err(|e| (ReasonCode::TopicFilterInvalid, e.message))?;
    match &wire.anonymous {
        Some(rules) => {
            if let Some(code) = rules.may_subscribe(filter).refusal_code() {
                return Err((
                    code,
                    format!("anonymous clients may not subscribe to {filter:?}"),
                ));
            }
        }
        None if !token_covers(&client.subscribe, &parsed) => {
            return Err((
                ReasonCode::NotAuthorized,
                format!(
                    "the token does not allow every channel {filter:?} can match (for a \
                     wildcard filter its channel patterns must cover the plain and the \
                     '='-encoded channels: docs/mqtt.md, \"Wildcards\")"
                ),
            ));
        }
        None => {}
    }
    Ok(parsed)
}

/// Ends the connection's subscription to wildcard `filter`; whether there was one.
pub(crate) fn unsubscribe(wire: &mut MqttWire, filter: &str) -> bool {
    let held = wire.subscriptions.remove_filter(filter);
    if held {
        wire.session_unsubscribed_filter(filter);
    }
    held
}

/// Adds to `after_suback` the retained message (`retained.rs`) of each channel of `app` that
/// `filter` matches, in name order, marked in the connection's retained window so that a live copy of one goes
/// out once. The store's retained messages are all read, by prefix, up to
/// `mqtt.max_retained_per_filter`; the newest message of another transport's channels is
/// looked for among the first [`LISTED_PER_PREFIX`] channels of each prefix (see the module
/// doc). A failed read leaves out what it would have found: live messages still arrive.
async fn send_retained_messages(
    wire: &mut MqttWire,
    app: &AppId,
    filter: &TopicFilter,
    after_suback: &mut Vec<SharedMessage>,
) {
    let max_retained = usize::from(wire.settings.max_retained_per_filter);
    if max_retained == 0 {
        return;
    }
    let engine = wire.session.edge().engine.clone();
    let wanted = |wire: &MqttWire, name: &ChannelName| {
        filter.matches_local(name.public())
            && app.owns_plain_channel(name.as_str())
            // An anonymous client's deny rules hold for retained messages as for live ones.
            && wire
                .anonymous
                .as_ref()
                .is_none_or(|rules| rules.may_receive(&name.topic()))
    };
    let scope = app.scope_prefix();
    let prefixes: Vec<&str> = filter.prefixes().collect();
    // A prefix another one covers (`#`'s `=` under its ``) is read once.
    let distinct = |i: usize| !prefixes[..i].iter().any(|p| prefixes[i].starts_with(p));
    let mut found: BTreeMap<ChannelName, SharedMessage> = BTreeMap::new();
    // The store's retained messages, complete up to the bound.
    'stored: for (i, prefix) in prefixes.iter().enumerate() {
        if !distinct(i) {
            continue;
        }
        let full = format!("{scope}{prefix}");
        let mut after: Option<String> = None;
        let mut looked_at = 0;
        loop {
            let Ok(page) = engine
                .retained_under(&full, after.as_deref(), RETAINED_PAGE)
                .await
            else {
                break;
            };
            let read = page.len();
            for message in page {
                looked_at += 1;
                after = Some(message.channel.as_str().to_owned());
                if !wanted(wire, &message.channel) {
                    continue;
                }
                if found.len() >= max_retained {
                    break 'stored;
                }
                found.insert(message.channel.clone(), message);
            }
            if read < RETAINED_PAGE || looked_at >= max_retained * LOOKED_AT_PER_RETAINED {
                break;
            }
        }
    }
    // The newest message of each channel, where it may be another transport's and newer.
    for (i, prefix) in prefixes.iter().enumerate() {
        if !distinct(i) {
            continue;
        }
        for (name, state) in list_matching(&engine, app, prefix, LISTED_PER_PREFIX).await {
            if !wanted(wire, &name) {
                continue;
            }
            let stored = found.get(&name);
            let newest_is_stored = match (&state, stored) {
                (Some(state), Some(stored)) => {
                    state.epoch == stored.epoch && state.last_seq == stored.seq
                }
                _ => false,
            };
            if newest_is_stored || (stored.is_none() && found.len() >= max_retained) {
                continue;
            }
            let Ok(slice) = engine.read(&name, ReadFrom::Tail(1), 1).await else {
                continue;
            };
            let newest = slice.messages.into_iter().last();
            match crate::retained::choose(newest, stored.cloned()) {
                Some(message) => found.insert(name, message),
                None => found.remove(&name),
            };
        }
    }
    if !found.is_empty() {
        // A persistent session's position does not start at a retained message older than
        // the filter (`crate::session`'s `missed.rs`).
        wire.retained_for_filter(filter.as_str(), found.values());
        // Marked before the writer can take them: it runs only once this SUBSCRIBE is handled.
        wire.subscriptions
            .retained_queued(found.values().map(|m| &**m));
        after_suback.extend(found.into_values());
    }
}

/// The channels of `app` with messages under the filter prefix `prefix` (one of
/// [`TopicFilter::prefixes`]), in name order: the channel the prefix names itself (`a/#`
/// matches `a`; its state not read, `None`) first, then those listed below it, at most
/// `max_listed` looked at. Whether the filter matches each is the caller's to ask; a failed
/// listing ends the list.
pub(crate) async fn list_matching(
    engine: &Engine,
    app: &AppId,
    prefix: &str,
    max_listed: usize,
) -> Vec<(ChannelName, Option<ChannelState>)> {
    let scope = app.scope_prefix();
    let mut names = Vec::new();
    let full = format!("{scope}{prefix}");
    if !prefix.is_empty() && prefix != "=" {
        if let Ok(name) = app.parse_channel(prefix) {
            names.push((name, None));
        }
    }
    let below = match prefix {
        "" => scope.clone(),
        "=" => full.clone(),
        _ => format!("{full}/"),
    };
    let mut after = below.clone();
    let mut listed = 0;
    'pages: while listed < max_listed {
        let Ok(page) = engine
            .list(Some(&after), 100.min(max_listed - listed))
            .await
        else {
            break;
        };
        if page.is_empty() {
            break;
        }
        for state in page {
            listed += 1;
            let name = state.name.as_str();
            if !name.starts_with(&below) {
                break 'pages;
            }
            after = name.to_owned();
            if state.last_seq > 0 && app.owns_plain_channel(name) {
                names.push((state.name.clone(), Some(state)));
            }
        }
    }
    names
}

/// Whether the token's channel patterns allow every channel `filter` can match (see the
/// module doc): sound, not complete; what it cannot show is refused.
pub(crate) fn token_covers(patterns: &PatternSet, filter: &TopicFilter) -> bool {
    if patterns.patterns().any(|p| p == "**") {
        return true;
    }
    let levels: Vec<&str> = filter.as_str().split('/').collect();
    // Plain channels: only if every literal level can be a plain channel's segment.
    let plain_possible = levels
        .iter()
        .enumerate()
        .all(|(i, l)| matches!(*l, "+" | "#") || is_plain_segment(l, i == 0));
    let plain: Vec<Cow<'_, str>> = levels.iter().map(|l| Cow::Borrowed(*l)).collect();
    let encoded: Vec<Cow<'_, str>> = levels
        .iter()
        .enumerate()
        .map(|(i, l)| match *l {
            "+" | "#" => Cow::Borrowed(*l),
            _ => {
                // The level escaped as the encoding writes it (the first with its `=`).
                let escaped = encode_levels(l);
                Cow::Owned(if i == 0 {
                    escaped
                } else {
                    escaped[1..].to_owned()
                })
            }
        })
        .collect();
    let covered = |levels: &[Cow<'_, str>], encoded: bool| {
        patterns
            .patterns()
            .any(|p| pattern_covers(p, levels, encoded))
    };
    // A trailing `#` also matches its parent level: that channel must be allowed as well.
    let parent_allowed = match filter.as_str().strip_suffix("/#") {
        Some(parent) if !parent.contains(['+', '#']) => ChannelName::from_topic(parent)
            .map_or(true, |channel| patterns.allows(channel.as_str())),
        Some(_) => {
            // `+/#`-like: the parent has wildcards itself; covered when the filter without
            // its `/#` is.
            match TopicFilter::parse(filter.as_str().trim_end_matches("/#")) {
                Ok(parent) => token_covers(patterns, &parent),
                Err(_) => false,
            }
        }
        None => true,
    };
    (!plain_possible || covered(&plain, false)) && covered(&encoded, true) && parent_allowed
}

/// Whether topic level `level` can be a segment of a plain channel (one that is its own
/// topic): channel-name bytes, not empty, `.` or `..`, and not starting with `=` when first.
fn is_plain_segment(level: &str, first: bool) -> bool {
    !level.is_empty()
        && level != "."
        && level != ".."
        && !(first && level.starts_with(ENCODED_PREFIX))
        && level
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:@=".contains(&b))
}

/// Whether channel pattern `pattern` matches every channel whose segments are `levels`, a
/// level being a literal segment, `+` (any one segment) or a last `#` (one or more segments;
/// its zero-segment case, the parent, is the caller's). In encoded channels the first segment
/// is `=` and something, which a first segment `=*` covers too.
fn pattern_covers(pattern: &str, levels: &[Cow<'_, str>], encoded: bool) -> bool {
    let segments: Vec<&str> = pattern.split('/').collect();
    for (i, level) in levels.iter().enumerate() {
        let Some(&segment) = segments.get(i) else {
            return false;
        };
        if segment == "**" && i + 1 == segments.len() {
            return true;
        }
        let ok = match &**level {
            "+" => segment == "*" || (encoded && i == 0 && segment == "=*"),
            "#" => false,
            literal => ChannelPattern::new(segment).matches(literal),
        };
        if !ok {
            return false;
        }
    }
    segments.len() == levels.len()
}

#[cfg(test)]
mod tests;
