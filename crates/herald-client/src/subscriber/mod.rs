//! A resuming, reconnecting subscriber over the WebSocket: what the TypeScript, Python and Java
//! SDKs give, for Rust. It keeps each channel's [`Position`] (the epoch and seq of the last
//! message it handed out), and when the connection is lost, or the server shuts down or
//! restarts, it reconnects with backoff ([`Backoff`]) and resubscribes from those positions, so
//! every message arrives once and in order. The subscribes of a connection go in batches (up to
//! 100 commands in one WebSocket message), and one to a message to a server that predates
//! batches. A resume the server could not make exactly
//! (`recovered: false`) is an [`Event::ResumeInexact`]; what a reconnect cannot fix (the token
//! rejected or expired, a subscription refused) ends it with a [`Stopped`].
//!
//! On a presence channel subscribed with [`ChannelOptions::presence`], it reports the members,
//! joins and leaves ([`Event::Presence`]) and keeps the member list ([`Subscriber::members`]),
//! listed again by the server on every resubscribe (presence is live state, never resumed).
//!
//! Nothing runs in the background: [`Subscriber::next`] reads, pings, waits and reconnects
//! while it is awaited. It is cancel-safe: dropping it (in a `select!`) loses no message; at
//! worst a connection being opened is dropped and opened again on the next call.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use herald_client::api::Publisher;
//! use herald_client::subscriber::{Event, Position, Subscriber};
//!
//! let base = "http://127.0.0.1:7070";
//! let publisher = Publisher::new(base, Some("hk_dev_key"));
//! let mut subscriber = Subscriber::builder(base)
//!     // Asked on every connection, so a token that expires is replaced by a fresh one.
//!     .token_supplier(move || {
//!         let publisher = publisher.clone();
//!         async move {
//!             let claims = serde_json::json!({"sub": "alice", "channels": ["news", "chat/*"]});
//!             Ok(publisher.mint_token(&claims).await?.token)
//!         }
//!     })
//!     .channel("news")
//!     .channel_after("chat/room-42", Position::new("a1b2c3", 41))
//!     .build()?;
//! loop {
//!     match subscriber.next().await? {
//!         Event::Message(m) => println!("{} #{}: {}", m.channel, m.seq, m.data.get()),
//!         Event::ResumeInexact { channel, after, now } => {
//!             eprintln!("{channel}: messages after {} up to {} may be missing", after.seq, now.seq)
//!         }
//!         Event::Reconnecting { why, after, .. } => eprintln!("{why}; reconnecting in {after:?}"),
//!         _ => {}
//!     }
//! }
//! # }
//! ```

mod backoff;
mod batch;
mod channels;
mod events;

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::{Instant, Interval};

pub use backoff::Backoff;
pub use events::{Event, Lost, Position, Presence, PresenceMember, Request, Stopped};

use crate::ws::WsClient;
use crate::Error;
use channels::{Channel, Channels, Flow};

/// What a token supplier answers.
pub type TokenFuture = Pin<Box<dyn Future<Output = Result<String, Error>> + Send>>;

/// Where the token comes from.
#[derive(Clone)]
enum TokenSource {
    Anonymous,
    Fixed(String),
    Supplier(Arc<dyn Fn() -> TokenFuture + Send + Sync>),
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token never appears in logs.
        f.write_str(match self {
            TokenSource::Anonymous => "Anonymous",
            TokenSource::Fixed(_) => "Fixed(..)",
            TokenSource::Supplier(_) => "Supplier(..)",
        })
    }
}

/// How to subscribe to one channel ([`SubscriberOptions::channel_with`]).
#[derive(Debug, Clone, Default)]
pub struct ChannelOptions {
    after: Option<Position>,
    last: bool,
    presence: bool,
    member: Option<Box<serde_json::value::RawValue>>,
}

impl ChannelOptions {
    /// Replay what came after `position` first (as [`SubscriberOptions::channel_after`]).
    pub fn after(mut self, position: Position) -> Self {
        self.after = Some(position);
        self
    }

    /// Start with the channel's newest message (as [`SubscriberOptions::channel_last`]).
    pub fn last(mut self) -> Self {
        self.last = true;
        self
    }

    /// On a presence channel: report its members, then each join and leave
    /// ([`Event::Presence`]), and keep its member list ([`Subscriber::members`]).
    pub fn presence(mut self) -> Self {
        self.presence = true;
        self
    }

    /// On a presence channel: this client's member data (a JSON object), used only when its
    /// token has no `user_info` claim; supplied by the client, so nobody verifies it.
    pub fn member(mut self, data: &serde_json::Value) -> Self {
        self.member = serde_json::value::to_raw_value(data).ok();
        self
    }
}

/// A subscriber's settings, built with [`Subscriber::builder`].
#[derive(Debug, Clone)]
pub struct SubscriberOptions {
    url: String,
    token: TokenSource,
    channels: Vec<Channel>,
    backoff: Backoff,
    ping_every: Duration,
    reconnect: bool,
}

impl SubscriberOptions {
    /// Sends `token` in a `connect` on every connection (without one, the subscriber is
    /// anonymous).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = TokenSource::Fixed(token.into());
        self
    }

    /// Asks `supplier` for a token before every connection; the server's `token_expired` then
    /// reconnects with a fresh one instead of stopping. A supplier's error fails that attempt:
    /// the first connection stops with it, later ones are retried with backoff.
    pub fn token_supplier<F, Fut>(mut self, supplier: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, Error>> + Send + 'static,
    {
        self.token = TokenSource::Supplier(Arc::new(move || Box::pin(supplier()) as TokenFuture));
        self
    }

    /// Subscribes to `channel` from now on.
    pub fn channel(self, channel: impl Into<String>) -> Self {
        self.with_channel(Channel::new(channel.into(), None, false))
    }

    /// Subscribes to `channel`, first replaying what came after `position` (e.g. one kept from
    /// [`Subscriber::position`]).
    pub fn channel_after(self, channel: impl Into<String>, position: Position) -> Self {
        self.with_channel(Channel::new(channel.into(), Some(position), false))
    }

    /// Subscribes to `channel`, starting with its newest message.
    pub fn channel_last(self, channel: impl Into<String>) -> Self {
        self.with_channel(Channel::new(channel.into(), None, true))
    }

    /// Subscribes to `channel` as `options` say (a position, the newest message first,
    /// presence and member data).
    pub fn channel_with(self, channel: impl Into<String>, options: ChannelOptions) -> Self {
        let mut state = Channel::new(channel.into(), options.after, options.last);
        state.presence = options.presence;
        state.member = options.member;
        self.with_channel(state)
    }

    fn with_channel(mut self, channel: Channel) -> Self {
        self.channels.push(channel);
        self
    }

    /// The shortest and longest wait before a reconnect (default 100 ms and 5 s).
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff = Backoff { min, max };
        self
    }

    /// How often to send `ping` while connected (default 25 s; zero: never).
    pub fn ping_every(mut self, every: Duration) -> Self {
        self.ping_every = every;
        self
    }

    /// Whether to reconnect when the connection is lost (default true); without, a lost
    /// connection is [`Stopped::Lost`].
    pub fn reconnect(mut self, reconnect: bool) -> Self {
        self.reconnect = reconnect;
        self
    }

    /// The subscriber; it connects on the first [`Subscriber::next`]. Fails only if the URL is
    /// not an `http(s)://` or `ws(s)://` one.
    pub fn build(self) -> Result<Subscriber, Error> {
        let url = crate::url::ws_url(&self.url)?;
        let renews_tokens = matches!(self.token, TokenSource::Supplier(_));
        Ok(Subscriber {
            url,
            token: self.token,
            channels: Channels::new(self.channels, renews_tokens),
            backoff: self.backoff,
            ping_every: self.ping_every,
            reconnect: self.reconnect,
            state: State::Idle { wake: None },
            ready: VecDeque::new(),
            connected_once: false,
            attempt: 0,
        })
    }
}

/// An open connection.
struct Open {
    ws: WsClient,
    ping: Option<Interval>,
}

/// Where the subscriber is.
enum State {
    /// Not connected: connect (at `wake`, if given).
    Idle { wake: Option<Instant> },
    /// Connected and subscribed.
    Open(Box<Open>),
    /// Stopped, with why until `next` returned it.
    Stopped(Option<Stopped>),
}

/// A WebSocket subscriber that resumes across reconnects (see the [module](self)).
pub struct Subscriber {
    url: String,
    token: TokenSource,
    channels: Channels,
    backoff: Backoff,
    ping_every: Duration,
    reconnect: bool,
    state: State,
    /// Events made and not yet returned (one frame can make two).
    ready: VecDeque<Event>,
    /// Whether a WebSocket ever opened: until then a failure to connect stops it.
    connected_once: bool,
    /// Failed connections in a row.
    attempt: u32,
}

impl Subscriber {
    /// Settings for a subscriber of the server at `url` (`http(s)://` or `ws(s)://`).
    pub fn builder(url: impl Into<String>) -> SubscriberOptions {
        SubscriberOptions {
            url: url.into(),
            token: TokenSource::Anonymous,
            channels: Vec::new(),
            backoff: Backoff::default(),
            ping_every: Duration::from_secs(25),
            reconnect: true,
        }
    }

    /// The WebSocket URL it connects to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Where `channel` stands: its last message handed out, or where the subscription started;
    /// `None` before the first subscribe reply when no position was given.
    pub fn position(&self, channel: &str) -> Option<&Position> {
        self.channels.position(channel)
    }

    /// The members of a channel subscribed with [`ChannelOptions::presence`], in the order they
    /// joined, as the last `members`, `join` and `leave` frames left them; `None` before the
    /// server first listed them (or for a channel without presence). After a reconnect it
    /// holds the last connection's list until the new subscription lists them again.
    pub fn members(&self, channel: &str) -> Option<&[PresenceMember]> {
        self.channels.members(channel)
    }

    /// The next event. It connects, subscribes, reads, pings, and reconnects (reporting
    /// [`Event::Reconnecting`] before each wait) as needed; an error is what a reconnect cannot
    /// fix, after which the subscriber is done.
    pub async fn next(&mut self) -> Result<Event, Stopped> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Ok(event);
            }
            let flow = match &mut self.state {
                State::Stopped(why) => return Err(why.take().unwrap_or(Stopped::Ended)),
                State::Idle { wake } => {
                    if let Some(at) = *wake {
                        tokio::time::sleep_until(at).await;
                    }
                    self.open().await
                }
                State::Open(open) => read(open, &mut self.channels, &mut self.ready).await,
            };
            match flow {
                Flow::Continue => {}
                Flow::Lost(why) if self.reconnect => {
                    if let Lost::Closed(Some(closed)) = &why {
                        self.channels.closed_with(closed.code);
                    }
                    let after = self.backoff.delay(self.attempt);
                    self.attempt = self.attempt.saturating_add(1);
                    self.state = State::Idle {
                        wake: Some(Instant::now() + after),
                    };
                    self.ready.push_back(Event::Reconnecting {
                        attempt: self.attempt,
                        after,
                        why,
                    });
                }
                // The connection is gone: nothing to close.
                Flow::Lost(why) => self.state = State::Stopped(Some(Stopped::Lost(why))),
                Flow::Stop(why) => self.stop(why).await,
            }
        }
    }

    /// Closes the connection, if one is open.
    pub async fn close(self) {
        if let State::Open(open) = self.state {
            open.ws.close().await;
        }
    }

    /// Gets a token, opens the WebSocket and sends the opening frames.
    async fn open(&mut self) -> Flow {
        let token = match &self.token {
            TokenSource::Anonymous => None,
            TokenSource::Fixed(token) => Some(token.clone()),
            TokenSource::Supplier(supply) => match supply().await {
                Ok(token) => Some(token),
                Err(e) => return self.cannot_connect(e),
            },
        };
        let mut ws = match WsClient::open_url(&self.url).await {
            Ok(ws) => ws,
            Err(e) => return self.cannot_connect(e),
        };
        self.connected_once = true;
        self.attempt = 0;
        for text in self.channels.opening_messages(token) {
            if let Err(e) = ws.send_text(text).await {
                return Flow::Lost(Lost::Broken(e));
            }
        }
        let ping = (!self.ping_every.is_zero())
            .then(|| tokio::time::interval_at(Instant::now() + self.ping_every, self.ping_every));
        self.state = State::Open(Box::new(Open { ws, ping }));
        Flow::Continue
    }

    fn cannot_connect(&self, e: Error) -> Flow {
        if self.connected_once {
            Flow::Lost(Lost::Connect(e))
        } else {
            Flow::Stop(Stopped::Connect(e))
        }
    }

    /// Stops for good, closing an open connection (the server is told, as by
    /// [`Subscriber::close`]).
    async fn stop(&mut self, why: Stopped) {
        let was = std::mem::replace(&mut self.state, State::Stopped(Some(why)));
        if let State::Open(open) = was {
            open.ws.close().await;
        }
    }
}

/// Reads the next frame (or sends a due `ping`) on an open connection.
async fn read(open: &mut Open, channels: &mut Channels, ready: &mut VecDeque<Event>) -> Flow {
    let ping_due = async {
        match open.ping.as_mut() {
            Some(ping) => ping.tick().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        frame = open.ws.next_frame() => match frame {
            Ok(Some(frame)) => {
                let flow = channels.handle(frame, ready);
                for text in channels.take_resend() {
                    if let Err(e) = open.ws.send_text(text).await {
                        return Flow::Lost(Lost::Broken(e));
                    }
                }
                flow
            }
            Ok(None) | Err(Error::Closed) => Flow::Lost(Lost::Closed(open.ws.closed().cloned())),
            Err(e) => Flow::Lost(Lost::Broken(e)),
        },
        _ = ping_due => match open.ws.send_ping().await {
            Ok(()) => Flow::Continue,
            Err(e) => Flow::Lost(Lost::Broken(e)),
        },
    }
}
