//! The payload rules of [`ApnsOptions::render`].

use super::*;

fn common<'a>(data: Option<&'a RawValue>) -> Common<'a> {
    Common {
        title: Some("Goal"),
        body: Some("2-0"),
        data,
        push_id: "p-1",
        ..Common::default()
    }
}

fn options(json: &str) -> ApnsOptions {
    serde_json::from_str(json).unwrap()
}

fn payload(n: &ApnsNotification) -> Value {
    serde_json::from_slice(&n.payload).unwrap()
}

#[test]
fn alert_has_aps_data_and_herald_id() {
    let data = RawValue::from_string(r#"{"score":[2,0]}"#.into()).unwrap();
    let mut c = common(Some(&data));
    c.badge = Some(3);
    c.sound = Some("default");
    c.collapse_key = Some("match-7");
    c.high_priority = Some(true);
    c.expires_ms = 1_700_000_000_500;
    let o =
        options(r#"{"subtitle":"Final","thread_id":"m7","mutable_content":true,"custom":{"x":1}}"#);
    let n = o.render(&c).unwrap();
    assert_eq!(n.push_type, PushType::Alert);
    assert_eq!(n.priority, Some(10));
    assert_eq!(n.expiration, Some(1_700_000_001));
    assert_eq!(n.collapse_id.as_deref(), Some("match-7"));
    let p = payload(&n);
    assert_eq!(p["aps"]["alert"]["title"], "Goal");
    assert_eq!(p["aps"]["alert"]["subtitle"], "Final");
    assert_eq!(p["aps"]["alert"]["body"], "2-0");
    assert_eq!(p["aps"]["badge"], 3);
    assert_eq!(p["aps"]["sound"], "default");
    assert_eq!(p["aps"]["thread-id"], "m7");
    assert_eq!(p["aps"]["mutable-content"], 1);
    assert_eq!(p["data"]["score"][1], 0);
    assert_eq!(p["herald_id"], "p-1");
    assert_eq!(p["x"], 1);
}

#[test]
fn overrides_win_over_the_common_fields() {
    let o = options(r#"{"title":"T","body":"B","badge":9,"sound":"ping.caf","priority":5}"#);
    let mut c = common(None);
    c.high_priority = Some(true);
    c.badge = Some(1);
    let n = o.render(&c).unwrap();
    let p = payload(&n);
    assert_eq!(p["aps"]["alert"]["title"], "T");
    assert_eq!(p["aps"]["alert"]["body"], "B");
    assert_eq!(p["aps"]["badge"], 9);
    assert_eq!(p["aps"]["sound"], "ping.caf");
    assert_eq!(n.priority, Some(5));
    assert!(p.get("data").is_none());
}

#[test]
fn background_is_content_available_priority_5_and_silent() {
    let o = options(r#"{"push_type":"background"}"#);
    let mut c = Common {
        push_id: "p",
        high_priority: Some(true),
        ..Common::default()
    };
    let n = o.render(&c).unwrap();
    assert_eq!(n.priority, Some(5));
    assert_eq!(payload(&n)["aps"]["content-available"], 1);
    assert!(options(r#"{"push_type":"background","priority":10}"#)
        .render(&c)
        .is_err());
    for bad in [
        Common {
            title: Some("t"),
            ..c
        },
        Common {
            sound: Some("s"),
            ..c
        },
        Common {
            badge: Some(1),
            ..c
        },
    ] {
        let e = o.render(&bad).unwrap_err();
        assert!(e.message.contains("background"), "{e}");
        assert!(!e.too_large);
    }
    c.high_priority = None;
    assert!(options(r#"{"push_type":"background","sound":"x"}"#)
        .render(&c)
        .is_err());
}

#[test]
fn a_push_that_shows_nothing_defaults_to_background() {
    let data = RawValue::from_string(r#"{"sync":true}"#.into()).unwrap();
    let c = Common {
        data: Some(&data),
        push_id: "p",
        high_priority: Some(true),
        ..Common::default()
    };
    let n = ApnsOptions::default().render(&c).unwrap();
    assert_eq!(n.push_type, PushType::Background);
    assert_eq!(
        n.priority,
        Some(5),
        "background is priority 5, even for high"
    );
    let p = payload(&n);
    assert_eq!(p["aps"], serde_json::json!({"content-available": 1}));
    assert_eq!(p["data"]["sync"], true);
    // A sound or a badge alone is something shown: an alert push.
    for visible in [
        r#"{"badge":2}"#,
        r#"{"sound":"ping.caf"}"#,
        r#"{"subtitle":"s"}"#,
    ] {
        assert_eq!(
            options(visible).render(&c).unwrap().push_type,
            PushType::Alert,
            "{visible}"
        );
    }
    // Priority 10 cannot go with it: the error says why and how to choose otherwise.
    let e = options(r#"{"priority":10}"#).render(&c).unwrap_err();
    assert!(
        e.message.contains("background") && e.message.contains("push_type"),
        "{e}"
    );
    // Asked for by name, the push type wins.
    let n = options(r#"{"push_type":"alert"}"#).render(&c).unwrap();
    assert_eq!(n.push_type, PushType::Alert);
}

#[test]
fn unknown_push_type_and_unknown_fields_do_not_deserialize() {
    assert!(serde_json::from_str::<ApnsOptions>(r#"{"push_type":"sms"}"#).is_err());
    assert!(serde_json::from_str::<ApnsOptions>(r#"{"pushtype":"alert"}"#).is_err());
    assert!(serde_json::from_str::<ApnsOptions>(r#"{"event":"pause"}"#).is_err());
    assert!(serde_json::from_str::<ApnsOptions>(r#"{}"#).is_ok());
}

#[test]
fn size_limits_are_4096_and_5120_for_voip() {
    let data = RawValue::from_string(format!("\"{}\"", "a".repeat(4200))).unwrap();
    let c = Common {
        data: Some(&data),
        push_id: "p",
        ..Common::default()
    };
    let e = ApnsOptions::default().render(&c).unwrap_err();
    assert!(e.too_large);
    assert_eq!(e.provider, "apns");
    let voip = options(r#"{"push_type":"voip"}"#).render(&c).unwrap();
    assert!(voip.payload.len() > 4096 && voip.payload.len() <= 5120);
    let data = RawValue::from_string(format!("\"{}\"", "a".repeat(5200))).unwrap();
    let c = Common {
        data: Some(&data),
        ..c
    };
    assert!(
        options(r#"{"push_type":"voip"}"#)
            .render(&c)
            .unwrap_err()
            .too_large
    );
}

#[test]
fn live_activity_needs_event_and_timestamp() {
    let c = Common {
        push_id: "p",
        ..Common::default()
    };
    let e = options(r#"{"push_type":"liveactivity","timestamp":1}"#)
        .render(&c)
        .unwrap_err();
    assert!(e.message.contains("event"), "{e}");
    let e = options(r#"{"push_type":"liveactivity","event":"end"}"#)
        .render(&c)
        .unwrap_err();
    assert!(e.message.contains("timestamp"), "{e}");
    assert!(
        options(r#"{"push_type":"liveactivity","event":"update","timestamp":1}"#)
            .render(&c)
            .is_err()
    );
    assert!(options(
        r#"{"push_type":"liveactivity","event":"start","timestamp":1,"content_state":{}}"#
    )
    .render(&c)
    .is_err());
    let n = options(
        r#"{"push_type":"liveactivity","event":"start","timestamp":1700000000,
            "content_state":{"score":"1-0"},"attributes_type":"MatchAttributes",
            "attributes":{"home":"A"},"stale_date":1700000600,"dismissal_date":1700003600}"#,
    )
    .render(&c)
    .unwrap();
    let aps = &payload(&n)["aps"];
    assert_eq!(aps["event"], "start");
    assert_eq!(aps["timestamp"], 1_700_000_000);
    assert_eq!(aps["content-state"]["score"], "1-0");
    assert_eq!(aps["attributes-type"], "MatchAttributes");
    assert_eq!(aps["attributes"]["home"], "A");
    assert_eq!(aps["stale-date"], 1_700_000_600);
    assert_eq!(aps["dismissal-date"], 1_700_003_600);
    assert!(options(r#"{"event":"end","timestamp":1}"#)
        .render(&c)
        .is_err());
}

#[test]
fn collapse_id_priority_custom_and_score_rules() {
    let c = common(None);
    let long = "c".repeat(65);
    let o = ApnsOptions {
        collapse_id: Some(long),
        ..ApnsOptions::default()
    };
    assert!(o.render(&c).unwrap_err().message.contains("64"));
    let ok = ApnsOptions {
        collapse_id: Some("c".repeat(64)),
        ..ApnsOptions::default()
    };
    assert!(ok.render(&c).is_ok());
    assert!(options(r#"{"priority":7}"#).render(&c).is_err());
    assert!(options(r#"{"custom":{"aps":{}}}"#).render(&c).is_err());
    assert!(options(r#"{"custom":{"herald_id":"x"}}"#)
        .render(&c)
        .is_err());
    assert!(options(r#"{"relevance_score":1.5}"#).render(&c).is_err());
    let n = options(r#"{"interruption_level":"time-sensitive","relevance_score":0.5}"#)
        .render(&c)
        .unwrap();
    assert_eq!(payload(&n)["aps"]["interruption-level"], "time-sensitive");
    assert_eq!(n.priority, None);
    assert_eq!(n.expiration, None);
}

#[test]
fn notifications_round_trip_as_json() {
    let n = options(r#"{"push_type":"voip","expiration":0}"#)
        .render(&common(None))
        .unwrap();
    let json = serde_json::to_string(&n).unwrap();
    assert_eq!(serde_json::from_str::<ApnsNotification>(&json).unwrap(), n);
    assert_eq!(n.expiration, Some(0));
}
