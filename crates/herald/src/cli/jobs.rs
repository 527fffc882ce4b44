//! `herald jobs`: the app's provider job queue through the API: worker statistics and queue
//! depth per provider (`stats`, once or as a live table with `--watch`), dead letters
//! (`dead`), and `replay` / `drop` of one dead letter.

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::Value;

use herald_client::api::Publisher;
use herald_client::url::DEFAULT_URL;

pub const EXAMPLES: &str = "\
Examples:
  herald jobs stats
  herald jobs stats --watch 2
  herald jobs dead --limit 20
  herald jobs replay 1234
  herald jobs drop 1234

The key is a publisher key of the app whose jobs these are (HERALD_API_KEY).";

/// Where and as whom.
#[derive(Debug, Args)]
pub struct Connection {
    /// Server URL
    #[arg(long, env = "HERALD_URL", default_value = DEFAULT_URL, value_name = "URL", value_parser = super::args::server_url)]
    pub url: String,
    /// A publisher key of the app
    #[arg(
        long,
        env = "HERALD_API_KEY",
        hide_env_values = true,
        value_name = "KEY"
    )]
    pub api_key: Option<String>,
}

/// `herald jobs ...`.
#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Worker statistics and queue depth per provider.
    #[command(after_help = EXAMPLES)]
    Stats {
        /// Redraw the table every this many seconds until interrupted
        #[arg(long, value_name = "SECS")]
        watch: Option<u64>,
        /// Print the JSON answer instead of a table
        #[arg(long, conflicts_with = "watch")]
        json: bool,
        #[command(flatten)]
        connection: Connection,
    },
    /// List dead letters (jobs that failed every retry).
    #[command(after_help = EXAMPLES)]
    Dead {
        /// After this job id (paging)
        #[arg(long)]
        after: Option<i64>,
        /// At most this many
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[command(flatten)]
        connection: Connection,
    },
    /// Queue a dead letter again, due now.
    #[command(after_help = EXAMPLES)]
    Replay {
        /// Job id
        id: i64,
        #[command(flatten)]
        connection: Connection,
    },
    /// Delete a dead letter.
    #[command(after_help = EXAMPLES)]
    Drop {
        /// Job id
        id: i64,
        #[command(flatten)]
        connection: Connection,
    },
}

/// The stats answer as a table: one row per provider.
pub fn table(stats: &Value) -> String {
    let mut out = format!(
        "{:<9} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>8} {:>6} {:>10}\n",
        "provider",
        "sends",
        "success",
        "failed",
        "retries",
        "avg ms",
        "p95 ms",
        "queued",
        "dead",
        "oldest s"
    );
    let empty = serde_json::Map::new();
    let providers = stats["providers"].as_object().unwrap_or(&empty);
    if providers.is_empty() {
        out.push_str("(no provider jobs yet)\n");
    }
    for (name, p) in providers {
        let n = |k: &str| p[k].as_u64().unwrap_or(0);
        let failed: u64 = p["failures"]
            .as_object()
            .map_or(0, |f| f.values().filter_map(Value::as_u64).sum());
        out.push_str(&format!(
            "{:<9} {:>9} {:>9} {:>8} {:>8} {:>9.2} {:>9.2} {:>8} {:>6} {:>10}\n",
            name,
            n("sends"),
            n("successes"),
            failed,
            n("retries"),
            p["avg_ms"].as_f64().unwrap_or(0.0),
            p["p95_ms"].as_f64().unwrap_or(0.0),
            n("queued"),
            n("dead"),
            p["oldest_age_ms"].as_i64().map_or_else(
                || "-".to_string(),
                |ms| format!("{:.1}", ms as f64 / 1000.0)
            ),
        ));
        if let Some(failures) = p["failures"].as_object() {
            for (reason, count) in failures {
                out.push_str(&format!("  {reason}: {count}\n"));
            }
        }
    }
    out
}

/// Runs a `herald jobs` command.
pub async fn run(command: JobsCommand) -> anyhow::Result<ExitCode> {
    use reqwest::Method;
    let (connection, method, path) = match &command {
        JobsCommand::Stats { connection, .. } => {
            (connection, Method::GET, "/v1/jobs/stats".to_string())
        }
        JobsCommand::Dead {
            after,
            limit,
            connection,
        } => {
            let mut path = format!("/v1/jobs/dead?limit={limit}");
            if let Some(a) = after {
                path.push_str(&format!("&after={a}"));
            }
            (connection, Method::GET, path)
        }
        JobsCommand::Replay { id, connection } => {
            (connection, Method::POST, format!("/v1/jobs/{id}/replay"))
        }
        JobsCommand::Drop { id, connection } => {
            (connection, Method::DELETE, format!("/v1/jobs/{id}"))
        }
    };
    let publisher = Publisher::new(&connection.url, connection.api_key.as_deref());
    if let JobsCommand::Stats { watch, json, .. } = &command {
        if !json {
            loop {
                let answer = publisher.send(Method::GET, &path, None, None).await;
                let stats: Value = match answer {
                    Ok(a) => serde_json::from_str(&a.body).unwrap_or(Value::Null),
                    Err(e) => return super::publish::report(&publisher, &path, Err(e)),
                };
                let Some(every) = watch else {
                    print!("{}", table(&stats));
                    return Ok(ExitCode::SUCCESS);
                };
                // Clear the screen and draw the table at the top, like `watch`.
                print!("\x1b[2J\x1b[H{}", table(&stats));
                println!("(every {every}s; Ctrl-C to stop)");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs((*every).max(1))) => {}
                    _ = tokio::signal::ctrl_c() => return Ok(ExitCode::SUCCESS),
                }
            }
        }
    }
    let answer = publisher.send(method, &path, None, None).await;
    if let Ok(a) = &answer {
        if a.status == 204 {
            println!("dropped");
            return Ok(ExitCode::SUCCESS);
        }
    }
    super::publish::report(&publisher, &path, answer)
}
