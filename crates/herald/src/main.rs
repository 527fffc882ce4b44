//! The `herald` binary: command line ([`cli`]), layered configuration ([`config`]), the small
//! HTTP and WebSocket clients behind `herald publish` / `herald subscribe` ([`client`]), and
//! `herald serve` ([`serve`]), which starts the server library (`herald-server`).
#![forbid(unsafe_code)]

mod cli;
mod client;
mod config;
mod serve;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    cli::main().await
}
