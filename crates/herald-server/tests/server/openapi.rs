//! docs/openapi.yaml against the routers themselves: the route list comes from
//! `herald_api::routes()` and `herald_edge::routes()` (the lists the routers are built from), and
//! each route's methods from the running server's own `Allow` header (a method no route serves
//! is answered 405 with the methods that path does serve). Every route must be documented with
//! exactly those methods, and every documented path must be served.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml::Value;
use tempfile::TempDir;

use crate::support::{settings, start};

/// The documented operations: path template -> methods (lowercase).
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let spec: Value = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let paths = spec["paths"].as_mapping().expect("`paths` is a mapping");
    paths
        .iter()
        .map(|(path, item)| {
            let methods = item
                .as_mapping()
                .expect("a path item is a mapping")
                .keys()
                .filter_map(Value::as_str)
                .filter(|k| ["get", "post", "put", "patch", "delete"].contains(k))
                .map(str::to_owned)
                .collect();
            (
                path.as_str().expect("paths are strings").to_owned(),
                methods,
            )
        })
        .collect()
}

/// A concrete path for a route template: each `{param}` filled in.
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|seg| if seg.starts_with('{') { "probe" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

/// The methods the server serves at `path` (HEAD and OPTIONS left out: HEAD comes with every
/// GET, OPTIONS answers CORS preflights), read from the `Allow` header of a TRACE request,
/// which no route serves.
async fn served(client: &reqwest::Client, base: &str, path: &str) -> BTreeSet<String> {
    let r = client
        .request(reqwest::Method::TRACE, format!("{base}{path}"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        405,
        "TRACE {path} should be answered 405 by a routed path"
    );
    let allow = r
        .headers()
        .get("allow")
        .unwrap_or_else(|| panic!("no Allow header for {path}"))
        .to_str()
        .unwrap()
        .to_ascii_lowercase();
    allow
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty() && *m != "head" && *m != "options")
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_is_documented_with_exactly_the_methods_it_serves() {
    let data = TempDir::new().unwrap();
    let server = start(settings(data.path())).await;
    let base = format!("http://{}", server.http_addr());
    let client = reqwest::Client::new();
    let mut documented = documented();
    let routes: Vec<&str> = herald_api::routes()
        .iter()
        .map(|(path, _)| *path)
        .chain(herald_edge::routes().iter().map(|(path, _)| *path))
        .collect();
    assert!(!routes.is_empty());
    for route in routes {
        let methods = served(&client, &base, &concrete(route)).await;
        // `/v1/channels/{*path}` serves a channel (`{name}`), its messages
        // (`{name}/messages`) and its members (`{name}/presence`): together they must be
        // documented with the route's methods.
        let docs: Vec<String> = match route.strip_suffix("{*path}") {
            Some(prefix) => vec![
                format!("{prefix}{{name}}"),
                format!("{prefix}{{name}}/messages"),
                format!("{prefix}{{name}}/presence"),
            ],
            None => vec![route.to_owned()],
        };
        let mut union = BTreeSet::new();
        for doc in &docs {
            let methods = documented
                .remove(doc)
                .unwrap_or_else(|| panic!("route {route} is not documented as {doc}"));
            assert!(!methods.is_empty(), "{doc} documents no operation");
            union.extend(methods);
        }
        assert_eq!(
            union, methods,
            "route {route}: documented methods (left) differ from the methods it serves (right)"
        );
    }
    assert!(
        documented.is_empty(),
        "documented but not served: {:?}",
        documented.keys().collect::<Vec<_>>()
    );
    server.shutdown().await.unwrap();
}
