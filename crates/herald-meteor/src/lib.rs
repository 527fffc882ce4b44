//! Meteor compatibility: the subscriber port of Meteor (the Perl Comet server Herald descends
//! from) and of Deacon, its Java/Android client, and Meteor's line-based controller port, both
//! over the same channels as every other transport. A message added by a controller reaches
//! WebSocket and SSE subscribers; a message published through the HTTP API reaches Meteor
//! subscribers; Meteor message ids are Herald seqs, so `.r<id>` resumes exactly.
//!
//! - [`request`]: the subscriber request line; [`conf`] and [`template`]: a `meteord.conf` and
//!   its templates; `session`: one subscriber connection; `files`: the document root;
//! - [`command`]: controller lines; `control`: one controller connection.
//!
//! This crate root owns the two accept loops, the host-id registry (a newer persistent connection
//! with the same host id replaces the older; `/disconnect/<hostid>` closes it only when asked from
//! the address the connection came from), the subscriber port's channel allow-list and Meteor's
//! statistics counters.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod command;
pub mod conf;
mod control;
mod files;
pub mod request;
mod session;
pub mod template;
mod text;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herald_edge::conn::{Conn, TlsAcceptor};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use conf::MeteorConf;
use herald_core::pattern::PatternSet;
use herald_edge::{Edge, KeepAlive};

/// What `herald serve` configures about the Meteor ports.
#[derive(Debug, Clone)]
pub struct MeteorSettings {
    /// The Meteor configuration (modes, templates, ping interval).
    pub conf: MeteorConf,
    /// Folder served under `/` of the subscriber port (overrides the file's
    /// `SubscriberDocumentRoot`); `None` serves no files.
    pub document_root: Option<PathBuf>,
    /// When set, a controller's first line must be `AUTH <password>`.
    pub control_password: Option<String>,
    /// The default-app channels the subscriber port may subscribe to (`meteor_channels`);
    /// `None`: every channel, as in Meteor.
    pub channels: Option<PatternSet>,
}

/// Meteor's counters, as `SHOWSTATS` reports them.
#[derive(Debug, Default)]
pub struct Stats {
    /// Subscriber connections accepted since start.
    pub subscriber_connections_accepted: AtomicU64,
    /// Subscriber connections open now.
    pub current_subscribers: AtomicU64,
    /// Controller connections accepted since start.
    pub controller_connections_accepted: AtomicU64,
    /// Controller connections open now.
    pub current_controllers: AtomicU64,
    /// Messages written to subscribers.
    pub messages_served: AtomicU64,
    /// Messages added by controllers.
    pub unique_messages: AtomicU64,
    /// Requests answered with the error header.
    pub errors_served: AtomicU64,
    /// Files served from the document root.
    pub documents_served: AtomicU64,
    /// File requests answered 404.
    pub documents_not_found: AtomicU64,
}

impl Stats {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    fn sub(counter: &AtomicU64) {
        counter.fetch_sub(1, Ordering::Relaxed);
    }

    /// `name: value` pairs, in a fixed order.
    pub fn lines(&self) -> Vec<(&'static str, u64)> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            (
                "subscriber_connections_accepted",
                get(&self.subscriber_connections_accepted),
            ),
            ("current_subscribers", get(&self.current_subscribers)),
            (
                "controller_connections_accepted",
                get(&self.controller_connections_accepted),
            ),
            ("current_controllers", get(&self.current_controllers)),
            ("messages_served", get(&self.messages_served)),
            ("unique_messages", get(&self.unique_messages)),
            ("errors_served", get(&self.errors_served)),
            ("documents_served", get(&self.documents_served)),
            ("documents_not_found", get(&self.documents_not_found)),
        ]
    }
}

/// A persistent connection's registration: its number, what closes it, and the address it
/// came from.
type Host = (u64, CancellationToken, Option<IpAddr>);

/// Persistent connections by host id.
#[derive(Default)]
struct Hosts {
    next: AtomicU64,
    by_id: Mutex<HashMap<String, Host>>,
}

impl Hosts {
    /// Registers a connection for `hostid` from `peer`, telling the one it replaces to close.
    fn claim(&self, hostid: &str, peer: Option<IpAddr>) -> (u64, CancellationToken) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        let old = self
            .by_id
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(hostid.to_owned(), (id, token.clone(), peer));
        if let Some((_, old, _)) = old {
            old.cancel();
        }
        (id, token)
    }

    /// Removes the registration of connection `id`, if it is still the host's.
    fn release(&self, hostid: &str, id: u64) {
        let mut map = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        if map
            .get(hostid)
            .is_some_and(|(current, _, _)| *current == id)
        {
            map.remove(hostid);
        }
    }

    /// Tells the host's connection to close when the request comes from the address that
    /// connection came from (the browser that holds it, as `meteor.js` sends it); false if it
    /// has none or `from` is another address. A host id is short and often guessable, so it is
    /// not a credential on its own: a stranger elsewhere cannot kick a subscriber.
    fn kick(&self, hostid: &str, from: Option<IpAddr>) -> bool {
        let mut map = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        let same_address = map
            .get(hostid)
            .is_some_and(|(_, _, peer)| peer.is_some() && *peer == from);
        if !same_address {
            return false;
        }
        map.remove(hostid)
            .map(|(_, token, _)| token.cancel())
            .is_some()
    }
}

/// The Meteor ports of one server.
pub struct Meteor {
    edge: Arc<Edge>,
    conf: MeteorConf,
    docs: Option<files::DocumentRoot>,
    control_password: Option<String>,
    channels: Option<PatternSet>,
    hosts: Hosts,
    /// Meteor's counters.
    pub stats: Stats,
    pings: Option<KeepAlive>,
    started: Instant,
}

/// Closes a connection whose client may still be sending (an oversized head or line): ends our
/// side, then reads and drops what arrives for a moment, so that closing with unread input does
/// not reset the connection before the client has read the error.
async fn close_after_error(tcp: &mut Conn) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = tcp.shutdown().await;
    let drain = async {
        let mut sink = vec![0u8; 4096];
        let mut left: usize = 1 << 20;
        while left > 0 {
            match tcp.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
}

impl Meteor {
    /// The Meteor transport over `edge` (starts the ping clock; call inside a runtime).
    pub fn new(edge: Arc<Edge>, settings: MeteorSettings) -> Arc<Meteor> {
        text::reserve_slot();
        let root = settings
            .document_root
            .or_else(|| settings.conf.document_root.as_ref().map(PathBuf::from));
        let docs = root.map(|r| files::DocumentRoot::new(r, &settings.conf.directory_index));
        let pings = (!settings.conf.ping_interval.is_zero())
            .then(|| KeepAlive::start(settings.conf.ping_interval, edge.shutdown.clone()));
        Arc::new(Meteor {
            edge,
            conf: settings.conf,
            docs,
            control_password: settings.control_password,
            channels: settings.channels,
            hosts: Hosts::default(),
            stats: Stats::default(),
            pings,
            started: Instant::now(),
        })
    }

    /// Accepts subscriber connections until shutdown (over TLS when `tls` is given).
    pub async fn serve_subscribers(
        self: Arc<Self>,
        listener: TcpListener,
        tls: Option<TlsAcceptor>,
    ) {
        self.accept_loop(listener, tls, |m, conn| async move {
            session::run(m, conn).await
        })
        .await;
    }

    /// Accepts controller connections until shutdown (over TLS when `tls` is given).
    pub async fn serve_controllers(
        self: Arc<Self>,
        listener: TcpListener,
        tls: Option<TlsAcceptor>,
    ) {
        self.accept_loop(listener, tls, |m, conn| async move {
            control::run(m, conn).await
        })
        .await;
    }

    async fn accept_loop<F, Fut>(
        self: Arc<Self>,
        listener: TcpListener,
        tls: Option<TlsAcceptor>,
        handle: F,
    ) where
        F: Fn(Arc<Meteor>, Conn) -> Fut + Clone + Send + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let shutdown = self.edge.shutdown.clone();
        loop {
            let tcp = tokio::select! {
                accepted = listener.accept() => match accepted {
                    // Over the source address's connection limit: closed at once.
                    Ok((_, peer)) if self.edge.limits.check_connection(peer.ip()).is_err() => {
                        continue
                    }
                    Ok((tcp, _)) => tcp,
                    Err(e) => {
                        tracing::warn!(error = %e, "meteor accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                },
                _ = shutdown.cancelled() => break,
            };
            let _ = tcp.set_nodelay(true);
            match &tls {
                None => {
                    self.edge
                        .connections
                        .spawn(handle(self.clone(), Conn::Plain(tcp)));
                }
                // The handshake runs in the connection's own task, within the first-byte
                // deadline, so a client that never finishes it holds up nothing else.
                Some(tls) => {
                    let (tls, m, handle) = (tls.clone(), self.clone(), handle.clone());
                    let limit = self.edge.settings.deadlines.first_byte;
                    self.edge.connections.spawn(async move {
                        if let Some(conn) = Box::pin(tls.accept(tcp, limit)).await {
                            handle(m, conn).await;
                        }
                    });
                }
            }
        }
    }

    /// Whether the subscriber port may subscribe to `channel` (`meteor_channels`).
    fn allows(&self, channel: &str) -> bool {
        self.channels.as_ref().is_none_or(|set| set.allows(channel))
    }

    /// Seconds since the Meteor ports started.
    fn uptime(&self) -> u64 {
        self.started.elapsed().as_secs()
    }
}
