//! What the TLS tests need: a private CA and server certificates made by rcgen ([`Pki`]), the
//! real binary started with them and its log lines readable ([`TlsServer`]), a rustls client
//! that trusts the CA ([`connect`]), and curl and openssl run against the server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SerialNumber};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use crate::support::{API_KEY, SECRET};

/// How long any one step may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(15);

/// A private CA, and the server certificate files it signs (rewritten by [`Pki::issue`]).
pub struct Pki {
    ca_key: KeyPair,
    ca: rcgen::Certificate,
    pub dir: tempfile::TempDir,
}

impl Pki {
    pub fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "Herald test CA");
        let ca = params.self_signed(&ca_key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki { ca_key, ca, dir }
    }

    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn cert_file(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    pub fn key_file(&self) -> PathBuf {
        self.dir.path().join("key.pem")
    }

    /// Signs a certificate for localhost and 127.0.0.1 named `cn` with `serial`, writes it and
    /// its key over the server's files, and returns its DER.
    pub fn issue(&self, cn: &str, serial: u64) -> CertificateDer<'static> {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.serial_number = Some(SerialNumber::from(serial));
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        std::fs::write(self.cert_file(), cert.pem()).unwrap();
        std::fs::write(self.key_file(), key.serialize_pem()).unwrap();
        cert.der().clone()
    }

    /// The TLS flags of `herald serve` for these files.
    pub fn flags(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.cert_file().display().to_string(),
            "--tls-key".into(),
            self.key_file().display().to_string(),
        ]
    }

    /// A rustls client configuration that trusts only this CA.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

/// Opens a TLS connection to `addr` as `localhost`, trusting `pki`'s CA.
pub async fn connect(pki: &Pki, addr: SocketAddr, alpn: &[&[u8]]) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(pki.client_config(alpn));
    let name = ServerName::try_from("localhost").unwrap();
    tokio::time::timeout(WAIT, connector.connect(name, tcp))
        .await
        .expect("TLS handshake timed out")
        .expect("TLS handshake")
}

/// The certificate a fresh TLS connection to `addr` is shown.
pub async fn served_certificate(pki: &Pki, addr: SocketAddr) -> CertificateDer<'static> {
    let tls = connect(pki, addr, &[]).await;
    tls.get_ref().1.peer_certificates().unwrap()[0].clone()
}

/// The real binary serving TLS, its log lines (INFO and up) readable with
/// [`TlsServer::log_line`]. Killed when dropped.
pub struct TlsServer {
    child: Child,
    pub addr: SocketAddr,
    pub meteor: Option<SocketAddr>,
    pub meteor_control: Option<SocketAddr>,
    /// The MQTT listener, when started with `--mqtt`.
    pub mqtt: Option<SocketAddr>,
    logs: tokio::sync::mpsc::UnboundedReceiver<String>,
    _data: tempfile::TempDir,
}

impl TlsServer {
    /// Starts `herald serve` with `pki`'s files and `extra` flags; waits for its https line.
    pub async fn start(pki: &Pki, extra: &[&str], env: &[(&str, &str)]) -> TlsServer {
        let data = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_herald"));
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data"])
            .arg(data.path())
            .args(["--api-key", API_KEY, "--token-secret", SECRET])
            .args(pki.flags())
            .args(extra)
            .env_remove("HERALD_CONFIG")
            .env("HERALD_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start herald");
        let (log_tx, logs) = tokio::sync::mpsc::unbounded_channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                eprintln!("{line}");
                let _ = log_tx.send(line);
            }
        });
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut addrs = (None, None, None);
            let parse = |a: &str| a.trim().parse::<SocketAddr>().ok();
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(a) = line.strip_prefix("herald meteor listening on ") {
                    addrs.0 = parse(a);
                } else if let Some(a) = line.strip_prefix("herald meteor-control listening on ") {
                    addrs.1 = parse(a);
                } else if let Some(a) = line.strip_prefix("herald mqtt listening on ") {
                    addrs.2 = parse(a);
                } else if let Some(a) = line.strip_prefix("herald listening on ") {
                    let _ = tx.send((a.to_owned(), addrs));
                }
            }
        });
        let (line, (meteor, meteor_control, mqtt)) =
            rx.recv_timeout(WAIT).expect("herald did not start");
        let addr = line
            .strip_prefix("https://")
            .unwrap_or_else(|| panic!("a TLS server says https: {line}"))
            .parse()
            .unwrap();
        TlsServer {
            child,
            addr,
            meteor,
            meteor_control,
            mqtt,
            logs,
            _data: data,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// Waits for a log line containing `needle` (lines before it are skipped).
    pub async fn log_line(&mut self, needle: &str) -> String {
        let found = async {
            while let Some(line) = self.logs.recv().await {
                if line.contains(needle) {
                    return line;
                }
            }
            panic!("the server's log ended before {needle:?}");
        };
        tokio::time::timeout(WAIT, found)
            .await
            .unwrap_or_else(|_| panic!("no log line with {needle:?}"))
    }

    /// Sends `signal` (e.g. `HUP`) to the server.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// A client token for `channels`.
    pub fn token(&self, channels: &[&str]) -> String {
        herald_proto::token::mint(
            SECRET.as_bytes(),
            &herald_proto::token::ClientClaims {
                sub: "tls-tester".into(),
                channels: channels.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            },
        )
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs curl with `--cacert` and `args`; returns (HTTP status, body).
pub async fn curl(ca: &Path, args: &[&str]) -> (u16, String) {
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new("curl")
            .args(["-sS", "--max-time", "10", "--cacert"])
            .arg(ca)
            .args(["-w", "\n%{http_code}"])
            .args(args)
            .output(),
    )
    .await
    .expect("curl timed out")
    .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    assert!(
        out.status.success(),
        "curl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

/// An SSE stream read by `curl -N`, line by line.
pub struct CurlStream {
    child: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl CurlStream {
    pub fn open(ca: &Path, url: &str) -> CurlStream {
        let mut child = tokio::process::Command::new("curl")
            .args(["-sSN", "--cacert"])
            .arg(ca)
            .arg(url)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run curl");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        CurlStream { child, lines }
    }

    /// Reads lines until one contains `needle`; returns it.
    pub async fn until(&mut self, needle: &str) -> String {
        let found = async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                if line.contains(needle) {
                    return line;
                }
            }
            panic!("the stream ended before {needle:?}");
        };
        tokio::time::timeout(WAIT, found)
            .await
            .unwrap_or_else(|_| panic!("nothing with {needle:?} on the stream"))
    }
}

impl Drop for CurlStream {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Runs `openssl s_client` against `addr` with `args`, sending nothing; returns whether it
/// connected and what it printed.
pub async fn s_client(addr: SocketAddr, args: &[&str]) -> (bool, String) {
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new("openssl")
            .args([
                "s_client",
                "-connect",
                &addr.to_string(),
                "-servername",
                "localhost",
            ])
            .args(args)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .expect("openssl timed out")
    .expect("run openssl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
