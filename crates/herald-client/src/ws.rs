//! The WebSocket transport (`/v1/ws`): one connection, commands written as proto's
//! [`ClientFrame`]s, server frames read as [`Frame`]s that parse into proto's [`ServerFrame`].
//! Request helpers ([`WsClient::subscribe`], [`WsClient::publish`], ...) wait for the reply
//! with their id; frames that arrive meanwhile (messages, other replies) are kept, in order, for
//! [`WsClient::next_frame`].

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};

use futures_util::{SinkExt, StreamExt};
use herald_proto::command::{self, ClientFrame, Command};
use herald_proto::reply::{ServerBody, ServerFrame};
use serde_json::value::RawValue;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{self, Message as WsMessage};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::types::{Connected, History, Published, Subscribed};
use crate::{Error, ServerError};

/// One text frame from the server, kept as its text; [`Frame::parse`] reads it as proto's
/// typed [`ServerFrame`], borrowing from the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    text: String,
}

impl Frame {
    /// The frame's text, as the server sent it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The typed frame.
    pub fn parse(&self) -> Result<ServerFrame<'_>, Error> {
        Ok(ServerFrame::parse(&self.text)?)
    }

    /// A frame as if the server had sent `text` (for tests that script a server).
    #[cfg(test)]
    pub(crate) fn from_text(text: &str) -> Frame {
        Frame {
            text: text.to_owned(),
        }
    }
}

/// How the server closed the connection, when it sent a close frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// The close code.
    pub code: u16,
    /// The close reason.
    pub reason: String,
}

/// A WebSocket connection to a Herald server.
pub struct WsClient {
    url: String,
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
    next_id: u64,
    unread: VecDeque<Frame>,
    closed: Option<Closed>,
}

impl WsClient {
    /// Opens `/v1/ws` of the server at `base` (`http(s)://` or `ws(s)://`) without sending
    /// anything. A refused handshake is an [`Error::Server`] with the HTTP status and the
    /// server's JSON error when it sent one.
    pub async fn open(base: &str) -> Result<WsClient, Error> {
        Self::open_url(&crate::url::ws_url(base)?).await
    }

    /// Opens a WebSocket at exactly `url` (e.g. with a `?token=` query).
    pub async fn open_url(url: &str) -> Result<WsClient, Error> {
        // wss:// URLs trust what `crate::tls` trusts; ws:// ones are plain TCP.
        let connector = tokio_tungstenite::Connector::Rustls(crate::tls::client_config(&[]));
        let (socket, _) =
            tokio_tungstenite::connect_async_tls_with_config(url, None, false, Some(connector))
                .await
                .map_err(|e| handshake_error(url, e))?;
        Ok(WsClient {
            url: url.to_owned(),
            socket,
            next_id: 0,
            unread: VecDeque::new(),
            closed: None,
        })
    }

    /// Opens the socket and, with a token, sends `connect` and waits for its reply.
    pub async fn connect(base: &str, token: Option<&str>) -> Result<WsClient, Error> {
        let mut ws = Self::open(base).await?;
        if let Some(token) = token {
            ws.authenticate(token).await?;
        }
        Ok(ws)
    }

    /// The URL of the socket.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// How the server closed the connection, once [`WsClient::next_frame`] returned `None`
    /// after a close frame.
    pub fn closed(&self) -> Option<&Closed> {
        self.closed.as_ref()
    }

    /// The id the next request helper will use (ids count up from 1).
    pub fn allocate_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends one command frame as is (the caller chooses its id).
    pub async fn send(&mut self, frame: &ClientFrame) -> Result<(), Error> {
        let text = serde_json::to_string(frame).map_err(|e| Error::Decode(e.to_string()))?;
        self.send_text(text).await
    }

    /// Sends any text frame (for tests of the server's parser).
    pub async fn send_text(&mut self, text: String) -> Result<(), Error> {
        let url = &self.url;
        self.socket
            .send(WsMessage::text(text))
            .await
            .map_err(|e| ws_error(url, e))
    }

    /// Sends `ping` without an id and without waiting (a keep-alive).
    pub async fn send_ping(&mut self) -> Result<(), Error> {
        self.send_text(r#"{"ping":{}}"#.to_owned()).await
    }

    /// The next server frame: one kept while waiting for a reply, else the next one read.
    /// `None` once the connection closed ([`WsClient::closed`] says how).
    pub async fn next_frame(&mut self) -> Result<Option<Frame>, Error> {
        if let Some(frame) = self.unread.pop_front() {
            return Ok(Some(frame));
        }
        self.read_frame().await
    }

    async fn read_frame(&mut self) -> Result<Option<Frame>, Error> {
        loop {
            match self.socket.next().await {
                Some(Ok(WsMessage::Text(text))) => {
                    return Ok(Some(Frame {
                        text: text.as_str().to_owned(),
                    }))
                }
                Some(Ok(WsMessage::Close(close))) => {
                    self.closed = close.map(|c| Closed {
                        code: c.code.into(),
                        reason: c.reason.as_str().to_owned(),
                    });
                    return Ok(None);
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(ws_error(&self.url, e)),
                None => return Ok(None),
            }
        }
    }

    /// Sends `command` with a fresh id and waits for the frame answering it; an `error` reply
    /// (or a `disconnect` meanwhile) is an [`Error::Server`]. Other frames are kept for
    /// [`WsClient::next_frame`].
    pub async fn request(&mut self, command: Command) -> Result<Frame, Error> {
        let id = self.allocate_id();
        self.send(&ClientFrame {
            id: Some(id),
            command,
        })
        .await?;
        loop {
            let frame = self.read_frame().await?.ok_or(Error::Closed)?;
            let parsed = frame.parse()?;
            match (&parsed.body, parsed.id) {
                (ServerBody::Error(e), Some(got)) if got == id => {
                    return Err(ServerError::from(e).into())
                }
                (ServerBody::Disconnect(e), _) => return Err(ServerError::from(e).into()),
                (_, Some(got)) if got == id => return Ok(frame),
                _ => self.unread.push_back(frame),
            }
        }
    }

    /// Sends `connect` with `token` and returns the reply.
    pub async fn authenticate(&mut self, token: &str) -> Result<Connected, Error> {
        let reply = self
            .request(Command::Connect(command::Connect {
                token: Some(token.to_owned()),
            }))
            .await?;
        body(&reply, "connect")
    }

    /// Subscribes to `channel`, resuming after `since` when given.
    pub async fn subscribe(
        &mut self,
        channel: &str,
        since: Option<command::Since>,
    ) -> Result<Subscribed, Error> {
        self.subscribe_with(command::Subscribe {
            channel: channel.to_owned(),
            since,
            last: None,
            ..Default::default()
        })
        .await
    }

    /// Subscribes with every option of the command (`last` included).
    pub async fn subscribe_with(&mut self, sub: command::Subscribe) -> Result<Subscribed, Error> {
        let reply = self.request(Command::Subscribe(sub)).await?;
        body(&reply, "subscribe")
    }

    /// Stops receiving `channel`.
    pub async fn unsubscribe(&mut self, channel: &str) -> Result<(), Error> {
        self.request(Command::Unsubscribe(command::Unsubscribe {
            channel: channel.to_owned(),
        }))
        .await?;
        Ok(())
    }

    /// Publishes `data` to `channel` (the token must allow it), with an optional idempotency key.
    pub async fn publish(
        &mut self,
        channel: &str,
        data: &serde_json::Value,
        id: Option<&str>,
    ) -> Result<Published, Error> {
        let data =
            RawValue::from_string(data.to_string()).map_err(|e| Error::Decode(e.to_string()))?;
        let reply = self
            .request(Command::Publish(command::Publish {
                channel: channel.to_owned(),
                data,
                id: id.map(str::to_owned),
            }))
            .await?;
        body(&reply, "publish")
    }

    /// Reads `channel`'s history after `since`, at most `limit` messages.
    pub async fn history(
        &mut self,
        channel: &str,
        since: Option<u64>,
        limit: Option<usize>,
    ) -> Result<History, Error> {
        let reply = self
            .request(Command::History(command::History {
                channel: channel.to_owned(),
                since,
                limit,
            }))
            .await?;
        body(&reply, "history")
    }

    /// Acknowledges a device inbox (`$app` or `$device`) up to `seq`.
    pub async fn ack(&mut self, channel: &str, seq: u64, epoch: Option<&str>) -> Result<(), Error> {
        self.request(Command::Ack(command::Ack {
            channel: channel.to_owned(),
            seq,
            epoch: epoch.map(str::to_owned),
        }))
        .await?;
        Ok(())
    }

    /// Sends `ping` and waits for its `pong`.
    pub async fn ping(&mut self) -> Result<(), Error> {
        self.request(Command::Ping).await?;
        Ok(())
    }

    /// The next `message` frame, skipping (and dropping) any other frame; a `disconnect` is an
    /// error, a closed connection `None`.
    pub async fn next_message(&mut self) -> Result<Option<crate::types::Message>, Error> {
        while let Some(frame) = self.next_frame().await? {
            match frame.parse()?.body {
                ServerBody::Message(_) => return body(&frame, "message").map(Some),
                ServerBody::Disconnect(e) => return Err(ServerError::from(&e).into()),
                _ => {}
            }
        }
        Ok(None)
    }

    /// Sends a close frame and waits briefly for the server's.
    pub async fn close(mut self) {
        let _ =
            tokio::time::timeout(std::time::Duration::from_secs(1), self.socket.close(None)).await;
    }
}

/// The owned body under key `kind` of a reply frame, read from its own text so `data` stays
/// byte for byte.
fn body<T: serde::de::DeserializeOwned>(frame: &Frame, kind: &str) -> Result<T, Error> {
    let map: BTreeMap<Cow<'_, str>, &RawValue> =
        serde_json::from_str(frame.text()).map_err(|e| Error::Decode(e.to_string()))?;
    let raw = map
        .get(kind)
        .ok_or_else(|| Error::Decode(format!("expected a {kind:?} frame, got {}", frame.text())))?;
    serde_json::from_str(raw.get()).map_err(|e| Error::Decode(format!("{kind}: {e}")))
}

fn ws_error(url: &str, e: tungstenite::Error) -> Error {
    match e {
        tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => Error::Closed,
        e => Error::WebSocket {
            url: url.to_owned(),
            source: Box::new(e),
        },
    }
}

/// A refused handshake as the server's error (status and JSON error), anything else as is.
fn handshake_error(url: &str, e: tungstenite::Error) -> Error {
    if let tungstenite::Error::Http(response) = &e {
        let body = response.body().as_deref().unwrap_or_default();
        return ServerError::from_http(response.status().as_u16(), body).into();
    }
    Error::WebSocket {
        url: url.to_owned(),
        source: Box::new(e),
    }
}
