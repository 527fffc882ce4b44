//! Herald's native client transports: WebSocket ([`ws`]), Server-Sent Events ([`sse`]) and
//! long-poll ([`poll`]); Meteor's protocols live in `herald-meteor`, built on this crate. Each
//! is an adapter over one protocol-neutral client session ([`session`]: authorisation, the
//! subscription limit, subscribing, the device inbox, publish, ack, history): it parses its wire
//! format, calls the session, and writes what the connection's
//! [`herald_core::outbox::Outbox`] holds; none of them touches storage directly. The
//! connections Herald serves on its own loop (WebSocket, SSE on a fresh connection) run on the
//! connection driver ([`driver`]) as implementations of its [`driver::Wire`] trait, which parks
//! them when idle ([`parking`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod attached;
pub mod channels;
pub mod conn;
pub mod deadlines;
pub mod detect;
pub mod direct_publish;
pub mod driver;
mod http;
pub mod parking;
pub mod parse_errors;
pub mod poll;
pub mod refuse;
pub mod roster;
pub mod session;
mod socket;
pub mod sse;
pub mod ws;

/// `{"error":{"code","message"}}` with the code's HTTP status, for another protocol's endpoint
/// on the HTTP listener (MQTT's `/mqtt`).
pub use http::error_response;

/// Entry points for `herald-fuzz` (the fuzz targets under `fuzz/` and their replay test): the
/// parsers a client reaches before it is authenticated, without making their modules public.
/// Not part of the crate's API.
#[doc(hidden)]
pub mod fuzzing {
    pub use crate::ws::frame::{encode, FrameError, FrameReader, Incoming, Opcode};

    /// What the SSE fast path made of a connection's first bytes.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum SseHead {
        /// A complete `GET /v1/sse` whose head is the first `len` bytes.
        Sse {
            /// Length of the request head.
            len: usize,
            /// It said HTTP/1.0.
            http10: bool,
            /// Its query string.
            query: Option<String>,
            /// How many header lines it had.
            headers: usize,
        },
        /// Anything else (left to hyper).
        Other,
        /// Could still become an SSE request.
        Incomplete,
    }

    /// Classifies `bytes` as the first bytes of a fresh connection, as the SSE fast path does.
    pub fn sse_head(bytes: &[u8]) -> SseHead {
        match crate::sse::sniff::classify(bytes) {
            crate::sse::sniff::Head::Sse { len, request } => SseHead::Sse {
                len,
                http10: request.http10,
                query: request.query,
                headers: request.headers.len(),
            },
            crate::sse::sniff::Head::Other => SseHead::Other,
            crate::sse::sniff::Head::Incomplete => SseHead::Incomplete,
        }
    }
}

use std::sync::Arc;
use std::time::Duration;

use axum::routing::{get, MethodRouter};
use axum::Router;
use herald_core::auth::{ApiKeys, Client, Tokens};
use herald_core::publish::Publisher;
use herald_core::usage::UsageMeter;
use herald_core::{Engine, HeraldError};
use herald_push::Inbox;
use roster::Roster;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Limits and switches of the client transports.
#[derive(Debug, Clone)]
pub struct EdgeSettings {
    /// Let clients without a token subscribe.
    pub allow_anonymous: bool,
    /// Largest WebSocket frame or message a client may send, in bytes.
    pub max_frame_bytes: usize,
    /// Per-connection outbound queue limit, in bytes; past it the client is disconnected.
    pub outbox_bytes: usize,
    /// Paged catch-up queued per subscription at a time, in bytes (the engine's
    /// [`herald_core::Engine::set_catchup_bytes`], capped at `outbox_bytes`).
    pub catchup_bytes: usize,
    /// Node-wide bytes of the channels' shared recent tails that catch-ups read from (the
    /// engine's [`herald_core::Engine::set_tail_cache_bytes`]; 0 turns it off).
    pub tail_cache_bytes: usize,
    /// Most subscriptions one connection may hold.
    pub max_subscriptions: usize,
    /// How often idle connections get a keep-alive (WebSocket ping, SSE comment).
    pub ping_interval: Duration,
    /// How long each state of a connection that is not a stream may last.
    pub deadlines: deadlines::Deadlines,
    /// How long a plain-TCP WebSocket connection or SSE stream has nothing to do before it
    /// leaves its task and waits parked ([`parking`]); `None` keeps every connection in a task.
    pub park_idle_after: Option<Duration>,
}

/// The default of `park_idle_after`: long enough that a connection which hears from the
/// server every second or two never parks, short enough that idle ones leave their tasks soon
/// (docs/benchmarks.md, "Session 14: idle WebSocket ≤ 800 B").
pub const DEFAULT_PARK_IDLE_AFTER: Duration = Duration::from_secs(2);

impl Default for EdgeSettings {
    fn default() -> Self {
        EdgeSettings {
            allow_anonymous: false,
            max_frame_bytes: 64 * 1024,
            outbox_bytes: 1024 * 1024,
            catchup_bytes: herald_core::hub::DEFAULT_CATCHUP_BUDGET,
            tail_cache_bytes: herald_core::catchup::tail::DEFAULT_TAIL_CACHE_BYTES,
            max_subscriptions: 10_000,
            ping_interval: Duration::from_secs(25),
            deadlines: deadlines::Deadlines::default(),
            park_idle_after: Some(DEFAULT_PARK_IDLE_AFTER),
        }
    }
}

/// What every transport handler needs.
pub struct Edge {
    /// The channel engine.
    pub engine: Arc<Engine>,
    /// Stores and counts what clients publish (the one publish rule).
    pub publisher: Arc<Publisher>,
    /// Verifies client tokens, each with its app's secret.
    pub tokens: Arc<Tokens>,
    /// This node's valid publisher API keys (the caches' set): a protocol whose clients may
    /// authenticate with one (MQTT's password, `herald-mqtt`) checks them here.
    pub api_keys: Arc<ApiKeys>,
    /// Device inboxes: what a device token's connection receives, and its acks.
    pub inbox: Arc<Inbox>,
    /// Per-app usage (connections and deliveries are counted here).
    pub usage: Arc<UsageMeter>,
    /// This node's live client connections, by app: every transport's connection registers
    /// here while its client is authorised, so a revocation closes it
    /// ([`session::open::register`]).
    pub live: Arc<herald_core::live::LiveClients>,
    /// Limits.
    pub settings: EdgeSettings,
    /// Cancelled when the server starts shutting down; connections then close with a reason.
    pub shutdown: CancellationToken,
    /// Tracks upgraded WebSocket connections, which outlive their HTTP request, so shutdown can
    /// wait for them to say goodbye.
    pub connections: TaskTracker,
    /// The runtime upgraded WebSocket connections run on, when HTTP requests are served on a
    /// runtime of their own (the server's `http_workers`): an upgrade moves its connection
    /// here, off the runtime that answers API requests. `None`: the same runtime for both.
    pub sessions: Option<tokio::runtime::Handle>,
    /// The one keep-alive clock every WebSocket connection and directly served SSE stream
    /// follows.
    pub keepalive: KeepAlive,
    /// The rate limits: commands per WebSocket connection, new connections per source
    /// address (checked by the listeners).
    pub limits: Arc<herald_core::limits::Limiters>,
    /// Where idle connections wait without a task.
    pub parking: parking::Parking,
    /// What a protocol keeps once per server (herald-mqtt's sessions), for its parked
    /// connections to reach through the edge.
    pub attached: attached::Attached,
}

/// One timer for every connection's keep-alive, and the one place shutdown reaches every
/// WebSocket connection (and SSE stream served by [`sse::serve_detected`]) from. Each ping
/// interval it asks every connection on its [`Roster`] for a ping (through the connection's
/// outbox) and ticks a watch channel for the transports that wait on one; when `shutdown` is cancelled it closes every rostered outbox with
/// [`CloseReason::Shutdown`]. An idle connection therefore holds no timer of its own.
///
/// [`CloseReason::Shutdown`]: herald_core::outbox::CloseReason::Shutdown
pub struct KeepAlive {
    ticks: tokio::sync::watch::Receiver<u64>,
    roster: Arc<Roster>,
    shutdown: CancellationToken,
}

impl KeepAlive {
    /// Starts the clock (inside a tokio runtime); it stops when `shutdown` is cancelled.
    pub fn start(interval: Duration, shutdown: CancellationToken) -> KeepAlive {
        let (tx, ticks) = tokio::sync::watch::channel(0u64);
        let roster = Arc::new(Roster::default());
        let members = roster.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let start = tokio::time::Instant::now() + interval;
            let mut clock = tokio::time::interval_at(start, interval);
            loop {
                tokio::select! {
                    _ = clock.tick() => {
                        members.for_each(|o| o.request_ping());
                        tx.send_modify(|n| *n += 1);
                    }
                    _ = stop.cancelled() => break,
                }
            }
            members.for_each(|o| {
                o.close(herald_core::outbox::CloseReason::Shutdown);
            });
        });
        KeepAlive {
            ticks,
            roster,
            shutdown,
        }
    }

    /// A receiver that sees the next tick (not any earlier one).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        let mut ticks = self.ticks.clone();
        ticks.mark_unchanged();
        ticks
    }

    /// Puts a connection's outbox on the roster: it gets ping requests from now on, and is
    /// closed at shutdown (at once, if shutdown has already begun). Leave with
    /// [`KeepAlive::leave`].
    pub fn join(&self, outbox: &Arc<herald_core::outbox::Outbox>) -> roster::Place {
        let place = self.roster.join(outbox);
        // Checked after joining: either the shutdown walk sees this entry, or this sees the
        // cancellation that came before the walk.
        if self.shutdown.is_cancelled() {
            outbox.close(herald_core::outbox::CloseReason::Shutdown);
        }
        place
    }

    /// Takes a connection off the roster.
    pub fn leave(&self, place: roster::Place) {
        self.roster.leave(place);
    }

    /// Calls `f` with the outbox of every connection on the roster (herald-mqtt's fence tells
    /// its listener's connections from another server's in the same process by them).
    pub fn for_each(&self, f: impl FnMut(&herald_core::outbox::Outbox)) {
        self.roster.for_each(f);
    }
}

impl Edge {
    /// Authenticates a client by token, or as anonymous when there is none and that is allowed
    /// (see [`session::authorise`]).
    pub fn authenticate(&self, token: Option<&str>) -> Result<Client, HeraldError> {
        session::authorise(self, token)
    }
}

/// Routes `/v1/ws`, `/v1/sse` and `/v1/poll`. SSE and long-poll answer cross-origin requests
/// from any origin (browsers need CORS for EventSource and fetch from another origin); they
/// carry no cookies, only the token the page sends.
pub fn router(edge: Arc<Edge>) -> Router {
    routes()
        .into_iter()
        .fold(Router::new(), |router, (path, handlers)| {
            router.route(path, handlers)
        })
        .with_state(edge)
}

/// Every route of the client transports, as (path, handlers): [`router`] is built from this
/// list, and the OpenAPI test walks it.
pub fn routes() -> Vec<(&'static str, MethodRouter<Arc<Edge>>)> {
    use axum::http::{header, HeaderName, Method};
    let cors = tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::Any)
        .allow_methods([Method::GET])
        .allow_headers([
            header::AUTHORIZATION,
            header::CACHE_CONTROL,
            HeaderName::from_static("last-event-id"),
        ])
        .max_age(std::time::Duration::from_secs(3600));
    // OPTIONS is routed explicitly so the CORS layer answers preflights whatever method
    // fallback the server installs around this router.
    let preflight = || async { axum::http::StatusCode::NO_CONTENT };
    vec![
        (
            "/v1/sse",
            get(sse::stream).options(preflight).layer(cors.clone()),
        ),
        ("/v1/poll", get(poll::poll).options(preflight).layer(cors)),
        ("/v1/ws", get(ws::upgrade)),
    ]
}
