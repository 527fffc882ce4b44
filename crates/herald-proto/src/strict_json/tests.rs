//! The strict reader: what serde reads still reads the same, and an array where an object
//! belongs is refused at any depth, saying where.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::{from_slice, from_str, NOT_AN_ARRAY, NOT_NULL};

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Limits {
    #[serde(default)]
    max_devices: Option<u64>,
    #[serde(default)]
    max_connections: Option<u64>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
enum Priority {
    High,
    Normal,
}

#[derive(Debug, Deserialize, PartialEq)]
enum Shape {
    Point,
    Circle(u32),
    Pair(u32, u32),
    Rect { w: u32, h: u32 },
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Body {
    name: String,
    #[serde(default)]
    limits: Option<Limits>,
    #[serde(default)]
    items: Vec<Limits>,
    #[serde(default)]
    by_name: HashMap<String, Limits>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    priority: Option<Priority>,
    #[serde(default)]
    shape: Option<Shape>,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    pair: Option<(u8, String)>,
    #[serde(default)]
    any: Option<Value>,
}

fn refused<T: std::fmt::Debug + for<'de> Deserialize<'de>>(text: &str) -> (String, String) {
    let e = from_str::<T>(text).expect_err(text);
    (e.path().to_owned(), e.to_string())
}

#[test]
fn everything_serde_reads_from_objects_still_reads() {
    let body: Body = from_str(
        r#"{"name":"n","limits":{"max_devices":5},"items":[{"max_connections":7},{}],
            "by_name":{"a":{"max_devices":1}},"labels":{"k":"v"},"priority":"high",
            "shape":{"Rect":{"w":2,"h":3}},"tags":["x","y"],"pair":[1,"one"],
            "any":[1,{"a":[2]}]}"#,
    )
    .unwrap();
    assert_eq!(body.name, "n");
    assert_eq!(
        body.limits,
        Some(Limits {
            max_devices: Some(5),
            max_connections: None
        })
    );
    assert_eq!(body.items.len(), 2);
    assert_eq!(body.items[0].max_connections, Some(7));
    assert_eq!(body.by_name["a"].max_devices, Some(1));
    assert_eq!(body.labels["k"], "v");
    assert_eq!(body.priority, Some(Priority::High));
    assert_eq!(body.shape, Some(Shape::Rect { w: 2, h: 3 }));
    assert_eq!(body.tags, ["x", "y"]);
    assert_eq!(body.pair, Some((1, "one".to_owned())));
    assert_eq!(body.any, Some(serde_json::json!([1, {"a": [2]}])));
}

#[test]
fn null_is_refused_for_an_optional_field_and_read_where_asked_for() {
    for (json, path) in [
        (r#"{"name":"n","limits":null}"#, "limits"),
        (r#"{"name":"n","priority":null}"#, "priority"),
        (
            r#"{"name":"n","limits":{"max_devices":null}}"#,
            "limits.max_devices",
        ),
    ] {
        let err = from_str::<Body>(json).unwrap_err();
        assert_eq!(err.path(), path, "{json}");
        assert_eq!(err.to_string(), format!("{path}: {NOT_NULL}"), "{json}");
    }
    // Any JSON value takes null as a value.
    assert_eq!(from_str::<Value>("null").unwrap(), Value::Null);
    let raw: Box<RawValue> = from_str("null").unwrap();
    assert_eq!(raw.get(), "null");

    #[derive(Debug, Deserialize, PartialEq)]
    struct Patch {
        #[serde(default, deserialize_with = "super::nullable")]
        user: Option<Option<String>>,
    }
    for (json, user) in [
        ("{}", None),
        (r#"{"user":null}"#, Some(None)),
        (r#"{"user":"u"}"#, Some(Some("u".to_owned()))),
    ] {
        assert_eq!(from_str::<Patch>(json).unwrap().user, user, "strict {json}");
        let plain: Patch = serde_json::from_str(json).unwrap();
        assert_eq!(plain.user, user, "serde_json {json}");
    }
}

#[test]
fn enums_of_every_kind_still_read() {
    assert_eq!(from_str::<Shape>(r#""Point""#).unwrap(), Shape::Point);
    assert_eq!(
        from_str::<Shape>(r#"{"Circle":4}"#).unwrap(),
        Shape::Circle(4)
    );
    assert_eq!(
        from_str::<Shape>(r#"{"Pair":[1,2]}"#).unwrap(),
        Shape::Pair(1, 2)
    );
    assert_eq!(
        from_str::<Priority>(r#""normal""#).unwrap(),
        Priority::Normal
    );
}

#[test]
fn raw_values_keep_their_text_and_may_be_arrays() {
    #[derive(Deserialize)]
    struct Owned {
        data: Box<RawValue>,
    }
    #[derive(Deserialize)]
    struct Borrowed<'a> {
        #[serde(borrow)]
        data: &'a RawValue,
    }
    let owned: Owned = from_slice(br#"{"data":[1, {"a":2}]}"#).unwrap();
    assert_eq!(owned.data.get(), r#"[1, {"a":2}]"#);
    let text = r#"{"data":{"x":[true]}}"#;
    let borrowed: Borrowed<'_> = from_str(text).unwrap();
    assert_eq!(borrowed.data.get(), r#"{"x":[true]}"#);
}

#[test]
fn an_array_in_place_of_a_struct_is_refused_at_any_depth() {
    for (text, path) in [
        (r#"[1]"#, ""),
        (r#"{"name":"n","limits":[5,7]}"#, "limits"),
        (r#"{"name":"n","limits":[null,null]}"#, "limits"),
        (r#"{"name":"n","limits":[]}"#, "limits"),
        (r#"{"name":"n","items":[{},[1]]}"#, "items[1]"),
        (r#"{"name":"n","by_name":{"a":[1]}}"#, "by_name.a"),
        (r#"{"name":"n","shape":{"Rect":[2,3]}}"#, "shape.Rect"),
    ] {
        let (at, message) = if path.is_empty() {
            refused::<Limits>(text)
        } else {
            refused::<Body>(text)
        };
        assert_eq!(at, path, "{text}");
        assert!(message.contains(NOT_AN_ARRAY), "{text}: {message}");
        if !path.is_empty() {
            assert_eq!(message, format!("{path}: {NOT_AN_ARRAY}"), "{text}");
        }
    }
}

#[test]
fn an_array_in_place_of_a_map_is_refused_with_the_same_words() {
    let (at, message) = refused::<Body>(r#"{"name":"n","labels":["k","v"]}"#);
    assert_eq!(at, "labels");
    assert_eq!(message, format!("labels: {NOT_AN_ARRAY}"));
}

#[test]
fn other_errors_name_their_path_too() {
    let (at, message) = refused::<Body>(r#"{"name":"n","items":[{"max_devices":"x"}]}"#);
    assert_eq!(at, "items[0].max_devices");
    assert!(
        message.starts_with("items[0].max_devices: invalid type"),
        "{message}"
    );
    let (_, message) = refused::<Body>(r#"{"name":"n","limits":{"bogus":1}}"#);
    assert!(message.contains("unknown field `bogus`"), "{message}");
    // No path at the top level: serde_json's message with its position.
    let (at, message) = refused::<Body>(r#"{"limits":{}}"#);
    assert_eq!(at, "");
    assert!(message.contains("missing field `name`"), "{message}");
    assert!(message.contains("line 1"), "{message}");
}

#[test]
fn trailing_characters_and_bad_json_are_refused() {
    let e = from_str::<Limits>(r#"{} x"#).unwrap_err();
    assert_eq!(e.path(), "");
    assert!(e.to_string().contains("trailing characters"), "{e}");
    let e = from_str::<Limits>(r#"{"max_devices":"#).unwrap_err();
    assert!(e.inner().is_eof(), "{e}");
}

#[test]
fn untagged_enums_of_plain_values_still_read() {
    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(untagged)]
    enum Rate {
        Number(u32),
        Text(String),
    }
    assert_eq!(from_str::<Rate>("3").unwrap(), Rate::Number(3));
    assert_eq!(
        from_str::<Rate>(r#""2/s""#).unwrap(),
        Rate::Text("2/s".into())
    );
}
