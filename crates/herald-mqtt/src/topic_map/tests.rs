use super::*;
use proptest::prelude::*;

fn default_app() -> AppId {
    AppId::default_app()
}

fn shop() -> AppId {
    AppId::parse("shop").unwrap()
}

fn channel(name: &str) -> ChannelName {
    ChannelName::parse(name).unwrap()
}

#[test]
fn topics_map_to_channels_and_back_through_the_public_name() {
    for (topic, name) in [
        ("sensors/kitchen/temp", "sensors/kitchen/temp"),
        ("/a", "==/a"),
        ("a//b", "=a/=/b"),
        ("$SYS/x", "==24SYS/x"),
        ("café/ménu", "=caf=C3=A9/m=C3=A9nu"),
        ("=", "==3D"),
    ] {
        let plain = topic_to_channel(&default_app(), topic).unwrap();
        assert_eq!(plain.as_str(), name, "{topic}");
        assert_eq!(channel_to_topic(&plain).unwrap(), topic);

        let scoped = topic_to_channel(&shop(), topic).unwrap();
        assert_eq!(scoped.as_str(), format!("shop~{name}"));
        assert_eq!(scoped.public(), name);
        assert_eq!(
            channel_to_topic(&scoped).unwrap(),
            topic,
            "never the app scope"
        );
    }
}

#[test]
fn refused_topics_say_why_and_answer_topic_name_invalid() {
    let long = "x".repeat(256);
    for (topic, why) in [
        ("", "it is empty"),
        ("a/+", "wildcards"),
        ("#", "wildcards"),
        ("a\0", "U+0000"),
        (long.as_str(), "would be 257 bytes, longer than 255"),
        (&"é".repeat(43), "would be 259 bytes"),
    ] {
        let refused = topic_to_channel(&shop(), topic).unwrap_err();
        assert!(
            refused.reason.starts_with("invalid topic name"),
            "{}",
            refused.reason
        );
        assert!(
            refused.reason.contains(why),
            "{topic:?}: {}",
            refused.reason
        );
        assert_eq!(refused.to_string(), refused.reason);
        assert_eq!(refused.publish_reason_code(), ReasonCode::TopicNameInvalid);
        assert_eq!(refused.publish_reason_code().value(), 0x90);
        assert_eq!(
            refused.subscribe_reason_code(),
            ReasonCode::TopicFilterInvalid
        );
        assert_eq!(refused.subscribe_reason_code().value(), 0x8F);
    }
    // The longest that fits: 42 two-byte characters, 1 + 42 * 6 = 253 bytes.
    assert!(topic_to_channel(&shop(), &"é".repeat(42)).is_ok());
}

#[test]
fn no_channel_encodes_a_topic_with_wildcards() {
    // Core refuses them, so every channel but the push logs has a topic name MQTT can use.
    for name in ["=a=2B", "==23"] {
        assert!(ChannelName::parse(name).is_err(), "{name}");
    }
}

#[test]
fn push_logs_keep_their_public_names() {
    let inbox = shop().reserved_log("$dev/d1");
    assert_eq!(channel_to_topic(&inbox).unwrap(), "$device");
    assert!(!filter_matches_channel("#", &inbox), "[MQTT-4.7.2-1]");
    assert!(filter_matches_channel("$device", &inbox));
}

#[test]
fn filters_match_the_topic_a_channel_maps_back_to() {
    let cases: &[(&str, &str, bool)] = &[
        ("#", "news", true),
        ("#", "==24SYS/x", false), // [MQTT-4.7.2-1]
        ("+/x", "==24SYS/x", false),
        ("$SYS/#", "==24SYS/x", true),
        ("$SYS/+", "==24SYS/x", true),
        ("a/#", "a", true),
        ("a/#", "=a/=", true), // "a/"
        ("a/+", "=a/=", true), // "+" matches the empty level
        ("+", "=a/=", false),
        ("+/+", "==/a", true), // "/a"
        ("+", "==/a", false),
        ("sensors/+/temp", "sensors/kitchen/temp", true),
        ("sensors/+/temp", "=sensors/living=20room/temp", true),
        ("sensors/+/temp", "sensors/kitchen/hum", false),
        ("a.b/+", "a.b/c", true),
        ("caf\u{e9}/+", "=caf=C3=A9/m=C3=A9nu", true),
        ("a/b", "a/b", true),
        ("a/b", "a/b/c", false),
    ];
    for &(filter, name, expected) in cases {
        let ch = channel(name);
        assert_eq!(
            filter_matches_channel(filter, &ch),
            expected,
            "{filter} ~ {name}"
        );
        let scoped = shop().channel(&ch);
        assert_eq!(
            filter_matches_channel(filter, &scoped),
            expected,
            "{filter} ~ shop~{name}"
        );
        if let Ok(FilterTarget::Wildcard(w)) = parse_filter(&shop(), filter) {
            assert_eq!(
                w.matches_channel(&scoped),
                expected,
                "{filter} ~ shop~{name}"
            );
        }
    }
}

#[test]
fn exact_filters_name_one_channel_and_wildcards_do_not() {
    assert_eq!(
        parse_filter(&shop(), "$SYS/x").unwrap(),
        FilterTarget::Exact(shop().channel(&channel("==24SYS/x")))
    );
    assert_eq!(
        parse_filter(&default_app(), "sensors/kitchen").unwrap(),
        FilterTarget::Exact(channel("sensors/kitchen"))
    );
    let refused = parse_filter(&shop(), &"x".repeat(300)).unwrap_err();
    assert_eq!(
        refused.subscribe_reason_code(),
        ReasonCode::TopicFilterInvalid
    );
    for wildcard in ["#", "+", "a/+/b", "a/#", "/+", "+/#"] {
        match parse_filter(&shop(), wildcard).unwrap() {
            FilterTarget::Wildcard(w) => assert_eq!(w.as_str(), wildcard),
            other => panic!("{wildcard}: {other:?}"),
        }
    }
    // `a+` is not a wildcard level; a valid filter never holds it (the codec refuses it).
    assert!(parse_filter(&shop(), "a+").is_err());
}

#[test]
fn wildcard_filters_give_the_channel_prefixes_to_index_by() {
    let prefixes = |f: &str| {
        WildcardFilter::new(f)
            .channel_prefixes()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    assert_eq!(prefixes("#"), ["", "="]);
    assert_eq!(prefixes("+/a/#"), ["", "="]);
    assert_eq!(prefixes("sensors/+/temp"), ["sensors", "=sensors"]);
    assert_eq!(prefixes("a.b/c/#"), ["a.b/c", "=a=2Eb/c"]);
    assert_eq!(prefixes("$SYS/#"), ["==24SYS"]);
    assert_eq!(prefixes("a//+"), ["=a/="]);
    assert_eq!(prefixes("/+"), ["=="]);
    assert_eq!(prefixes("=x/+"), ["==3Dx"]);
}

/// Levels made of the characters the mapping treats differently, so that filters and topics
/// built from them often match.
fn level() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a", "b", "", "$x", "a.b", "=", " ", "é", "..", "a:b", "x-y",
    ])
    .prop_map(String::from)
}

fn topic() -> impl Strategy<Value = String> {
    prop::collection::vec(level(), 1..6).prop_map(|levels| levels.join("/"))
}

fn filter() -> impl Strategy<Value = String> {
    let level_or_plus = prop_oneof![3 => level(), 1 => Just("+".to_string())];
    (prop::collection::vec(level_or_plus, 0..5), any::<bool>()).prop_filter_map(
        "a filter is not empty",
        |(mut levels, hash)| {
            if hash {
                levels.push("#".into());
            }
            let filter = levels.join("/");
            (!filter.is_empty()).then_some(filter)
        },
    )
}

proptest! {
    #[test]
    fn every_topic_round_trips_through_its_channel(topic in topic(), scoped in any::<bool>()) {
        let app = if scoped { shop() } else { default_app() };
        if topic.is_empty() {
            prop_assert!(topic_to_channel(&app, &topic).is_err());
        } else {
            let ch = topic_to_channel(&app, &topic).unwrap();
            prop_assert_eq!(channel_to_topic(&ch).unwrap(), topic.as_str());
        }
    }

    #[test]
    fn matching_a_channel_is_matching_its_topic(filter in filter(), topic in topic()) {
        prop_assume!(!topic.is_empty());
        let ch = topic_to_channel(&shop(), &topic).unwrap();
        let expected = matches(&filter, &topic);
        prop_assert_eq!(filter_matches_channel(&filter, &ch), expected);
        match parse_filter(&shop(), &filter).unwrap() {
            FilterTarget::Exact(exact) => prop_assert_eq!(exact == ch, expected),
            FilterTarget::Wildcard(w) => {
                prop_assert_eq!(w.matches_channel(&ch), expected);
                if expected {
                    prop_assert!(
                        w.channel_prefixes().any(|p| ch.public().starts_with(p)),
                        "{} matched {} but none of {:?} begins it",
                        filter,
                        ch.public(),
                        w.channel_prefixes().collect::<Vec<_>>()
                    );
                }
            }
        }
    }
}
