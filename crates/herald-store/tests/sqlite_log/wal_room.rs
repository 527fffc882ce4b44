//! The write-ahead log extended with zeros ahead of its writes (`wal_preallocate`): the file
//! reaches the size it is kept at while appends go on, nothing committed is lost when the
//! process is killed with zeros after the last frame, and the log is cut to nothing at close, as
//! before.
//!
//! The kill is real: the test runs this test binary again as a child process (the test
//! [`child_appends_until_killed`], which does nothing unless its environment names a data
//! directory), reads the seqs the child's appends were acknowledged with, kills it with
//! SIGKILL, and opens the store again.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use herald_core::log::{ChannelLog, ReadFrom};
use herald_store::{SqliteLog, SqliteOptions, SyncMode};

use super::{keep, msg, name, RecordingSink};

/// The data directory the child appends in; unset, the child test does nothing.
const CHILD_DIR: &str = "HERALD_TEST_WAL_ROOM_DIR";
/// The log restarts past this in these tests; the file is kept at twice it.
const RESTART_BYTES: u64 = 1 << 20;
const BOUND: Duration = Duration::from_secs(30);
/// Messages each channel keeps: every one, so the test reads back all it was told were stored.
const KEPT: u64 = 1 << 20;

fn options() -> SqliteOptions {
    SqliteOptions {
        sync: SyncMode::Batch,
        wal_restart_bytes: RESTART_BYTES,
        wal_preallocate: true,
        ..SqliteOptions::default()
    }
}

fn wal_len(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("herald.db-wal"))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// The child: appends 2 KB messages to `room/a` until the log file is as long as it is kept,
/// then 200 more, printing each acknowledged seq as `acked SEQ`, then `extended LEN` and
/// `done`, and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_appends_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let dir = Path::new(&dir);
    let log = SqliteLog::open(dir, options(), Arc::new(RecordingSink::default())).unwrap();
    let kept = options().wal_kept_bytes();
    let data = format!("\"{}\"", "x".repeat(2000));
    let channel = name("room/a");
    let deadline = Instant::now() + BOUND;
    let mut after_full = 0;
    while after_full < 200 {
        assert!(
            Instant::now() < deadline,
            "the log file never reached {kept} bytes"
        );
        let appended = log
            .append(&channel, vec![msg(&data)], keep(KEPT))
            .await
            .unwrap();
        println!("acked {}", appended[0].message.seq);
        if wal_len(dir) == kept {
            after_full += 1;
        }
    }
    println!("extended {}", wal_len(dir));
    println!("done");
    tokio::time::sleep(BOUND).await;
    panic!("the child was not killed");
}

#[tokio::test]
async fn the_log_is_extended_ahead_of_its_writes_and_survives_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "wal_room::child_appends_until_killed",
            "--nocapture",
        ])
        .env(CHILD_DIR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut acked = Vec::new();
    let mut extended = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(seq) = line.strip_prefix("acked ") {
            acked.push(seq.parse::<u64>().unwrap());
        } else if let Some(len) = line.strip_prefix("extended ") {
            extended = Some(len.parse::<u64>().unwrap());
        } else if line == "done" {
            break;
        }
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child ended by itself: {status}");
    assert_eq!(
        extended,
        Some(options().wal_kept_bytes()),
        "child output ended early"
    );
    assert!(acked.len() > 200);
    assert!(acked.windows(2).all(|w| w[1] == w[0] + 1), "{acked:?}");

    // Reopened after the kill: every acknowledged message is there, and the next append
    // continues after the last of them.
    let log = SqliteLog::open(dir.path(), options(), Arc::new(RecordingSink::default())).unwrap();
    let channel = name("room/a");
    let last = *acked.last().unwrap();
    let state = log.state(&channel).await.unwrap();
    assert!(state.last_seq >= last, "{} < {last}", state.last_seq);
    let mut stored = Vec::new();
    let mut from = 0;
    loop {
        let slice = log
            .read(&channel, ReadFrom::After(from), 500)
            .await
            .unwrap();
        let Some(newest) = slice.messages.last() else {
            break;
        };
        from = newest.seq;
        stored.extend(slice.messages.iter().map(|m| m.seq));
    }
    for seq in &acked {
        assert!(
            stored.binary_search(seq).is_ok(),
            "acknowledged seq {seq} lost"
        );
    }
    let next = log
        .append(&channel, vec![msg("\"after\"")], keep(KEPT))
        .await
        .unwrap();
    assert_eq!(next[0].message.seq, state.last_seq + 1);
    log.close().await;
    assert_eq!(wal_len(dir.path()), 0, "the log is cut to nothing at close");
}

#[tokio::test]
async fn a_log_that_stays_small_is_not_extended_and_off_means_off() {
    let data = format!("\"{}\"", "x".repeat(2000));
    // (preallocate, restart size, appends): a log under half the restart size is not extended
    // (50 commits write about 1.2 MB of log); with the setting off, neither is a large one.
    for (preallocate, restart, appends) in [(true, 64 << 20, 50), (false, RESTART_BYTES, 400)] {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions {
            wal_preallocate: preallocate,
            wal_restart_bytes: restart,
            ..options()
        };
        let kept = options.wal_kept_bytes();
        let log = SqliteLog::open(dir.path(), options, Arc::new(RecordingSink::default())).unwrap();
        for _ in 0..appends {
            log.append(&name("room/b"), vec![msg(&data)], keep(KEPT))
                .await
                .unwrap();
        }
        // Two checkpoint passes, each of which would make the room.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        // Only frames: the file ends where its last frame does (a 32-byte header, then frames
        // of a 24-byte header and a 4 KiB page), not at the kept size.
        let len = wal_len(dir.path());
        assert!(len < kept || !preallocate, "{len} of {kept} bytes");
        assert_eq!(
            (len - 32) % (24 + 4096),
            0,
            "preallocate {preallocate}: {len} bytes"
        );
        log.close().await;
    }
}
