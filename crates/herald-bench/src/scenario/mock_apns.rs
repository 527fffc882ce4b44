//! The mock APNs the provider scenarios (`broadcast --provider apns`, `auto`) send to: a
//! `herald mock apns` process started by `MockProcess` (the same `herald` binary as the
//! server; stopped by its PID when dropped, also on error), and what a server needs to use it:
//! its certificate and the credentials made from its `.p8` key.

use std::path::{Path, PathBuf};

use crate::scenario::providers::mock::MockProcess;
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
    process: MockProcess,
}

impl MockApns {
    /// Starts `bin mock apns` and waits for its URL.
    pub fn spawn(bin: &Path) -> anyhow::Result<MockApns> {
        let process = MockProcess::start(bin, "apns", &[])?;
        Ok(MockApns {
            url: process.url.clone(),
            pid: process.pid,
            process,
        })
    }

    /// The mock's certificate (for the server's `provider_ca_file`).
    pub fn ca_file(&self) -> PathBuf {
        self.process.dir.join("ca.pem")
    }

    /// The body of `PUT /v1/apps/{app}/providers/apns` with the mock's key.
    pub fn credentials_body(&self) -> anyhow::Result<String> {
        let key = String::from_utf8(self.process.file("AuthKey.p8")?)?;
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
    pub fn stop(self) -> Option<u64> {
        self.process.stop()
    }
}
