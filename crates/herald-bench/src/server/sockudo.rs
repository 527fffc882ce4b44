//! Sockudo as the target (`--peer sockudo`): a Pusher-protocol server in Rust, measured with the
//! bench's Pusher clients and publishers. `--spawn` starts the `sockudo` binary (`--server-bin`,
//! else `HERALD_BENCH_SOCKUDO`, else `sockudo` on PATH) with a generated JSON config on a free
//! loopback port: one app with generated credentials in its memory app manager, the local
//! (single-node) adapter, and every limit that would refuse the bench's load raised or off
//! (connections, the HTTP API's and connect rate limits; no metrics listener, no queue); its
//! defaults otherwise. It runs with a cleared environment (so no `SOCKUDO_*`, `PORT` or `HOST`
//! of ours overrides the config), logging at `warn`, in a temporary folder, stopped by pid at the
//! end. A server already running is measured with `--target http://HOST:PORT` and
//! `--pusher-app-id`, `--pusher-key`, `--pusher-secret` (`--server-pid` for its CPU and memory).

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use super::{spawn, Node, Target};
use crate::args::Common;
use crate::pusher_api::PusherApp;

/// The environment variable naming the `sockudo` binary when `--server-bin` is not given.
pub const SOCKUDO_BIN_ENV: &str = "HERALD_BENCH_SOCKUDO";

/// Connections the generated app accepts (the bench opens up to 19,500 on one server).
pub const MAX_CONNECTIONS: u32 = 100_000;

/// Finds `sockudo`: `--server-bin`, else `$HERALD_BENCH_SOCKUDO`, else on PATH.
pub fn sockudo_binary(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let given = flag
        .map(|p| (p.to_path_buf(), "--server-bin"))
        .or_else(|| std::env::var_os(SOCKUDO_BIN_ENV).map(|p| (p.into(), SOCKUDO_BIN_ENV)));
    if let Some((p, from)) = given {
        if p.is_file() {
            return Ok(p);
        }
        bail!("{from} {} does not exist", p.display());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("sockudo"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            anyhow!(
                "cannot find sockudo on PATH; build it from source (cargo build --release -p \
                 sockudo --no-default-features --features local, docs/benchmarks/herald-bench.md) \
                 and pass --server-bin PATH or set {SOCKUDO_BIN_ENV}"
            )
        })
}

/// Opens the Sockudo target of `c` (`--spawn`, or `--target http://...` with the app's
/// credentials).
pub(super) fn open(c: &Common) -> anyhow::Result<Target> {
    if c.spawn_cluster.is_some() {
        bail!("--peer sockudo runs one sockudo: use --spawn or --target http://HOST:PORT");
    }
    if !matches!(
        c.transport,
        crate::proto::Transport::Ws | crate::proto::Transport::Pusher
    ) {
        bail!("--peer sockudo speaks the Pusher protocol: leave out --transport (or give --transport pusher)");
    }
    if let Some(urls) = &c.target {
        let app = given_app(c).ok_or_else(|| {
            anyhow!(
                "--peer sockudo with --target needs the app's credentials: --pusher-app-id, \
                 --pusher-key and --pusher-secret"
            )
        })?;
        let node = super::parse_node(urls, c.allow_remote)?.with_server_pid(c, "http")?;
        return Ok(with_app(Target::peer(node, None, None), app));
    }
    spawn_sockudo(c)
}

/// The app credentials given with `--pusher-app-id`, `--pusher-key` and `--pusher-secret`, when
/// all three are.
pub fn given_app(c: &Common) -> Option<PusherApp> {
    Some(PusherApp {
        app_id: c.pusher_app_id.clone()?,
        key: c.pusher_key.clone()?,
        secret: c.pusher_secret.clone()?,
    })
}

fn with_app(mut target: Target, app: PusherApp) -> Target {
    target.pusher_key = Some(app.key.clone());
    target.pusher_app = Some(app);
    target
}

/// Credentials drawn as Pusher draws them: an app id of 7 digits, a key and a secret of 20
/// lower-case hex digits.
pub fn random_app() -> PusherApp {
    let hex = |n: usize| -> String {
        (0..n)
            .map(|_| char::from_digit(u32::from(rand::random::<u8>() % 16), 16).expect("hex"))
            .collect()
    };
    PusherApp {
        app_id: (1_000_000 + rand::random::<u32>() % 9_000_000).to_string(),
        key: hex(20),
        secret: hex(20),
    }
}

/// The configuration a spawned Sockudo runs with (JSON, as `sockudo --config FILE` reads it):
/// `port` on 127.0.0.1, `app` in the memory app manager with [`MAX_CONNECTIONS`], the local
/// adapter, memory cache and queue, rate limits and the metrics listener off.
pub fn config(port: u16, app: &PusherApp) -> String {
    let config = serde_json::json!({
        "debug": false,
        "mode": "production",
        "host": "127.0.0.1",
        "port": port,
        "max_connections": 0,
        "adapter": { "driver": "local" },
        "app_manager": {
            "driver": "memory",
            "array": { "apps": [{
                "id": app.app_id,
                "key": app.key,
                "secret": app.secret,
                "enabled": true,
                "policy": { "limits": {
                    "max_connections": MAX_CONNECTIONS,
                    "max_client_events_per_second": 1000
                } }
            }] }
        },
        "cache": { "driver": "memory" },
        "queue": { "driver": "memory" },
        "rate_limiter": { "enabled": false },
        "metrics": { "enabled": false }
    });
    serde_json::to_string_pretty(&config).expect("a JSON value serializes")
}

/// A loopback port free now (Sockudo cannot be told to pick one itself).
fn free_port() -> anyhow::Result<u16> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("cannot find a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// Starts `sockudo --config sockudo.json` on a free loopback port in a temporary folder (its log
/// in sockudo.log there) and waits up to 30 s for its `GET /up` to answer 200.
fn spawn_sockudo(c: &Common) -> anyhow::Result<Target> {
    let bin = sockudo_binary(c.server_bin.as_deref())?;
    let tmp = tempfile::Builder::new()
        .prefix("herald-bench-sockudo-")
        .tempdir()
        .context("cannot create a temporary folder")?;
    let port = free_port()?;
    let app = given_app(c).unwrap_or_else(random_app);
    let conf = tmp.path().join("sockudo.json");
    std::fs::write(&conf, config(port, &app)).context("cannot write sockudo.json")?;
    let log = std::fs::File::create(tmp.path().join("sockudo.log"))
        .context("cannot create sockudo.log")?;
    let mut child = Command::new(&bin)
        .arg("--config")
        .arg(&conf)
        .current_dir(tmp.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(log.try_clone().context("cannot share sockudo.log")?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    if let Err(e) = wait_up(&mut child, addr, Duration::from_secs(30)) {
        spawn::stop(&mut child);
        let said = std::fs::read_to_string(tmp.path().join("sockudo.log")).unwrap_or_default();
        let tail: Vec<&str> = said.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "{} ({}): {e}; it said:\n{}",
            bin.display(),
            addr,
            tail.join("\n")
        );
    }
    let node = Node {
        addr,
        host: addr.to_string(),
        url: format!("http://{addr}"),
        pid: Some(child.id()),
        mqtt: None,
    };
    Ok(with_app(Target::peer(node, Some(child), Some(tmp)), app))
}

/// Waits until `GET /up` on `addr` answers 200, the child exits, or `limit` passes.
fn wait_up(child: &mut Child, addr: SocketAddr, limit: Duration) -> anyhow::Result<()> {
    use std::io::{Read, Write};
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(status) = child.try_wait()? {
            bail!("it exited before it answered ({status})");
        }
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let request = format!("GET /up HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
            let mut answer = Vec::new();
            if s.write_all(request.as_bytes()).is_ok()
                && s.read_to_end(&mut answer).is_ok()
                && answer.starts_with(b"HTTP/1.1 200")
            {
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("GET /up did not answer 200 within {} s", limit.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_holds_the_app_and_opens_the_limits_on_loopback() {
        let app = PusherApp {
            app_id: "1234567".into(),
            key: "0123456789abcdef0123".into(),
            secret: "fedcba9876543210fedc".into(),
        };
        let v: serde_json::Value = serde_json::from_str(&config(16001, &app)).unwrap();
        assert_eq!(v["host"], "127.0.0.1");
        assert_eq!(v["port"], 16001);
        assert_eq!(v["adapter"]["driver"], "local");
        assert_eq!(v["app_manager"]["driver"], "memory");
        let apps = v["app_manager"]["array"]["apps"].as_array().unwrap();
        assert_eq!(apps.len(), 1);
        assert_eq!(apps[0]["id"], "1234567");
        assert_eq!(apps[0]["key"], "0123456789abcdef0123");
        assert_eq!(apps[0]["secret"], "fedcba9876543210fedc");
        assert_eq!(apps[0]["enabled"], true);
        let limit = apps[0]["policy"]["limits"]["max_connections"]
            .as_u64()
            .unwrap();
        assert!(limit >= 19_500, "{limit}");
        // 0: no server-wide limit.
        assert_eq!(v["max_connections"], 0);
        assert_eq!(v["rate_limiter"]["enabled"], false);
        assert_eq!(v["metrics"]["enabled"], false);
        // The default queue driver is Redis, which the bench does not start.
        assert_eq!(v["queue"]["driver"], "memory");
    }

    #[test]
    fn drawn_credentials_look_like_pushers() {
        let a = random_app();
        assert_eq!(a.app_id.len(), 7);
        assert!(a.app_id.bytes().all(|b| b.is_ascii_digit()));
        for s in [&a.key, &a.secret] {
            assert_eq!(s.len(), 20);
            assert!(s
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        }
        assert_ne!(a.key, random_app().key);
    }
}
