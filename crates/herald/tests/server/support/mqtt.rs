//! Third-party MQTT clients against a server started with `--mqtt 127.0.0.1:0`
//! ([`super::Builder::mqtt`]): Debian's `mosquitto_pub` and `mosquitto_sub`, and Eclipse Paho
//! for Python through `tests/mqtt/paho_client.py` (JSON instructions in, JSON lines out). All
//! are installed by `scripts/install-mqtt-clients.sh` (scripts/test.sh runs it). Every run has a
//! timeout, and a failure shows the client's stderr and what it printed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// How long one client run may take before the test fails.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(20);

/// `tests/mqtt`, where the Python and Node clients are installed.
pub fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mqtt")
}

/// Panics with how to install `program` when it is missing.
fn require(program: &str) {
    let found = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false);
    assert!(
        found,
        "{program} is missing: run scripts/install-mqtt-clients.sh (scripts/test.sh does)"
    );
}

/// What a finished client run left: its exit status, stdout and stderr.
#[derive(Debug)]
pub struct Finished {
    /// The command line, for messages.
    pub command: String,
    /// Its exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// Itself if the client exited 0; otherwise panics with its command, stdout and stderr.
    #[track_caller]
    pub fn ok(self) -> Finished {
        assert_eq!(self.code, Some(0), "{}", self.describe());
        self
    }

    /// The command, its exit code and what it printed, for a failure message.
    pub fn describe(&self) -> String {
        format!(
            "{} exited with {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.command, self.code, self.stdout, self.stderr
        )
    }

    /// Its stdout's lines that are JSON objects (paho_client.py's events, `mosquitto_sub -F %j`'s
    /// messages).
    pub fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// paho_client.py's events of kind `event` (`connack`, `message`, ...).
    pub fn events(&self, event: &str) -> Vec<Value> {
        self.json_lines()
            .into_iter()
            .filter(|v| v["event"] == event)
            .collect()
    }
}

/// Runs `command` to its end within [`CLIENT_TIMEOUT`] (killing it and failing the test after).
pub async fn run(mut command: Command) -> Finished {
    let shown = format!("{:?}", command.as_std());
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
    let output = tokio::time::timeout(CLIENT_TIMEOUT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{shown} did not finish within {CLIENT_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("{shown}: {e}"));
    Finished {
        command: shown,
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `mosquitto_pub -h 127.0.0.1 -p PORT args...`, run to its end.
pub async fn mosquitto_pub(addr: SocketAddr, args: &[&str]) -> Finished {
    require("mosquitto_pub");
    let mut command = Command::new("mosquitto_pub");
    command
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(args);
    run(command).await
}

/// `mosquitto_sub -h 127.0.0.1 -p PORT args...`, run to its end (give it `-C N` and `-W SECS`
/// so it ends: after N messages or SECS seconds).
pub async fn mosquitto_sub(addr: SocketAddr, args: &[&str]) -> Finished {
    require("mosquitto_sub");
    let mut command = Command::new("mosquitto_sub");
    command
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(args);
    run(command).await
}

/// `tests/mqtt/paho_client.py` with `spec` (its JSON instructions; see the script) and the
/// server's MQTT port, run to its end.
pub async fn paho(addr: SocketAddr, spec: Value) -> Finished {
    run(paho_command(addr, spec)).await
}

fn paho_command(addr: SocketAddr, mut spec: Value) -> Command {
    let dir = clients_dir();
    let python = dir.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-mqtt-clients.sh (scripts/test.sh does)",
        python.display()
    );
    spec["host"] = addr.ip().to_string().into();
    spec["port"] = addr.port().into();
    let mut command = Command::new(python);
    command
        .arg(dir.join("paho_client.py"))
        .arg(spec.to_string());
    command
}

/// `node tests/mqtt/mqttjs_client.mjs` (mqtt.js's Node build) with `spec` (its JSON
/// instructions; see the script) connecting to `url` (`ws://HOST:PORT/mqtt` for MQTT over
/// WebSocket); run it with [`run`] or [`PahoRun::spawn`], whose events it prints alike.
pub fn mqttjs_command(url: &str, mut spec: Value) -> Command {
    let dir = clients_dir();
    let script = dir.join("mqttjs_client.mjs");
    assert!(
        dir.join("node_modules/mqtt").exists(),
        "tests/mqtt/node_modules/mqtt is missing: run scripts/install-mqtt-clients.sh \
         (scripts/test.sh does)"
    );
    require("node");
    spec["url"] = url.into();
    let mut command = Command::new("node");
    command.arg(script).arg(spec.to_string());
    command
}

/// A paho_client.py run (or a mqttjs_client.mjs one, which prints the same kind of events)
/// still going, read line by line: a subscriber that a test publishes to once it said
/// `subscribed`.
pub struct PahoRun {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every event read so far.
    pub seen: Vec<Value>,
    command: String,
}

impl PahoRun {
    /// Starts paho_client.py with `spec` against the server's MQTT port.
    pub fn start(addr: SocketAddr, spec: Value) -> PahoRun {
        PahoRun::spawn(paho_command(addr, spec))
    }

    /// Starts `command`, a client that prints one JSON event per line.
    pub fn spawn(mut command: Command) -> PahoRun {
        let shown = format!("{:?}", command.as_std());
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {shown}: {e}"));
        let stdout = child.stdout.take().unwrap();
        PahoRun {
            child,
            lines: BufReader::new(stdout).lines(),
            seen: Vec::new(),
            command: shown,
        }
    }

    /// Reads events until one of kind `event` (returned); panics if the client ends first or
    /// nothing comes within [`CLIENT_TIMEOUT`].
    pub async fn until(&mut self, event: &str) -> Value {
        loop {
            let line = tokio::time::timeout(CLIENT_TIMEOUT, self.lines.next_line())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "{}: no {event:?} within {CLIENT_TIMEOUT:?}; events: {:?}",
                        self.command, self.seen
                    )
                })
                .unwrap_or(None);
            let Some(line) = line else {
                panic!(
                    "{} ended before {event:?}; events: {:?}",
                    self.command, self.seen
                );
            };
            let Ok(value) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            self.seen.push(value.clone());
            if value["event"] == event {
                return value;
            }
        }
    }

    /// Waits for the client to exit; its exit code and every event it printed.
    pub async fn finish(mut self) -> (Option<i32>, Vec<Value>) {
        while let Ok(Some(line)) = tokio::time::timeout(CLIENT_TIMEOUT, self.lines.next_line())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{} did not finish: nothing printed for {CLIENT_TIMEOUT:?}; events: {:?}",
                    self.command, self.seen
                )
            })
        {
            if let Ok(value) = serde_json::from_str::<Value>(&line) {
                self.seen.push(value);
            }
        }
        let status = tokio::time::timeout(CLIENT_TIMEOUT, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("{} did not exit", self.command))
            .unwrap();
        (status.code(), self.seen)
    }
}
