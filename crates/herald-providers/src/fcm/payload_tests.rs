//! Render rules for FCM messages.

use serde_json::json;
use serde_json::value::RawValue;

use super::*;

const NOW_MS: i64 = 1_700_000_000_000;

fn common<'a>(data: Option<&'a RawValue>) -> Common<'a> {
    Common {
        title: Some("Goal"),
        body: Some("2-0"),
        badge: None,
        sound: Some("default"),
        data,
        collapse_key: Some("score"),
        high_priority: Some(true),
        expires_ms: NOW_MS + 90_500,
        push_id: "p-1",
    }
}

#[test]
fn renders_notification_data_and_android_from_the_common_fields() {
    let raw = RawValue::from_string(r#"{"score":[2,0]}"#.into()).unwrap();
    let n = FcmOptions::default()
        .render_at(&common(Some(&raw)), NOW_MS)
        .unwrap();
    assert_eq!(
        n.message,
        json!({
            "notification": {"title": "Goal", "body": "2-0"},
            "data": {"herald_id": "p-1", "data": "{\"score\":[2,0]}"},
            "android": {"priority": "HIGH", "ttl": "91s", "collapse_key": "score",
                        "notification": {"sound": "default"}}
        })
    );
}

#[test]
fn options_override_and_extend() {
    let options: FcmOptions = serde_json::from_value(json!({
        "notification": {"title": "T", "image": "https://i/x.png"},
        "android": {"priority": "normal", "ttl": 60, "collapse_key": "c", "channel_id": "news",
                    "tag": "t", "click_action": "OPEN", "color": "#ff0000", "icon": "ic"},
        "data": {"k": "v"}
    }))
    .unwrap();
    let mut c = common(None);
    c.badge = Some(3);
    let n = options.render_at(&c, NOW_MS).unwrap();
    assert_eq!(
        n.message,
        json!({
            "notification": {"title": "T", "body": "2-0", "image": "https://i/x.png"},
            "data": {"herald_id": "p-1", "k": "v"},
            "android": {"priority": "NORMAL", "ttl": "60s", "collapse_key": "c",
                        "notification": {"channel_id": "news", "sound": "default", "tag": "t",
                            "click_action": "OPEN", "color": "#ff0000", "icon": "ic",
                            "notification_count": 3}}
        })
    );
}

#[test]
fn expiry_and_priority_defaults() {
    let mut c = common(None);
    c.title = None;
    c.body = None;
    c.high_priority = None;
    c.expires_ms = 0;
    c.collapse_key = None;
    c.sound = None;
    let n = FcmOptions::default().render_at(&c, NOW_MS).unwrap();
    assert_eq!(
        n.message,
        json!({"data": {"herald_id": "p-1"}, "android": {"ttl": "0s"}})
    );
    c.expires_ms = NOW_MS - 5_000;
    let n = FcmOptions::default().render_at(&c, NOW_MS).unwrap();
    assert_eq!(n.message["android"]["ttl"], "0s");
    c.expires_ms = NOW_MS + 365 * 24 * 3600 * 1000;
    let n = FcmOptions::default().render_at(&c, NOW_MS).unwrap();
    assert_eq!(n.message["android"]["ttl"], "2419200s");
}

#[test]
fn refuses_non_string_data_reserved_keys_and_bad_colours() {
    let parsed: Result<FcmOptions, _> = serde_json::from_value(json!({"data": {"n": 1}}));
    assert!(parsed.is_err(), "data values must be strings");
    let parsed: Result<FcmOptions, _> = serde_json::from_value(json!({"priority": "high"}));
    assert!(parsed.is_err(), "unknown fields are refused");
    for key in [
        "herald_id",
        "data",
        "from",
        "google.x",
        "gcm_y",
        "message_type",
    ] {
        let options = FcmOptions {
            data: Some([(key.to_string(), "v".to_string())].into()),
            ..Default::default()
        };
        let err = options.render_at(&common(None), NOW_MS).unwrap_err();
        assert!(!err.too_large);
        assert!(err.message.contains("reserved"), "{key}: {}", err.message);
    }
    let options: FcmOptions = serde_json::from_value(json!({"android": {"color": "red"}})).unwrap();
    let err = options.render_at(&common(None), NOW_MS).unwrap_err();
    assert!(err.message.contains("#rrggbb"));
}

#[test]
fn too_large_says_the_limit() {
    let big = format!("\"{}\"", "x".repeat(4100));
    let raw = RawValue::from_string(big).unwrap();
    let err = FcmOptions::default()
        .render_at(&common(Some(&raw)), NOW_MS)
        .unwrap_err();
    assert!(err.too_large);
    assert_eq!(err.provider, "fcm");
    assert!(err.message.contains("4096"), "{}", err.message);
    // Just under the limit passes.
    let fits = format!("\"{}\"", "x".repeat(3900));
    let raw = RawValue::from_string(fits).unwrap();
    assert!(FcmOptions::default()
        .render_at(&common(Some(&raw)), NOW_MS)
        .is_ok());
}

#[test]
fn the_ttl_is_carried_typed_and_rendered_from_it() {
    let mut c = common(None);
    c.expires_ms = NOW_MS + 90_500;
    let n = FcmOptions::default().render_at(&c, NOW_MS).unwrap();
    assert_eq!(n.ttl_secs(), Some(91));
    assert_eq!(n.message["android"]["ttl"], "91s");
    let options = FcmOptions {
        android: Some(AndroidOptions {
            ttl: Some(60),
            ..AndroidOptions::default()
        }),
        ..FcmOptions::default()
    };
    let n = options.render_at(&c, NOW_MS).unwrap();
    assert_eq!(n.ttl_secs(), Some(60));

    let shorter = n.with_ttl_secs(7);
    assert_eq!(shorter.ttl_secs(), Some(7));
    assert_eq!(shorter.message["android"]["ttl"], "7s");
    let mut rest = shorter.message.clone();
    rest["android"]["ttl"] = n.message["android"]["ttl"].clone();
    assert_eq!(rest, n.message, "only the TTL changes");
}

#[test]
fn the_stored_form_is_the_message_alone_and_reads_back_with_its_ttl() {
    let n = FcmOptions::default()
        .render_at(&common(None), NOW_MS)
        .unwrap();
    let stored = serde_json::to_value(&n).unwrap();
    assert_eq!(stored, json!({"message": n.message.clone()}));
    let back: FcmNotification = serde_json::from_value(stored).unwrap();
    assert_eq!(back, n);
    assert!(back.ttl_secs().is_some());
    // A message with no TTL this can read carries none, and is left as it is.
    let bare = FcmNotification::new(json!({"data": {"herald_id": "p-1"}}));
    assert_eq!(bare.ttl_secs(), None);
    assert_eq!(bare.with_ttl_secs(5).message, bare.message);
}
