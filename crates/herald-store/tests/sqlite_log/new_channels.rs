//! Channels subscribed before their first message: the store answers "no log" without a read
//! (it knows which channels have one), and that answer must never hide a message, on a fresh
//! store, after a restart (once the stored channels are loaded), or for a subscriber that
//! registered just before the first publish.

use std::time::Duration;

use herald_core::engine::{Engine, SubscribeRequest};
use herald_core::log::{ChannelLog, ReadFrom, Retention};
use herald_core::message::Cursor;
use herald_core::outbox::{OutFrame, Outbox};
use herald_store::{SqliteLog, SqliteOptions};

use super::{message_seqs, msg, name, open, seqs};

const BOUND: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_channel_published_after_its_first_read_is_read_in_full_before_and_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = name("fresh/a");
    let epoch = {
        let (log, _) = open(dir.path());
        tokio::time::timeout(BOUND, log.stored_channels_known())
            .await
            .expect("an empty store's channels are known at once");
        let state = log.state(&fresh).await.unwrap();
        assert_eq!((state.last_seq, state.epoch.as_str()), (0, ""));
        let out = log
            .append(&fresh, vec![msg("1"), msg("2")], Retention::default())
            .await
            .unwrap();
        let state = log.state(&fresh).await.unwrap();
        assert_eq!(state.last_seq, 2, "read once it has a log");
        assert_eq!(state.epoch, out[0].message.epoch);
        let slice = log.read(&fresh, ReadFrom::After(0), 10).await.unwrap();
        assert_eq!(seqs(&slice.messages), [1, 2]);
        log.close().await;
        out[0].message.epoch.clone()
    };
    let (log, _) = open(dir.path());
    tokio::time::timeout(BOUND, log.stored_channels_known())
        .await
        .expect("the stored channels are loaded");
    let state = log.state(&fresh).await.unwrap();
    assert_eq!(
        (state.last_seq, &state.epoch),
        (2, &epoch),
        "loaded at open"
    );
    let slice = log.read(&fresh, ReadFrom::Tail(1), 1).await.unwrap();
    assert_eq!(seqs(&slice.messages), [2]);
    let never = name("fresh/never");
    assert_eq!(log.state(&never).await.unwrap().last_seq, 0);
    assert!(log
        .read(&never, ReadFrom::After(0), 10)
        .await
        .unwrap()
        .messages
        .is_empty());
    let out = log
        .append(&never, vec![msg("x")], Retention::default())
        .await
        .unwrap();
    assert_eq!(out[0].message.seq, 1);
    assert_eq!(log.state(&never).await.unwrap().last_seq, 1);
}

#[tokio::test]
async fn subscribers_of_a_new_channel_get_its_first_messages_once_and_resume_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let channel = name("storm/user-7/subject-3");
    let open_engine = || {
        Engine::open(Default::default(), |sink| {
            SqliteLog::open(dir.path(), SqliteOptions::default(), sink)
        })
        .unwrap()
    };
    let epoch = {
        let (engine, log) = open_engine();
        tokio::time::timeout(BOUND, log.stored_channels_known())
            .await
            .unwrap();
        let early = Outbox::new(1 << 20);
        let sub = engine
            .subscribe(&channel, &early, &SubscribeRequest::default())
            .await
            .unwrap();
        assert_eq!((sub.outcome.seq, sub.outcome.recovered), (0, false));
        assert_eq!(sub.outcome.epoch.as_str(), "");
        sub.go_live(None);
        let appended = engine
            .publish(&channel, vec![msg("a"), msg("b")])
            .await
            .unwrap();
        let mut live = Vec::new();
        let delivered = async {
            while live.len() < 2 {
                let (frames, _) = early.next_batch().await;
                live.extend(frames.into_iter().filter_map(|f| match f {
                    OutFrame::Message(m) | OutFrame::Replayed(m) => Some(m.seq),
                    OutFrame::Control(_) | OutFrame::Presence(_) => None,
                }));
            }
        };
        tokio::time::timeout(BOUND, delivered)
            .await
            .expect("both messages delivered live");
        assert_eq!(live, [1, 2], "delivered live, once each");
        let later = Outbox::new(1 << 20);
        let sub = engine
            .subscribe(&channel, &later, &SubscribeRequest::default())
            .await
            .unwrap();
        assert_eq!(sub.outcome.seq, 2);
        log.close().await;
        appended[0].message.epoch.clone()
    };
    let (engine, log) = open_engine();
    tokio::time::timeout(BOUND, log.stored_channels_known())
        .await
        .unwrap();
    let resuming = Outbox::new(1 << 20);
    let request = SubscribeRequest {
        since: Some(Cursor {
            epoch: epoch.clone(),
            seq: 0,
        }),
        ..Default::default()
    };
    let sub = engine
        .subscribe(&channel, &resuming, &request)
        .await
        .unwrap();
    assert_eq!((sub.outcome.seq, sub.outcome.recovered), (2, true));
    assert_eq!(sub.outcome.epoch, epoch);
    sub.go_live(None);
    assert_eq!(message_seqs(&resuming), [1, 2], "replayed from the log");
    let last = Outbox::new(1 << 20);
    let request = SubscribeRequest {
        last: Some(true),
        ..Default::default()
    };
    let sub = engine.subscribe(&channel, &last, &request).await.unwrap();
    sub.go_live(None);
    assert_eq!(message_seqs(&last), [2], "the last message on subscribe");
    log.close().await;
}
