//! `herald version`: the program's name, version and the commit it was built from.

use std::process::ExitCode;

pub const EXAMPLES: &str = "Examples:\n  herald version\n  herald --version";

/// The version and the commit it was built from, `0.1.0 (abc1234 2026-11-29)`, or
/// `0.1.0 (unknown)` for a build outside a git checkout (set by build.rs).
pub const LINE: &str = env!("HERALD_VERSION_LINE");

/// Prints `herald <version> (<commit> <date>)`, as `herald --version` does.
pub fn run() -> anyhow::Result<ExitCode> {
    println!("{} {LINE}", env!("CARGO_PKG_NAME"));
    Ok(ExitCode::SUCCESS)
}
