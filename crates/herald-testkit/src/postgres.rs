//! A PostgreSQL server of its own for a test: `initdb` into a temporary directory, `postgres`
//! on a free loopback port with trust authentication for the user `herald`.
//!
//! PostgreSQL refuses to run as root; when the tests run as root (CI), `initdb` and `postgres`
//! run as the `postgres` user the Debian package creates, in a directory handed to that user.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::process::{free_port, output, run, stop, tail};
use crate::TestkitError;

/// The role every test connects as (trust authentication, a superuser).
const USER: &str = "herald";

/// A running PostgreSQL server; stopped when dropped.
pub struct Postgres {
    dir: TempDir,
    bin: PathBuf,
    port: u16,
    owner: Option<(u32, u32)>,
    /// Serves TLS too (`ssl=on` with `server.crt` and `server.key` in the folder).
    tls: bool,
    /// Syncs its write-ahead log to disk (`fsync` and `full_page_writes` on), as a production
    /// server does; off for tests ([`Postgres::start`]).
    durable: bool,
    child: Option<Child>,
}

impl Postgres {
    /// Initialises a new cluster and starts it.
    pub fn start() -> Result<Postgres, TestkitError> {
        Postgres::start_inner(None, false)
    }

    /// Like [`Postgres::start`], with `fsync` and `full_page_writes` on (PostgreSQL's defaults,
    /// as in production): every commit waits for its write-ahead log to reach the disk. For
    /// benchmarks that compare with a server that syncs; tests use [`Postgres::start`].
    pub fn start_durable() -> Result<Postgres, TestkitError> {
        Postgres::start_inner(None, true)
    }

    /// Like [`Postgres::start`], serving TLS with this certificate and key (PEM) and refusing
    /// TCP connections that do not use it (`hostssl` in `pg_hba.conf`).
    pub fn start_with_tls(cert_pem: &str, key_pem: &str) -> Result<Postgres, TestkitError> {
        Postgres::start_inner(Some((cert_pem, key_pem)), false)
    }

    fn start_inner(tls: Option<(&str, &str)>, durable: bool) -> Result<Postgres, TestkitError> {
        let bin = bin_dir()?;
        let dir = tempfile::Builder::new()
            .prefix("herald-pg-")
            .tempdir()
            .map_err(TestkitError::io("creating a folder for PostgreSQL"))?;
        let owner = if running_as_root() {
            let owner = postgres_user()?;
            std::os::unix::fs::chown(dir.path(), Some(owner.0), Some(owner.1))
                .map_err(TestkitError::io("handing the folder to the postgres user"))?;
            Some(owner)
        } else {
            None
        };
        let mut pg = Postgres {
            dir,
            bin,
            port: 0,
            owner,
            tls: tls.is_some(),
            durable,
            child: None,
        };
        if let Some((cert_pem, key_pem)) = tls {
            pg.write_private("server.crt", cert_pem)?;
            pg.write_private("server.key", key_pem)?;
        }
        let mut initdb = pg.command("initdb");
        initdb.arg("-D").arg(pg.data()).args([
            "-U",
            USER,
            "--auth=trust",
            "-N",
            "-E",
            "UTF8",
            "--locale=C",
        ]);
        run(&mut initdb)?;
        if pg.tls {
            let hba = pg.data().join("pg_hba.conf");
            let rules =
                std::fs::read_to_string(&hba).map_err(TestkitError::io("reading pg_hba.conf"))?;
            let tls_only: String = rules
                .lines()
                .map(|l| match l.strip_prefix("host ") {
                    Some(rest) => format!("hostssl {rest}\n"),
                    None => format!("{l}\n"),
                })
                .collect();
            std::fs::write(&hba, tls_only).map_err(TestkitError::io("writing pg_hba.conf"))?;
        }
        let mut last = None;
        for _ in 0..5 {
            pg.port = free_port()?;
            match pg.launch() {
                Ok(()) => return Ok(pg),
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("five attempts"))
    }

    /// The server's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The running server's process id (the postmaster's: its backends are its children), to read its CPU time from /proc;
    /// `None` while stopped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(std::process::Child::id)
    }

    /// A connection URL for `database`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{database}", self.port)
    }

    /// Creates `database` and answers its URL.
    pub fn create_database(&self, database: &str) -> Result<String, TestkitError> {
        let mut createdb = Command::new(self.bin.join("createdb"));
        createdb
            .args(["-h", "127.0.0.1", "-U", USER, "-p"])
            .arg(self.port.to_string())
            .arg(database);
        run(&mut createdb)?;
        Ok(self.url(database))
    }

    /// Runs `sql` in `database` with `psql` and answers its output (unaligned, no headers).
    pub fn psql(&self, database: &str, sql: &str) -> Result<String, TestkitError> {
        let shown = format!("psql -c {sql:?}");
        let mut psql = Command::new(self.bin.join("psql"));
        psql.args([
            "-h",
            "127.0.0.1",
            "-U",
            USER,
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-p",
        ])
        .arg(self.port.to_string())
        .args(["-d", database, "-c", sql]);
        output(&mut psql, shown)
    }

    /// Stops the server with a fast shutdown (clients are disconnected, nothing committed is
    /// lost). [`Postgres::restart`] starts it again.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child, "INT", Duration::from_secs(10));
        }
    }

    /// Kills the server with SIGKILL, as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child, "KILL", Duration::from_secs(10));
        }
    }

    /// Starts a stopped or killed server again on the same port with the same data.
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.stop();
        self.launch()
    }

    /// Writes `contents` to `name` in the folder, readable by the server's user only (the
    /// server refuses a key file others can read).
    fn write_private(&self, name: &str, contents: &str) -> Result<(), TestkitError> {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.path().join(name);
        std::fs::write(&path, contents).map_err(TestkitError::io(format!("writing {name}")))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(TestkitError::io(format!("protecting {name}")))?;
        if let Some((uid, gid)) = self.owner {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(TestkitError::io(
                format!("handing {name} to the postgres user"),
            ))?;
        }
        Ok(())
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    fn command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.owner {
            command.uid(uid).gid(gid);
        }
        command
    }

    fn launch(&mut self) -> Result<(), TestkitError> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .map_err(TestkitError::io("opening the PostgreSQL log"))?;
        if let Some((uid, gid)) = self.owner {
            let _ = std::os::unix::fs::chown(self.log(), Some(uid), Some(gid));
        }
        let err = log
            .try_clone()
            .map_err(TestkitError::io("opening the PostgreSQL log"))?;
        let mut postgres = self.command("postgres");
        if self.tls {
            postgres.args(["-c", "ssl=on"]);
            postgres.arg("-c").arg(format!(
                "ssl_cert_file={}",
                self.dir.path().join("server.crt").display()
            ));
            postgres.arg("-c").arg(format!(
                "ssl_key_file={}",
                self.dir.path().join("server.key").display()
            ));
        }
        if !self.durable {
            // Tests never crash the machine, only the server: committed data in the page
            // cache survives a SIGKILL, so syncing to disk would only slow the suite.
            postgres.args(["-c", "fsync=off", "-c", "full_page_writes=off"]);
        }
        let mut child = postgres
            .arg("-D")
            .arg(self.data())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-c")
            .arg("listen_addresses=127.0.0.1")
            .arg("-c")
            .arg(format!(
                "unix_socket_directories={}",
                self.dir.path().display()
            ))
            .args(["-c", "shared_buffers=16MB", "-c", "max_connections=200"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(TestkitError::io("starting postgres"))?;
        let ready = self.wait_ready(&mut child);
        if ready.is_err() {
            stop(&mut child, "KILL", Duration::from_secs(5));
        } else {
            self.child = Some(child);
        }
        ready
    }

    fn wait_ready(&self, child: &mut Child) -> Result<(), TestkitError> {
        let start = Instant::now();
        let limit = Duration::from_secs(30);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-q", "-h", "127.0.0.1", "-U", USER, "-p"])
                .arg(self.port.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ready {
                return Ok(());
            }
            let exited = matches!(child.try_wait(), Ok(Some(_)));
            if exited || start.elapsed() > limit {
                return Err(TestkitError::NotReady {
                    what: "postgres",
                    port: self.port,
                    seconds: start.elapsed().as_secs(),
                    log: tail(&self.log()),
                });
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The folder with `initdb`, `postgres`, `pg_isready`, `createdb` and `psql`.
fn bin_dir() -> Result<PathBuf, TestkitError> {
    if let Some(dir) = std::env::var_os("HERALD_PG_BIN") {
        let dir = PathBuf::from(dir);
        if dir.join("postgres").is_file() {
            return Ok(dir);
        }
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, bin)| bin)
        .ok_or_else(|| TestkitError::NotInstalled {
            what: "PostgreSQL",
            hint: "looked in HERALD_PG_BIN and /usr/lib/postgresql/*/bin".into(),
        })
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The `postgres` user's uid and gid, from `/etc/passwd`.
fn postgres_user() -> Result<(u32, u32), TestkitError> {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 3 && f[0] == "postgres")
        .and_then(|f| Some((f[2].parse().ok()?, f[3].parse().ok()?)))
        .ok_or_else(|| TestkitError::NotInstalled {
            what: "the postgres user (PostgreSQL does not run as root)",
            hint: "no postgres entry in /etc/passwd".into(),
        })
}
