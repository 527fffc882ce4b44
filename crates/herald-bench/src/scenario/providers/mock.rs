//! The mock provider as a separate process (`herald mock apns|fcm|webpush`), so its CPU time can
//! be read from /proc apart from the client's: started on 127.0.0.1 port 0 with a temporary
//! folder for its certificate and credentials, its URL read from the line it prints, and killed
//! by its pid when dropped (also when the run fails).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context};

/// How long the mock may take to print where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `herald mock <provider>` process.
pub(crate) struct MockProcess {
    /// `https://127.0.0.1:PORT`.
    pub url: String,
    /// Its pid, for /proc.
    pub pid: u32,
    /// The folder it wrote `ca.pem` and its credentials into.
    pub dir: PathBuf,
    child: Option<Child>,
    /// The last `accepted N in all` line the mock printed on its way out.
    accepted_in_all: mpsc::Receiver<u64>,
    _tmp: tempfile::TempDir,
}

impl MockProcess {
    /// Starts `bin mock <provider> --listen 127.0.0.1:0 --out TMP extra...` and waits for its
    /// `herald mock <provider> listening on URL` line.
    pub fn start(bin: &Path, provider: &str, extra: &[String]) -> anyhow::Result<MockProcess> {
        let tmp = tempfile::Builder::new()
            .prefix("herald-bench-mock-")
            .tempdir()
            .context("cannot make a folder for the mock")?;
        let mut child = Command::new(bin)
            .args(["mock", provider, "--listen", "127.0.0.1:0", "--out"])
            .arg(tmp.path())
            .args(extra)
            .env_remove("HERALD_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("cannot start {} mock {provider}", bin.display()))?;
        let pid = child.id();
        let stdout = child.stdout.take().context("the mock has no stdout")?;
        let (url_tx, url_rx) = mpsc::channel();
        let (total_tx, total_rx) = mpsc::channel();
        let prefix = format!("herald mock {provider} listening on ");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix(&prefix) {
                    let _ = url_tx.send(url.trim().to_string());
                } else if let Some(n) = accepted_in_all(&line) {
                    let _ = total_tx.send(n);
                }
            }
        });
        let mut mock = MockProcess {
            url: String::new(),
            pid,
            dir: tmp.path().to_path_buf(),
            child: Some(child),
            accepted_in_all: total_rx,
            _tmp: tmp,
        };
        match url_rx.recv_timeout(START_TIMEOUT) {
            Ok(url) => mock.url = url,
            Err(_) => bail!(
                "the {provider} mock (pid {pid}) did not say where it listens within {}s",
                START_TIMEOUT.as_secs()
            ),
        }
        Ok(mock)
    }

    /// Reads a file the mock wrote.
    pub fn file(&self, name: &str) -> anyhow::Result<Vec<u8>> {
        let path = self.dir.join(name);
        std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
    }

    /// Stops the mock (SIGTERM) and returns how many notifications it says it accepted in all.
    pub fn stop(mut self) -> Option<u64> {
        self.terminate();
        self.accepted_in_all
            .recv_timeout(Duration::from_secs(2))
            .ok()
    }

    fn terminate(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
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
}

impl Drop for MockProcess {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// The count in the mock's last line, `accepted N in all`.
fn accepted_in_all(line: &str) -> Option<u64> {
    line.strip_prefix("accepted ")?
        .strip_suffix(" in all")?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_mocks_final_count() {
        assert_eq!(accepted_in_all("accepted 4200 in all"), Some(4200));
        assert_eq!(accepted_in_all("accepted 4200 (+200)"), None);
        assert_eq!(accepted_in_all("herald mock apns listening on x"), None);
    }
}
