use super::*;
use proptest::prelude::*;

fn bytes(b: &[u8]) -> Bytes {
    Bytes::copy_from_slice(b)
}

fn stored(payload: &[u8], retain: bool, props: &MessageProps) -> String {
    String::from_utf8(to_data(&bytes(payload), retain, props).to_vec()).unwrap()
}

fn plain(payload: &[u8]) -> Outgoing {
    Outgoing {
        payload: bytes(payload),
        retain: false,
        clear: false,
        props: MessageProps::default(),
    }
}

fn every_prop() -> MessageProps {
    MessageProps {
        content_type: Some("application/cbor".into()),
        payload_format: Some(PayloadFormat::Utf8),
        expiry_at_ms: Some(1_795_000_000_123),
        response_topic: Some("replies/$me/é".into()),
        correlation_data: Some(bytes(&[0, 1, 0xfe, 0xff])),
        user_properties: vec![
            ("k".into(), "v1".into()),
            ("k".into(), "v2".into()),
            ("a \"quoted\" key".into(), "".into()),
        ],
    }
}

#[test]
fn json_payloads_are_stored_byte_for_byte() {
    for json in [
        &br#"{"t":21.5}"#[..],
        b"21.5",
        b"-0.0e+10",
        br#""a string""#,
        b"[1, 2 ,3]",
        b"null",
        b"true",
        b"  { \"spaced\" :\t[ 1 ]\n}\n",
        br#"{"$mqttx":1,"nested":{"$mqtt":{"text":"no"}}}"#,
        "\"caf\u{e9}\"".as_bytes(),
    ] {
        let data = to_data(&bytes(json), false, &MessageProps::default());
        assert_eq!(data, json, "{}", String::from_utf8_lossy(json));
        assert_eq!(from_data(&data), plain(json));
    }
}

#[test]
fn other_payloads_are_wrapped_as_the_design_says() {
    let none = MessageProps::default();
    assert_eq!(stored(b"ON", false, &none), r#"{"$mqtt":{"text":"ON"}}"#);
    assert_eq!(stored(b"", false, &none), r#"{"$mqtt":{"text":""}}"#);
    assert_eq!(
        stored(b"21.5 x", false, &none),
        r#"{"$mqtt":{"text":"21.5 x"}}"#
    );
    assert_eq!(
        stored(b"{\"a\":1}{}", false, &none),
        r#"{"$mqtt":{"text":"{\"a\":1}{}"}}"#
    );
    assert_eq!(
        stored(&[0xff, 0, 0x80], false, &none),
        r#"{"$mqtt":{"base64":"/wCA"}}"#
    );
    assert_eq!(
        stored(b"\xc3(", false, &none),
        r#"{"$mqtt":{"base64":"wyg="}}"#
    );
    assert_eq!(
        stored(b"21.5", true, &none),
        r#"{"$mqtt":{"json":21.5,"retain":true}}"#
    );
    assert_eq!(
        stored(b"ON", true, &none),
        r#"{"$mqtt":{"text":"ON","retain":true}}"#
    );
    assert_eq!(
        stored(b"", true, &none),
        r#"{"$mqtt":{"text":"","retain":true,"clear":true}}"#
    );
    assert_eq!(
        stored(br#"{"$mqtt":{"text":"ON"}}"#, false, &none),
        r#"{"$mqtt":{"json":{"$mqtt":{"text":"ON"}}}}"#
    );
    assert_eq!(
        stored(br#"{"t":1}"#, false, &every_prop()),
        r#"{"$mqtt":{"json":{"t":1},"content_type":"application/cbor","format":1,"expiry":1795000000123,"response_topic":"replies/$me/é","correlation_base64":"AAH+/w==","user_properties":[["k","v1"],["k","v2"],["a \"quoted\" key",""]]}}"#
    );
}

#[test]
fn wrapped_payloads_round_trip_exactly() {
    let cases: Vec<(&[u8], bool)> = vec![
        (b"ON", false),
        (b"", false),
        (b"", true),
        (b"ON", true),
        (&[0, 159, 146, 150], false),
        (b"\xc3(", true),
        (br#"{"$mqtt":{"text":"ON"}}"#, false),
        (br#"  {"a":1, "$mqtt" : 2}  "#, false),
        (br#"{"\u0024mqtt":1}"#, false),
        (br#"[1, 2 ,3]"#, true),
        (b" 21.5\n", true),
        (br#""tab	and \u00e9""#, true),
    ];
    for (payload, retain) in cases {
        for props in [MessageProps::default(), every_prop()] {
            let data = to_data(&bytes(payload), retain, &props);
            assert_ne!(data, payload, "{}", String::from_utf8_lossy(payload));
            let out = from_data(&data);
            assert_eq!(
                out,
                Outgoing {
                    payload: bytes(payload),
                    retain,
                    clear: retain && payload.is_empty(),
                    props: props.clone(),
                },
                "{}",
                String::from_utf8_lossy(&data)
            );
        }
    }
}

#[test]
fn json_with_surrounding_whitespace_is_wrapped_as_text() {
    assert_eq!(
        stored(b" 21.5\n", true, &MessageProps::default()),
        r#"{"$mqtt":{"text":" 21.5\n","retain":true}}"#
    );
}

#[test]
fn every_property_survives_alone() {
    let all = every_prop();
    let singles = [
        MessageProps {
            content_type: all.content_type.clone(),
            ..Default::default()
        },
        MessageProps {
            payload_format: Some(PayloadFormat::Unspecified),
            ..Default::default()
        },
        MessageProps {
            payload_format: Some(PayloadFormat::Utf8),
            ..Default::default()
        },
        MessageProps {
            expiry_at_ms: Some(u64::MAX),
            ..Default::default()
        },
        MessageProps {
            expiry_at_ms: Some(0),
            ..Default::default()
        },
        MessageProps {
            response_topic: all.response_topic.clone(),
            ..Default::default()
        },
        MessageProps {
            correlation_data: Some(Bytes::new()),
            ..Default::default()
        },
        MessageProps {
            correlation_data: all.correlation_data.clone(),
            ..Default::default()
        },
        MessageProps {
            user_properties: all.user_properties.clone(),
            ..Default::default()
        },
    ];
    for props in singles {
        assert!(!props.is_empty());
        let data = to_data(&bytes(b"{}"), false, &props);
        let out = from_data(&data);
        assert_eq!(out.props, props, "{}", String::from_utf8_lossy(&data));
        assert_eq!(out.payload, &b"{}"[..]);
    }
    assert_eq!(PayloadFormat::from_value(2), None);
    assert_eq!(PayloadFormat::from_value(1), Some(PayloadFormat::Utf8));
}

#[test]
fn envelopes_from_other_publishers_are_read() {
    let cases: &[(&str, &[u8], bool)] = &[
        (r#"{"$mqtt":{"text":"ON"}}"#, b"ON", false),
        (
            r#" { "$mqtt" : { "retain" : true , "text" : "caf\u00e9" } } "#,
            "café".as_bytes(),
            true,
        ),
        (
            r#"{"\u0024mqtt":{"text":"escaped key"}}"#,
            b"escaped key",
            false,
        ),
        (r#"{"$mqtt":{"json":null}}"#, b"null", false),
        (r#"{"$mqtt":{"json": {"a" : 1} }}"#, br#"{"a" : 1}"#, false),
        (r#"{"$mqtt":{"base64":"AP8="}}"#, &[0, 0xff], false),
        (
            r#"{"$mqtt":{"text":"x","retain":null,"content_type":null,"user_properties":null}}"#,
            b"x",
            false,
        ),
        (
            r#"{"$mqtt":{"text":"x","retain":false,"clear":false}}"#,
            b"x",
            false,
        ),
    ];
    for &(data, payload, retain) in cases {
        let out = from_data(&bytes(data.as_bytes()));
        assert_eq!(out.payload, payload, "{data}");
        assert_eq!(out.retain, retain, "{data}");
        assert!(!out.clear);
        assert!(out.props.is_empty(), "{data}");
    }
    // A retained empty payload is a clear, said or not.
    let out = from_data(&bytes(br#"{"$mqtt":{"text":"","retain":true}}"#));
    assert!(out.retain && out.clear && out.payload.is_empty());
}

#[test]
fn only_an_object_whose_first_key_reads_mqtt_is_parsed_as_an_envelope() {
    for (data, may) in [
        (r#"{"$mqtt":{"text":"x"}}"#, true),
        (" \n{ \t\"$mqtt\" :1}", true),
        (r#"{"\u0024mqtt":{"text":"x"}}"#, true),
        (r#"{"$\u006dqtt":{"text":"x"}}"#, true),
        (r#"{"$mqtt"#, false),
        (r#"{"n":1,"$mqtt":{"text":"x"}}"#, false),
        (r#"{"$mqttx":1}"#, false),
        (r#"{"$mqt":1}"#, false),
        (r#"{"":1}"#, false),
        ("{}", false),
        ("[1]", false),
        ("\"$mqtt\"", false),
        ("", false),
    ] {
        assert_eq!(may_be_envelope(data.as_bytes()), may, "{data}");
    }
    // The escaped spellings are read as envelopes (the pre-check leaves them to the parse).
    let out = from_data(&bytes(br#"{"$\u006dqtt":{"text":"escaped inside"}}"#));
    assert_eq!(out.payload, &b"escaped inside"[..]);
    assert_eq!(from_data(&bytes(br#"{"n":1}"#)), plain(br#"{"n":1}"#));
}

#[test]
fn malformed_envelopes_are_plain_json() {
    for data in [
        r#"{"$mqtt":{}}"#,
        r#"{"$mqtt":null}"#,
        r#"{"$mqtt":"ON"}"#,
        r#"{"$mqtt":{"text":"ON"},"other":1}"#,
        r#"{"$mqtt":{"text":"ON"},"$mqtt":{"text":"OFF"}}"#,
        r#"{"$mqtt":{"text":"ON","colour":"red"}}"#,
        r#"{"$mqtt":{"text":"ON","json":1}}"#,
        r#"{"$mqtt":{"text":"ON","base64":"AA=="}}"#,
        r#"{"$mqtt":{"text":1}}"#,
        r#"{"$mqtt":{"base64":"not base64!"}}"#,
        r#"{"$mqtt":{"base64":"AP8"}}"#,
        r#"{"$mqtt":{"text":"ON","retain":"yes"}}"#,
        r#"{"$mqtt":{"text":"","clear":true}}"#,
        r#"{"$mqtt":{"text":"x","retain":true,"clear":true}}"#,
        r#"{"$mqtt":{"text":"ON","format":2}}"#,
        r#"{"$mqtt":{"text":"ON","expiry":-1}}"#,
        r#"{"$mqtt":{"text":"ON","expiry":1.5}}"#,
        r#"{"$mqtt":{"text":"ON","content_type":"a\u0000b"}}"#,
        r#"{"$mqtt":{"text":"ON","response_topic":"a/+"}}"#,
        r#"{"$mqtt":{"text":"ON","response_topic":""}}"#,
        r#"{"$mqtt":{"text":"ON","correlation_base64":"%%"}}"#,
        r#"{"$mqtt":{"text":"ON","user_properties":[["k"]]}}"#,
        r#"{"$mqtt":{"text":"ON","user_properties":[["k","v","w"]]}}"#,
        r#"{"$mqtt":{"text":"ON","user_properties":{"k":"v"}}}"#,
        r#"{"$MQTT":{"text":"ON"}}"#,
        r#"[{"$mqtt":{"text":"ON"}}]"#,
    ] {
        assert_eq!(
            from_data(&bytes(data.as_bytes())),
            plain(data.as_bytes()),
            "{data}"
        );
    }
    let long = "x".repeat(65_536);
    let data = format!(r#"{{"$mqtt":{{"text":"ON","user_properties":[["k","{long}"]]}}}}"#);
    assert_eq!(from_data(&bytes(data.as_bytes())), plain(data.as_bytes()));
}

#[test]
fn only_a_well_formed_retained_envelope_touches_the_retained_message() {
    let of = |data: &str| retain_of_data(&bytes(data.as_bytes()));
    assert_eq!(
        of(r#"{"$mqtt":{"json":{"t":21.5},"retain":true}}"#),
        Retain::Keep {
            expires_at_ms: None
        }
    );
    assert_eq!(
        of(r#" {"$mqtt":{"text":"ON","retain":true,"expiry":1795961118133}}"#),
        Retain::Keep {
            expires_at_ms: Some(1_795_961_118_133)
        }
    );
    // A retained empty payload clears it, said or not.
    assert_eq!(
        of(r#"{"$mqtt":{"text":"","retain":true,"clear":true}}"#),
        Retain::Clear
    );
    assert_eq!(
        of(r#"{"$mqtt":{"base64":"","retain":true}}"#),
        Retain::Clear
    );
    for untouched in [
        r#"{"t":21.5}"#,
        r#"21.5"#,
        r#""{\"$mqtt\":{\"text\":\"ON\",\"retain\":true}}""#,
        r#"{"$mqtt":{"text":"ON"}}"#,
        r#"{"$mqtt":{"text":"ON","retain":false}}"#,
        r#"{"state":"on","$mqtt":{"text":"ON","retain":true}}"#,
        r#"{"$mqtt":{"text":"x","retain":true,"clear":true}}"#,
        r#"{"$mqtt":{"text":"ON","retain":true,"colour":"red"}}"#,
    ] {
        assert_eq!(of(untouched), Retain::Untouched, "{untouched}");
    }
    // What an MQTT RETAIN publish stores reads back as what it did.
    let props = every_prop();
    for (payload, retain) in [(&b"ON"[..], true), (b"", true), (b"ON", false)] {
        let data = to_data(&bytes(payload), retain, &props);
        assert_eq!(
            retain_of_data(&data),
            retain_of(&bytes(payload), retain, &props)
        );
    }
}

#[test]
fn plain_payloads_are_not_copied() {
    let data = bytes(br#"{"t":21.5}"#);
    let stored = to_data(&data, false, &MessageProps::default());
    assert_eq!(stored.as_ptr(), data.as_ptr());
    let out = from_data(&stored);
    assert_eq!(out.payload.as_ptr(), stored.as_ptr());
    // An envelope's unescaped text or JSON is a slice of the data.
    let data = bytes(br#"{"$mqtt":{"json":[1,2],"retain":true}}"#);
    let out = from_data(&data);
    assert_eq!(out.payload, &b"[1,2]"[..]);
    let start = data.iter().position(|&b| b == b'[').unwrap();
    assert_eq!(out.payload.as_ptr(), data[start..].as_ptr());
}

fn mqtt_string() -> impl Strategy<Value = String> {
    "[^\u{0}]{0,12}"
}

fn props() -> impl Strategy<Value = MessageProps> {
    (
        prop::option::of(mqtt_string()),
        prop::option::of(prop_oneof![
            Just(PayloadFormat::Unspecified),
            Just(PayloadFormat::Utf8)
        ]),
        prop::option::of(any::<u64>()),
        prop::option::of("[^\u{0}+#]{1,12}"),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..16).prop_map(Bytes::from)),
        prop::collection::vec((mqtt_string(), mqtt_string()), 0..4),
    )
        .prop_map(
            |(
                content_type,
                payload_format,
                expiry_at_ms,
                response_topic,
                correlation_data,
                user_properties,
            )| {
                MessageProps {
                    content_type,
                    payload_format,
                    expiry_at_ms,
                    response_topic,
                    correlation_data,
                    user_properties,
                }
            },
        )
}

/// Payloads of every kind: arbitrary bytes, arbitrary text, JSON-looking text, envelopes.
fn payload() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64).prop_map(Bytes::from),
        ".{0,32}".prop_map(Bytes::from),
        r#"[ \n]?(\{"(\$mqtt|a)":[ ]?(1|"x"|\{"text":"y"\}|null)\}|[0-9]{1,5}|"[a-z\\]{0,4}"|\[\]|true)[ \t]?"#
            .prop_map(Bytes::from),
    ]
}

proptest! {
    #[test]
    fn every_publish_round_trips(payload in payload(), retain in any::<bool>(), props in props()) {
        let data = to_data(&payload, retain, &props);
        prop_assert!(serde_json::from_slice::<serde::de::IgnoredAny>(&data).is_ok());
        let out = from_data(&data);
        prop_assert_eq!(
            out,
            Outgoing { clear: retain && payload.is_empty(), payload, retain, props }
        );
    }

    #[test]
    fn the_pre_check_never_turns_an_envelope_away(
        key in prop_oneof![
            Just(r#""$mqtt""#.to_string()),
            Just(r#""\u0024mqtt""#.to_string()),
            Just(r#""$mq\u0074t""#.to_string()),
            "\"[$a-z\\\\]{0,7}\"",
        ],
        space in "[ \t\n\r]{0,2}",
        body in prop_oneof![Just(r#"{"text":"x"}"#), Just(r#"{"json":1}"#), Just("1")],
    ) {
        let data = format!("{space}{{{space}{key}{space}:{body}}}");
        let parsed = serde_json::from_slice::<Envelope<'_>>(data.as_bytes()).is_ok();
        prop_assert!(!parsed || may_be_envelope(data.as_bytes()), "{}", data);
    }

    #[test]
    fn any_json_is_delivered_without_panicking(data in ".{0,64}") {
        let out = from_data(&Bytes::from(data));
        prop_assert!(!out.clear || out.retain);
    }
}
