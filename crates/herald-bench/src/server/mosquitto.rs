//! Mosquitto as the target (`--peer mosquitto`): `mosquitto` started with a generated config on a
//! free loopback port for `--spawn` (anonymous clients allowed, no persistence, its defaults
//! otherwise; its pid read like a spawned Herald's, stopped by pid at the end), or a broker
//! already running at `--target mqtt://HOST:PORT` (`--server-pid` for its CPU and memory).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{anyhow, bail, Context};

use super::{spawn, Node, Target};
use crate::args::Common;

/// The line Mosquitto logs (on stderr) once it accepts clients.
const RUNNING: &str = " running";

/// Finds `mosquitto`: `--server-bin`, else on PATH, else /usr/sbin (Debian's package puts it
/// there, which is not on every PATH).
pub fn mosquitto_binary(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = flag {
        if p.is_file() {
            return Ok(p.to_path_buf());
        }
        bail!("--server-bin {} does not exist", p.display());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|d| d.join("mosquitto"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow!(
                "cannot find mosquitto on PATH or in /usr/sbin; install it (Debian: apt-get \
                 install mosquitto) or pass --server-bin PATH"
            )
        })
}

/// Opens the Mosquitto target of `c` (`--spawn` or `--target mqtt://...`).
pub(super) fn open(c: &Common) -> anyhow::Result<Target> {
    if c.spawn_cluster.is_some() {
        bail!("--peer mosquitto runs one mosquitto: use --spawn or --target mqtt://HOST:PORT");
    }
    if !matches!(
        c.transport,
        crate::proto::Transport::Ws | crate::proto::Transport::Mqtt
    ) {
        bail!("--peer mosquitto speaks MQTT: leave out --transport (or give --transport mqtt)");
    }
    if let Some(url) = &c.target {
        return attach(c, url);
    }
    spawn_mosquitto(c)
}

fn parse_url(url: &str, allow_remote: bool) -> anyhow::Result<Node> {
    let url = url.trim();
    let rest = url.strip_prefix("mqtt://").ok_or_else(|| {
        anyhow!("--peer mosquitto needs an mqtt://HOST:PORT --target (got {url:?})")
    })?;
    let host = rest.trim_end_matches('/').to_string();
    if host.contains(',') || host.contains('/') {
        bail!("--target mqtt://HOST:PORT names one server (got {url:?})");
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
    Ok(mqtt_node(addr, None))
}

fn mqtt_node(addr: SocketAddr, pid: Option<u32>) -> Node {
    Node {
        addr,
        host: addr.to_string(),
        url: format!("mqtt://{addr}"),
        pid,
        mqtt: Some(addr),
    }
}

fn attach(c: &Common, url: &str) -> anyhow::Result<Target> {
    let node = parse_url(url, c.allow_remote)?.with_server_pid(c, "mqtt")?;
    Ok(Target::peer(node, None, None))
}

/// The configuration a spawned Mosquitto runs with: one loopback listener on `port`, anonymous
/// clients, no persistence, no line per connection in its log; Mosquitto's defaults otherwise.
fn config(port: u16) -> String {
    format!(
        "# Written by herald bench --peer mosquitto.\n\
         listener {port} 127.0.0.1\n\
         allow_anonymous true\n\
         persistence false\n\
         log_dest stderr\n\
         log_type error\n\
         log_type warning\n\
         log_type information\n\
         connection_messages false\n"
    )
}

/// A loopback port free now (Mosquitto cannot be told to pick one itself).
fn free_port() -> anyhow::Result<u16> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// Starts `mosquitto -c CONFIG` on a free loopback port and waits up to 30 s for the line saying
/// it runs. Its config and log are files in a temporary folder, kept for the run.
fn spawn_mosquitto(c: &Common) -> anyhow::Result<Target> {
    let bin = mosquitto_binary(c.server_bin.as_deref())?;
    let tmp = tempfile::Builder::new()
        .prefix("herald-bench-mosquitto-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let port = free_port()?;
    let conf = tmp.path().join("mosquitto.conf");
    std::fs::write(&conf, config(port)).context("cannot write mosquitto.conf")?;
    let mut child = Command::new(&bin)
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let stderr = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let log = tmp.path().join("mosquitto.log");
    std::thread::spawn(move || {
        use std::io::Write;
        let mut tx = Some(tx);
        let mut file = std::fs::File::create(log).ok();
        let mut said = Vec::new();
        // Read to the end, so the broker never blocks on a full pipe.
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(f) = file.as_mut() {
                let _ = writeln!(f, "{line}");
            }
            if tx.is_some() && said.len() < 20 {
                said.push(line.clone());
            }
            if line.trim_end().ends_with(RUNNING) {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(Ok(()));
                }
            }
        }
        if let Some(tx) = tx.take() {
            let _ = tx.send(Err(said.join("\n")));
        }
    });
    let started = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(said)) => Err(anyhow!(
            "{} exited before it ran (port {port}); it said:\n{said}",
            bin.display()
        )),
        Err(_) => Err(anyhow!(
            "{} did not say it runs within 30 s (is it mosquitto?)",
            bin.display()
        )),
    };
    if let Err(e) = started {
        spawn::stop(&mut child);
        return Err(e);
    }
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let node = mqtt_node(addr, Some(child.id()));
    Ok(Target::peer(node, Some(child), Some(tmp)))
}

#[cfg(test)]
mod tests {
    use super::{config, parse_url};

    #[test]
    fn mqtt_urls_name_one_loopback_server() {
        let n = parse_url("mqtt://127.0.0.1:1883", false).unwrap();
        assert_eq!(n.addr, "127.0.0.1:1883".parse().unwrap());
        assert_eq!(n.mqtt, Some(n.addr));
        assert_eq!(n.url, "mqtt://127.0.0.1:1883");
        assert!(parse_url("http://127.0.0.1:1883", false).is_err());
        assert!(parse_url("mqtt://10.1.2.3:1883", false).is_err());
        assert!(parse_url("mqtt://10.1.2.3:1883", true).is_ok());
        assert!(parse_url("mqtt://127.0.0.1:1883,127.0.0.1:1884", false).is_err());
    }

    #[test]
    fn the_config_listens_on_loopback_only_and_allows_anonymous_clients() {
        let c = config(18830);
        assert!(c.contains("listener 18830 127.0.0.1\n"), "{c}");
        assert!(c.contains("allow_anonymous true\n"), "{c}");
    }
}
