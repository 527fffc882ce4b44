//! Meteor's ports: binds the subscriber and controller listeners that are configured (with a
//! deep accept queue) and, once the server is ready, serves them with `herald-meteor`'s Meteor
//! transport.

use std::net::SocketAddr;
use std::sync::Arc;

use herald_core::pattern::PatternSet;
use herald_edge::conn::TlsAcceptor;
use herald_edge::Edge;
use herald_meteor::{Meteor, MeteorConf, MeteorSettings};
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

use crate::error::ServerError;
use crate::settings::MeteorPorts;

/// Accept-queue length asked for on the Meteor ports (the kernel caps it at somaxconn).
const BACKLOG: u32 = 8192;

/// The bound Meteor listeners, not yet accepting.
pub(crate) struct MeteorListeners {
    meteor: Arc<Meteor>,
    subscribers: Option<TcpListener>,
    controllers: Option<TcpListener>,
    /// The subscriber and controller ports' TLS acceptors, when they serve TLS.
    tls: Option<(TlsAcceptor, TlsAcceptor)>,
}

impl MeteorListeners {
    /// Binds the configured ports (subscriber first), or returns `None` when neither is. With
    /// `ports.tls`, both serve TLS with `tls` (the server's certificate).
    pub(crate) fn bind(
        ports: &MeteorPorts,
        edge: &Arc<Edge>,
        tls: Option<&crate::tls::ServerTls>,
    ) -> Result<Option<MeteorListeners>, ServerError> {
        if !ports.any() {
            return Ok(None);
        }
        let tls = match (ports.tls, tls) {
            (false, _) => None,
            (true, Some(tls)) => Some((tls.http_acceptor(), tls.line_acceptor())),
            (true, None) => return Err(ServerError::MeteorTlsWithoutCertificate),
        };
        let conf = ports.conf.clone().unwrap_or_else(MeteorConf::builtin);
        if !conf.ignored.is_empty() {
            tracing::info!(
                keys = ?conf.ignored,
                "meteor_conf keys Herald does not use (its own listen settings apply)"
            );
        }
        if ports.listen.is_some() && ports.channels.is_none() {
            tracing::warn!(
                "the Meteor subscriber port can subscribe to every channel of the default app, \
                 with no token (as Meteor did): set meteor_channels to the patterns it may read"
            );
        }
        let subscribers = ports
            .listen
            .map(|addr| bind(addr, " (meteor)"))
            .transpose()?;
        let controllers = match ports.control {
            Some(addr) => {
                if !addr.ip().is_loopback() && ports.control_password.is_none() {
                    tracing::warn!(
                        %addr,
                        "the Meteor controller port is reachable from other machines and has no \
                         password: anyone who can connect can publish (set meteor_control_password)"
                    );
                }
                Some(bind(addr, " (meteor-control)")?)
            }
            None => None,
        };
        let meteor = Meteor::new(
            edge.clone(),
            MeteorSettings {
                conf,
                document_root: ports.document_root.clone(),
                control_password: ports.control_password.clone(),
                channels: ports.channels.as_deref().map(PatternSet::new),
            },
        );
        Ok(Some(MeteorListeners {
            meteor,
            subscribers,
            controllers,
            tls,
        }))
    }

    /// The subscriber port's bound address.
    pub(crate) fn subscriber_addr(&self) -> Option<SocketAddr> {
        self.subscribers.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// The controller port's bound address.
    pub(crate) fn controller_addr(&self) -> Option<SocketAddr> {
        self.controllers.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Starts accepting on each port, on `tasks`; each accept loop ends at shutdown.
    pub(crate) fn serve(self, tasks: &TaskTracker) {
        let (subscriber_tls, controller_tls) = self.tls.unzip();
        if let Some(listener) = self.subscribers {
            tasks.spawn(
                self.meteor
                    .clone()
                    .serve_subscribers(listener, subscriber_tls),
            );
        }
        if let Some(listener) = self.controllers {
            tasks.spawn(self.meteor.serve_controllers(listener, controller_tls));
        }
    }
}

/// A listener with a deep accept queue: Deacon's long-poll clients all reconnect at once after
/// every message (and MQTT devices all at once after a restart), and an overflowing queue
/// turns into one-second SYN retries.
pub(crate) fn bind(addr: SocketAddr, what: &'static str) -> Result<TcpListener, ServerError> {
    let listen = || {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(BACKLOG)
    };
    listen().map_err(|source| ServerError::Listen { addr, what, source })
}
