//! The `herald` binary: command line ([`cli`]; `herald publish`, `push` and `subscribe` talk to
//! a server through `herald-client`), layered configuration ([`config`]), and `herald serve`
//! ([`serve`]), which starts the server library (`herald-server`).
#![forbid(unsafe_code)]

mod cli;
mod serve;

use herald::config;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    cli::main().await
}
