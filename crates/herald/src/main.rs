//! The `herald` binary: command line ([`cli`]), layered configuration ([`config`]), the small
//! HTTP and WebSocket clients behind `herald publish` / `herald subscribe` ([`client`]), and the
//! server wiring ([`serve`]).
#![forbid(unsafe_code)]

mod cli;
mod client;
mod config;
mod listener;
mod serve;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    cli::main().await
}
