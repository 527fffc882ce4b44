//! The `$SYS/` tree: the server's statistics as read-only topics, as Mosquitto publishes them
//! (docs/mqtt.md, "`$SYS/` statistics").
//!
//! **Where the values come from**: the process's Prometheus registry, the figures `/metrics`
//! serves, read back from its text ([`Render`], which `herald-server` gives
//! [`crate::session::Sessions::start_sys`]); nothing here counts anything of its own. So the
//! values are **this node's** (a process's registry), not the cluster's, and every app's
//! together, as Mosquitto's are its broker's:
//!
//! | topic | value |
//! |---|---|
//! | `$SYS/broker/version` | `herald version X.Y.Z` |
//! | `$SYS/broker/uptime` | `N seconds` since the MQTT sessions started |
//! | `$SYS/broker/clients/connected` | the sum of `herald_app_connections`: client connections, every transport |
//! | `$SYS/broker/messages/received` | `herald_published_messages_total` |
//! | `$SYS/broker/messages/sent` | `herald_deliveries_total` |
//! | `$SYS/broker/subscriptions/count` | `herald_subscriptions` (channel subscriptions) |
//! | `$SYS/broker/load/messages/{received,sent}/{1min,5min,15min}` | the two counters' rate per minute, as moving averages over those windows |
//!
//! **How they go out**: every `mqtt.sys_interval` seconds the values are read, and those that
//! changed are queued to each connection that subscribed to a `$SYS/` topic or filter, at QoS
//! 0; a SUBSCRIBE is sent the current values it matches at once, as retained messages
//! (Mosquitto publishes them retained). They are messages of this module's own, never stored
//! in a channel's log: their epoch is `$SYS`, which `deliver.rs` recognises (no
//! session position, QoS 0). Who may subscribe is checked as for any topic (`$SYS/...` is
//! the channel `==24SYS/...`: an API key may, a token needs a pattern covering it). A
//! connection's registration lasts while it does (its outbox is held weakly); one that
//! unsubscribed is queued messages its subscriptions no longer match, which `deliver.rs`
//! drops.
//!
//! **Read-only**: a PUBLISH to a `$SYS/` topic is refused (`refuse_publish`: 0x87 Not
//! authorized in v5's PUBACK or PUBREC; 3.1.1 acknowledged and dropped; QoS 0 dropped).

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use herald_core::message::SharedMessage;
use herald_core::name::topic::filter::TopicFilter;
use herald_core::outbox::{OutFrame, Outbox};
use herald_core::tenant::AppId;
use herald_core::{Epoch, StoredMessage};

use crate::packet::ReasonCode;
use crate::payload::{self, MessageProps};
use crate::wire::MqttWire;

/// Renders the process's metrics as Prometheus text (what `/metrics` serves).
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// The epoch of every `$SYS/` message (no channel's: a channel epoch is never `$`-led).
pub(crate) const SYS_EPOCH: &str = "$SYS";

/// Every `$SYS/` topic starts with this.
const PREFIX: &str = "$SYS/";

/// The moving averages' windows, in seconds, and their topics' last level.
const WINDOWS: [(f64, &str); 3] = [(60.0, "1min"), (300.0, "5min"), (900.0, "15min")];

/// The `$SYS/` tree of one listener: the values, and the connections that follow them.
pub struct SysTree {
    /// `mqtt.sys_interval`, in seconds (0: off).
    interval_secs: u32,
    started: Instant,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The current value of each topic, in a fixed order.
    values: Vec<(String, String)>,
    /// How many times the values were read.
    reads: u64,
    /// The counters the loads are averaged from, when last read.
    last: Option<(Instant, [f64; 2])>,
    /// The loads: received and sent, per window, messages per minute.
    loads: [[f64; 3]; 2],
    /// The connections that subscribed to a `$SYS/` topic or filter.
    followers: Vec<(AppId, Weak<Outbox>)>,
}

impl SysTree {
    /// A tree published every `interval_secs` seconds (0: never) once started.
    pub(crate) fn new(interval_secs: u32) -> Self {
        SysTree {
            interval_secs,
            started: Instant::now(),
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the values from `render` now and then every interval on the current runtime,
    /// queuing those that changed to the connections that follow them, while the tree lives.
    /// Does nothing with an interval of 0.
    pub(crate) fn start(self: &Arc<Self>, render: Render) {
        if self.interval_secs == 0 {
            return;
        }
        self.read(&render());
        let weak = Arc::downgrade(self);
        let every = Duration::from_secs(u64::from(self.interval_secs));
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                // Rendering folds histogram samples: off the runtime's workers.
                let render = render.clone();
                let Ok(text) = tokio::task::spawn_blocking(move || render()).await else {
                    return;
                };
                let Some(tree) = weak.upgrade() else {
                    return;
                };
                let changed = tree.read(&text);
                tree.publish(&changed);
            }
        });
    }

    /// Takes the values in the Prometheus `text`; returns those that changed.
    fn read(&self, text: &str) -> Vec<(String, String)> {
        let figures = Figures::parse(text);
        let now = Instant::now();
        let mut state = self.state();
        let counters = [figures.received, figures.sent];
        if let Some((at, before)) = state.last {
            let secs = now.duration_since(at).as_secs_f64();
            if secs > 0.0 {
                for (kind, loads) in state.loads.iter_mut().enumerate() {
                    let per_minute = (counters[kind] - before[kind]).max(0.0) * 60.0 / secs;
                    for (load, (window, _)) in loads.iter_mut().zip(WINDOWS) {
                        let keep = (-secs / window).exp();
                        *load = *load * keep + per_minute * (1.0 - keep);
                    }
                }
            }
        }
        state.last = Some((now, counters));
        state.reads += 1;
        let mut values = vec![
            (
                "broker/version".to_owned(),
                format!("herald version {}", env!("CARGO_PKG_VERSION")),
            ),
            (
                "broker/uptime".to_owned(),
                format!("{} seconds", self.started.elapsed().as_secs()),
            ),
            (
                "broker/clients/connected".to_owned(),
                whole(figures.connected),
            ),
            (
                "broker/messages/received".to_owned(),
                whole(figures.received),
            ),
            ("broker/messages/sent".to_owned(), whole(figures.sent)),
            (
                "broker/subscriptions/count".to_owned(),
                whole(figures.subscriptions),
            ),
        ];
        for (kind, name) in ["received", "sent"].into_iter().enumerate() {
            for (load, (_, window)) in state.loads[kind].iter().zip(WINDOWS) {
                let topic = format!("broker/load/messages/{name}/{window}");
                values.push((topic, format!("{load:.2}")));
            }
        }
        for value in &mut values {
            value.0.insert_str(0, PREFIX);
        }
        let changed = values
            .iter()
            .filter(|v| !state.values.contains(v))
            .cloned()
            .collect();
        state.values = values;
        changed
    }

    /// Queues `values` to every connection that follows the tree (one encoding per app).
    fn publish(&self, values: &[(String, String)]) {
        let mut state = self.state();
        state
            .followers
            .retain(|(_, outbox)| outbox.strong_count() > 0);
        if values.is_empty() {
            return;
        }
        let seq = state.reads;
        let mut by_app: Vec<(AppId, Vec<SharedMessage>)> = Vec::new();
        for (app, outbox) in &state.followers {
            let Some(outbox) = outbox.upgrade() else {
                continue;
            };
            let at = match by_app.iter().position(|(a, _)| a == app) {
                Some(at) => at,
                None => {
                    let messages = values
                        .iter()
                        .filter_map(|(topic, value)| message(app, topic, value, seq))
                        .collect();
                    by_app.push((app.clone(), messages));
                    by_app.len() - 1
                }
            };
            // Bounded like any message: a connection too slow for them is a slow consumer.
            outbox.push_many(by_app[at].1.iter().cloned().map(OutFrame::Message));
        }
    }

    /// `outbox`, a connection of `app`, follows the tree (once, whatever number of its
    /// subscriptions); the current values `filter` matches are returned, as messages.
    fn follow(
        &self,
        app: &AppId,
        outbox: &Arc<Outbox>,
        filter: &TopicFilter,
    ) -> Vec<SharedMessage> {
        let mut state = self.state();
        let weak = Arc::downgrade(outbox);
        if !state.followers.iter().any(|(_, o)| o.ptr_eq(&weak)) {
            state.followers.push((app.clone(), weak));
        }
        state
            .values
            .iter()
            .filter_map(|(topic, value)| message(app, topic, value, state.reads))
            .filter(|m| filter.matches_local(m.channel.public()))
            .collect()
    }
}

/// The `$SYS/` message of `topic` in `app` with `value` as its payload.
fn message(app: &AppId, topic: &str, value: &str, seq: u64) -> Option<SharedMessage> {
    let channel = crate::topic_map::topic_to_channel(app, topic).ok()?;
    let data = payload::to_data(
        &Bytes::copy_from_slice(value.as_bytes()),
        false,
        &MessageProps::default(),
    );
    let time = i64::try_from(crate::wire::now_ms()).unwrap_or(i64::MAX);
    Some(Arc::new(StoredMessage::new(
        channel,
        Epoch::new(SYS_EPOCH),
        seq,
        None,
        time,
        data,
    )))
}

/// A figure as a whole number.
fn whole(value: f64) -> String {
    format!("{}", value.max(0.0).round() as u64)
}

/// Whether `message` is one of the `$SYS/` tree's.
pub(crate) fn is_sys(message: &StoredMessage) -> bool {
    message.epoch.as_str() == SYS_EPOCH
}

/// Whether `topic` (a topic name or filter) is in the `$SYS/` tree.
pub(crate) fn is_sys_topic(topic: &str) -> bool {
    topic == "$SYS" || topic.starts_with(PREFIX)
}

/// The refusal of a PUBLISH to `topic`, if it is a `$SYS/` topic.
pub(crate) fn refuse_publish(topic: &str) -> Option<(ReasonCode, String)> {
    is_sys_topic(topic).then(|| {
        (
            ReasonCode::NotAuthorized,
            format!("{topic:?} is in the $SYS/ tree, the server's read-only statistics"),
        )
    })
}

impl MqttWire {
    /// The connection subscribed to `filter`, a `$SYS/` topic or filter: it follows the tree,
    /// and the current values it matches are added to `send_current` (sent as retained
    /// messages once the SUBACK is, `crate::inbound`), if given.
    pub(crate) fn follow_sys(
        &mut self,
        filter: &str,
        send_current: Option<&mut Vec<SharedMessage>>,
    ) {
        let (Ok(parsed), Ok(app)) = (
            TopicFilter::parse_any(filter),
            self.session.client().map(|c| c.app.clone()),
        ) else {
            return;
        };
        let current = self.sys.follow(&app, self.session.outbox(), &parsed);
        if let Some(after_suback) = send_current {
            after_suback.extend(current);
        }
    }
}

/// The figures the tree shows, read from a Prometheus text exposition: each the sum of its
/// metric's samples (every label set).
#[derive(Debug, Default, PartialEq)]
struct Figures {
    connected: f64,
    received: f64,
    sent: f64,
    subscriptions: f64,
}

impl Figures {
    fn parse(text: &str) -> Figures {
        let mut figures = Figures::default();
        for line in text.lines() {
            if line.starts_with('#') {
                continue;
            }
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let field = match &line[..name_end] {
                "herald_app_connections" => &mut figures.connected,
                "herald_published_messages_total" => &mut figures.received,
                "herald_deliveries_total" => &mut figures.sent,
                "herald_subscriptions" => &mut figures.subscriptions,
                _ => continue,
            };
            let value = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok());
            if let Some(value) = value.filter(|v| v.is_finite()) {
                *field += value;
            }
        }
        figures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
# HELP herald_app_connections An app's live client connections on this node.
# TYPE herald_app_connections gauge
herald_app_connections{app=\"default\"} 3
herald_app_connections{app=\"shop\"} 2
herald_published_messages_total 120
herald_deliveries_total 360
herald_subscriptions 7
herald_app_published_total{app=\"shop\"} 9
";

    #[test]
    fn the_figures_are_the_sums_of_their_metrics_samples() {
        assert_eq!(
            Figures::parse(PAGE),
            Figures {
                connected: 5.0,
                received: 120.0,
                sent: 360.0,
                subscriptions: 7.0
            }
        );
        assert_eq!(
            Figures::parse("garbage\nherald_subscriptions x\n"),
            Figures::default()
        );
    }

    #[test]
    fn the_tree_says_what_changed_and_a_follower_gets_what_its_filter_matches() {
        let tree = SysTree::new(10);
        let first = tree.read(PAGE);
        let value = |values: &[(String, String)], topic: &str| {
            values
                .iter()
                .find(|(t, _)| t == topic)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(first.len(), 12, "{first:?}");
        assert_eq!(
            value(&first, "$SYS/broker/version"),
            Some(format!("herald version {}", env!("CARGO_PKG_VERSION")))
        );
        assert_eq!(
            value(&first, "$SYS/broker/clients/connected").as_deref(),
            Some("5")
        );
        assert_eq!(
            value(&first, "$SYS/broker/messages/sent").as_deref(),
            Some("360")
        );
        assert_eq!(
            value(&first, "$SYS/broker/load/messages/received/1min").as_deref(),
            Some("0.00")
        );
        let again = tree.read(&PAGE.replace("herald_subscriptions 7", "herald_subscriptions 8"));
        assert!(
            value(&again, "$SYS/broker/version").is_none(),
            "unchanged: {again:?}"
        );
        assert_eq!(
            value(&again, "$SYS/broker/subscriptions/count").as_deref(),
            Some("8")
        );
        let app = AppId::default_app();
        let outbox = Outbox::new(1 << 20);
        let filter = TopicFilter::parse("$SYS/broker/messages/+").unwrap();
        let got = tree.follow(&app, &outbox, &filter);
        let topics: Vec<_> = got.iter().map(|m| m.channel.topic().into_owned()).collect();
        assert_eq!(
            topics,
            ["$SYS/broker/messages/received", "$SYS/broker/messages/sent"]
        );
        assert!(got.iter().all(|m| is_sys(m)));
        tree.follow(&app, &outbox, &filter);
        assert_eq!(tree.state().followers.len(), 1, "followed once");
        tree.publish(&again);
        let (queued, _) = outbox.take();
        assert_eq!(queued.len(), again.len());
        drop(outbox);
        tree.publish(&[]);
        assert!(
            tree.state().followers.is_empty(),
            "gone with its connection"
        );
    }

    #[test]
    fn a_token_reads_the_tree_with_a_pattern_of_its_encoded_channels() {
        use herald_core::pattern::PatternSet;
        let covers = |patterns: &[&str], filter: &str| {
            let filter = TopicFilter::parse(filter).unwrap();
            crate::wildcards::token_covers(&PatternSet::new(patterns), &filter)
        };
        // `$SYS/#` matches `$SYS` itself too.
        assert!(!covers(&["==24SYS/**"], "$SYS/#"));
        assert!(covers(&["==24SYS", "==24SYS/**"], "$SYS/#"));
        assert!(covers(&["==24SYS/**"], "$SYS/broker/+"));
        assert!(covers(&["**"], "$SYS/broker/+"));
        assert!(!covers(&["sensors/**", "=sensors/**"], "$SYS/#"));
        let exact = PatternSet::new(&["==24SYS/**"]);
        assert!(exact.allows("==24SYS/broker/version"));
    }

    #[test]
    fn sys_topics_are_refused_to_publishers() {
        assert!(refuse_publish("$SYS/x").is_some());
        assert!(refuse_publish("$SYS").is_some());
        assert!(refuse_publish("$SYSTEM/x").is_none());
        assert!(refuse_publish("sensors/$SYS").is_none());
    }
}
