//! The publisher HTTP API, with a bearer API key (or an admin key for apps): publish, batch,
//! channel info, list and history, devices, pushes and receipts, apps, keys, tokens and stats.
//! Each call returns a typed answer; an error answer is [`Error::Server`] with the server's
//! code, message and HTTP status. [`Publisher::send`] is the untyped call under all of them.

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::types::{History, Published};
use crate::url::{encode_path, join};
use crate::{Error, ServerError};

/// A successful answer as the server sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status (2xx).
    pub status: u16,
    /// The body's text.
    pub body: String,
}

impl Answer {
    /// The body read as `T`.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_str(&self.body).map_err(|e| Error::Decode(format!("{e}: {}", self.body)))
    }
}

/// A channel's state (`GET /v1/channels/{name}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelInfo {
    /// Channel name.
    pub channel: String,
    /// Its epoch.
    pub epoch: String,
    /// Its newest seq.
    pub seq: u64,
    /// Its oldest retained seq.
    pub first_seq: u64,
    /// Live subscribers on this node.
    pub subscribers: usize,
}

/// A presence channel's members (`GET /v1/channels/{name}/presence`), in the order they joined.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChannelPresence {
    /// Channel name.
    pub channel: String,
    /// Its members.
    pub members: Vec<PresenceMember>,
    /// How many.
    pub count: usize,
}

/// One member of a presence channel.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PresenceMember {
    /// The user id (the client token's `sub`).
    pub user: String,
    /// Its data (a JSON object): the token's `user_info`, else the client's subscribe `member`.
    pub data: Value,
}

/// One page of the channel list (`GET /v1/channels`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChannelList {
    /// The channels, in name order.
    pub channels: Vec<ChannelInfo>,
    /// The name to pass as `after` for the next page, if there may be one.
    pub next: Option<String>,
}

/// One message of a batch (`POST /v1/batch`).
#[derive(Debug, Clone, Serialize)]
pub struct BatchMessage {
    /// Channel to publish to.
    pub channel: String,
    /// The data.
    pub data: Value,
    /// Idempotency key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// What a push was accepted as (`POST /v1/push`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PushAccepted {
    /// The push id (follow it with [`Publisher::receipt`]).
    pub id: String,
    /// Devices targeted, when known at once.
    pub targeted: Option<u64>,
    /// True if the idempotency key was already used.
    #[serde(default)]
    pub duplicate: bool,
}

/// A push's receipt (`GET /v1/push/{id}`), as proto defines it.
pub use herald_proto::receipt::Receipt;

/// A registered device (`POST /v1/devices`, `GET /v1/devices/{id}`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Device {
    /// Device id.
    pub id: String,
    /// `herald`, `apns`, `fcm` or `webpush`.
    pub platform: String,
    /// The provider token.
    #[serde(default)]
    pub token: Option<String>,
    /// The user it belongs to.
    #[serde(default)]
    pub user: Option<String>,
    /// Its tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Whether pushes reach it.
    pub active: bool,
}

/// A batch registration's counts (`POST /v1/devices/batch`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DeviceBatch {
    /// Devices new to the app.
    pub created: u64,
    /// Devices that existed and were updated.
    pub updated: u64,
    /// Their ids, in request order.
    pub ids: Vec<String>,
}

/// A new app and its first key (`POST /v1/apps`, admin key).
#[derive(Debug, Clone, Deserialize)]
pub struct CreatedApp {
    /// The app as stored (id, name, limits).
    pub app: Value,
    /// Its first publisher API key (shown once).
    pub key: String,
    /// That key's id.
    pub key_id: String,
    /// The app's token secret.
    pub token_secret: String,
}

/// A new publisher key (`POST /v1/apps/{id}/keys`).
#[derive(Debug, Clone, Deserialize)]
pub struct CreatedKey {
    /// The key (shown once).
    pub key: String,
    /// Its id.
    pub key_id: String,
    /// Its label.
    #[serde(default)]
    pub label: Option<String>,
}

/// A client token minted by the server (`POST /v1/tokens`).
#[derive(Debug, Clone, Deserialize)]
pub struct MintedToken {
    /// The token.
    pub token: String,
    /// Its `exp`, if any.
    #[serde(default)]
    pub expires: Option<u64>,
}

/// An app's usage (`GET /v1/apps/{id}/stats`).
#[derive(Debug, Clone, Deserialize)]
pub struct AppStats {
    /// The app id.
    pub app: String,
    /// Usage counters.
    pub usage: Value,
    /// Device counts.
    pub devices: Value,
    /// Limits.
    pub limits: Value,
}

/// A client of the publisher API of one server, with one key.
#[derive(Debug, Clone)]
pub struct Publisher {
    http: reqwest::Client,
    base: String,
    key: Option<String>,
}

impl Publisher {
    /// A client of the server at `base` using `key` (an empty key counts as none).
    pub fn new(base: &str, key: Option<&str>) -> Publisher {
        Publisher {
            http: crate::tls::http_client(),
            base: base.to_owned(),
            key: key.filter(|k| !k.is_empty()).map(str::to_owned),
        }
    }

    /// The same server with another key.
    pub fn with_key(&self, key: &str) -> Publisher {
        Publisher {
            key: Some(key.to_owned()),
            ..self.clone()
        }
    }

    /// The server's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends one request: `body` as JSON, `idempotency_key` as `Idempotency-Key`. A 2xx answer
    /// is returned as is; any other is [`Error::Server`] (its code empty when the body was not
    /// a JSON error).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Result<Answer, Error> {
        let url = join(&self.base, path);
        let mut request = self.http.request(method, &url);
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        if let Some(id) = idempotency_key {
            request = request.header("Idempotency-Key", id);
        }
        let response = check(&url, request.send().await).await?;
        let status = response.status().as_u16();
        let body = response
            .text()
            .await
            .map_err(|source| Error::Http { url, source })?;
        Ok(Answer { status, body })
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, Error> {
        self.send(method, path, body, None).await?.json()
    }

    /// Publishes `data` to `channel`; the answer comes once it is stored.
    pub async fn publish(
        &self,
        channel: &str,
        data: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Published, Error> {
        let path = format!("/v1/channels/{}/messages", encode_path(channel));
        let body = serde_json::json!({ "data": data });
        self.send(Method::POST, &path, Some(&body), idempotency_key)
            .await?
            .json()
    }

    /// Publishes several messages in one request; each has its own result.
    pub async fn batch(
        &self,
        messages: &[BatchMessage],
    ) -> Result<Vec<Result<Published, ServerError>>, Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Item {
            Published(Published),
            Failed { error: ErrorItem },
        }
        #[derive(Deserialize)]
        struct ErrorItem {
            code: String,
            message: String,
        }
        #[derive(Deserialize)]
        struct Results {
            results: Vec<Item>,
        }
        let body = serde_json::json!({ "messages": messages });
        let answer: Results = self.call(Method::POST, "/v1/batch", Some(&body)).await?;
        Ok(answer
            .results
            .into_iter()
            .map(|item| match item {
                Item::Published(p) => Ok(p),
                Item::Failed { error } => Err(ServerError {
                    status: None,
                    code: error.code,
                    message: error.message,
                }),
            })
            .collect())
    }

    /// A channel's state.
    pub async fn channel(&self, channel: &str) -> Result<ChannelInfo, Error> {
        let path = format!("/v1/channels/{}", encode_path(channel));
        self.call(Method::GET, &path, None).await
    }

    /// A presence channel's members (`not_found` for a channel outside every presence
    /// namespace).
    pub async fn presence(&self, channel: &str) -> Result<ChannelPresence, Error> {
        let path = format!("/v1/channels/{}/presence", encode_path(channel));
        self.call(Method::GET, &path, None).await
    }

    /// One page of the app's channels after `after`, at most `limit`.
    pub async fn channels(
        &self,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<ChannelList, Error> {
        let mut query = Vec::new();
        if let Some(after) = after {
            query.push(format!("after={}", crate::url::encode_query(after)));
        }
        if let Some(limit) = limit {
            query.push(format!("limit={limit}"));
        }
        let path = if query.is_empty() {
            "/v1/channels".to_owned()
        } else {
            format!("/v1/channels?{}", query.join("&"))
        };
        self.call(Method::GET, &path, None).await
    }

    /// A channel's messages after `since`, at most `limit`.
    pub async fn history(
        &self,
        channel: &str,
        since: u64,
        limit: Option<usize>,
    ) -> Result<History, Error> {
        let mut path = format!(
            "/v1/channels/{}/messages?since={since}",
            encode_path(channel)
        );
        if let Some(limit) = limit {
            path.push_str(&format!("&limit={limit}"));
        }
        self.call(Method::GET, &path, None).await
    }

    /// Registers (or updates) a device: `device` is the registration body
    /// (`{"platform","id","token","user","tags",...}`).
    pub async fn register_device(&self, device: &Value) -> Result<Device, Error> {
        self.call(Method::POST, "/v1/devices", Some(device)).await
    }

    /// Registers many devices in one request (`{"devices":[...]}`).
    pub async fn register_devices(&self, devices: &[Value]) -> Result<DeviceBatch, Error> {
        let body = serde_json::json!({ "devices": devices });
        self.call(Method::POST, "/v1/devices/batch", Some(&body))
            .await
    }

    /// One device.
    pub async fn device(&self, id: &str) -> Result<Device, Error> {
        self.call(
            Method::GET,
            &format!("/v1/devices/{}", encode_path(id)),
            None,
        )
        .await
    }

    /// Deletes a device.
    pub async fn delete_device(&self, id: &str) -> Result<(), Error> {
        let path = format!("/v1/devices/{}", encode_path(id));
        self.send(Method::DELETE, &path, None, None).await?;
        Ok(())
    }

    /// Sends a push: `push` is the `POST /v1/push` body (`{"target":{...},"data":...}`).
    pub async fn push(
        &self,
        push: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<PushAccepted, Error> {
        self.send(Method::POST, "/v1/push", Some(push), idempotency_key)
            .await?
            .json()
    }

    /// A push's receipt.
    pub async fn receipt(&self, id: &str) -> Result<Receipt, Error> {
        self.call(Method::GET, &format!("/v1/push/{}", encode_path(id)), None)
            .await
    }

    /// Creates an app (admin key): `app` is `{"id","name",...}`.
    pub async fn create_app(&self, app: &Value) -> Result<CreatedApp, Error> {
        self.call(Method::POST, "/v1/apps", Some(app)).await
    }

    /// Adds a publisher key to an app.
    pub async fn add_key(&self, app: &str, label: Option<&str>) -> Result<CreatedKey, Error> {
        let body = match label {
            Some(label) => serde_json::json!({ "label": label }),
            None => serde_json::json!({}),
        };
        let path = format!("/v1/apps/{}/keys", encode_path(app));
        self.call(Method::POST, &path, Some(&body)).await
    }

    /// Mints a client token on the server: `claims` is the `POST /v1/tokens` body.
    pub async fn mint_token(&self, claims: &Value) -> Result<MintedToken, Error> {
        self.call(Method::POST, "/v1/tokens", Some(claims)).await
    }

    /// An app's usage counters, device counts and limits.
    pub async fn stats(&self, app: &str) -> Result<AppStats, Error> {
        let path = format!("/v1/apps/{}/stats", encode_path(app));
        self.call(Method::GET, &path, None).await
    }
}

/// A sent request's response if its status is 2xx; otherwise the server's error.
pub(crate) async fn check(
    url: &str,
    sent: reqwest::Result<reqwest::Response>,
) -> Result<reqwest::Response, Error> {
    let response = sent.map_err(|source| Error::Http {
        url: url.to_owned(),
        source,
    })?;
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(|source| Error::Http {
        url: url.to_owned(),
        source,
    })?;
    Err(ServerError::from_http(status, &body).into())
}
