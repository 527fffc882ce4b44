//! The mock APNs the provider scenarios send to: `herald mock apns --listen 127.0.0.1:0 --out
//! DIR` started as a child process (the same `herald` binary as the server), its URL read from
//! its first line, its certificate and `.p8` key read from `DIR`. It is stopped by its PID with
//! SIGTERM (then SIGKILL) when dropped, also on error; [`MockApns::stop`] stops it and returns the
//! total it printed on the way out, which counts every notification it accepted.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{anyhow, Context};

use crate::server::ProcStats;

/// The key id the mock's `.p8` key is known by.
pub const KEY_ID: &str = "MOCKKEY001";
/// The team id the mock's `.p8` key is known by.
pub const TEAM_ID: &str = "MOCKTEAM01";
/// The APNs topic (bundle id) of the bench's app.
pub const TOPIC: &str = "com.example.bench";

/// A running `herald mock apns`.
pub struct MockApns {
    /// Its base URL (`https://127.0.0.1:PORT`).
    pub url: String,
    /// Its process id.
    pub pid: u32,
    dir: tempfile::TempDir,
    child: Option<Child>,
    lines: mpsc::Receiver<String>,
}

/// The URL in the mock's first line, `herald mock apns listening on URL`.
pub fn listening_url(line: &str) -> Option<&str> {
    let url = line.strip_prefix("herald mock apns listening on ")?.trim();
    url.starts_with("https://").then_some(url)
}

/// The total in the mock's last line, `accepted N in all`.
pub fn accepted_in_all(line: &str) -> Option<u64> {
    line.trim()
        .strip_prefix("accepted ")?
        .strip_suffix(" in all")?
        .parse()
        .ok()
}

impl MockApns {
    /// Starts `bin mock apns` and waits (up to 30 s) for its URL.
    pub fn spawn(bin: &Path) -> anyhow::Result<MockApns> {
        let dir = tempfile::Builder::new()
            .prefix("herald-bench-mock-")
            .tempdir()
            .context("cannot create the mock's folder")?;
        let mut child = Command::new(bin)
            .args(["mock", "apns", "--listen", "127.0.0.1:0", "--out"])
            .arg(dir.path())
            .env_remove("HERALD_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {} mock apns", bin.display()))?;
        let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let pid = child.id();
        let mut mock = MockApns {
            url: String::new(),
            pid,
            dir,
            child: Some(child),
            lines,
        };
        let first = mock
            .lines
            .recv_timeout(Duration::from_secs(30))
            .map_err(|_| anyhow!("herald mock apns did not print its URL within 30 s"))?;
        mock.url = listening_url(&first)
            .ok_or_else(|| anyhow!("unexpected first line from herald mock apns: {first:?}"))?
            .to_owned();
        Ok(mock)
    }

    /// The mock's certificate (for the server's `provider_ca_file`).
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The body of `PUT /v1/apps/{app}/providers/apns` with the mock's key.
    pub fn credentials_body(&self) -> anyhow::Result<String> {
        let path = self.dir.path().join("AuthKey.p8");
        let key = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(serde_json::json!({
            "topic": TOPIC, "key": key, "key_id": KEY_ID, "team_id": TEAM_ID,
        })
        .to_string())
    }

    /// The mock's CPU time and memory now.
    pub fn probe(&self) -> Option<ProcStats> {
        ProcStats::read(self.pid)
    }

    /// Stops the mock (SIGTERM) and returns the total it accepted, from its last line.
    pub fn stop(mut self) -> Option<u64> {
        let child = self.child.take()?;
        terminate(child);
        let mut total = None;
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            if let Some(n) = accepted_in_all(&line) {
                total = Some(n);
            }
        }
        total
    }
}

/// Sends SIGTERM to `child` by its PID and waits up to 5 s, then kills it.
fn terminate(mut child: Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    for _ in 0..100 {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for MockApns {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            terminate(child);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_url_line() {
        assert_eq!(
            listening_url("herald mock apns listening on https://127.0.0.1:40123\n"),
            Some("https://127.0.0.1:40123")
        );
        assert_eq!(
            listening_url("herald mock fcm listening on https://x"),
            None
        );
        assert_eq!(
            listening_url("herald mock apns listening on http://x"),
            None
        );
        assert_eq!(listening_url(""), None);
    }

    #[test]
    fn reads_the_total_line() {
        assert_eq!(accepted_in_all("accepted 1000001 in all"), Some(1_000_001));
        assert_eq!(accepted_in_all("accepted 0 in all\n"), Some(0));
        assert_eq!(accepted_in_all("accepted 12 (+12)"), None);
        assert_eq!(accepted_in_all("accepted x in all"), None);
        assert_eq!(accepted_in_all("certificate: /tmp/ca.pem"), None);
    }
}
