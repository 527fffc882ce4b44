//! The `herald` binary (placeholder until the CLI lands).
mod serve;
fn main() {}
