use super::*;
use proptest::prelude::*;

fn channel(topic: &str) -> String {
    ChannelName::from_topic(topic).unwrap().as_str().to_string()
}

#[test]
fn design_examples_map_both_ways() {
    for (topic, name) in [
        ("sensors/kitchen/temp", "sensors/kitchen/temp"),
        ("/a", "==/a"),
        ("a//b", "=a/=/b"),
        ("a/", "=a/="),
        ("/", "==/="),
        ("$SYS/x", "==24SYS/x"),
        ("café/ménu", "=caf=C3=A9/m=C3=A9nu"),
        ("a.b", "a.b"),
        ("..", "==2E=2E"),
        ("a/./b", "=a/=2E/b"),
        ("=x", "==3Dx"),
        ("a=b", "a=b"),
        ("sp ace", "=sp=20ace"),
        ("$device", "==24device"),
    ] {
        assert_eq!(channel(topic), name, "{topic}");
        let parsed = ChannelName::parse(name).unwrap();
        assert_eq!(parsed.topic(), topic, "{name}");
        assert_eq!(decode(name).unwrap(), topic, "{name}");
    }
}

#[test]
fn encode_levels_escapes_plain_names_too() {
    assert_eq!(encode_levels("a.b/c="), "=a=2Eb/c=3D");
    assert_eq!(encode_levels("sensors"), "=sensors");
    assert_eq!(encode_levels("a/"), "=a/=");
    assert_eq!(encode_levels("$SYS"), encode("$SYS"));
    assert_eq!(encode_levels(""), "==");
}

#[test]
fn plain_names_map_to_themselves() {
    for name in ["news", "chat/room-42", "a:b@c=d.e_f", "...", "v1.2/..x"] {
        let parsed = ChannelName::parse(name).unwrap();
        assert_eq!(parsed.topic(), name);
        assert!(matches!(parsed.topic(), Cow::Borrowed(_)));
        assert!(matches!(encode(name), Cow::Borrowed(_)));
        assert_eq!(channel(name), name);
    }
}

#[test]
fn scoped_and_reserved_names_decode_their_public_part() {
    let shop = crate::tenant::AppId::parse("shop").unwrap();
    let encoded = shop.channel(&ChannelName::from_topic("$SYS/x").unwrap());
    assert_eq!(encoded.as_str(), "shop~==24SYS/x");
    assert_eq!(encoded.topic(), "$SYS/x");
    assert_eq!(shop.reserved_log("$dev/d1").topic(), "$device");
    assert_eq!(shop.reserved_log("$app").topic(), "$app");
    assert_eq!(
        crate::tenant::parse_full("shop~=a/=").unwrap().topic(),
        "a/"
    );
    assert!(crate::tenant::parse_full("shop~=abc").is_err());
}

#[test]
fn non_canonical_and_malformed_encodings_are_refused_with_reason() {
    for (bad, why) in [
        ("=", "must be followed by a level"),
        ("=/a", "must be followed by a level"),
        ("==", "the encoded topic is empty"),
        ("=abc", "a channel name by itself"),
        ("=a/b", "a channel name by itself"),
        ("=a=2Eb", "a channel name by itself"),
        ("=a=2e", "two upper-case hex digits"),
        ("=a=2", "two upper-case hex digits"),
        ("=a=", "two upper-case hex digits"),
        ("=a==20", "two upper-case hex digits"),
        ("=a=G0", "two upper-case hex digits"),
        ("=x=41", "may not escape"),
        ("=x=5F", "may not escape"),
        ("=x=2F", "may not escape"),
        ("=a.b", "a segment is '=' or"),
        ("=a/../b", "a segment may not be"),
        ("=a/.x", "a segment is '=' or"),
        ("==C3", "not UTF-8"),
        ("==FF=20", "not UTF-8"),
        ("==00", "U+0000"),
        ("=a=00", "U+0000"),
        ("=a=2B", "wildcards"),
        ("==23", "wildcards"),
    ] {
        let err = ChannelName::parse(bad).unwrap_err();
        assert_eq!(err.code, ErrorCode::ChannelInvalid, "{bad}");
        assert!(
            err.message
                .starts_with(&format!("invalid channel name {bad:?}: ")),
            "{bad}: {}",
            err.message
        );
        assert!(err.message.contains(why), "{bad}: {}", err.message);
        assert_eq!(decode(bad).unwrap_err().message, err.message, "{bad}");
    }
}

#[test]
fn topics_are_refused_when_empty_nul_or_too_long() {
    let err = ChannelName::from_topic("").unwrap_err();
    assert_eq!(err.code, ErrorCode::ChannelInvalid);
    assert_eq!(err.message, "invalid topic name \"\": it is empty");
    let err = ChannelName::from_topic("a\0b").unwrap_err();
    assert_eq!(
        err.message,
        "invalid topic name \"a\\0b\": it contains U+0000"
    );
    for wildcard in ["a+", "a/#", "#"] {
        let err = ChannelName::from_topic(wildcard).unwrap_err();
        assert!(
            err.message.ends_with("the wildcards of topic filters"),
            "{}",
            err.message
        );
    }

    // 255 bytes of a plain name fit; as do 84 spaces after one letter (1 + 1 + 84 * 3 = 254).
    assert_eq!(channel(&"a".repeat(255)), "a".repeat(255));
    let spaces = format!("a{}", " ".repeat(84));
    assert_eq!(channel(&spaces).len(), 254);
    assert_eq!(
        ChannelName::from_topic(&format!("{spaces}x"))
            .unwrap()
            .as_str()
            .len(),
        255
    );

    // 256 letters become `=` and 256 letters; 85 spaces after one letter take 257 bytes.
    let err = ChannelName::from_topic(&"a".repeat(256)).unwrap_err();
    assert_eq!(err.code, ErrorCode::ChannelInvalid);
    assert!(
        err.message
            .ends_with("its channel name would be 257 bytes, longer than 255 (every byte outside A-Z a-z 0-9 _ - : @ takes 3)"),
        "{}",
        err.message
    );
    let err = ChannelName::from_topic(&format!("a{}", " ".repeat(85))).unwrap_err();
    assert!(
        err.message.contains("would be 257 bytes"),
        "{}",
        err.message
    );
    // The message quotes at most 64 characters of the topic.
    assert!(err.message.len() < 200, "{}", err.message);
}

/// Characters a topic is made of: every class the encoding treats differently, weighted
/// towards the interesting ones, and any other character now and then.
fn topic_char() -> impl Strategy<Value = char> {
    prop_oneof![
        6 => prop::sample::select(vec![
            'a', 'Z', '0', '_', '-', ':', '@', '.', '=', '/', '/', '/', ' ', '$', '~', '%', '*',
            'é', '€', '😀', '\u{7f}', '\t', '\u{fffd}',
        ]),
        1 => any::<char>().prop_filter("MQTT topic names have no NUL or wildcard", |c| {
            !matches!(c, '\0' | '+' | '#')
        }),
    ]
}

fn mqtt_topic() -> impl Strategy<Value = String> {
    prop::collection::vec(topic_char(), 1..=100).prop_map(|cs| cs.into_iter().collect())
}

proptest! {
    #[test]
    fn every_topic_round_trips(topic in mqtt_topic()) {
        let name = encode(&topic);
        // The encoding decodes whatever its length; only names that fit are channel names.
        prop_assert_eq!(decode_reason(&name).unwrap(), topic.as_str());
        match ChannelName::from_topic(&topic) {
            Ok(channel) => {
                prop_assert_eq!(channel.as_str(), &*name);
                prop_assert_eq!(channel.topic(), topic.as_str());
            }
            Err(err) => {
                prop_assert!(name.len() > MAX_CHANNEL_NAME_LEN, "{}", err.message);
                prop_assert!(err.message.contains("longer than 255"), "{}", err.message);
            }
        }
        if name.len() <= MAX_CHANNEL_NAME_LEN {
            prop_assert!(ChannelName::parse(&name).is_ok(), "{}", name);
        }
    }

    #[test]
    fn encoded_names_that_parse_decode_and_re_encode_to_themselves(
        rest in "[=/a.A-F0-9]{0,24}"
    ) {
        let name = format!("={rest}");
        if let Ok(channel) = ChannelName::parse(&name) {
            let topic = channel.topic();
            prop_assert_eq!(&*encode(&topic), name.as_str());
            prop_assert_eq!(ChannelName::from_topic(&topic).unwrap(), channel.clone());
        }
    }

    #[test]
    fn escaped_bytes_decode_only_when_they_are_text(bytes in prop::collection::vec(any::<u8>(), 1..40)) {
        let name: String = std::iter::once("=".to_string())
            .chain(bytes.iter().map(|b| format!("={b:02X}")))
            .collect();
        let parsed = ChannelName::parse(&name);
        match std::str::from_utf8(&bytes) {
            // '+' and '#' are topic filters' wildcards: never in a topic-style name.
            Ok(text) if encode(text) == name && !text.contains(['\0', '+', '#']) => {
                prop_assert_eq!(parsed.unwrap().topic().into_owned(), text);
            }
            _ => prop_assert!(parsed.is_err()),
        }
    }

    #[test]
    fn plain_channel_names_are_their_own_topic(name in "[a-zA-Z0-9_.:@=-]{1,20}(/[a-zA-Z0-9_.:@=-]{1,20}){0,3}") {
        if let Ok(channel) = ChannelName::parse(&name) {
            if !name.starts_with('=') {
                prop_assert_eq!(channel.topic(), name.as_str());
                prop_assert_eq!(ChannelName::from_topic(&name).unwrap(), channel);
            }
        }
    }
}
