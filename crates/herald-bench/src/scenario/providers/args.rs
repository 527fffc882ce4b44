//! Flags of `herald bench apns|fcm|webpush`, and [`Counts`], the `1,2,4` lists of threads and
//! connections.

use std::path::PathBuf;
use std::str::FromStr;

/// A comma-separated list of positive counts (`1,2,4`), in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts(pub Vec<usize>);

impl FromStr for Counts {
    type Err = String;

    fn from_str(s: &str) -> Result<Counts, String> {
        let mut counts = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let n: usize = part
                .parse()
                .map_err(|_| format!("{part:?} is not a count (give e.g. 1,2,4)"))?;
            if n == 0 || n > 1024 {
                return Err(format!("{n} is out of range (1 to 1024)"));
            }
            counts.push(n);
        }
        Ok(Counts(counts))
    }
}

/// Flags of `herald bench apns`, `fcm` and `webpush`.
#[derive(Debug, Clone, clap::Args)]
pub struct ProviderArgs {
    /// Tokio worker threads of the client's runtime, one runtime per row (e.g. 1,2).
    #[arg(long, default_value = "1,2", value_name = "LIST")]
    pub threads: Counts,
    /// HTTP/2 connections to the mock (e.g. 1,2,4).
    #[arg(long, default_value = "1,2,4", value_name = "LIST")]
    pub connections: Counts,
    /// Notifications each client sends per round [default: 200000; webpush 20000].
    #[arg(long, value_name = "N")]
    pub notifications: Option<u64>,
    /// Notifications awaiting an answer at once (each connection still keeps to the mock's
    /// SETTINGS_MAX_CONCURRENT_STREAMS, 1000).
    #[arg(long, default_value_t = 2000, value_name = "W")]
    pub in_flight: usize,
    /// Rounds per row: each sends N through Herald's client, then N through the raw client.
    #[arg(long, default_value_t = 2, value_name = "R")]
    pub rounds: u32,
    /// webpush: subscriptions the mock makes (each has its own keys, so messages to different
    /// subscriptions are encrypted differently).
    #[arg(long, default_value_t = 16, value_name = "K")]
    pub subscriptions: usize,
    /// webpush: messages encrypted in the separate loop that measures encryption alone.
    #[arg(long, default_value_t = 5000, value_name = "N")]
    pub encryptions: u64,
    /// The herald binary whose `herald mock` runs the mock [default: this binary when the bench
    /// runs in `herald`, else herald beside it, else target/release/herald].
    #[arg(long, value_name = "PATH")]
    pub mock_bin: Option<PathBuf>,
    /// Write CSV, summary.json and an SVG chart into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Stop the run after this many seconds whatever else it would still do.
    #[arg(long, default_value_t = 600, value_name = "SECS")]
    pub time_limit: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_comma_separated_positive_numbers() {
        assert_eq!("1,2,4".parse::<Counts>(), Ok(Counts(vec![1, 2, 4])));
        assert_eq!(" 2 , 1 ".parse::<Counts>(), Ok(Counts(vec![2, 1])));
        assert_eq!("8".parse::<Counts>(), Ok(Counts(vec![8])));
        for bad in ["", "1,,2", "0", "1,x", "-1", "2000", "1;2"] {
            assert!(bad.parse::<Counts>().is_err(), "{bad:?}");
        }
    }
}
