//! Starting `herald serve` processes for `--spawn` and `--spawn-cluster`: which binary, the
//! secrets a run makes up, and one node's start (it prints its addresses on stdout; we wait for
//! them).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use rand::Rng;

/// The Meteor configuration a spawned server gets for `--transport meteor`: Deacon's templates.
pub(super) const DEACON_CONF: &str = include_str!("../../../../docs/examples/meteord-deacon.conf");

/// A random key of 32 lower-case letters and digits after `prefix`.
pub(super) fn random_key(prefix: &str) -> String {
    let mut rng = rand::thread_rng();
    let s: String = (0..32)
        .map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.gen_range(0..36)]))
        .collect();
    format!("{prefix}{s}")
}

/// 64 random hex digits: the `--credentials-key` every node of a spawned cluster shares.
pub(super) fn random_hex_key() -> String {
    let mut rng = rand::thread_rng();
    (0..64)
        .map(|_| char::from(b"0123456789abcdef"[rng.gen_range(0..16)]))
        .collect()
}

/// Finds the `herald` binary: `--server-bin`, else this executable when the bench runs inside
/// `herald` (whatever its file is called), else `herald` beside this executable, else
/// `target/release/herald` of the workspace.
pub fn server_binary(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = flag {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        bail!("--server-bin {} does not exist", p.display());
    }
    let exe = std::env::current_exe().context("cannot find the running executable")?;
    if crate::host() == crate::Host::Herald {
        return Ok(exe);
    }
    let mut candidates = Vec::new();
    if let Some(dir) = exe.parent() {
        candidates.push(dir.join("herald"));
        if dir.ends_with("deps") {
            if let Some(up) = dir.parent() {
                candidates.push(up.join("herald"));
            }
        }
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    candidates.push(workspace.join("target/release/herald"));
    for c in &candidates {
        if c.is_file() {
            return Ok(c.clone());
        }
    }
    bail!(
        "cannot find the herald server binary (looked at {}); build it with \
         `cargo build --release -p herald` or pass --server-bin PATH",
        candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// A `herald serve` that has printed where it listens.
pub(super) struct Started {
    /// The process.
    pub child: Child,
    /// Its HTTP address.
    pub addr: SocketAddr,
    /// Its Meteor subscriber address, when it has one.
    pub meteor: Option<SocketAddr>,
    /// Its MQTT listener's address, when it has one.
    pub mqtt: Option<SocketAddr>,
}

/// Starts `cmd` (a `herald serve` command line, stdout not yet set) and waits up to 30 s for it
/// to print its HTTP address. The child is killed if it does not.
pub(super) fn start_node(mut cmd: Command, bin: &Path) -> anyhow::Result<Started> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        let mut meteor = None;
        let mut mqtt = None;
        // The Meteor and MQTT lines come before the HTTP one.
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("herald meteor listening on ") {
                meteor = addr.trim().parse::<SocketAddr>().ok();
            } else if let Some(addr) = line.strip_prefix("herald mqtt listening on ") {
                mqtt = addr.trim().parse::<SocketAddr>().ok();
            } else if let Some(addr) = line.strip_prefix("herald listening on http://") {
                if let Some(tx) = tx.take() {
                    let _ = tx.send((addr.trim().to_string(), meteor, mqtt));
                }
            }
        }
    });
    let started = rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| anyhow!("{} did not report its address within 30 s", bin.display()))
        .and_then(|(addr, meteor, mqtt)| {
            let addr = addr
                .parse::<SocketAddr>()
                .context("server printed a bad address")?;
            Ok((addr, meteor, mqtt))
        });
    match started {
        Ok((addr, meteor, mqtt)) => Ok(Started {
            child,
            addr,
            meteor,
            mqtt,
        }),
        Err(e) => {
            stop(&mut child);
            Err(e)
        }
    }
}

/// Stops a spawned server by its pid: SIGTERM, up to 5 s to exit, then SIGKILL.
pub(super) fn stop(child: &mut Child) {
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
