//! `herald-bench`: the bench suite as a binary of its own (the same as `herald bench`).
#![forbid(unsafe_code)]

use clap::Parser;

/// Herald's load generator and burn-in suite.
#[derive(Debug, Parser)]
#[command(name = "herald-bench", version, max_term_width = 100)]
struct Cli {
    #[command(flatten)]
    bench: herald_bench::BenchArgs,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match herald_bench::run(Cli::parse().bench, herald_bench::Host::Standalone).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
