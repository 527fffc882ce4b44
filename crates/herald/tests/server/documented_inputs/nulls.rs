//! Every documented JSON request body, sent with `null` in place of each property whose schema
//! has a type and is not `nullable` (at any depth: `name`, `limits.ack_window_ms`,
//! `target.user`, `webpush.notification.icon`, `messages[0].id`): `null` is not a string or a
//! number, so each must be refused with `400`, a message that names the property (for an
//! optional one: `name: null is not allowed: leave the field out`), and nothing
//! the fixture holds may change. Before, the server read `null` as "left out" wherever a field
//! was optional (`{"name": null}` made an app, `{"device": null}` minted a token).
//!
//! A property documented as `nullable` (a device patch's `user`, whose `null` removes it) or
//! as any JSON value (`data`) takes `null` and is not checked here; `data: null` is a value,
//! delivered as `null` (the last test).

use serde_json::{json, Value};
use serde_yaml::Value as Yaml;

use super::bodies::{describe, examples, get, object_alternatives, set, Step};
use super::{json_bodies, resolve, spec, Fixture};
use crate::support;

/// Whether `schema` says what type its values have (a `type`, or alternatives that do).
fn typed(spec: &Yaml, schema: &Yaml) -> bool {
    let schema = resolve(spec, schema);
    schema.get("type").is_some()
        || ["oneOf", "anyOf", "allOf"].iter().any(|key| {
            schema
                .get(*key)
                .and_then(Yaml::as_sequence)
                .is_some_and(|alternatives| alternatives.iter().all(|a| typed(spec, a)))
        })
}

/// Every property location in a body of `schema` whose schema is typed and not `nullable`,
/// walking objects, the first element of arrays, and the alternatives of a body or property
/// that is one of several objects (those that take every field `example` has there).
fn typed_properties(
    spec: &Yaml,
    schema: &Yaml,
    example: &Value,
    at: Vec<Step>,
    out: &mut Vec<Vec<Step>>,
) {
    let schema = resolve(spec, schema);
    let here = get(example, &at).and_then(Value::as_object);
    for alternative in object_alternatives(spec, schema) {
        let names = alternative.get("properties").and_then(Yaml::as_mapping);
        let takes_example = here.is_none_or(|fields| {
            fields
                .keys()
                .all(|k| names.is_some_and(|n| n.contains_key(k.as_str())))
        });
        if takes_example {
            typed_properties(spec, alternative, example, at.clone(), out);
        }
    }
    match schema.get("type").and_then(Yaml::as_str) {
        Some("object") => {
            let properties = schema.get("properties").and_then(Yaml::as_mapping);
            for (name, property) in properties.into_iter().flatten() {
                let mut next = at.clone();
                next.push(Step::Key(name.as_str().unwrap().to_owned()));
                let resolved = resolve(spec, property);
                let nullable = resolved.get("nullable").and_then(Yaml::as_bool) == Some(true);
                if typed(spec, property) && !nullable {
                    let known = out.iter().any(|l| describe(l) == describe(&next));
                    if !known {
                        out.push(next.clone());
                    }
                }
                typed_properties(spec, property, example, next, out);
            }
        }
        Some("array") => {
            if let Some(items) = schema.get("items") {
                let mut next = at;
                next.push(Step::Index(0));
                typed_properties(spec, items, example, next, out);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn every_documented_body_refuses_null_for_a_property_that_is_not_nullable() {
    let spec = spec();
    let fixture = Fixture::start().await;
    let before = fixture.state().await;
    let mut sent = 0;
    let mut failures = Vec::new();
    for (template, method, op, media) in json_bodies(&spec) {
        let key = fixture.key_for(&spec, op);
        for (name, example) in examples(media) {
            let path = fixture.example_path(&template, &name);
            let mut locations = Vec::new();
            typed_properties(
                &spec,
                &media["schema"],
                &example,
                Vec::new(),
                &mut locations,
            );
            for location in &locations {
                let mut body = example.clone();
                set(&mut body, location, Value::Null);
                let (status, answer) = fixture.send(&method, &path, &key, Some(&body)).await;
                sent += 1;
                let message = answer["error"]["message"].as_str().unwrap_or("");
                let named = describe(location);
                let last = match location.last() {
                    Some(Step::Key(k)) => k.clone(),
                    _ => named.clone(),
                };
                // An optional field says "null is not allowed"; a required one serde's own words
                // ("expected value" for an enum): both name the property.
                if status != 400 || !message.contains(&last) {
                    failures.push(format!(
                        "{method} {path} with null at {named}: {status} {answer}\n  body: {body}"
                    ));
                }
            }
        }
    }
    assert!(
        sent > 100,
        "only {sent} requests: the walk found too few properties"
    );
    failures.extend(fixture.changes_since(&before).await);
    assert!(
        failures.is_empty(),
        "{} of {sent} requests with null for a property that is not nullable were not refused, \
         or state changed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn null_data_is_a_value_and_a_nullable_field_takes_null() {
    let fixture = Fixture::start().await;
    let server = &fixture.server;
    // A push's `data` is any JSON value: `null` is delivered as `null`, not read as "no data"
    // (which a push without a notification would be refused for).
    let push = json!({"target": {"device": "dev-1"}, "data": null});
    let (status, body) = server.post("/v1/push", push).await;
    assert_eq!(status, 202, "{body}");
    let push_id = body["id"].as_str().expect("a push id").to_owned();
    let (status, body) = support::call(
        server,
        "GET",
        "/v1/poll?timeout=0",
        &fixture.device_token,
        None,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let messages = body["messages"].as_array().expect("messages");
    let envelope = messages
        .iter()
        .find(|m| m["id"] == json!(push_id))
        .map(|m| &m["data"])
        .unwrap_or_else(|| panic!("the push {push_id} reaches the device: {body}"));
    assert!(
        envelope.get("data").is_some_and(Value::is_null),
        "the envelope carries data: null: {envelope}"
    );
    // A device patch's `user` is nullable: `null` removes it.
    let (status, body) = support::call(
        server,
        "PATCH",
        "/v1/devices/dev-1",
        support::API_KEY,
        Some(json!({"user": "alice"})),
    )
    .await;
    assert_eq!((status, &body["user"]), (200, &json!("alice")), "{body}");
    let (status, body) = support::call(
        server,
        "PATCH",
        "/v1/devices/dev-1",
        support::API_KEY,
        Some(json!({"user": null})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(body.get("user").is_none(), "{body}");
}
