//! A TCP proxy on loopback between one node and a server it talks to (Redis, in the fence
//! tests), which a test can cut off and heal: a network partition of that one node.
//!
//! - [`Proxy::cut`] black-holes: every connection stops forwarding in both directions, its
//!   sockets kept open (the node's client sees no close and no answer, as behind a dead
//!   switch), and connections made meanwhile are accepted and held the same way.
//! - [`Proxy::heal`] drops the held sockets (the node's client sees them close and reconnects)
//!   and forwards every connection made from then on.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy to one upstream address; dropping it stops accepting (connections under way end
/// when their sockets do).
pub struct Proxy {
    addr: SocketAddr,
    cut: Arc<watch::Sender<bool>>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each connection to `upstream`.
    pub async fn start(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(watch::channel(false).0);
        let state = cut.clone();
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(relay(client, upstream, state.subscribe()));
            }
        });
        Proxy {
            addr,
            cut,
            accepting,
        }
    }

    /// The proxy's address, for the node's URL.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops forwarding, keeping every socket open (see the module documentation).
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Drops what was held and forwards new connections again.
    pub fn heal(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// One connection: forwarded while the proxy is not cut; once cut, held open without a byte
/// either way until healed, then dropped.
async fn relay(mut client: TcpStream, upstream: SocketAddr, mut cut: watch::Receiver<bool>) {
    if !*cut.borrow_and_update() {
        let Ok(mut server) = TcpStream::connect(upstream).await else {
            return;
        };
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => return,
            _ = cut.wait_for(|cut| *cut) => {}
        }
        // Cut: `server` is held too, silent, until healed.
        let _ = cut.wait_for(|cut| !*cut).await;
        return;
    }
    let _ = cut.wait_for(|cut| !*cut).await;
}
