//! A small pool of HTTP/2-over-TLS connections to one origin, shared by every provider client.
//!
//! Requests go to the open connection with the fewest requests in flight; each connection multiplexes as many
//! streams as the server's `SETTINGS_MAX_CONCURRENT_STREAMS` allows (h2's `ready()` waits for a
//! free stream). The pool opens one connection first and **another when volume needs it**:
//! when the requests in flight would pass [`BUSY_CONNECTION`] (or the server's stream limit,
//! when lower) on every open connection, up to `connections`
//! (the pool's maximum); it never closes one for being idle. A connection that fails or receives GOAWAY is dropped and made again on the
//! next request; a request the server refused before processing it (`REFUSED_STREAM`, a stream
//! above a graceful GOAWAY's last stream id, or a request that could not be started because the
//! connection was already going away) is sent again on a fresh connection, up to
//! [`ATTEMPTS`] times in all, since the server says it did not act on it.
//!
//! A send reads its slot's current connection under a short synchronous lock (a clone of the
//! `SendRequest`, no `.await` while locked); only making a new connection takes the slot's
//! async lock, so concurrent sends never queue behind one another's `ready()`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use h2::client::SendRequest;
use http::{Request, Response};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::coalesce::CoalescedWrites;
use crate::destination::{DestinationError, Destinations};

/// Requests in flight on one connection past which the pool opens another (when the server
/// allows fewer streams, that number): one connection is read and written by one task, so a
/// thousand streams on one connection keep one thread of each side busy while the others wait.
pub const BUSY_CONNECTION: usize = 250;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum H2Error {
    /// The TCP connection or TLS handshake failed.
    #[error("connect to {origin}: {message}")]
    Connect {
        /// `host:port`.
        origin: String,
        /// What failed.
        message: String,
    },
    /// The HTTP/2 connection or stream failed after the request may have been sent.
    #[error("HTTP/2: {0}")]
    Stream(#[from] h2::Error),
    /// The origin's address may not be reached ([`Destinations`]); nothing was sent.
    #[error(transparent)]
    Refused(#[from] DestinationError),
}

impl H2Error {
    /// Whether the server certainly did not act on the request (it never reached it, or the
    /// server refused the stream), so sending it again cannot duplicate it.
    pub fn not_processed(&self) -> bool {
        match self {
            H2Error::Connect { .. } | H2Error::Refused(_) => true,
            H2Error::Stream(e) => {
                e.reason() == Some(h2::Reason::REFUSED_STREAM)
                    // h2 fails a stream with the peer's GOAWAY only when its id is above the
                    // GOAWAY's last stream id (RFC 9113 6.8: not processed) or when it was
                    // opened after the GOAWAY; a graceful (NO_ERROR) GOAWAY never fails the
                    // streams it lets finish.
                    || (e.is_go_away() && e.is_remote() && e.reason() == Some(h2::Reason::NO_ERROR))
            }
        }
    }
}

/// How many times [`H2Pool::send`] sends one request that the server did not process.
pub const ATTEMPTS: usize = 3;

/// A pooled connection and the number that tells it apart from the slot's later connections.
type Pooled = (u64, SendRequest<Bytes>);

/// One connection of the pool, made again when it fails.
#[derive(Default)]
struct Slot {
    /// The connection sends use now; locked only to clone or replace it.
    current: parking_lot::Mutex<Option<Pooled>>,
    /// Held while a new connection is being made, so concurrent sends make only one.
    connecting: tokio::sync::Mutex<()>,
    /// Requests sent on this slot and not yet answered.
    in_flight: AtomicUsize,
}

impl Slot {
    fn current(&self) -> Option<Pooled> {
        self.current.lock().clone()
    }

    /// Forgets the connection `generation` (not one a concurrent send already made in its
    /// place).
    fn forget(&self, generation: u64) {
        let mut current = self.current.lock();
        if current.as_ref().is_some_and(|(g, _)| *g == generation) {
            current.take();
        }
    }
}

/// Connections to one `https` origin.
#[derive(Clone)]
pub struct H2Pool {
    inner: Arc<Inner>,
}

struct Inner {
    host: String,
    port: u16,
    tls: TlsConnector,
    slots: Vec<Slot>,
    /// Slots in use (from 1 up to `slots.len()`): requests go round-robin over these.
    open: AtomicUsize,
    /// Streams the server allows per connection, as the last connection made was told (1,000,
    /// what APNs allows, until a server says otherwise).
    streams_per_connection: AtomicUsize,
    next: AtomicUsize,
    connections_made: AtomicU64,
    /// The addresses a connection may reach, for an origin a tenant gave (`None`: any, for the
    /// operator's own provider hosts).
    destinations: Option<Destinations>,
}

impl std::fmt::Debug for H2Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "H2Pool({}:{}, {} connections)",
            self.inner.host,
            self.inner.port,
            self.inner.slots.len()
        )
    }
}

impl H2Pool {
    /// A pool of up to `connections` (at least 1) connections to `host:port`, made lazily.
    pub fn new(host: &str, port: u16, tls: Arc<ClientConfig>, connections: usize) -> Self {
        Self::build(host, port, tls, connections, None)
    }

    /// A pool like [`H2Pool::new`] for an origin a tenant gave: every connection resolves the
    /// host again and reaches only the addresses `destinations` allows.
    pub fn guarded(
        host: &str,
        port: u16,
        tls: Arc<ClientConfig>,
        connections: usize,
        destinations: Destinations,
    ) -> Self {
        Self::build(host, port, tls, connections, Some(destinations))
    }

    fn build(
        host: &str,
        port: u16,
        tls: Arc<ClientConfig>,
        connections: usize,
        destinations: Option<Destinations>,
    ) -> Self {
        H2Pool {
            inner: Arc::new(Inner {
                host: host.to_string(),
                port,
                tls: TlsConnector::from(tls),
                slots: (0..connections.max(1)).map(|_| Slot::default()).collect(),
                open: AtomicUsize::new(1),
                streams_per_connection: AtomicUsize::new(DEFAULT_STREAMS),
                next: AtomicUsize::new(0),
                connections_made: AtomicU64::new(0),
                destinations,
            }),
        }
    }

    /// Sends `request` with `body` (empty: no body) and reads the whole answer. A request the
    /// server did not process is sent again on a new connection (at most [`ATTEMPTS`] in all),
    /// as `again` builds it (the first send takes `request` itself, not a copy); a connection
    /// that cannot be made is not retried here.
    pub async fn send(
        &self,
        request: Request<()>,
        again: impl Fn() -> Request<()>,
        body: Bytes,
    ) -> Result<(Response<()>, Bytes), H2Error> {
        let in_flight = self.inner.in_flight() + 1;
        let slot = self.inner.least_busy(self.inner.open_for(in_flight));
        let _on_slot = SlotInFlight::enter(&self.inner.slots[slot]);
        let mut attempt = 1;
        let mut request = Some(request);
        loop {
            let this = request.take().unwrap_or_else(&again);
            match self.send_on(slot, this, body.clone()).await {
                Err(e)
                    if attempt < ATTEMPTS
                        && e.not_processed()
                        && !matches!(e, H2Error::Connect { .. }) =>
                {
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// How many connections this pool has made.
    pub fn connections_made(&self) -> u64 {
        self.inner.connections_made.load(Ordering::Relaxed)
    }

    /// How many connections the pool uses now (it grows with volume, up to its maximum).
    pub fn connections_open(&self) -> usize {
        self.inner.open.load(Ordering::Relaxed)
    }

    async fn send_on(
        &self,
        slot: usize,
        request: Request<()>,
        body: Bytes,
    ) -> Result<(Response<()>, Bytes), H2Error> {
        let (generation, sender) = self.sender(slot).await?;
        // A server says how many streams it allows in its SETTINGS, after the handshake, and
        // may change it (APNs allows one until it accepts the first provider token, then
        // 1,000): read it at every send (one uncontended lock in h2).
        self.inner.learn_streams(&sender);
        let result = exchange(sender, request, body).await;
        if let Err(H2Error::Stream(e)) = &result {
            if e.is_go_away() || e.is_io() || e.reason() == Some(h2::Reason::REFUSED_STREAM) {
                self.inner.slots[slot].forget(generation);
            }
        }
        result
    }

    /// The slot's connection, ready for a request; made if there is none or the old one is
    /// closed.
    async fn sender(&self, slot: usize) -> Result<Pooled, H2Error> {
        let slot = &self.inner.slots[slot];
        let mut closed = None;
        if let Some((generation, sender)) = slot.current() {
            match sender.ready().await {
                Ok(ready) => return Ok((generation, ready)),
                Err(_) => closed = Some(generation),
            }
        }
        let _connecting = slot.connecting.lock().await;
        // Another send may have made a new connection while this one waited for the lock.
        if let Some((generation, sender)) = slot.current() {
            if Some(generation) != closed {
                if let Ok(ready) = sender.ready().await {
                    return Ok((generation, ready));
                }
            }
            slot.forget(generation);
        }
        // Boxed: making a connection (TCP, TLS and HTTP/2 handshakes) is a large future, and
        // inline it would make every send's future that large, copied at every spawn.
        let sender = Box::pin(self.connect()).await?;
        self.inner.learn_streams(&sender);
        let generation = self.inner.connections_made.fetch_add(1, Ordering::Relaxed) + 1;
        *slot.current.lock() = Some((generation, sender.clone()));
        Ok((generation, sender.ready().await?))
    }

    async fn connect(&self) -> Result<SendRequest<Bytes>, H2Error> {
        let origin = format!("{}:{}", self.inner.host, self.inner.port);
        let fail = |message: String| H2Error::Connect {
            origin: origin.clone(),
            message,
        };
        let tcp = match &self.inner.destinations {
            None => TcpStream::connect((self.inner.host.as_str(), self.inner.port)).await,
            Some(destinations) => {
                // Resolved at every connection and only to allowed addresses, so a name that
                // changes its answer (DNS rebinding) cannot lead it elsewhere.
                let addrs = destinations
                    .resolve(&self.inner.host, self.inner.port)
                    .await?;
                TcpStream::connect(addrs.as_slice()).await
            }
        }
        .map_err(|e| fail(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let name =
            ServerName::try_from(self.inner.host.clone()).map_err(|e| fail(e.to_string()))?;
        let tls = self
            .inner
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| fail(format!("TLS: {e}")))?;
        let (sender, connection) = h2::client::Builder::new()
            .initial_window_size(1 << 20)
            .initial_connection_window_size(1 << 24)
            .handshake::<_, Bytes>(CoalescedWrites::new(tls))
            .await
            .map_err(|e| fail(format!("HTTP/2 handshake: {e}")))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "provider connection closed");
            }
        });
        Ok(sender)
    }
}

/// Streams per connection assumed before a server's settings say otherwise.
const DEFAULT_STREAMS: usize = 1000;

impl Inner {
    /// Remembers how many streams the server lets `sender`'s connection open.
    fn learn_streams(&self, sender: &SendRequest<Bytes>) {
        let allowed = sender.current_max_send_streams();
        if allowed > 0 && allowed < usize::MAX {
            self.streams_per_connection
                .store(allowed, Ordering::Relaxed);
        }
    }

    /// The connections to spread over with `in_flight` requests in flight (this one included):
    /// enough that none carries more than [`BUSY_CONNECTION`] (or the server's stream limit,
    /// when lower), within the pool's maximum. Grows `open` as needed.
    fn open_for(&self, in_flight: usize) -> usize {
        let max = self.slots.len();
        let per = self
            .streams_per_connection
            .load(Ordering::Relaxed)
            .clamp(1, BUSY_CONNECTION);
        let needed = in_flight.div_ceil(per).clamp(1, max);
        let before = self.open.fetch_max(needed, Ordering::Relaxed);
        if needed > before {
            tracing::debug!(
                host = %self.host,
                port = self.port,
                open = needed,
                in_flight,
                "provider pool grows by a connection"
            );
        }
        before.max(needed)
    }
}

impl Inner {
    /// Requests sent and not yet answered, on every slot.
    fn in_flight(&self) -> usize {
        self.slots
            .iter()
            .map(|slot| slot.in_flight.load(Ordering::Relaxed))
            .sum()
    }

    /// The open slot with the fewest requests in flight (ties go round-robin).
    fn least_busy(&self, open: usize) -> usize {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..open)
            .map(|i| (start + i) % open)
            .min_by_key(|&i| self.slots[i].in_flight.load(Ordering::Relaxed))
            .unwrap_or(0)
    }
}

/// A request in flight on one slot, counted until dropped.
struct SlotInFlight<'a>(&'a Slot);

impl<'a> SlotInFlight<'a> {
    fn enter(slot: &'a Slot) -> SlotInFlight<'a> {
        slot.in_flight.fetch_add(1, Ordering::Relaxed);
        SlotInFlight(slot)
    }
}

impl Drop for SlotInFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Sends `request` on `sender` (ready) and reads the whole answer.
async fn exchange(
    mut sender: SendRequest<Bytes>,
    request: Request<()>,
    body: Bytes,
) -> Result<(Response<()>, Bytes), H2Error> {
    let (response, mut stream) = sender.send_request(request, body.is_empty())?;
    if !body.is_empty() {
        stream.send_data(body, true)?;
    }
    let (head, mut recv) = response.await?.into_parts();
    let mut data = BytesMut::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    Ok((Response::from_parts(head, ()), data.freeze()))
}
