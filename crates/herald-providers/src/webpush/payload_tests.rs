//! Render rules for Web Push messages.

use serde_json::json;
use serde_json::value::RawValue;

use super::*;

const NOW_MS: i64 = 1_700_000_000_000;

fn common<'a>(data: Option<&'a RawValue>) -> Common<'a> {
    Common {
        title: Some("Goal"),
        body: Some("2-0"),
        badge: Some(2),
        sound: None,
        data,
        collapse_key: Some("score"),
        high_priority: Some(true),
        expires_ms: NOW_MS + 60_000,
        push_id: "p-1",
    }
}

fn parsed(n: &WebPushNotification) -> serde_json::Value {
    serde_json::from_str(&n.payload).unwrap()
}

#[test]
fn default_payload_and_headers() {
    let raw = RawValue::from_string(r#"{"score":[2,0]}"#.into()).unwrap();
    let n = WebPushOptions::default()
        .render_at(&common(Some(&raw)), NOW_MS)
        .unwrap();
    assert_eq!(
        parsed(&n),
        json!({"id": "p-1", "notification": {"title": "Goal", "body": "2-0"},
               "data": {"score": [2, 0]}, "app_badge": 2})
    );
    assert_eq!(n.ttl_secs, 60);
    assert_eq!(n.urgency.as_deref(), Some("high"));
    assert_eq!(n.topic.as_deref(), Some("score"));
}

#[test]
fn options_override() {
    let options: WebPushOptions = serde_json::from_value(json!({
        "ttl": 30, "urgency": "very-low", "topic": "t_1",
        "notification": {"title": "T", "icon": "https://x/i.png", "navigate": "https://x/a"}
    }))
    .unwrap();
    let n = options.render_at(&common(None), NOW_MS).unwrap();
    assert_eq!(
        parsed(&n),
        json!({"id": "p-1", "notification": {"title": "T", "body": "2-0",
               "icon": "https://x/i.png", "navigate": "https://x/a"}, "app_badge": 2})
    );
    assert_eq!(
        (n.ttl_secs, n.urgency.as_deref(), n.topic.as_deref()),
        (30, Some("very-low"), Some("t_1"))
    );
}

#[test]
fn declarative_payload() {
    let raw = RawValue::from_string("[1]".into()).unwrap();
    let options: WebPushOptions = serde_json::from_value(json!({
        "declarative": true, "notification": {"navigate": "https://x/match"}
    }))
    .unwrap();
    let n = options.render_at(&common(Some(&raw)), NOW_MS).unwrap();
    assert_eq!(
        parsed(&n),
        json!({"web_push": 8030,
               "notification": {"title": "Goal", "body": "2-0", "navigate": "https://x/match",
                                "data": {"id": "p-1", "data": [1]}},
               "app_badge": 2})
    );
    let no_navigate = WebPushOptions {
        declarative: true,
        ..Default::default()
    };
    let err = no_navigate.render_at(&common(None), NOW_MS).unwrap_err();
    assert!(err.message.contains("navigate"), "{}", err.message);
}

#[test]
fn defaults_without_priority_expiry_or_collapse_key() {
    let mut c = common(None);
    c.high_priority = Some(false);
    c.expires_ms = 0;
    c.collapse_key = Some("a collapse key with spaces, longer than thirty-two");
    c.title = None;
    c.body = None;
    c.badge = None;
    let n = WebPushOptions::default().render_at(&c, NOW_MS).unwrap();
    assert_eq!(parsed(&n), json!({"id": "p-1"}));
    assert_eq!(n.ttl_secs, 0);
    assert_eq!(n.urgency.as_deref(), Some("low"));
    let topic = n.topic.unwrap();
    assert_eq!(topic.len(), 32);
    let again = WebPushOptions::default().render_at(&c, NOW_MS).unwrap();
    assert_eq!(
        again.topic.unwrap(),
        topic,
        "the same key gives the same topic"
    );
    c.high_priority = None;
    c.collapse_key = None;
    let n = WebPushOptions::default().render_at(&c, NOW_MS).unwrap();
    assert_eq!((n.urgency, n.topic), (None, None));
}

#[test]
fn refuses_bad_options() {
    for bad in [
        json!({"urgency": "urgent"}),
        json!({"ttl": -1}),
        json!({"sound": "x"}),
    ] {
        assert!(
            serde_json::from_value::<WebPushOptions>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    for topic in ["", "has space", &"x".repeat(33), "dot.ted"] {
        let options = WebPushOptions {
            topic: Some(topic.to_string()),
            ..Default::default()
        };
        let err = options.render_at(&common(None), NOW_MS).unwrap_err();
        assert!(err.message.contains("topic"), "{topic}");
    }
    let options: WebPushOptions =
        serde_json::from_value(json!({"notification": {"navigate": "/relative"}})).unwrap();
    assert!(options.render_at(&common(None), NOW_MS).is_err());
}

#[test]
fn too_large_says_the_limit() {
    let big = format!("\"{}\"", "x".repeat(4000));
    let raw = RawValue::from_string(big).unwrap();
    let err = WebPushOptions::default()
        .render_at(&common(Some(&raw)), NOW_MS)
        .unwrap_err();
    assert!(err.too_large);
    assert_eq!(err.provider, "webpush");
    assert!(
        err.message.contains("3993") && err.message.contains("4096"),
        "{}",
        err.message
    );
}
