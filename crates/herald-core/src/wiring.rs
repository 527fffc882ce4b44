//! Building an [`Engine`] together with its hub, its fan-out and its log, so that they cannot be
//! wired to each other wrongly.
//!
//! The invariant: every message the log commits reaches the hub this engine subscribes
//! through, in commit order. If the log's commit sink fed another hub, publishes would succeed
//! and be stored while the engine's subscribers never heard of them. Nothing outside this crate
//! can build an [`Engine`] or a [`FanOut`] directly: [`Engine::open`] creates the hub, starts the
//! fan-out thread for it, hands the fan-out (the only sink that feeds that hub) to the caller's
//! log opener, and builds the engine from that log and that hub. [`Engine::open_with_bus`] does
//! the same with a [`Bus`] between the log and the fan-out: the bus is built over the fan-out
//! and is the log's commit sink.

use std::sync::Arc;

use crate::bus::Bus;
use crate::engine::Engine;
use crate::fanout::FanOut;
use crate::hub::Hub;
use crate::log::{ChannelLog, CommitSink};
use crate::namespace::Namespaces;

/// Why [`Engine::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError<E> {
    /// The fan-out thread could not be started.
    #[error("cannot start the fan-out thread")]
    FanOut(#[source] std::io::Error),
    /// The log opener failed.
    #[error(transparent)]
    Log(E),
}

impl Engine {
    /// Builds a new hub, starts its fan-out thread, opens the log with `open_log` (which
    /// receives the fan-out as the log's commit sink) and returns the engine over that log and
    /// hub, with the log itself (for the caller's other uses of the store, and to close it).
    ///
    /// This is the only way outside this crate to get an engine, so every engine's log feeds
    /// its own hub (see the [module documentation](self)).
    pub fn open<L, E>(
        namespaces: Namespaces,
        open_log: impl FnOnce(Arc<dyn CommitSink>) -> Result<Arc<L>, E>,
    ) -> Result<(Engine, Arc<L>), OpenError<E>>
    where
        L: ChannelLog + 'static,
    {
        let hub = Hub::new();
        let fan_out = FanOut::start(hub.clone()).map_err(OpenError::FanOut)?;
        // On failure the fan-out is dropped here and its thread ends.
        let log = open_log(fan_out).map_err(OpenError::Log)?;
        let engine = Engine::new(log.clone(), hub, namespaces);
        Ok((engine, log))
    }

    /// Like [`Engine::open`], with a [`Bus`] between the log and the fan-out: `make_bus`
    /// receives this engine's fan-out (the only one feeding its hub) and builds the bus over it;
    /// the log's commit sink is that bus, which must hand the fan-out every committed message,
    /// in order. Returns the engine, the bus (for publishing cache events) and the log.
    #[allow(clippy::type_complexity)]
    pub fn open_with_bus<B, L, E>(
        namespaces: Namespaces,
        make_bus: impl FnOnce(Arc<FanOut>) -> Arc<B>,
        open_log: impl FnOnce(Arc<dyn CommitSink>) -> Result<Arc<L>, E>,
    ) -> Result<(Engine, Arc<B>, Arc<L>), OpenError<E>>
    where
        B: Bus + 'static,
        L: ChannelLog + 'static,
    {
        let hub = Hub::new();
        let bus = make_bus(FanOut::start(hub.clone()).map_err(OpenError::FanOut)?);
        // On failure the bus (and with it the fan-out) is dropped here and its thread ends.
        let log = open_log(bus.clone()).map_err(OpenError::Log)?;
        let engine = Engine::new(log.clone(), hub, namespaces);
        engine.use_head_source(bus.head_source());
        Ok((engine, bus, log))
    }

    /// [`Engine::open_with_bus`] for a log that opens asynchronously (a networked database):
    /// the same wiring, with `open_log` awaited.
    #[allow(clippy::type_complexity)]
    pub async fn open_with_bus_async<B, L, E, F>(
        namespaces: Namespaces,
        make_bus: impl FnOnce(Arc<FanOut>) -> Arc<B>,
        open_log: impl FnOnce(Arc<dyn CommitSink>) -> F,
    ) -> Result<(Engine, Arc<B>, Arc<L>), OpenError<E>>
    where
        B: Bus + 'static,
        L: ChannelLog + 'static,
        F: std::future::Future<Output = Result<Arc<L>, E>>,
    {
        let hub = Hub::new();
        let bus = make_bus(FanOut::start(hub.clone()).map_err(OpenError::FanOut)?);
        let log = open_log(bus.clone()).await.map_err(OpenError::Log)?;
        let engine = Engine::new(log.clone(), hub, namespaces);
        engine.use_head_source(bus.head_source());
        Ok((engine, bus, log))
    }

    /// Like [`Engine::open`], but the commit sink is made by `make_sink` from the new hub
    /// instead of being the fan-out thread: for tests and tools that need to control when
    /// committed messages are delivered. The sink is given this engine's hub and no other, and
    /// must hand it every committed message, in order ([`Hub::deliver`]); `open_log` receives
    /// the sink (so the caller can keep a handle on it) and opens the log with it.
    pub fn open_with_sink<S, L, E>(
        namespaces: Namespaces,
        make_sink: impl FnOnce(Arc<Hub>) -> Arc<S>,
        open_log: impl FnOnce(Arc<S>) -> Result<Arc<L>, E>,
    ) -> Result<(Engine, Arc<L>), E>
    where
        S: CommitSink + 'static,
        L: ChannelLog + 'static,
    {
        let hub = Hub::new();
        let log = open_log(make_sink(hub.clone()))?;
        let engine = Engine::new(log.clone(), hub, namespaces);
        Ok((engine, log))
    }
}
