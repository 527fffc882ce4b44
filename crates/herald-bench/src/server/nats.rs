//! A NATS server as the target (`--peer nats`): `nats-server` started on a free loopback port
//! for `--spawn` (its pid read like a spawned Herald's, stopped by pid at the end), or one
//! already running at `--target nats://HOST:PORT` (`--server-pid` for its CPU and memory).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};

use super::{spawn, Node, Target};
use crate::args::Common;

/// The line nats-server logs (on stderr) once it accepts clients.
const LISTENING: &str = "Listening for client connections on ";

/// Finds `nats-server`: `--server-bin`, else on PATH, else /usr/sbin (Debian's package puts it
/// there, which is not on every PATH).
pub fn nats_binary(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = flag {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        bail!("--server-bin {} does not exist", p.display());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|d| d.join("nats-server"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow!(
                "cannot find nats-server on PATH or in /usr/sbin; install it (Debian: \
                 apt-get install nats-server) or pass --server-bin PATH"
            )
        })
}

/// Opens the NATS target of `c` (`--spawn` or `--target nats://...`).
pub(super) fn open(c: &Common) -> anyhow::Result<Target> {
    if c.spawn_cluster.is_some() {
        bail!("--peer nats runs one nats-server: use --spawn or --target nats://HOST:PORT");
    }
    if c.transport != crate::proto::Transport::Ws {
        bail!("--peer nats speaks NATS's own protocol: leave out --transport");
    }
    if let Some(url) = &c.target {
        return attach(c, url);
    }
    spawn_nats(c)
}

fn parse_url(url: &str, allow_remote: bool) -> anyhow::Result<Node> {
    let url = url.trim();
    let rest = url
        .strip_prefix("nats://")
        .ok_or_else(|| anyhow!("--peer nats needs a nats://HOST:PORT --target (got {url:?})"))?;
    let host = rest.trim_end_matches('/').to_string();
    if host.contains(',') || host.contains('/') {
        bail!("--target nats://HOST:PORT names one server (got {url:?})");
    }
    let addr = host
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host:?}"))?
        .next()
        .ok_or_else(|| anyhow!("{host:?} resolves to no address"))?;
    if !addr.ip().is_loopback() && !allow_remote {
        bail!(
            "{url} is not a loopback address; the bench only loads this machine unless \
             --allow-remote is given"
        );
    }
    Ok(Node {
        addr,
        url: format!("nats://{host}"),
        host,
        pid: None,
        mqtt: None,
    })
}

fn attach(c: &Common, url: &str) -> anyhow::Result<Target> {
    let node = parse_url(url, c.allow_remote)?.with_server_pid(c, "nats")?;
    Ok(Target::peer(node, None, None))
}

/// Starts `nats-server -a 127.0.0.1 -p -1` (a free port it picks) and waits up to 30 s for the
/// line saying where it listens. Its log goes to a file in a temporary folder, kept for the run.
fn spawn_nats(c: &Common) -> anyhow::Result<Target> {
    let bin = nats_binary(c.server_bin.as_deref())?;
    let tmp = tempfile::Builder::new()
        .prefix("herald-bench-nats-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let mut child = Command::new(&bin)
        .args(["-a", "127.0.0.1", "-p", "-1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let log = tmp.path().join("nats-server.log");
    std::thread::spawn(move || {
        use std::io::Write;
        let mut tx = Some(tx);
        let mut file = std::fs::File::create(log).ok();
        // Read to the end, so the server never blocks on a full pipe.
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(f) = file.as_mut() {
                let _ = writeln!(f, "{line}");
            }
            if let Some(at) = line.find(LISTENING) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(line[at + LISTENING.len()..].trim().to_string());
                }
            }
        }
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| {
            anyhow!(
                "{} exited or did not say where it listens within 30 s (is it nats-server?)",
                bin.display()
            )
        })
        .and_then(|a| {
            a.parse::<SocketAddr>()
                .with_context(|| format!("nats-server printed a bad address {a:?}"))
        });
    let addr = match addr {
        Ok(a) => a,
        Err(e) => {
            spawn::stop(&mut child);
            return Err(e);
        }
    };
    let node = Node {
        addr,
        host: addr.to_string(),
        url: format!("nats://{addr}"),
        pid: Some(child.id()),
        mqtt: None,
    };
    Ok(Target::peer(node, Some(child), Some(tmp)))
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn nats_urls_name_one_loopback_server() {
        let n = parse_url("nats://127.0.0.1:4222", false).unwrap();
        assert_eq!(n.addr, "127.0.0.1:4222".parse().unwrap());
        assert_eq!(n.url, "nats://127.0.0.1:4222");
        assert!(parse_url("http://127.0.0.1:4222", false).is_err());
        assert!(parse_url("nats://10.1.2.3:4222", false).is_err());
        assert!(parse_url("nats://10.1.2.3:4222", true).is_ok());
        assert!(parse_url("nats://127.0.0.1:4222,127.0.0.1:4223", false).is_err());
    }
}
