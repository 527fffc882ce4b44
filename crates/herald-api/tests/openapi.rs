//! Checks docs/openapi.yaml (which the server serves at `/v1/openapi.yaml`) on its own: it
//! parses as OpenAPI 3.x, every operation has a response, path parameters are declared, and
//! every `$ref` points to a component that exists. That every route the routers serve is
//! documented with exactly its methods is checked against the running server, in
//! `crates/herald-server/tests/server/openapi.rs`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_yaml::{Mapping, Value};

const METHODS: &[&str] = &[
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn repo_file(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

fn spec_text() -> String {
    let path = repo_file("docs/openapi.yaml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn spec() -> Value {
    serde_yaml::from_str(&spec_text()).unwrap_or_else(|e| panic!("docs/openapi.yaml: {e}"))
}

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_mapping().and_then(|m| m.get(key))
}

fn paths(spec: &Value) -> &Mapping {
    get(spec, "paths")
        .and_then(Value::as_mapping)
        .expect("`paths` is a mapping")
}

/// Every (path, method, operation) in the document.
fn operations(spec: &Value) -> Vec<(String, String, &Value)> {
    let mut out = Vec::new();
    for (path, item) in paths(spec) {
        let path = path.as_str().expect("path keys are strings").to_owned();
        let item = item.as_mapping().expect("path items are mappings");
        for (key, op) in item {
            let key = key.as_str().expect("path item keys are strings");
            if METHODS.contains(&key) {
                out.push((path.clone(), key.to_owned(), op));
            }
        }
    }
    out
}

#[test]
fn is_openapi_3() {
    let spec = spec();
    let version = get(&spec, "openapi")
        .and_then(Value::as_str)
        .expect("`openapi` is a string");
    assert!(version.starts_with("3."), "openapi version is {version:?}");
    let info = get(&spec, "info").expect("`info` is present");
    assert!(get(info, "title").and_then(Value::as_str).is_some());
    assert!(get(info, "version").and_then(Value::as_str).is_some());
}

#[test]
fn every_operation_has_a_response() {
    let spec = spec();
    let ops = operations(&spec);
    assert!(!ops.is_empty());
    let mut ids = BTreeSet::new();
    for (path, method, op) in ops {
        let responses = get(op, "responses")
            .and_then(Value::as_mapping)
            .unwrap_or_else(|| panic!("{method} {path} has no responses"));
        assert!(!responses.is_empty(), "{method} {path} has no responses");
        for (status, response) in responses {
            let status = status
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}: quote status {status:?} as a string"));
            assert!(
                status == "default" || (status.len() == 3 && status.parse::<u16>().is_ok()),
                "{method} {path}: bad status {status:?}"
            );
            assert!(
                get(response, "$ref").is_some() || get(response, "description").is_some(),
                "{method} {path} {status}: a response needs a description"
            );
        }
        if let Some(id) = get(op, "operationId").and_then(Value::as_str) {
            assert!(ids.insert(id.to_owned()), "operationId {id} is used twice");
        }
    }
}

#[test]
fn path_parameters_are_declared() {
    let spec = spec();
    for (path, item) in paths(&spec) {
        let path = path.as_str().unwrap();
        let mut declared = BTreeSet::new();
        let mut collect = |params: Option<&Value>| {
            for p in params.and_then(Value::as_sequence).into_iter().flatten() {
                let p = resolve(&spec, p);
                if get(p, "in").and_then(Value::as_str) == Some("path") {
                    declared.insert(get(p, "name").and_then(Value::as_str).unwrap().to_owned());
                }
            }
        };
        collect(get(item, "parameters"));
        for method in METHODS {
            if let Some(op) = get(item, method) {
                collect(get(op, "parameters"));
            }
        }
        let mut rest = path;
        while let Some(start) = rest.find('{') {
            let end = rest[start..].find('}').expect("closing brace") + start;
            let name = &rest[start + 1..end];
            assert!(
                declared.contains(name),
                "{path}: parameter {name} is not declared"
            );
            rest = &rest[end + 1..];
        }
    }
}

/// Follows a `$ref` (if `v` is one) to what it names.
fn resolve<'a>(spec: &'a Value, v: &'a Value) -> &'a Value {
    match get(v, "$ref").and_then(Value::as_str) {
        Some(r) => lookup(spec, r).unwrap_or_else(|| panic!("$ref {r} points nowhere")),
        None => v,
    }
}

/// The value a local JSON pointer reference (`#/a/b`) names.
fn lookup<'a>(spec: &'a Value, reference: &str) -> Option<&'a Value> {
    let pointer = reference.strip_prefix("#/")?;
    pointer.split('/').try_fold(spec, |node, token| {
        let token = token.replace("~1", "/").replace("~0", "~");
        get(node, &token)
    })
}

fn collect_refs<'a>(v: &'a Value, at: &str, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::Mapping(m) => {
            for (k, child) in m {
                let key = k.as_str().unwrap_or("?");
                if key == "$ref" {
                    let r = child
                        .as_str()
                        .unwrap_or_else(|| panic!("{at}: $ref is not a string"));
                    out.push((at.to_owned(), r));
                } else {
                    collect_refs(child, &format!("{at}/{key}"), out);
                }
            }
        }
        Value::Sequence(s) => {
            for (i, child) in s.iter().enumerate() {
                collect_refs(child, &format!("{at}/{i}"), out);
            }
        }
        Value::Tagged(t) => collect_refs(&t.value, at, out),
        _ => {}
    }
}

#[test]
fn every_ref_points_to_an_existing_component() {
    let spec = spec();
    let mut refs = Vec::new();
    collect_refs(&spec, "#", &mut refs);
    assert!(!refs.is_empty(), "expected some $refs");
    for (at, r) in refs {
        assert!(
            r.starts_with("#/components/"),
            "{at}: $ref {r} is not a local component"
        );
        assert!(lookup(&spec, r).is_some(), "{at}: $ref {r} points nowhere");
    }
}

#[test]
fn security_schemes_are_defined() {
    let spec = spec();
    let schemes = get(&spec, "components")
        .and_then(|c| get(c, "securitySchemes"))
        .and_then(Value::as_mapping)
        .expect("components.securitySchemes");
    for (path, method, op) in operations(&spec) {
        for requirement in get(op, "security")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
        {
            for name in requirement.as_mapping().expect("requirement").keys() {
                let name = name.as_str().unwrap();
                assert!(
                    schemes.contains_key(name),
                    "{method} {path}: unknown security scheme {name}"
                );
            }
        }
    }
}
