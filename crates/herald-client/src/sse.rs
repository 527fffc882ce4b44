//! The Server-Sent Events transport (`/v1/sse`): opened with channels, a token and a cursor
//! (`since`, or the `Last-Event-ID` header an `EventSource` sends when it reconnects); read as
//! proto's [`SseEvent`]s or as typed [`SseItem`]s. An error before the stream starts is the
//! server's JSON error ([`crate::Error::Server`]).

use herald_proto::sse::SseEvent;

use crate::types::{Message, Subscribed};
use crate::{Error, ServerError};

/// What to open.
#[derive(Debug, Clone, Default)]
pub struct SseOptions<'a> {
    /// Channels, in cursor order (none: a device token's inbox).
    pub channels: &'a [&'a str],
    /// Client token, sent as `?token=`.
    pub token: Option<&'a str>,
    /// Cursor string to resume from (`?since=`).
    pub since: Option<&'a str>,
    /// Cursor string sent as the `Last-Event-ID` header (wins over `since`).
    pub last_event_id: Option<&'a str>,
    /// More query parameters, as `&k=v` pairs (e.g. `&last=true`).
    pub extra_query: &'a str,
}

/// One typed event of the stream.
#[derive(Debug, Clone)]
pub enum SseItem {
    /// `event: subscribed`: a channel's subscription started.
    Subscribed(Subscribed),
    /// A message, with the connection's cursor string after it (its `id:`).
    Message {
        /// The cursor to resume from after this message.
        cursor: Option<String>,
        /// The message.
        message: Message,
    },
    /// `event: disconnect`: the server ends the stream next.
    Disconnect(ServerError),
    /// A named event this client does not know, as read.
    Other(SseEvent),
}

/// An open event stream.
pub struct SseStream {
    response: reqwest::Response,
    url: String,
    buf: Vec<u8>,
    last_event_id: Option<String>,
}

impl SseStream {
    /// Opens the stream on the server at `base`.
    pub async fn open(base: &str, opts: &SseOptions<'_>) -> Result<SseStream, Error> {
        let mut extra = String::new();
        if let Some(since) = opts.since {
            extra.push_str("&since=");
            extra.push_str(&crate::url::encode_query(since));
        }
        extra.push_str(opts.extra_query);
        let query = crate::url::channel_query(opts.channels, opts.token, &extra);
        let url = crate::url::join(base, &format!("/v1/sse{query}"));
        let mut request = crate::tls::http_client().get(&url);
        if let Some(id) = opts.last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = crate::api::check(&url, request.send().await).await?;
        Ok(SseStream {
            response,
            url,
            buf: Vec::new(),
            last_event_id: None,
        })
    }

    /// The response's headers (e.g. `content-type`).
    pub fn headers(&self) -> &reqwest::header::HeaderMap {
        self.response.headers()
    }

    /// The `id:` of the last message read: the cursor to reconnect with.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// The next event with data (comments and `retry:` skipped); `None` at the end of the
    /// stream.
    pub async fn next_event(&mut self) -> Result<Option<SseEvent>, Error> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                let text = String::from_utf8_lossy(&block);
                if let Some(event) = SseEvent::parse(text.trim_end_matches('\n')) {
                    if event.id.is_some() {
                        self.last_event_id.clone_from(&event.id);
                    }
                    return Ok(Some(event));
                }
                continue;
            }
            match self.response.chunk().await {
                Ok(Some(bytes)) => self.buf.extend_from_slice(&bytes),
                Ok(None) => return Ok(None),
                Err(source) => {
                    return Err(Error::Http {
                        url: self.url.clone(),
                        source,
                    })
                }
            }
        }
    }

    /// The next event, typed.
    pub async fn next(&mut self) -> Result<Option<SseItem>, Error> {
        let Some(event) = self.next_event().await? else {
            return Ok(None);
        };
        Ok(Some(classify(event)?))
    }

    /// The next message, skipping `subscribed` events; a `disconnect` is an error.
    pub async fn next_message(&mut self) -> Result<Option<Message>, Error> {
        while let Some(item) = self.next().await? {
            match item {
                SseItem::Message { message, .. } => return Ok(Some(message)),
                SseItem::Disconnect(e) => return Err(e.into()),
                _ => {}
            }
        }
        Ok(None)
    }
}

/// Reads an event's body as the type its name says.
pub fn classify(event: SseEvent) -> Result<SseItem, Error> {
    let decode = |e: serde_json::Error| Error::Decode(format!("SSE event: {e}"));
    Ok(match event.event.as_deref() {
        None | Some("message") => SseItem::Message {
            message: serde_json::from_str(&event.data).map_err(decode)?,
            cursor: event.id,
        },
        Some("subscribed") => {
            SseItem::Subscribed(serde_json::from_str(&event.data).map_err(decode)?)
        }
        Some("disconnect") => {
            let body: herald_proto::reply::ErrorBody<'_> =
                serde_json::from_str(&event.data).map_err(decode)?;
            SseItem::Disconnect(ServerError::from(&body))
        }
        Some(_) => SseItem::Other(event),
    })
}
