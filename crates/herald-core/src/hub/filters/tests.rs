use super::*;
use crate::hub::tests::{msg, seqs};
use crate::hub::Hub;
use crate::name::ChannelName;
use crate::outbox::OutFrame;

fn topic_channel(app: &AppId, topic: &str) -> ChannelName {
    app.channel(&ChannelName::from_topic(topic).unwrap())
}

fn filter(f: &str) -> TopicFilter {
    TopicFilter::parse(f).unwrap()
}

/// The (channel's public name, seq) of every message queued.
fn taken(outbox: &Outbox) -> Vec<(String, u64)> {
    outbox
        .take()
        .0
        .into_iter()
        .filter_map(|f| match f {
            OutFrame::Message(m) => Some((m.channel.public().to_string(), m.seq)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_filter_subscriber_receives_matching_channels_after_their_exact_subscribers() {
    let hub = Hub::new();
    let app = AppId::default_app();
    assert!(!hub.filters().is_active());
    let out = Outbox::new(1 << 20);
    let mut subscriber = hub.filters().subscriber(&app, out.clone(), None);
    assert!(subscriber.add(filter("a/+/c")));
    assert!(hub.filters().is_active());
    let exact = Outbox::new(1 << 20);
    let abc = topic_channel(&app, "a/b/c");
    let (sub, _) = hub.subscribe(&abc, exact.clone());
    sub.go_live(vec![], 0);
    hub.deliver_all(&[
        msg(&abc, 1),
        msg(&abc, 2),
        msg(&topic_channel(&app, "a/b/d"), 1),
        msg(&topic_channel(&app, "a/x y/c"), 1),
        msg(&topic_channel(&app, "a/b/c/d"), 1),
    ]);
    hub.deliver(&msg(&topic_channel(&app, "a/z/c"), 7));
    assert_eq!(
        taken(&out),
        [
            ("a/b/c".to_string(), 1),
            ("a/b/c".into(), 2),
            ("=a/x=20y/c".into(), 1),
            ("a/z/c".into(), 7)
        ]
    );
    assert_eq!(seqs(&exact), [1, 2], "the exact subscriber as before");
}

#[test]
fn several_matching_filters_of_one_subscriber_deliver_once() {
    let hub = Hub::new();
    let app = AppId::default_app();
    let out = Outbox::new(1 << 20);
    let other = Outbox::new(1 << 20);
    let mut one = hub.filters().subscriber(&app, out.clone(), None);
    let mut two = hub.filters().subscriber(&app, other.clone(), None);
    for f in ["a/#", "a/+", "+/b", "#"] {
        assert!(one.add(filter(f)));
    }
    assert!(!one.add(filter("#")), "held already");
    assert!(two.add(filter("+/+")));
    let ab = topic_channel(&app, "a/b");
    hub.deliver_all(&[msg(&ab, 1), msg(&ab, 2)]);
    assert_eq!(seqs(&out), [1, 2], "once, though four filters match");
    assert_eq!(seqs(&other), [1, 2]);
}

#[test]
fn filters_are_per_app_and_skip_push_logs_and_dollar_topics() {
    let hub = Hub::new();
    let shop = AppId::parse("shop").unwrap();
    let out = Outbox::new(1 << 20);
    let mut subscriber = hub.filters().subscriber(&shop, out.clone(), None);
    subscriber.add(filter("#"));
    subscriber.add(filter("$device/#"));
    hub.deliver_all(&[
        msg(&topic_channel(&AppId::default_app(), "news"), 1),
        msg(&topic_channel(&shop, "news"), 2),
        msg(&topic_channel(&shop, "$SYS/x"), 3),
        msg(&shop.reserved_log("$app"), 4),
        msg(&shop.reserved_log("$dev/phone"), 5),
    ]);
    assert_eq!(
        taken(&out),
        [("news".to_string(), 2)],
        "its own app's channels only; '#' sees no $ topic, and push logs are no topics"
    );
    subscriber.add(filter("$SYS/#"));
    hub.deliver(&msg(&topic_channel(&shop, "$SYS/x"), 6));
    assert_eq!(taken(&out), [("==24SYS/x".to_string(), 6)]);
}

#[test]
fn removing_a_filter_or_dropping_the_subscriber_stops_delivery_and_the_registry_goes_idle() {
    let hub = Hub::new();
    let app = AppId::default_app();
    let out = Outbox::new(1 << 20);
    let ch = topic_channel(&app, "a/b");
    let mut subscriber = hub.filters().subscriber(&app, out.clone(), None);
    subscriber.add(filter("a/+"));
    subscriber.add(filter("+/b"));
    subscriber.add(filter("sensors/living room/#"));
    assert_eq!(hub.filters().count(&app), 4, "index entries: 2 + 1 + 1");
    assert!(subscriber.remove("a/+"));
    assert!(!subscriber.remove("a/+"));
    hub.deliver(&msg(&ch, 1));
    assert_eq!(seqs(&out), [1], "still matched by +/b");
    assert!(subscriber.remove("+/b"));
    hub.deliver(&msg(&ch, 2));
    assert!(seqs(&out).is_empty());
    assert!(hub.filters().is_active());
    drop(subscriber);
    assert!(
        !hub.filters().is_active(),
        "nothing left: one load per delivery"
    );
    assert_eq!(hub.filters().count(&app), 0);
}

#[test]
fn a_full_outbox_closes_as_a_slow_consumer() {
    let hub = Hub::new();
    let app = AppId::default_app();
    let out = Outbox::new(100);
    let mut subscriber = hub.filters().subscriber(&app, out.clone(), None);
    subscriber.add(filter("#"));
    let ch = topic_channel(&app, "busy");
    let big = |seq| {
        std::sync::Arc::new(crate::message::StoredMessage::new(
            ch.clone(),
            crate::message::Epoch::new("e"),
            seq,
            None,
            0,
            bytes::Bytes::from(vec![b'1'; 80]),
        ))
    };
    hub.deliver_all(&[big(1), big(2), big(3)]);
    assert_eq!(out.closed(), Some(crate::outbox::CloseReason::SlowConsumer));
}

#[test]
fn a_subscriber_holding_the_exact_subscription_too_gets_each_message_once_and_admit_filters() {
    let hub = Hub::new();
    let app = AppId::default_app();
    let out = Outbox::new(1 << 20);
    let admit: Admit = std::sync::Arc::new(|m: &crate::StoredMessage| m.seq != 3);
    let mut subscriber = hub.filters().subscriber(&app, out.clone(), Some(admit));
    subscriber.add(filter("a/+"));
    let ab = topic_channel(&app, "a/b");
    let (sub, _) = hub.subscribe(&ab, out.clone());
    sub.go_live(vec![], 0);
    hub.deliver_all(&[msg(&ab, 1), msg(&ab, 2)]);
    hub.deliver(&msg(&ab, 3));
    assert_eq!(
        seqs(&out),
        [1, 2, 3],
        "through the exact subscription, once"
    );
    assert!(hub.unsubscribe(&ab, sub.id()));
    hub.deliver_all(&[msg(&ab, 3), msg(&ab, 4)]);
    hub.deliver(&msg(&ab, 5));
    assert_eq!(
        seqs(&out),
        [4, 5],
        "through the filter, 3 refused by its admit"
    );
}

/// A [`FilterFeed`] recording what it is told.
#[derive(Default)]
struct Told(parking_lot::Mutex<Vec<String>>);

#[async_trait::async_trait]
impl FilterFeed for Told {
    fn gained(&self, app: &str) {
        self.0.lock().push(format!("+{app}"));
    }
    fn lost(&self, app: &str) {
        self.0.lock().push(format!("-{app}"));
    }
    async fn ready(&self, _app: &str) {}
}

#[test]
fn a_fed_registry_tells_its_apps_and_hands_each_message_once_whichever_path_brings_it() {
    let hub = Hub::new();
    let told = Arc::new(Told::default());
    assert!(hub.filters().set_feed(told.clone()));
    let app = AppId::default_app();
    let shop = AppId::parse("shop").unwrap();
    let both = Outbox::new(1 << 20);
    let only = Outbox::new(1 << 20);
    let mut first = hub.filters().subscriber(&app, both.clone(), None);
    first.add(filter("a/+"));
    first.add(filter("#"));
    let mut second = hub.filters().subscriber(&app, only.clone(), None);
    second.add(filter("a/#"));
    let group = hub
        .filters()
        .join_group(&shop, "g", filter("x/+"), only.clone(), None);
    assert_eq!(
        *told.0.lock(),
        ["+default", "+shop"],
        "each app's first filter"
    );
    // `both` holds a/b's exact subscription too.
    let ab = topic_channel(&app, "a/b");
    let (sub, _) = hub.subscribe(&ab, both.clone());
    sub.go_live(vec![], 0);
    let ac = topic_channel(&app, "a/c");
    // The feed brings a/b 1 and a/c 1 first, then a/b's own stream 1 and 2, then the feed 2.
    hub.deliver_filters_only(&[msg(&ab, 1), msg(&ac, 1)]);
    hub.deliver_all(&[msg(&ab, 1), msg(&ab, 2)]);
    hub.deliver_filters_only(&[msg(&ab, 2), msg(&ac, 1)]);
    assert_eq!(
        taken(&both),
        [("a/c".to_string(), 1), ("a/b".into(), 1), ("a/b".into(), 2)],
        "a/b through its exact subscription only, a/c once"
    );
    assert_eq!(
        taken(&only),
        [("a/b".to_string(), 1), ("a/c".into(), 1), ("a/b".into(), 2)]
    );
    drop(first);
    drop(second);
    assert_eq!(told.0.lock().len(), 3);
    assert_eq!(told.0.lock()[2], "-default", "its last filter gone");
    drop(group);
    assert_eq!(told.0.lock()[3], "-shop");
}
