//! The long-poll transport (`/v1/poll`): each request carries the channels, the token and the
//! previous answer's cursor (`since`), and the answer is proto's poll answer, here owned
//! ([`PollAnswer`]). [`Poller`] keeps the cursor between polls.

use std::time::Duration;

use serde::Deserialize;

use crate::types::Message;
use crate::Error;

/// Where one channel of a poll stands.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ChannelStatus {
    /// Channel name.
    pub channel: String,
    /// Its epoch.
    pub epoch: String,
    /// Its newest seq when the poll started.
    pub seq: u64,
    /// Whether the cursor's position was resumed exactly.
    pub recovered: bool,
}

/// One poll's answer.
#[derive(Debug, Clone, Deserialize)]
pub struct PollAnswer {
    /// Messages, in seq order within each channel.
    pub messages: Vec<Message>,
    /// The cursor to send as `since` next time.
    pub cursor: String,
    /// Per channel, in cursor order.
    pub channels: Vec<ChannelStatus>,
}

/// A long-poll client of some channels, keeping its cursor.
pub struct Poller {
    http: reqwest::Client,
    base: String,
    channels: Vec<String>,
    token: Option<String>,
    /// The cursor the next poll sends (`None`: the first poll, which replays nothing).
    pub cursor: Option<String>,
    /// The longest wait the server is asked for (`timeout=`, whole seconds).
    pub timeout: Duration,
    /// More query parameters, as `&k=v` pairs (e.g. `&limit=10`).
    pub extra_query: String,
}

impl Poller {
    /// A poller of `channels` (none: a device token's inbox) on the server at `base`.
    pub fn new(base: &str, channels: &[&str], token: Option<&str>) -> Poller {
        Poller {
            http: crate::tls::http_client(),
            base: base.to_owned(),
            channels: channels.iter().map(|c| c.to_string()).collect(),
            token: token.map(str::to_owned),
            cursor: None,
            timeout: Duration::from_secs(30),
            extra_query: String::new(),
        }
    }

    /// Resumes from `cursor` (a cursor string of SSE or an earlier poll).
    pub fn since(mut self, cursor: &str) -> Poller {
        self.cursor = Some(cursor.to_owned());
        self
    }

    /// Polls once and moves the cursor to the answer's.
    pub async fn poll(&mut self) -> Result<PollAnswer, Error> {
        let mut extra = format!("&timeout={}", self.timeout.as_secs());
        if let Some(cursor) = &self.cursor {
            extra.push_str("&since=");
            extra.push_str(&crate::url::encode_query(cursor));
        }
        extra.push_str(&self.extra_query);
        let channels: Vec<&str> = self.channels.iter().map(String::as_str).collect();
        let query = crate::url::channel_query(&channels, self.token.as_deref(), &extra);
        let url = crate::url::join(&self.base, &format!("/v1/poll{query}"));
        let response = crate::api::check(&url, self.http.get(&url).send().await).await?;
        let text = response.text().await.map_err(|source| Error::Http {
            url: url.clone(),
            source,
        })?;
        let answer: PollAnswer =
            serde_json::from_str(&text).map_err(|e| Error::Decode(format!("poll answer: {e}")))?;
        self.cursor = Some(answer.cursor.clone());
        Ok(answer)
    }
}
