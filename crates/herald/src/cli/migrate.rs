//! `herald migrate`: brings a PostgreSQL store's schema up to this build's version and exits
//! (nodes also migrate when they start, under a lock, so this is for doing it ahead of a
//! rolling upgrade or checking that the database is reachable). SQLite migrates itself when the
//! server opens it.

use std::process::ExitCode;

use crate::config::{Config, ConfigFlags};

pub const EXAMPLES: &str = "\
Examples:
  herald migrate --store postgres://herald:PASSWORD@db:5432/herald
  HERALD_STORE=postgres://herald@db/herald?sslmode=require herald migrate

Prints the schema version before and after. Safe to run while nodes are serving, and from
several places at once (an advisory lock makes the others wait).";

/// Flags of `herald migrate`.
#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub config: ConfigFlags,
}

/// Runs the migrations of the configured PostgreSQL store.
pub async fn run(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let Some(url) = &config.cluster.postgres else {
        println!(
            "the store is SQLite in {}: it migrates itself when `herald serve` opens it; \
             nothing to do (give --store postgres://... for a PostgreSQL store)",
            config.data.display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    let (before, after) = herald_server::migrate_postgres(url).await?;
    if before == after {
        println!("schema version {after}: already current");
    } else {
        println!("schema version {before} -> {after}");
    }
    Ok(ExitCode::SUCCESS)
}
