//! The runtime HTTP requests are served on ([`HttpRuntime`]): a small multi-threaded tokio
//! runtime of its own (`http_workers` threads, named `herald-http`), apart from the runtime the
//! server was started in, which runs WebSocket and SSE connections, Meteor, and background work.
//!
//! Why: a publish's answer is written by its HTTP connection's task. On one runtime that task
//! is woken (by the store's reply) into the same queues as the thousands of connection tasks a
//! fan-out has just woken, and waits behind all of them: publish round trips then take as long
//! as a whole fan-out. On a runtime of its own it waits only for other HTTP requests, and the
//! operating system shares the cores between the two runtimes' threads.
//!
//! The listener accepts (and looks for an SSE stream first, as before) on the server's runtime;
//! a connection for hyper moves here, unless its first request is a WebSocket handshake (it
//! stays: its session runs on the server's runtime), and a WebSocket upgraded here, on a
//! connection that served other requests first, moves back
//! ([`herald_edge::conn::Conn::register_here`]).

use tokio::runtime::{Builder, Handle, Runtime};

use crate::error::ServerError;

/// The HTTP runtime, or none (`http_workers = 0`: HTTP is served on the server's runtime).
/// Dropping it stops its threads without waiting for them (it may be dropped inside another
/// runtime, where waiting is not allowed); a task still running there is dropped.
pub(crate) struct HttpRuntime {
    runtime: Option<Runtime>,
}

impl HttpRuntime {
    /// Starts `workers` threads; none for `0`.
    pub(crate) fn start(workers: usize) -> Result<HttpRuntime, ServerError> {
        if workers == 0 {
            return Ok(HttpRuntime { runtime: None });
        }
        let runtime = Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("herald-http")
            .enable_all()
            .build()
            .map_err(ServerError::HttpRuntime)?;
        Ok(HttpRuntime {
            runtime: Some(runtime),
        })
    }

    /// Where to spawn HTTP connections; `None` for the caller's runtime.
    pub(crate) fn handle(&self) -> Option<Handle> {
        self.runtime.as_ref().map(|r| r.handle().clone())
    }
}

impl Drop for HttpRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}
