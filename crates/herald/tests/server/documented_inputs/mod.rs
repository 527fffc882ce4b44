//! Inputs driven by docs/openapi.yaml (the document the server serves), sent to the real
//! server: every request body with an array in place of each object it holds ([`bodies`]), and
//! every integer query parameter at and just past the range the document gives ([`queries`]).
//! The routes are read from the document, so a route documented later is checked too.

mod agreement;
mod bodies;
mod nulls;
mod queries;

use serde_json::{json, Value};
use serde_yaml::Value as Yaml;

use crate::support::{self, Server};

/// The admin key of the fixture's server.
const ADMIN: &str = "documented-inputs-admin-key-0123456789";

/// docs/openapi.yaml.
fn spec() -> Yaml {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.yaml");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `schema` with a `$ref` followed (repeatedly) to the component it names.
fn resolve<'a>(spec: &'a Yaml, mut schema: &'a Yaml) -> &'a Yaml {
    while let Some(reference) = schema.get("$ref").and_then(Yaml::as_str) {
        let mut target = spec;
        for part in reference.trim_start_matches("#/").split('/') {
            target = target
                .get(part)
                .unwrap_or_else(|| panic!("$ref {reference} names nothing"));
        }
        schema = target;
    }
    schema
}

/// Every `(path template, method, operation)` of the document.
fn operations(spec: &Yaml) -> Vec<(String, String, &Yaml)> {
    let mut out = Vec::new();
    for (path, item) in spec["paths"].as_mapping().expect("paths") {
        let path = path.as_str().expect("a path is a string");
        for (method, op) in item.as_mapping().expect("a path item is a mapping") {
            let method = method.as_str().expect("a method is a string");
            if ["get", "put", "post", "patch", "delete"].contains(&method) {
                out.push((path.to_owned(), method.to_uppercase(), op));
            }
        }
    }
    out
}

/// Every operation that takes a JSON body: `(path template, method, operation, its
/// `application/json` media object)`.
fn json_bodies(spec: &Yaml) -> Vec<(String, String, &Yaml, &Yaml)> {
    operations(spec)
        .into_iter()
        .filter_map(|(template, method, op)| {
            let media = op
                .get("requestBody")
                .and_then(|b| b.get("content"))
                .and_then(|c| c.get("application/json"))?;
            Some((template, method, op, media))
        })
        .collect()
}

/// A server with what the documented routes need to find: an app `a1` with limits and a
/// webhook endpoint, a device `dev-1` of the default app, a message in `news`, a push to
/// `dev-1`, and a token of `dev-1`.
struct Fixture {
    server: Server,
    device_token: String,
    push: String,
    /// The id of `a1`'s webhook endpoint.
    hook: String,
}

impl Fixture {
    /// The concrete path of `template` for the example named `example`: credentials examples
    /// are named for their provider (`apns_token`, `fcm`), others take `webpush`'s path.
    fn example_path(&self, template: &str, example: &str) -> String {
        let provider = example.split('_').next().filter(|p| !p.is_empty());
        self.concrete(template, provider.unwrap_or("webpush"))
    }

    async fn start() -> Fixture {
        // The webhook endpoint listens on loopback, which tenant-given URLs reach only when
        // allowed.
        let server = Server::builder()
            .arg("--admin-key")
            .arg(ADMIN)
            .arg("--outbound-allow")
            .arg("127.0.0.1")
            .start()
            .await;
        let limits = json!({"max_devices": 5, "max_connections": 7, "max_message_bytes": 1000});
        let (status, body) = support::call(
            &server,
            "POST",
            "/v1/apps",
            ADMIN,
            Some(json!({"id": "a1", "limits": limits})),
        )
        .await;
        assert_eq!(status, 201, "{body}");
        let device = json!({"platform": "herald", "id": "dev-1", "tags": ["sports"]});
        let (status, body) = server.post("/v1/devices", device).await;
        assert_eq!(status, 201, "{body}");
        server.publish("news", json!({"n": 1})).await;
        let push = json!({"target": {"device": "dev-1"}, "data": {"n": 2}});
        let (status, body) = server.post("/v1/push", push).await;
        assert_eq!(status, 202, "{body}");
        let push = body["id"].as_str().unwrap().to_owned();
        let (status, body) = server.post("/v1/tokens", json!({"device": "dev-1"})).await;
        assert_eq!(status, 200, "{body}");
        let device_token = body["token"].as_str().unwrap().to_owned();
        let hook = json!({"url": "http://127.0.0.1:9/hooks", "events": ["user.offline"]});
        let (status, body) =
            support::call(&server, "POST", "/v1/apps/a1/hooks", ADMIN, Some(hook)).await;
        assert_eq!(status, 201, "{body}");
        let hook = body["hook"]["id"].as_i64().unwrap().to_string();
        Fixture {
            server,
            device_token,
            push,
            hook,
        }
    }

    /// The credential for `op`, by its documented security: the admin key where it is
    /// accepted, else a publisher key, else the device token.
    fn key_for(&self, spec: &Yaml, op: &Yaml) -> String {
        let security = op.get("security").or_else(|| spec.get("security"));
        let schemes: Vec<&str> = security
            .and_then(Yaml::as_sequence)
            .into_iter()
            .flatten()
            .filter_map(Yaml::as_mapping)
            .flat_map(|m| m.keys().filter_map(Yaml::as_str))
            .collect();
        if schemes.contains(&"adminKey") {
            ADMIN.to_owned()
        } else if schemes.contains(&"clientTokenBearer") {
            self.device_token.clone()
        } else {
            support::API_KEY.to_owned()
        }
    }

    /// `template` with each path parameter filled with something the fixture holds
    /// (`provider` for the credentials routes: `provider`; a webhook dead letter's `row`, which
    /// the fixture does not hold: `1`).
    fn concrete(&self, template: &str, provider: &str) -> String {
        let under = |prefix: &str| template.starts_with(prefix);
        template
            .split('/')
            .map(|segment| match segment {
                "{name}" => "news".to_owned(),
                "{provider}" => provider.to_owned(),
                "{id}" if under("/v1/apps/") => "a1".to_owned(),
                "{id}" if under("/v1/devices/") => "dev-1".to_owned(),
                "{id}" if under("/v1/push/") => self.push.clone(),
                "{id}" => "1".to_owned(),
                "{key}" => "000000000000".to_owned(),
                "{hook}" => self.hook.clone(),
                "{row}" => "1".to_owned(),
                other => other.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("/")
    }

    /// `method path` with `key`, the dashboard's session header, and a JSON `body`: the status
    /// and the JSON answer (`null` if it is not JSON).
    async fn send(
        &self,
        method: &str,
        path: &str,
        key: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .server
            .http
            .request(m, self.server.url(path))
            .bearer_auth(key)
            .header("X-Herald-Session", "1");
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// What the fixture's state looks like from the outside: apps and their limits and keys,
    /// the test app's token keys, providers and webhook endpoints, devices, the device's inbox,
    /// channels and history. A refused request changes none of it.
    async fn state(&self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (path, key) in [
            ("/v1/apps", ADMIN),
            ("/v1/apps/a1/keys", ADMIN),
            ("/v1/apps/default/keys", ADMIN),
            ("/v1/apps/a1/token-keys", ADMIN),
            ("/v1/apps/a1/providers", ADMIN),
            ("/v1/apps/a1/hooks", ADMIN),
            ("/v1/devices", support::API_KEY),
            ("/v1/devices/dev-1/inbox", support::API_KEY),
            ("/v1/channels", support::API_KEY),
            ("/v1/channels/news/messages", support::API_KEY),
        ] {
            let (status, body) = self.send("GET", path, key, None).await;
            assert_eq!(status, 200, "GET {path}: {body}");
            out.push((path.to_owned(), body));
        }
        out
    }

    /// What differs now from `before` (an earlier [`Fixture::state`]), one line per path.
    async fn changes_since(&self, before: &[(String, Value)]) -> Vec<String> {
        let after = self.state().await;
        before
            .iter()
            .zip(&after)
            .filter(|((_, was), (_, is))| was != is)
            .map(|((path, was), (_, is))| {
                format!("GET {path} changed:\n  before: {was}\n  after:  {is}")
            })
            .collect()
    }
}
