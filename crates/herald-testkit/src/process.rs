//! Child processes of the test servers: free ports, readiness by connecting, stopping by PID.

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::TestkitError;

/// A loopback port nothing listens on now (the server binds it just after; a clash makes the
/// start fail and the caller try another).
pub(crate) fn free_port() -> Result<u16, TestkitError> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(TestkitError::io("binding a port"))?;
    let port = listener
        .local_addr()
        .map_err(TestkitError::io("reading a port"))?
        .port();
    Ok(port)
}

/// Waits until `port` accepts TCP connections, `child` exits, or `limit` passes.
pub(crate) fn wait_listening(
    what: &'static str,
    child: &mut Child,
    port: u16,
    limit: Duration,
    log: &Path,
) -> Result<(), TestkitError> {
    let start = Instant::now();
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        let exited = matches!(child.try_wait(), Ok(Some(_)));
        if exited || start.elapsed() > limit {
            return Err(TestkitError::NotReady {
                what,
                port,
                seconds: start.elapsed().as_secs(),
                log: tail(log),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The last lines of a log file, for an error message.
pub(crate) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Sends `signal` (a `kill` name such as `INT` or `KILL`) to `child` by its PID, and waits up
/// to `grace` for it to exit; kills it outright if it has not.
pub(crate) fn stop(child: &mut Child, signal: &str, grace: Duration) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let start = Instant::now();
    while start.elapsed() < grace {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Runs `command` to the end; an error with its output if it fails.
pub(crate) fn run(command: &mut Command) -> Result<(), TestkitError> {
    let shown = format!("{command:?}");
    output(command, shown).map(drop)
}

/// Runs `command` (called `shown` in an error) to the end and answers its standard output,
/// trimmed; an error with its status and output if it fails.
pub(crate) fn output(command: &mut Command, shown: String) -> Result<String, TestkitError> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .map_err(TestkitError::io(format!("running {shown}")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(TestkitError::Command {
            command: shown,
            detail: format!(
                "{}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        })
    }
}
