//! The store crate's tests. [`backends`] is the backend conformance suite: every store trait's
//! behaviour, written once and run on SQLite and on PostgreSQL (with the job queue's in
//! [`jobs`]). The rest is SQLite's own: appends and reads, seqs and epochs across restarts,
//! idempotency, retention, group commit under concurrency, sync modes and the commit sink; the
//! engine over it when fan-out runs behind the publishers; a broadcast's audience count under
//! the push crate's inbox ([`devices`]); channels subscribed before their first message
//! ([`new_channels`]); the write-ahead log extended ahead of its writes, and killed with it
//! ([`wal_room`]).

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use herald_core::log::{ChannelLog, CommitSink, ReadFrom, Retention, StoreError};
use herald_core::message::{NewMessage, SharedMessage};
use herald_core::name::ChannelName;
use herald_store::{SqliteLog, SqliteOptions, SyncMode};
use parking_lot::Mutex;

#[path = "sqlite_log/backends/mod.rs"]
mod backends;
#[path = "sqlite_log/devices.rs"]
mod devices;
#[path = "sqlite_log/jobs/mod.rs"]
mod jobs;
#[path = "sqlite_log/new_channels.rs"]
mod new_channels;
#[path = "sqlite_log/wal_room.rs"]
mod wal_room;

/// Records every committed message as (channel, seq), in the order the sink saw them.
#[derive(Default)]
struct RecordingSink {
    seen: Mutex<Vec<(String, u64)>>,
}

impl CommitSink for RecordingSink {
    fn committed(&self, messages: &[SharedMessage]) {
        let mut seen = self.seen.lock();
        for m in messages {
            seen.push((m.channel.as_str().to_owned(), m.seq));
        }
    }
}

impl RecordingSink {
    fn contains(&self, channel: &str, seq: u64) -> bool {
        self.seen
            .lock()
            .iter()
            .any(|(c, s)| c == channel && *s == seq)
    }
}

fn open_with(dir: &Path, sync: SyncMode) -> (Arc<SqliteLog>, Arc<RecordingSink>) {
    let sink = Arc::new(RecordingSink::default());
    let options = SqliteOptions {
        sync,
        ..SqliteOptions::default()
    };
    let log = SqliteLog::open(dir, options, sink.clone()).expect("open store");
    (log, sink)
}

fn open(dir: &Path) -> (Arc<SqliteLog>, Arc<RecordingSink>) {
    open_with(dir, SyncMode::Batch)
}

fn name(s: &str) -> ChannelName {
    ChannelName::parse(s).unwrap()
}

fn msg(data: &str) -> NewMessage {
    NewMessage {
        id: None,
        data: Bytes::copy_from_slice(data.as_bytes()),
        retain: Default::default(),
        hold: None,
    }
}

fn keyed(id: &str, data: &str) -> NewMessage {
    NewMessage {
        id: Some(id.to_owned()),
        data: Bytes::copy_from_slice(data.as_bytes()),
        retain: Default::default(),
        hold: None,
    }
}

fn keep(max_messages: u64) -> Retention {
    Retention {
        max_messages,
        max_age_ms: 0,
    }
}

fn seqs(messages: &[SharedMessage]) -> Vec<u64> {
    messages.iter().map(|m| m.seq).collect()
}

#[tokio::test]
async fn append_then_read() {
    let dir = tempfile::tempdir().unwrap();
    let (log, sink) = open(dir.path());
    let news = name("news");
    let out = log
        .append(
            &news,
            vec![msg("1"), msg("2"), msg("3")],
            Retention::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.iter().map(|a| a.message.seq).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(out.iter().all(|a| !a.duplicate));
    assert_eq!(out[0].message.client_id, None);
    assert_eq!(sink.seen.lock().len(), 3);

    let slice = log.read(&news, ReadFrom::After(0), 100).await.unwrap();
    assert_eq!(seqs(&slice.messages), [1, 2, 3]);
    assert_eq!(slice.messages[1].data, Bytes::from_static(b"2"));
    assert_eq!(slice.messages[0].epoch, out[0].message.epoch);
    assert_eq!((slice.state.first_seq, slice.state.last_seq), (1, 3));
    assert_eq!(slice.state.epoch.as_str().len(), 8);

    let after = log.read(&news, ReadFrom::After(1), 1).await.unwrap();
    assert_eq!(seqs(&after.messages), [2]);
    let past_end = log
        .read(&news, ReadFrom::After(u64::MAX), 10)
        .await
        .unwrap();
    assert!(past_end.messages.is_empty());

    let state = log.state(&news).await.unwrap();
    assert_eq!(state, slice.state);
    log.close().await;
}

#[tokio::test]
async fn unknown_channel_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path());
    let nobody = name("nobody/here");
    let slice = log.read(&nobody, ReadFrom::Tail(5), 5).await.unwrap();
    assert!(slice.messages.is_empty());
    assert_eq!(
        slice.state,
        herald_core::log::ChannelState::empty(nobody.clone())
    );
    assert_eq!(log.state(&nobody).await.unwrap().last_seq, 0);
    assert!(log
        .append(&nobody, vec![], Retention::default())
        .await
        .unwrap()
        .is_empty());
    assert!(
        log.list(None, 10).await.unwrap().is_empty(),
        "empty append creates nothing"
    );
}

#[tokio::test]
async fn seqs_continue_after_reopen_and_epoch_survives() {
    let dir = tempfile::tempdir().unwrap();
    let chat = name("chat/room-42");
    let epoch = {
        let (log, _) = open(dir.path());
        let out = log
            .append(&chat, vec![msg("a"), msg("b")], Retention::default())
            .await
            .unwrap();
        log.close().await;
        assert!(matches!(
            log.append(&chat, vec![msg("late")], Retention::default())
                .await,
            Err(StoreError::Closed)
        ));
        out[0].message.epoch.clone()
    };
    let (log, _) = open(dir.path());
    let out = log
        .append(&chat, vec![msg("c")], Retention::default())
        .await
        .unwrap();
    assert_eq!(out[0].message.seq, 3);
    assert_eq!(out[0].message.epoch, epoch);
    let slice = log.read(&chat, ReadFrom::After(0), 10).await.unwrap();
    assert_eq!(seqs(&slice.messages), [1, 2, 3]);
    assert_eq!(slice.state.epoch, epoch);
    drop(log); // dropping without close also stops the writer and releases the database

    let (log, _) = open(dir.path());
    assert_eq!(log.state(&chat).await.unwrap().last_seq, 3);
}

#[tokio::test]
async fn seqs_are_not_reused_after_everything_was_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let c = name("trimmed");
    {
        let (log, _) = open(dir.path());
        let ret = Retention {
            max_messages: 1000,
            max_age_ms: 1,
        };
        log.append(&c, vec![msg("1"), msg("2")], ret).await.unwrap();
        log.trim_expired_at(i64::MAX / 2).await.unwrap();
        let state = log.state(&c).await.unwrap();
        assert_eq!((state.first_seq, state.last_seq), (3, 2));
        log.close().await;
    }
    let (log, _) = open(dir.path());
    let out = log.append(&c, vec![msg("3")], keep(10)).await.unwrap();
    assert_eq!(out[0].message.seq, 3);
}

#[tokio::test]
async fn idempotency_within_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let (log, sink) = open(dir.path());
    let c = name("orders");
    let out = log
        .append(
            &c,
            vec![
                keyed("k1", "first"),
                keyed("k1", "again"),
                msg("x"),
                keyed("k2", "y"),
            ],
            Retention::default(),
        )
        .await
        .unwrap();
    let view: Vec<(u64, bool)> = out.iter().map(|a| (a.message.seq, a.duplicate)).collect();
    assert_eq!(view, [(1, false), (1, true), (2, false), (3, false)]);
    assert_eq!(out[1].message.data, Bytes::from_static(b"first"));
    assert_eq!(out[0].message.client_id.as_deref(), Some("k1"));
    assert_eq!(
        sink.seen.lock().len(),
        3,
        "duplicates are not passed to the sink"
    );
}

#[tokio::test]
async fn idempotency_across_requests_and_channels_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (name("a"), name("b"));
    {
        let (log, sink) = open(dir.path());
        log.append(&a, vec![keyed("k", "one")], Retention::default())
            .await
            .unwrap();
        let again = log
            .append(
                &a,
                vec![keyed("k", "two"), keyed("j", "three")],
                Retention::default(),
            )
            .await
            .unwrap();
        assert!(again[0].duplicate);
        assert_eq!(again[0].message.seq, 1);
        assert_eq!(again[0].message.data, Bytes::from_static(b"one"));
        assert_eq!((again[1].message.seq, again[1].duplicate), (2, false));
        // The same key in another channel is a different message.
        let other = log
            .append(&b, vec![keyed("k", "b")], Retention::default())
            .await
            .unwrap();
        assert!(!other[0].duplicate);
        assert_eq!(sink.seen.lock().len(), 3);
        log.close().await;
    }
    let (log, sink) = open(dir.path());
    let out = log
        .append(&a, vec![keyed("j", "four")], Retention::default())
        .await
        .unwrap();
    assert!(out[0].duplicate);
    assert_eq!(out[0].message.seq, 2);
    assert_eq!(out[0].message.data, Bytes::from_static(b"three"));
    assert!(sink.seen.lock().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_of_one_key_store_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let (log, sink) = open(dir.path());
    let c = name("once");
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let (log, c) = (log.clone(), c.clone());
            tokio::spawn(async move {
                log.append(
                    &c,
                    vec![keyed("same", &i.to_string())],
                    Retention::default(),
                )
                .await
                .unwrap()
            })
        })
        .collect();
    let mut fresh = 0;
    for t in tasks {
        let out = t.await.unwrap();
        assert_eq!(out[0].message.seq, 1);
        fresh += usize::from(!out[0].duplicate);
    }
    assert_eq!(fresh, 1);
    assert_eq!(sink.seen.lock().len(), 1);
}

#[tokio::test]
async fn tail_reads_newest_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path());
    let c = name("ticks");
    let batch: Vec<_> = (1..=10).map(|i| msg(&i.to_string())).collect();
    log.append(&c, batch, Retention::default()).await.unwrap();
    let tail = log.read(&c, ReadFrom::Tail(3), 100).await.unwrap();
    assert_eq!(seqs(&tail.messages), [8, 9, 10]);
    let capped = log.read(&c, ReadFrom::Tail(5), 2).await.unwrap();
    assert_eq!(
        seqs(&capped.messages),
        [9, 10],
        "limit caps the tail to the newest"
    );
    let all = log
        .read(&c, ReadFrom::Tail(u64::MAX), usize::MAX)
        .await
        .unwrap();
    assert_eq!(all.messages.len(), 10);
    assert!(log
        .read(&c, ReadFrom::Tail(0), 10)
        .await
        .unwrap()
        .messages
        .is_empty());
    assert!(log
        .read(&c, ReadFrom::After(0), 0)
        .await
        .unwrap()
        .messages
        .is_empty());
}

#[tokio::test]
async fn count_retention_trims_and_keeps_first_seq_exact() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path());
    let c = name("short");
    for i in 0..100 {
        log.append(&c, vec![msg(&i.to_string())], keep(10))
            .await
            .unwrap();
        let slice = log.read(&c, ReadFrom::After(0), 1000).await.unwrap();
        let state = &slice.state;
        assert_eq!(state.first_seq, slice.messages[0].seq);
        assert_eq!(
            seqs(&slice.messages),
            (state.first_seq..=state.last_seq).collect::<Vec<_>>()
        );
        assert!(slice.messages.len() <= 10 + 16, "slack is max(10/8, 16)");
        assert!(slice.messages.len() >= (i + 1).min(10));
    }
    // One big request larger than the limit is stored (and passed on) then trimmed.
    let big: Vec<_> = (0..50).map(|i| msg(&i.to_string())).collect();
    let out = log.append(&c, big, keep(10)).await.unwrap();
    assert_eq!(out.last().unwrap().message.seq, 150);
    let state = log.state(&c).await.unwrap();
    assert_eq!((state.first_seq, state.last_seq), (141, 150));
    let slice = log.read(&c, ReadFrom::After(0), 1000).await.unwrap();
    assert_eq!(seqs(&slice.messages), (141..=150).collect::<Vec<_>>());
}

#[tokio::test]
async fn age_retention_removes_old_messages() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path());
    let c = name("ages");
    let untouched = name("no-age-limit");
    let ret = Retention {
        max_messages: 1000,
        max_age_ms: 1000,
    };
    let old = log.append(&c, vec![msg("1"), msg("2")], ret).await.unwrap();
    log.append(&untouched, vec![msg("x")], keep(1000))
        .await
        .unwrap();
    let old_time = old[1].message.time;
    while herald_core::message::now_millis() <= old_time {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let new = log.append(&c, vec![msg("3")], ret).await.unwrap();
    assert!(new[0].message.time > old_time);

    // Nothing is old enough yet.
    assert_eq!(log.trim_expired_at(old_time + 1000).await.unwrap(), 0);
    // Now the first two are older than 1000 ms, the third is not.
    let deleted = log.trim_expired_at(old_time + 1001).await.unwrap();
    assert_eq!(deleted, 2);
    let slice = log.read(&c, ReadFrom::After(0), 10).await.unwrap();
    assert_eq!(seqs(&slice.messages), [3]);
    assert_eq!((slice.state.first_seq, slice.state.last_seq), (3, 3));

    // Everything expires: first_seq = last_seq + 1, and appends carry on from there.
    log.trim_expired_at(new[0].message.time + 1001)
        .await
        .unwrap();
    let state = log.state(&c).await.unwrap();
    assert_eq!((state.first_seq, state.last_seq), (4, 3));
    let next = log.append(&c, vec![msg("4")], ret).await.unwrap();
    assert_eq!(next[0].message.seq, 4);
    assert_eq!(log.state(&c).await.unwrap().first_seq, 4);
    assert_eq!(log.state(&untouched).await.unwrap().first_seq, 1);
    log.trim_expired().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_get_contiguous_seqs_in_sink_order() {
    let dir = tempfile::tempdir().unwrap();
    let (log, sink) = open(dir.path());
    let channels = [name("hot"), name("warm")];
    let (tasks, per_task) = (16, 50);
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let log = log.clone();
            let sink = sink.clone();
            let c = channels[t % 2].clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..per_task {
                    let n = 1 + (i % 3);
                    let batch = (0..n).map(|j| msg(&format!("{t}-{i}-{j}"))).collect();
                    let out = log.append(&c, batch, Retention::default()).await.unwrap();
                    for a in &out {
                        assert!(sink.contains(c.as_str(), a.message.seq), "sink ran first");
                        got.push(a.message.seq);
                    }
                    // Seqs of one request are consecutive.
                    assert!(out
                        .windows(2)
                        .all(|w| w[1].message.seq == w[0].message.seq + 1));
                }
                (c, got)
            })
        })
        .collect();
    let mut by_channel: [Vec<u64>; 2] = Default::default();
    for h in handles {
        let (c, got) = h.await.unwrap();
        by_channel[usize::from(c != channels[0])].extend(got);
    }
    let seen = sink.seen.lock().clone();
    for (i, c) in channels.iter().enumerate() {
        let mut got = by_channel[i].clone();
        got.sort_unstable();
        let n = got.len() as u64;
        assert_eq!(
            got,
            (1..=n).collect::<Vec<_>>(),
            "{c}: contiguous, no duplicates"
        );
        let order: Vec<u64> = seen
            .iter()
            .filter(|(name, _)| name == c.as_str())
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(
            order,
            (1..=n).collect::<Vec<_>>(),
            "{c}: sink saw strictly increasing seqs"
        );
        assert_eq!(log.state(c).await.unwrap().last_seq, n);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sync_mode_works() {
    for mode in [SyncMode::Always, SyncMode::Batch, SyncMode::Off] {
        let dir = tempfile::tempdir().unwrap();
        let c = name("modes");
        {
            let (log, sink) = open_with(dir.path(), mode);
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let (log, c) = (log.clone(), c.clone());
                    tokio::spawn(async move {
                        log.append(&c, vec![msg(&i.to_string())], Retention::default())
                            .await
                            .unwrap()
                    })
                })
                .collect();
            for h in handles {
                h.await.unwrap();
            }
            let order: Vec<u64> = sink.seen.lock().iter().map(|(_, s)| *s).collect();
            assert_eq!(order, (1..=8).collect::<Vec<_>>(), "{mode}");
            log.close().await;
        }
        let (log, _) = open_with(dir.path(), mode);
        let slice = log.read(&c, ReadFrom::After(0), 100).await.unwrap();
        assert_eq!(seqs(&slice.messages), (1..=8).collect::<Vec<_>>(), "{mode}");
    }
}

#[tokio::test]
async fn small_max_batch_still_commits_everything() {
    let dir = tempfile::tempdir().unwrap();
    let sink = Arc::new(RecordingSink::default());
    let options = SqliteOptions {
        sync: SyncMode::Off,
        max_batch: 1,
        read_connections: 1,
        ..SqliteOptions::default()
    };
    let log = SqliteLog::open(dir.path(), options, sink.clone()).unwrap();
    let c = name("tiny");
    let big: Vec<_> = (0..5).map(|i| msg(&i.to_string())).collect();
    let (x, y) = tokio::join!(
        log.append(&c, big, Retention::default()),
        log.append(&c, vec![msg("z")], Retention::default())
    );
    assert_eq!(x.unwrap().len() + y.unwrap().len(), 6);
    assert_eq!(log.state(&c).await.unwrap().last_seq, 6);
}

#[tokio::test]
async fn list_channels_in_name_order() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = open(dir.path());
    for n in ["b", "a", "c/d", "c"] {
        log.append(&name(n), vec![msg(n)], Retention::default())
            .await
            .unwrap();
    }
    let names = |v: Vec<herald_core::log::ChannelState>| {
        v.into_iter()
            .map(|s| s.name.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(log.list(None, 10).await.unwrap()),
        ["a", "b", "c", "c/d"]
    );
    assert_eq!(names(log.list(Some("b"), 10).await.unwrap()), ["c", "c/d"]);
    assert_eq!(names(log.list(None, 2).await.unwrap()), ["a", "b"]);
    assert!(log.list(Some("z"), 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn api_keys_are_stored_once_and_outlive_a_restart() {
    use herald_core::tenancy::{KeyInfo, Tenancy};
    use herald_core::tenant::AppId;
    let key = |hash: &str, label: &str| KeyInfo {
        app: AppId::default_app(),
        id: hash[..12].to_owned(),
        hash: hash.to_owned(),
        label: label.to_owned(),
        created: 1,
    };
    let hashes = |keys: Vec<KeyInfo>| {
        let mut h: Vec<_> = keys.into_iter().map(|k| (k.hash, k.label)).collect();
        h.sort();
        h
    };
    let (aa, bb) = ("aa".repeat(32), "bb".repeat(32));
    let dir = tempfile::tempdir().unwrap();
    {
        let (log, _) = open(dir.path());
        assert!(log.keys().await.unwrap().is_empty());
        log.add_key(&key(&bb, "second")).await.unwrap();
        log.add_key(&key(&aa, "first")).await.unwrap();
        log.add_key(&key(&aa, "again")).await.unwrap();
        let stored = hashes(log.keys().await.unwrap());
        assert_eq!(
            stored,
            [(aa.clone(), "first".into()), (bb.clone(), "second".into())]
        );
        log.close().await;
        assert!(matches!(
            log.add_key(&key(&"cc".repeat(32), "late")).await,
            Err(StoreError::Closed)
        ));
        log.close().await; // closing twice is harmless
    }
    let (log, _) = open(dir.path());
    assert_eq!(
        hashes(log.keys().await.unwrap()),
        [(aa, "first".into()), (bb, "second".into())]
    );
}

#[tokio::test]
async fn creates_missing_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("a/b/c");
    let (log, _) = open(&nested);
    log.append(&name("x"), vec![msg("1")], Retention::default())
        .await
        .unwrap();
    assert!(nested.join(herald_store::DB_FILE_NAME).exists());
}

#[tokio::test]
async fn failed_batch_is_rolled_back_and_seqs_stay_contiguous() {
    let dir = tempfile::tempdir().unwrap();
    let (log, sink) = open(dir.path());
    let (old, fresh) = (name("old"), name("fresh"));
    log.append(&old, vec![msg("1"), msg("2")], Retention::default())
        .await
        .unwrap();
    // Make the database refuse one payload, as a disk or constraint failure would.
    let admin = rusqlite::Connection::open(dir.path().join(herald_store::DB_FILE_NAME)).unwrap();
    admin
        .execute_batch(
            "CREATE TRIGGER poison BEFORE INSERT ON messages WHEN NEW.data = CAST('poison' AS BLOB)
             BEGIN SELECT RAISE(ABORT, 'poisoned payload'); END;",
        )
        .unwrap();

    let err = log
        .append(&old, vec![msg("3"), msg("poison")], Retention::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Backend { .. }) && err.chain().contains("poisoned"),
        "{err}"
    );
    assert!(log
        .append(&fresh, vec![keyed("k", "poison")], Retention::default())
        .await
        .is_err());
    assert_eq!(
        sink.seen.lock().len(),
        2,
        "nothing from failed batches reached the sink"
    );
    assert_eq!(log.state(&old).await.unwrap().last_seq, 2);
    assert_eq!(log.state(&fresh).await.unwrap().last_seq, 0);
    assert!(log
        .list(None, 10)
        .await
        .unwrap()
        .iter()
        .all(|s| s.name != fresh));

    let out = log
        .append(&old, vec![msg("3")], Retention::default())
        .await
        .unwrap();
    assert_eq!(out[0].message.seq, 3, "the failed batch used no seq");
    let out = log
        .append(&fresh, vec![keyed("k", "fine")], Retention::default())
        .await
        .unwrap();
    assert_eq!((out[0].message.seq, out[0].duplicate), (1, false));
    let slice = log.read(&old, ReadFrom::After(0), 10).await.unwrap();
    assert_eq!(seqs(&slice.messages), [1, 2, 3]);
}

#[tokio::test]
async fn wal_is_checkpointed_in_the_background_and_truncated_on_close() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _sink) = open(dir.path());
    let db = dir.path().join("herald.db");
    let wal = dir.path().join("herald.db-wal");
    let before = std::fs::metadata(&db).unwrap().len();
    let big = format!("\"{}\"", "x".repeat(4000));
    for _ in 0..50 {
        log.append(&name("ckpt"), vec![msg(&big)], Retention::default())
            .await
            .unwrap();
    }
    // The writer never checkpoints; the background thread copies the pages within seconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::metadata(&db).unwrap().len() <= before + 100_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint reached the database file"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    log.close().await;
    assert_eq!(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0), 0);
    drop(log);
    let (log, _sink) = open(dir.path());
    let slice = log
        .read(&name("ckpt"), ReadFrom::After(0), 100)
        .await
        .unwrap();
    assert_eq!(slice.messages.len(), 50);
}

#[tokio::test]
async fn the_wal_is_restarted_and_cut_back_while_appends_never_stop() {
    let dir = tempfile::tempdir().unwrap();
    let limit: u64 = 256 << 10;
    // Commits extend the file here (`wal_room` covers the file made long ahead of them).
    let options = SqliteOptions {
        sync: SyncMode::Off,
        wal_restart_bytes: limit,
        wal_preallocate: false,
        ..SqliteOptions::default()
    };
    let log = SqliteLog::open(dir.path(), options, Arc::new(RecordingSink::default())).unwrap();
    let wal = dir.path().join("herald.db-wal");
    let wal_len = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    // Four appenders commit without pause, so some commit always lands while a checkpoint
    // copies: a passive checkpoint alone never finds the log fully copied when a commit starts.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let big = format!("\"{}\"", "x".repeat(3000));
    let appenders: Vec<_> = (0..4)
        .map(|i| {
            let (log, stop, big) = (log.clone(), stop.clone(), big.clone());
            tokio::spawn(async move {
                let channel = name(&format!("wal/{i}"));
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    log.append(&channel, vec![msg(&big)], keep(100))
                        .await
                        .unwrap();
                    n += 1;
                }
                n
            })
        })
        .collect();
    // Wait for the log to pass the limit, then for it to shrink while the appends go on.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut peak = 0;
    let shrank = loop {
        let len = wal_len();
        if peak > limit && len < peak {
            break Some((peak, len));
        }
        peak = peak.max(len);
        if std::time::Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut appended = 0;
    for a in appenders {
        appended += a.await.unwrap();
    }
    let (peak, after) = shrank.unwrap_or_else(|| {
        panic!("the WAL grew to {peak} bytes over {appended} appends and was never cut back")
    });
    assert!(
        after <= limit,
        "cut back to {after} bytes, more than the {limit} limit (peak {peak})"
    );
    // Everything is still there, in order.
    for i in 0..4 {
        let slice = log
            .read(&name(&format!("wal/{i}")), ReadFrom::Tail(100), 100)
            .await
            .unwrap();
        let seqs = seqs(&slice.messages);
        assert!(!seqs.is_empty());
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
        assert_eq!(*seqs.last().unwrap(), slice.state.last_seq);
    }
    log.close().await;
}

/// Holds committed messages until told to hand them to the hub: a fan-out thread that is behind.
struct LateFanOut {
    hub: Arc<herald_core::hub::Hub>,
    held: Mutex<Vec<SharedMessage>>,
}

impl CommitSink for LateFanOut {
    fn committed(&self, messages: &[SharedMessage]) {
        self.held.lock().extend(messages.iter().cloned());
    }
}

impl LateFanOut {
    fn release(&self) {
        for m in std::mem::take(&mut *self.held.lock()) {
            self.hub.deliver(&m);
        }
    }
}

fn message_seqs(outbox: &herald_core::outbox::Outbox) -> Vec<u64> {
    use herald_core::outbox::OutFrame;
    outbox
        .take()
        .0
        .into_iter()
        .filter_map(|f| match f {
            OutFrame::Message(m) | OutFrame::Replayed(m) => Some(m.seq),
            OutFrame::Control(_) | OutFrame::Presence(_) => None,
        })
        .collect()
}

#[tokio::test]
async fn a_subscriber_after_a_returned_publish_is_told_its_seq_before_fan_out_catches_up() {
    use herald_core::engine::{Engine, SubscribeRequest};
    use herald_core::message::Cursor;
    use herald_core::outbox::Outbox;

    let dir = tempfile::tempdir().unwrap();
    let mut late = None;
    let (engine, log) = Engine::open_with_sink(
        Default::default(),
        |hub| {
            Arc::new(LateFanOut {
                hub,
                held: Mutex::new(Vec::new()),
            })
        },
        |sink| {
            late = Some(sink.clone());
            SqliteLog::open(dir.path(), SqliteOptions::default(), sink)
        },
    )
    .unwrap();
    let fan_out = late.unwrap();
    let news = name("news");

    // A first subscriber makes the hub track the channel's head.
    let early = Outbox::new(1 << 20);
    let sub = engine
        .subscribe(&news, &early, &SubscribeRequest::default())
        .await
        .unwrap();
    assert_eq!(sub.outcome.seq, 0);
    sub.go_live(None);
    let appended = engine
        .publish(&news, vec![msg("a"), msg("b")])
        .await
        .unwrap();
    assert_eq!(appended.last().unwrap().message.seq, 2);

    // Fan-out has delivered nothing yet; these subscribers start after the publisher's answer.
    let live = Outbox::new(1 << 20);
    let sub = engine
        .subscribe(&news, &live, &SubscribeRequest::default())
        .await
        .unwrap();
    assert_eq!(sub.outcome.seq, 2, "live-only: told the published seq");
    sub.go_live(None);
    let resuming = Outbox::new(1 << 20);
    let request = SubscribeRequest {
        since: Some(Cursor {
            epoch: appended[0].message.epoch.clone(),
            seq: 0,
        }),
        ..Default::default()
    };
    let sub = engine.subscribe(&news, &resuming, &request).await.unwrap();
    assert_eq!((sub.outcome.seq, sub.outcome.recovered), (2, true));
    sub.go_live(None);

    fan_out.release();
    assert_eq!(message_seqs(&early), [1, 2], "subscribed before: both live");
    assert_eq!(message_seqs(&live), Vec::<u64>::new(), "subscribed after");
    assert_eq!(
        message_seqs(&resuming),
        [1, 2],
        "replayed once, not again live"
    );
    log.close().await;
}
