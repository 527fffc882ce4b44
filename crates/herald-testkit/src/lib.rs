//! Real PostgreSQL and Redis servers for Herald's tests.
//!
//! Each server runs as a child process on a free loopback port, with its files in a temporary
//! directory of its own, and is stopped by its PID when the value is dropped (or by
//! [`Postgres::stop`] / [`Redis::stop`] in a fault test, which can then start it again on the
//! same port with the same data). Nothing here is a mock: these are the Debian packages'
//! binaries, installed by `scripts/install-services.sh` (the test command runs it).
//!
//! Where the binaries are: `HERALD_PG_BIN` (a folder holding `initdb` and `postgres`) or the
//! newest `/usr/lib/postgresql/*/bin`; `HERALD_REDIS_SERVER` or `redis-server` on `PATH`.
//! A test that needs one and cannot find it fails with a message naming the install script.
//!
//! [`logs`] captures the log lines code writes, for tests of what an operator reads.

pub mod logs;
mod postgres;
mod process;
mod redis;

pub use postgres::Postgres;
pub use redis::{Redis, RedisCluster};

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// The binary is not installed.
    #[error("{what} not found ({hint}); run scripts/install-services.sh")]
    NotInstalled {
        /// Which binary.
        what: &'static str,
        /// Where it was looked for.
        hint: String,
    },
    /// A command failed.
    #[error("{command} failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status and output.
        detail: String,
    },
    /// The server did not become ready in time.
    #[error("{what} on port {port} was not ready after {seconds} s; its log: {log}")]
    NotReady {
        /// Which server.
        what: &'static str,
        /// Its port.
        port: u16,
        /// How long we waited.
        seconds: u64,
        /// The end of its log.
        log: String,
    },
    /// A file or process operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl TestkitError {
    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> TestkitError {
        let context = context.into();
        move |source| TestkitError::Io { context, source }
    }
}
