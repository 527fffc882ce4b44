//! Redis servers of their own for a test: one server ([`Redis`]) or a Redis Cluster of several
//! masters ([`RedisCluster`]), each on a free loopback port with its files in a temporary
//! directory, persistence off. [`Redis::start_tls`] starts one that accepts only TLS
//! connections, with a certificate the test gives.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::process::{free_port, output, run, stop, wait_listening};
use crate::TestkitError;

/// A running Redis server; stopped when dropped.
pub struct Redis {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
    cluster: bool,
    /// Serves TLS only (on `port`), with the certificate and key in `dir`.
    tls: bool,
    child: Option<Child>,
}

/// Where [`Redis::start_tls`] keeps the certificate and key it was given, inside its folder.
const CERT_FILE: &str = "tls-cert.pem";
const KEY_FILE: &str = "tls-key.pem";

impl Redis {
    /// Starts a standalone server.
    pub fn start() -> Result<Redis, TestkitError> {
        Redis::start_node(false, None)
    }

    /// Starts a standalone server that accepts only TLS connections (no plain port), serving
    /// `cert_pem` (a certificate for `localhost`, or a chain) with `key_pem`; clients are not
    /// asked for a certificate. [`Redis::url`] answers `rediss://localhost:PORT`.
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> Result<Redis, TestkitError> {
        Redis::start_node(false, Some((cert_pem, key_pem)))
    }

    fn start_node(cluster: bool, tls: Option<(&str, &str)>) -> Result<Redis, TestkitError> {
        let bin = server_bin()?;
        let dir = tempfile::Builder::new()
            .prefix("herald-redis-")
            .tempdir()
            .map_err(TestkitError::io("creating a folder for Redis"))?;
        if let Some((cert_pem, key_pem)) = tls {
            std::fs::write(dir.path().join(CERT_FILE), cert_pem)
                .map_err(TestkitError::io("writing the Redis TLS certificate"))?;
            std::fs::write(dir.path().join(KEY_FILE), key_pem)
                .map_err(TestkitError::io("writing the Redis TLS key"))?;
        }
        let mut redis = Redis {
            dir,
            bin,
            port: 0,
            cluster,
            tls: tls.is_some(),
            child: None,
        };
        let mut last = None;
        for _ in 0..5 {
            redis.port = if cluster {
                free_cluster_port()?
            } else {
                free_port()?
            };
            match redis.launch() {
                Ok(()) => return Ok(redis),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("five attempts"))
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The running server's process id (the server's), to read its CPU time from /proc;
    /// `None` while stopped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    /// Its URL: `redis://127.0.0.1:PORT`, or `rediss://localhost:PORT` for a TLS server (the
    /// name its certificate is checked against).
    pub fn url(&self) -> String {
        if self.tls {
            format!("rediss://localhost:{}", self.port)
        } else {
            format!("redis://127.0.0.1:{}", self.port)
        }
    }

    /// Runs `redis-cli` against this server with `args` and answers its output.
    pub fn cli(&self, args: &[&str]) -> Result<String, TestkitError> {
        let shown = format!("redis-cli {}", args.join(" "));
        let mut command = Command::new(cli_bin(&self.bin));
        command
            .args(["-h", "127.0.0.1", "-p"])
            .arg(self.port.to_string());
        if self.tls {
            // The certificate is self-signed in the tests: it is its own CA.
            command
                .args(["--tls", "--sni", "localhost", "--cacert"])
                .arg(self.dir.path().join(CERT_FILE));
        }
        output(command.args(args), shown)
    }

    /// Stops the server (SIGTERM). [`Redis::restart`] starts it again.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child, "TERM", Duration::from_secs(10));
        }
    }

    /// Kills the server with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child, "KILL", Duration::from_secs(10));
        }
    }

    /// Starts a stopped or killed server again on the same port (with no data: persistence is
    /// off, as a restarted cache would be).
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.stop();
        self.launch()
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    fn launch(&mut self) -> Result<(), TestkitError> {
        let mut command = Command::new(&self.bin);
        command.args(["--bind", "127.0.0.1"]);
        if self.tls {
            let cert = self.dir.path().join(CERT_FILE);
            command
                .args(["--port", "0", "--tls-port"])
                .arg(self.port.to_string())
                .arg("--tls-cert-file")
                .arg(&cert)
                .arg("--tls-key-file")
                .arg(self.dir.path().join(KEY_FILE))
                .arg("--tls-ca-cert-file")
                .arg(&cert)
                .args(["--tls-auth-clients", "no"]);
        } else {
            command.arg("--port").arg(self.port.to_string());
        }
        command
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--logfile")
            .arg(self.log());
        if self.cluster {
            command
                .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(self.dir.path().join("nodes.conf"));
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(TestkitError::io("starting redis-server"))?;
        let ready = wait_listening(
            "redis-server",
            &mut child,
            self.port,
            Duration::from_secs(15),
            &self.log(),
        );
        // A cluster node listens on its port before it binds its cluster bus port (the port
        // + 10,000) and exits if it cannot: it is ready once both accept connections.
        let ready = ready.and_then(|()| {
            if !self.cluster {
                return Ok(());
            }
            wait_listening(
                "redis-server's cluster bus",
                &mut child,
                self.port + CLUSTER_BUS_OFFSET,
                Duration::from_secs(15),
                &self.log(),
            )
        });
        if ready.is_err() {
            stop(&mut child, "KILL", Duration::from_secs(5));
        } else {
            self.child = Some(child);
        }
        ready
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How far above a cluster node's port its cluster bus listens (Redis's default).
const CLUSTER_BUS_OFFSET: u16 = 10_000;

/// A free port for a cluster node: at most 55,535 (Redis refuses a higher one, its bus port
/// would not exist) with its bus port free too, when looked at.
fn free_cluster_port() -> Result<u16, TestkitError> {
    for _ in 0..200 {
        let port = free_port()?;
        if port > u16::MAX - CLUSTER_BUS_OFFSET {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port + CLUSTER_BUS_OFFSET)).is_ok() {
            return Ok(port);
        }
    }
    Err(TestkitError::io("finding a port for a Redis Cluster node")(
        std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "no free port at or below 55,535 with its cluster bus port free",
        ),
    ))
}

/// A Redis Cluster of masters with no replicas, its 16,384 slots spread over them.
pub struct RedisCluster {
    nodes: Vec<Redis>,
}

impl RedisCluster {
    /// Starts `masters` (at least 3, as `redis-cli --cluster create` requires) cluster-mode
    /// servers and joins them into one cluster; returns once the cluster says it is ok.
    pub fn start(masters: usize) -> Result<RedisCluster, TestkitError> {
        let nodes = (0..masters.max(3))
            .map(|_| Redis::start_node(true, None))
            .collect::<Result<Vec<_>, _>>()?;
        let mut create = Command::new(cli_bin(&nodes[0].bin));
        create.args(["--cluster", "create"]);
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port));
        }
        create.args(["--cluster-replicas", "0", "--cluster-yes"]);
        run(&mut create)?;
        let cluster = RedisCluster { nodes };
        let start = Instant::now();
        loop {
            let all_ok = cluster.nodes.iter().all(|n| {
                n.cli(&["cluster", "info"])
                    .is_ok_and(|info| info.contains("cluster_state:ok"))
            });
            if all_ok {
                return Ok(cluster);
            }
            if start.elapsed() > Duration::from_secs(30) {
                return Err(TestkitError::NotReady {
                    what: "redis cluster",
                    port: cluster.nodes[0].port,
                    seconds: start.elapsed().as_secs(),
                    log: cluster.nodes[0]
                        .cli(&["cluster", "info"])
                        .unwrap_or_default(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every node's URL.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Redis::url).collect()
    }

    /// The nodes, to stop or restart one.
    pub fn nodes_mut(&mut self) -> &mut [Redis] {
        &mut self.nodes
    }
}

fn server_bin() -> Result<PathBuf, TestkitError> {
    if let Some(bin) = std::env::var_os("HERALD_REDIS_SERVER") {
        return Ok(PathBuf::from(bin));
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/local/bin")])
    {
        let bin = dir.join("redis-server");
        if bin.is_file() {
            return Ok(bin);
        }
    }
    Err(TestkitError::NotInstalled {
        what: "redis-server",
        hint: "looked in HERALD_REDIS_SERVER and PATH".into(),
    })
}

/// `redis-cli` beside the server binary, else on `PATH`.
fn cli_bin(server: &std::path::Path) -> PathBuf {
    let beside = server.with_file_name("redis-cli");
    if beside.is_file() {
        beside
    } else {
        PathBuf::from("redis-cli")
    }
}
