//! Every documented integer query parameter, on every route that has one, at the ends of its
//! documented range (accepted) and just past them and not a number (refused with `400
//! bad_request` and a message naming the parameter and the range). The range comes from the
//! document (`minimum`, `maximum`, else the bounds of `format: int64`), so the server and the
//! document agree or this fails. Before one rule read every query, `GET /v1/jobs/dead?limit=0`
//! and `GET /v1/push/{id}?devices=true&limit=99999` were accepted and `limit=abc` answered
//! `query: invalid digit found in string`.

use serde_json::Value;
use serde_yaml::Value as Yaml;

use super::{operations, resolve, spec, Fixture};
use crate::support;

/// A documented query parameter: its name and schema.
struct Parameter<'a> {
    name: String,
    schema: &'a Yaml,
}

/// The query parameters documented for `op` (and its path item's `parameters`).
fn query_parameters<'a>(spec: &'a Yaml, item: &'a Yaml, op: &'a Yaml) -> Vec<Parameter<'a>> {
    let lists = [item.get("parameters"), op.get("parameters")];
    lists
        .into_iter()
        .flatten()
        .filter_map(Yaml::as_sequence)
        .flatten()
        .map(|p| resolve(spec, p))
        .filter(|p| p.get("in").and_then(Yaml::as_str) == Some("query"))
        .map(|p| Parameter {
            name: p["name"].as_str().unwrap().to_owned(),
            schema: resolve(spec, &p["schema"]),
        })
        .collect()
}

/// The documented range of an integer parameter.
fn range(name: &str, schema: &Yaml) -> (i128, i128) {
    let int64 = schema.get("format").and_then(Yaml::as_str) == Some("int64");
    let bound = |key: &str, int64_bound: i64| {
        schema
            .get(key)
            .and_then(Yaml::as_i64)
            .map(i128::from)
            .or(int64.then_some(i128::from(int64_bound)))
            .unwrap_or_else(|| panic!("query parameter {name}: document its {key} or format"))
    };
    (bound("minimum", i64::MIN), bound("maximum", i64::MAX))
}

/// The query a route needs beside the parameter under test (left out when it is the one under
/// test): long-poll needs a channel it may read (with a message waiting, so it answers at
/// once) and a token; a receipt lists devices only with `devices=true`.
fn base_query(fixture: &Fixture, template: &str, under_test: &str) -> String {
    let pairs = match template {
        "/v1/poll" => vec![
            ("channel", "news".to_owned()),
            ("since", "0".to_owned()),
            ("token", fixture.server.token(&["news"], &[])),
        ],
        "/v1/push/{id}" => vec![("devices", "true".to_owned())],
        _ => Vec::new(),
    };
    pairs
        .into_iter()
        .filter(|(name, _)| *name != under_test)
        .map(|(name, value)| format!("{name}={value}&"))
        .collect()
}

#[tokio::test]
async fn every_documented_query_number_is_checked_against_its_documented_range() {
    let spec = spec();
    let fixture = Fixture::start().await;
    let mut checked = Vec::new();
    let mut failures = Vec::new();
    for (template, method, op) in operations(&spec) {
        if method != "GET" {
            continue;
        }
        let item = &spec["paths"][template.as_str()];
        let path = fixture.concrete(&template, "webpush");
        let key = fixture.key_for(&spec, op);
        for parameter in query_parameters(&spec, item, op) {
            let name = &parameter.name;
            let base = base_query(&fixture, &template, name);
            let kind = parameter.schema.get("type").and_then(Yaml::as_str);
            let mut cases: Vec<(String, Option<String>)> = Vec::new();
            match kind {
                Some("integer") => {
                    let (min, max) = range(name, parameter.schema);
                    let refusal = |v: &str| {
                        format!("{name}: must be a whole number from {min} to {max}, not {v:?}")
                    };
                    for accepted in [min, max] {
                        cases.push((accepted.to_string(), None));
                    }
                    for refused in [(min - 1).to_string(), (max + 1).to_string(), "abc".into()] {
                        let message = refusal(&refused);
                        cases.push((refused, Some(message)));
                    }
                }
                Some("boolean") => {
                    cases.push(("true".into(), None));
                    cases.push(("false".into(), None));
                    let message = format!("{name}: must be true or false, not \"maybe\"");
                    cases.push(("maybe".into(), Some(message)));
                }
                _ => continue,
            }
            checked.push(format!("{template} {name}"));
            for (value, refusal) in cases {
                let url = format!("{path}?{base}{name}={value}");
                let (status, answer) = fixture.send("GET", &url, &key, None).await;
                let ok = match &refusal {
                    None => status == 200,
                    Some(message) => {
                        status == 400
                            && answer["error"]["code"] == "bad_request"
                            && answer["error"]["message"] == Value::String(message.clone())
                    }
                };
                if !ok {
                    failures.push(format!(
                        "GET {url}: {status} {answer}\n  expected {}",
                        refusal.map_or("200".to_owned(), |m| format!("400: {m}"))
                    ));
                }
            }
        }
    }
    for expected in [
        "/v1/channels limit",
        "/v1/channels/{name}/messages since",
        "/v1/channels/{name}/messages last",
        "/v1/channels/{name}/messages limit",
        "/v1/poll timeout",
        "/v1/poll limit",
        "/v1/jobs/dead after",
        "/v1/jobs/dead limit",
        "/v1/apps/{id}/hooks/{hook}/dead after",
        "/v1/apps/{id}/hooks/{hook}/dead limit",
        "/v1/audit since",
        "/v1/audit until",
        "/v1/audit limit",
        "/v1/devices limit",
        "/v1/push/{id} devices",
        "/v1/push/{id} limit",
    ] {
        assert!(
            checked.iter().any(|c| c == expected),
            "{expected} is not documented as a number or flag (checked: {checked:?})"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn api_routes_refuse_unknown_and_repeated_query_parameters_by_name() {
    let fixture = Fixture::start().await;
    let push = format!("/v1/push/{}", fixture.push);
    for path in [
        "/v1/channels",
        "/v1/channels/news/messages",
        "/v1/jobs/dead",
        "/v1/audit",
        "/v1/devices",
        push.as_str(),
    ] {
        let (status, answer) = fixture
            .send("GET", &format!("{path}?lmit=5"), support::API_KEY, None)
            .await;
        assert_eq!(status, 400, "{path}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("unknown parameter \"lmit\": this route takes "),
            "{path}: {message}"
        );
        let (status, answer) = fixture
            .send(
                "GET",
                &format!("{path}?limit=5&limit=6"),
                support::API_KEY,
                None,
            )
            .await;
        assert_eq!(status, 400, "{path}: {answer}");
        assert_eq!(
            answer["error"]["message"], "limit: given more than once; give it once",
            "{path}"
        );
    }
}
