//! Every documented JSON request body, sent with an array in place of each object it holds:
//! the body itself, each property whose schema is an object (after `$ref`), and each object
//! element of an array, at any depth (`limits`, `target`, `messages[0]`, `fcm.android`,
//! `apns.custom`). serde reads an array into a struct field by field, so before bodies were read
//! strictly `{"limits":[null,null]}` wiped an app's limits and `{"target":["dev-1"]}` pushed.
//! Each must be refused with `400 bad_request`, a message that says an array is not an object
//! and where, and nothing the fixture holds may change.
//!
//! A property documented as one of several shapes (`oneOf`, e.g. FCM's `service_account`,
//! an object or a string) or as any JSON value (`data`) is not an object and not checked.

use serde_json::{json, Value};
use serde_yaml::Value as Yaml;

use super::{json_bodies, resolve, spec, Fixture};

/// One step of a location in a body.
#[derive(Clone, Debug)]
pub(super) enum Step {
    Key(String),
    Index(usize),
}

/// How the server names a location: `messages[0].target`.
pub(super) fn describe(location: &[Step]) -> String {
    let mut out = String::new();
    for step in location {
        match step {
            Step::Key(key) if out.is_empty() => out.push_str(key),
            Step::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// The alternatives of a `oneOf`/`anyOf` schema when every one of them is an object (a push
/// `target`, a device registration, a revoke body); none otherwise (FCM's `service_account` is
/// an object or a string).
pub(super) fn object_alternatives<'a>(spec: &'a Yaml, schema: &'a Yaml) -> Vec<&'a Yaml> {
    for key in ["oneOf", "anyOf"] {
        if let Some(alternatives) = schema.get(key).and_then(Yaml::as_sequence) {
            let resolved: Vec<&Yaml> = alternatives.iter().map(|a| resolve(spec, a)).collect();
            if resolved
                .iter()
                .all(|a| a.get("type").and_then(Yaml::as_str) == Some("object"))
            {
                return resolved;
            }
        }
    }
    Vec::new()
}

/// Every location in a body of `schema` whose schema is an object: `at` itself when it is
/// one, each property, and the first element of each array. A `oneOf`/`anyOf` whose
/// alternatives are all objects is walked into (the credentials body is one of three objects,
/// a push `target` one of four); one with another alternative is not an object.
pub(super) fn object_locations(
    spec: &Yaml,
    schema: &Yaml,
    at: Vec<Step>,
    out: &mut Vec<Vec<Step>>,
) {
    let schema = resolve(spec, schema);
    for alternative in object_alternatives(spec, schema) {
        object_locations(spec, alternative, at.clone(), out);
    }
    match schema.get("type").and_then(Yaml::as_str) {
        Some("object") => {
            if !out.iter().any(|l| describe(l) == describe(&at)) {
                out.push(at.clone());
            }
            let properties = schema.get("properties").and_then(Yaml::as_mapping);
            for (name, property) in properties.into_iter().flatten() {
                let mut next = at.clone();
                next.push(Step::Key(name.as_str().unwrap().to_owned()));
                object_locations(spec, property, next, out);
            }
        }
        Some("array") => {
            if let Some(items) = schema.get("items") {
                let mut next = at;
                next.push(Step::Index(0));
                object_locations(spec, items, next, out);
            }
        }
        _ => {}
    }
}

/// The value at `location` in `body`, if there is one.
pub(super) fn get<'a>(body: &'a Value, location: &[Step]) -> Option<&'a Value> {
    location.iter().try_fold(body, |v, step| match step {
        Step::Key(k) => v.get(k),
        Step::Index(i) => v.get(i),
    })
}

/// `body` with `value` at `location`, making the objects and arrays on the way.
pub(super) fn set(body: &mut Value, location: &[Step], value: Value) {
    let Some((first, rest)) = location.split_first() else {
        *body = value;
        return;
    };
    let slot = match first {
        Step::Key(k) => {
            if !body.is_object() {
                *body = json!({});
            }
            body.as_object_mut()
                .unwrap()
                .entry(k.clone())
                .or_insert(Value::Null)
        }
        Step::Index(i) => {
            if !body.is_array() {
                *body = json!([]);
            }
            let items = body.as_array_mut().unwrap();
            while items.len() <= *i {
                items.push(json!({}));
            }
            &mut items[*i]
        }
    };
    set(slot, rest, value);
}

/// The arrays put in place of the object at `location`: its example's values in field order
/// (what serde would read as the fields), and `[null, null]` (what wiped an app's limits).
fn arrays_for(example: &Value, location: &[Step]) -> Vec<Value> {
    let mut arrays = vec![json!([null, null])];
    if let Some(Value::Object(fields)) = get(example, location) {
        if !fields.is_empty() {
            arrays.insert(0, Value::Array(fields.values().cloned().collect()));
        }
    }
    arrays
}

/// The documented examples of a request body, by name (`""` for a single `example`).
pub(super) fn examples(media: &Yaml) -> Vec<(String, Value)> {
    let to_json = |y: &Yaml| serde_json::to_value(y).expect("an example is JSON");
    if let Some(example) = media.get("example") {
        return vec![(String::new(), to_json(example))];
    }
    let named = media.get("examples").and_then(Yaml::as_mapping);
    let out: Vec<(String, Value)> = named
        .into_iter()
        .flatten()
        .map(|(name, e)| (name.as_str().unwrap().to_owned(), to_json(&e["value"])))
        .collect();
    if out.is_empty() {
        vec![(String::new(), json!({}))]
    } else {
        out
    }
}

#[tokio::test]
async fn every_documented_body_refuses_an_array_in_place_of_each_object() {
    let spec = spec();
    let fixture = Fixture::start().await;
    let before = fixture.state().await;
    let mut sent = 0;
    let mut failures = Vec::new();
    for (template, method, op, media) in json_bodies(&spec) {
        let mut locations = Vec::new();
        object_locations(&spec, &media["schema"], Vec::new(), &mut locations);
        let key = fixture.key_for(&spec, op);
        for (name, example) in examples(media) {
            let path = fixture.example_path(&template, &name);
            for location in &locations {
                for array in arrays_for(&example, location) {
                    let mut body = example.clone();
                    set(&mut body, location, array);
                    let (status, answer) = fixture.send(&method, &path, &key, Some(&body)).await;
                    sent += 1;
                    let message = answer["error"]["message"].as_str().unwrap_or("");
                    let named = describe(location);
                    let refused = status == 400
                        && answer["error"]["code"] == "bad_request"
                        && message.contains("not an array")
                        && message.contains(&named);
                    if !refused {
                        failures.push(format!(
                            "{method} {path} with an array at {:?}: {status} {answer}\n  body: {body}",
                            if named.is_empty() { "the top" } else { &named }
                        ));
                    }
                }
            }
        }
    }
    assert!(
        sent > 40,
        "only {sent} requests: the walk found too few bodies"
    );
    failures.extend(fixture.changes_since(&before).await);
    assert!(
        failures.is_empty(),
        "{} of {sent} requests with an array in place of an object were not refused, or state \
         changed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
