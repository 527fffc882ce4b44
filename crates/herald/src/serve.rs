//! `herald serve`: wires store, engine, transports and API together and runs until SIGTERM.
//! (Being written by the lead; this stub keeps the crate compiling.)

/// Runs the server with a validated configuration until shutdown.
#[allow(dead_code)]
pub async fn serve(_config: crate::config::Config) -> anyhow::Result<()> {
    anyhow::bail!("not yet wired")
}
