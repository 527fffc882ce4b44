//! The raw floors of this machine, measured in the same run as every scenario so results can be
//! stated as ratios: small writes over loopback TCP (one `write` per 64-byte message),
//! connect+accept pairs, and `write`+`fdatasync` of 64 bytes to a file.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::report::{f, Report, Table};
use crate::svg::{Chart, Series};

/// The measured floors.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Floors {
    /// 64-byte writes per second over one loopback TCP connection, each its own syscall.
    pub tcp_writes_per_sec: f64,
    /// Loopback connect+accept pairs per second, one at a time.
    pub connects_per_sec: f64,
    /// 64-byte append + fdatasync per second.
    pub fsyncs_per_sec: f64,
    /// Where fsync was measured.
    pub fsync_dir: String,
    /// Loopback write rate per 100 ms slice (for the chart).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub write_series: Vec<f64>,
}

/// Most operations of each kind, whatever the time allows.
///
/// Connections are few enough that repeated runs do not fill the ephemeral port range.
const MAX_WRITES: u64 = 20_000_000;
const MAX_CONNECTS: u64 = 4000;
const MAX_FSYNCS: u64 = 20_000;

fn tcp_writes(seconds: f64) -> anyhow::Result<(f64, Vec<f64>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        loop {
            match s.read(&mut buf)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let mut s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    let msg = [b'x'; 64];
    let start = Instant::now();
    let limit = Duration::from_secs_f64(seconds);
    let mut n = 0u64;
    let mut series = Vec::new();
    let mut slice_start = start;
    let mut slice_n = 0u64;
    while n < MAX_WRITES {
        s.write_all(&msg)?;
        n += 1;
        slice_n += 1;
        if n.is_multiple_of(256) {
            let now = Instant::now();
            if now.duration_since(slice_start) >= Duration::from_millis(100) {
                series.push(slice_n as f64 / now.duration_since(slice_start).as_secs_f64());
                slice_start = now;
                slice_n = 0;
            }
            if now.duration_since(start) >= limit {
                break;
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    drop(s);
    let _ = reader.join();
    Ok((n as f64 / elapsed, series))
}

fn connects(seconds: f64) -> anyhow::Result<f64> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let acceptor = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while let Ok((s, _)) = listener.accept() {
                drop(s);
                if stop.load(Ordering::Relaxed) {
                    break;
                }
            }
        })
    };
    let start = Instant::now();
    let limit = Duration::from_secs_f64(seconds);
    let mut n = 0u64;
    let mut byte = [0u8; 1];
    while n < MAX_CONNECTS && start.elapsed() < limit {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        // Let the accepting side close first, so TIME_WAIT lands on the listener's side and
        // does not use up (and slow down the search for) this side's ephemeral ports.
        let _ = s.read(&mut byte);
        n += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    // Wake the acceptor so it sees the flag.
    let _ = TcpStream::connect_timeout(&addr, Duration::from_secs(1));
    let _ = acceptor.join();
    Ok(n as f64 / elapsed)
}

fn fsyncs(seconds: f64, dir: &Path) -> anyhow::Result<f64> {
    let file = tempfile::NamedTempFile::new_in(dir)?;
    let mut f = file.as_file().try_clone()?;
    let msg = [b'x'; 64];
    let start = Instant::now();
    let limit = Duration::from_secs_f64(seconds);
    let mut n = 0u64;
    while n < MAX_FSYNCS && start.elapsed() < limit {
        f.write_all(&msg)?;
        f.sync_data()?;
        n += 1;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// Measures the floors, `seconds` each (blocking; call from a blocking thread).
pub fn measure(seconds: f64, dir: &Path) -> anyhow::Result<Floors> {
    let (tcp, series) = tcp_writes(seconds)?;
    let conn = connects(seconds)?;
    let fs = fsyncs(seconds, dir)?;
    Ok(Floors {
        tcp_writes_per_sec: tcp.round(),
        connects_per_sec: conn.round(),
        fsyncs_per_sec: fs.round(),
        fsync_dir: dir.display().to_string(),
        write_series: series,
    })
}

/// Measures on a blocking thread.
pub async fn measure_async(seconds: f64, dir: &Path) -> anyhow::Result<Floors> {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || measure(seconds, &dir)).await?
}

/// `herald bench baseline`.
pub async fn run(args: crate::args::BaselineArgs) -> anyhow::Result<Report> {
    let started = Instant::now();
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let floors = measure_async(args.seconds, &dir).await?;
    let mut r = Report::new("baseline");
    let mut t = Table::new(&["floor", "per_sec", "us_each"]);
    for (name, v) in [
        ("loopback 64-byte writes", floors.tcp_writes_per_sec),
        ("connect+accept", floors.connects_per_sec),
        ("64-byte append+fdatasync", floors.fsyncs_per_sec),
    ] {
        t.row(vec![
            name.into(),
            f(v, 0),
            f(if v > 0.0 { 1e6 / v } else { 0.0 }, 2),
        ]);
    }
    r.table = t;
    r.chart = Some(Chart {
        title: "Loopback small-write rate per 100 ms".into(),
        x_label: "seconds".into(),
        y_label: "writes per second".into(),
        series: vec![Series::Line {
            name: "64-byte writes/s".into(),
            points: floors
                .write_series
                .iter()
                .enumerate()
                .map(|(i, v)| (i as f64 * 0.1, *v))
                .collect(),
            color: "#1f5fa8",
        }],
    });
    r.lines
        .push(format!("fsync measured in {}", floors.fsync_dir));
    r.limited_by = format!("time: {} s per floor", args.seconds);
    r.baseline = Some(floors);
    r.duration_s = started.elapsed().as_secs_f64();
    Ok(r)
}
