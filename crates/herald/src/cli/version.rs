//! `herald version`: the program's name and version.

use std::process::ExitCode;

pub const EXAMPLES: &str = "Examples:\n  herald version\n  herald --version";

/// Prints `herald <version>`.
pub fn run() -> anyhow::Result<ExitCode> {
    println!("{} {}", env!("CARGO_PKG_NAME"), env!("CARGO_PKG_VERSION"));
    Ok(ExitCode::SUCCESS)
}
