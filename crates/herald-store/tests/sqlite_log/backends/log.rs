//! The channel log on both backends: appends and reads, seqs and epochs across a reopen,
//! idempotency (within a request, across requests, channels and a reopen, and concurrent
//! appends of one key), tail reads, retention by count and by age (seqs never reused), many
//! concurrent appends getting contiguous seqs in sink order, listing, a closed store, and
//! closing while appends are queued; the states of a batch of channels in one call.

use bytes::Bytes;
use herald_core::log::{ChannelState, ReadFrom, Retention, StoreError};
use herald_core::message::{NewMessage, SharedMessage};
use herald_core::name::ChannelName;

use super::Backend;

crate::on_both!(
    append_then_read,
    unknown_channel_is_empty,
    states_of_a_batch_answer_each_channel_in_order,
    seqs_and_epoch_survive_a_reopen_and_are_not_reused_after_a_trim,
    idempotency_within_and_across_requests_and_reopen,
    concurrent_appends_of_one_key_store_it_once,
    tail_reads_and_count_retention,
    age_retention_removes_old_messages_oldest_first,
    concurrent_appends_get_contiguous_seqs_in_sink_order,
    list_channels_in_name_order,
    close_finishes_queued_appends,
);

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

async fn append_then_read(b: Backend) {
    let log = b.store();
    let news = name("news");
    let out = log
        .append(&news, vec![msg("1"), msg("2"), msg("3")], keep(100))
        .await
        .unwrap();
    let got: Vec<_> = out.iter().map(|a| (a.message.seq, a.duplicate)).collect();
    assert_eq!(got, [(1, false), (2, false), (3, false)]);
    assert_eq!(b.sink.seen.lock().len(), 3);
    let slice = log.read(&news, ReadFrom::After(0), 100).await.unwrap();
    assert_eq!(seqs(&slice.messages), [1, 2, 3]);
    assert_eq!(slice.messages[1].data, Bytes::from_static(b"2"));
    assert_eq!(slice.messages[0].epoch, out[0].message.epoch);
    assert_eq!(slice.messages[0].client_id, None);
    assert_eq!((slice.state.first_seq, slice.state.last_seq), (1, 3));
    assert_eq!(slice.state.epoch.as_str().len(), 8);
    let after = log.read(&news, ReadFrom::After(1), 1).await.unwrap();
    assert_eq!(seqs(&after.messages), [2]);
    let past = log.read(&news, ReadFrom::After(u64::MAX), 10).await;
    assert!(past.unwrap().messages.is_empty());
    assert_eq!(log.state(&news).await.unwrap(), slice.state);
    log.close().await;
    let late = log.append(&news, vec![msg("late")], keep(100)).await;
    assert!(matches!(late, Err(StoreError::Closed)), "{late:?}");
}

async fn unknown_channel_is_empty(b: Backend) {
    let log = b.store();
    let nobody = name("nobody/here");
    let slice = log.read(&nobody, ReadFrom::Tail(5), 5).await.unwrap();
    assert!(slice.messages.is_empty());
    assert_eq!(slice.state, ChannelState::empty(nobody.clone()));
    assert_eq!(log.state(&nobody).await.unwrap().last_seq, 0);
    assert!(log
        .append(&nobody, vec![], keep(10))
        .await
        .unwrap()
        .is_empty());
    assert!(log.list(None, 10).await.unwrap().is_empty());
    log.close().await;
}

async fn states_of_a_batch_answer_each_channel_in_order(b: Backend) {
    let log = b.store();
    let (news, chat, nobody) = (name("news"), name("chat/1"), name("nobody/here"));
    log.append(&news, vec![msg("1"), msg("2")], keep(100))
        .await
        .unwrap();
    log.append(&chat, vec![msg("1")], keep(100)).await.unwrap();
    let batch = [chat.clone(), nobody.clone(), news.clone(), chat.clone()];
    let states = log.states(&batch).await.unwrap();
    assert_eq!(
        states,
        [
            log.state(&chat).await.unwrap(),
            ChannelState::empty(nobody.clone()),
            log.state(&news).await.unwrap(),
            log.state(&chat).await.unwrap(),
        ]
    );
    assert_eq!((states[2].last_seq, states[0].last_seq), (2, 1));
    assert!(log.states(&[]).await.unwrap().is_empty());
    log.close().await;
}

async fn seqs_and_epoch_survive_a_reopen_and_are_not_reused_after_a_trim(b: Backend) {
    let chat = name("chat/room-42");
    let aging = Retention {
        max_messages: 1000,
        max_age_ms: 1,
    };
    let out = b
        .store()
        .append(&chat, vec![msg("a"), msg("b")], aging)
        .await
        .unwrap();
    let epoch = out[0].message.epoch.clone();
    b.trim_expired_at(i64::MAX / 2).await;
    let state = b.store().state(&chat).await.unwrap();
    assert_eq!((state.first_seq, state.last_seq), (3, 2), "all trimmed");
    let b = b.reopen().await;
    let out = b
        .store()
        .append(&chat, vec![msg("c")], keep(10))
        .await
        .unwrap();
    assert_eq!((out[0].message.seq, &out[0].message.epoch), (3, &epoch));
    let slice = b.store().read(&chat, ReadFrom::After(0), 10).await.unwrap();
    assert_eq!(seqs(&slice.messages), [3]);
    assert_eq!((slice.state.first_seq, slice.state.epoch), (3, epoch));
    b.store().close().await;
}

async fn idempotency_within_and_across_requests_and_reopen(b: Backend) {
    let (orders, other) = (name("orders"), name("other"));
    let batch = vec![
        keyed("k1", "first"),
        keyed("k1", "again"),
        msg("x"),
        keyed("k2", "y"),
    ];
    let out = b.store().append(&orders, batch, keep(100)).await.unwrap();
    let view: Vec<(u64, bool)> = out.iter().map(|a| (a.message.seq, a.duplicate)).collect();
    assert_eq!(view, [(1, false), (1, true), (2, false), (3, false)]);
    assert_eq!(out[1].message.data, Bytes::from_static(b"first"));
    assert_eq!(out[0].message.client_id.as_deref(), Some("k1"));
    assert_eq!(b.sink.seen.lock().len(), 3, "duplicates are not sunk");
    let again = b
        .store()
        .append(&orders, vec![keyed("k2", "z"), keyed("k3", "w")], keep(100))
        .await
        .unwrap();
    assert!(again[0].duplicate);
    assert_eq!(
        (again[0].message.seq, &again[0].message.data[..]),
        (3, &b"y"[..])
    );
    assert_eq!((again[1].message.seq, again[1].duplicate), (4, false));
    let elsewhere = b
        .store()
        .append(&other, vec![keyed("k1", "o")], keep(100))
        .await
        .unwrap();
    assert!(!elsewhere[0].duplicate, "a key is per channel");
    let b = b.reopen().await;
    let out = b
        .store()
        .append(&orders, vec![keyed("k3", "later"), msg("new")], keep(100))
        .await
        .unwrap();
    assert!(out[0].duplicate);
    assert_eq!(
        (out[0].message.seq, &out[0].message.data[..]),
        (4, &b"w"[..])
    );
    assert_eq!((out[1].message.seq, out[1].duplicate), (5, false));
    assert_eq!(*b.sink.seen.lock(), [("orders".to_string(), 5)]);
    b.store().close().await;
}

async fn concurrent_appends_of_one_key_store_it_once(b: Backend) {
    let b = std::sync::Arc::new(b);
    let c = name("once");
    let tasks: Vec<_> = (0..32)
        .map(|i| {
            let (b, c) = (b.clone(), c.clone());
            tokio::spawn(async move {
                let one = vec![keyed("same", &i.to_string())];
                b.store().append(&c, one, keep(100)).await.unwrap()
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
    assert_eq!(b.sink.seen.lock().len(), 1);
    b.store().close().await;
}

async fn tail_reads_and_count_retention(b: Backend) {
    let log = b.store();
    let ticks = name("ticks");
    let batch: Vec<_> = (1..=10).map(|i| msg(&i.to_string())).collect();
    log.append(&ticks, batch, keep(1000)).await.unwrap();
    let tail = log.read(&ticks, ReadFrom::Tail(3), 100).await.unwrap();
    assert_eq!(seqs(&tail.messages), [8, 9, 10]);
    let capped = log.read(&ticks, ReadFrom::Tail(5), 2).await.unwrap();
    assert_eq!(
        seqs(&capped.messages),
        [9, 10],
        "the newest, capped by limit"
    );
    let all = log.read(&ticks, ReadFrom::Tail(50), 100).await.unwrap();
    assert_eq!(all.messages.len(), 10);
    // Keep 10: a trim runs past 10 + 16 retained and keeps exactly 10.
    let c = name("kept");
    for i in 0..26 {
        log.append(&c, vec![msg(&i.to_string())], keep(10))
            .await
            .unwrap();
    }
    assert_eq!(
        log.state(&c).await.unwrap().first_seq,
        1,
        "within the slack"
    );
    log.append(&c, vec![msg("27")], keep(10)).await.unwrap();
    let slice = log.read(&c, ReadFrom::After(0), 100).await.unwrap();
    assert_eq!((slice.state.first_seq, slice.state.last_seq), (18, 27));
    assert_eq!(seqs(&slice.messages), (18..=27).collect::<Vec<_>>());
    log.close().await;
}

async fn age_retention_removes_old_messages_oldest_first(b: Backend) {
    let log = b.store();
    let (aged, forever) = (name("aged"), name("forever"));
    let hour = Retention {
        max_messages: 100,
        max_age_ms: 3_600_000,
    };
    let out = log
        .append(&aged, vec![msg("1"), msg("2")], hour)
        .await
        .unwrap();
    log.append(&forever, vec![msg("x")], keep(100))
        .await
        .unwrap();
    let stored_at = out[0].message.time;
    assert_eq!(b.trim_expired_at(stored_at + 1000).await, 0, "young");
    assert_eq!(b.trim_expired_at(stored_at + 3_600_001).await, 2);
    let state = log.state(&aged).await.unwrap();
    assert_eq!((state.first_seq, state.last_seq), (3, 2));
    assert_eq!(
        log.state(&forever).await.unwrap().first_seq,
        1,
        "no age limit"
    );
    let next = log.append(&aged, vec![msg("3")], hour).await.unwrap();
    assert_eq!(next[0].message.seq, 3);
    log.close().await;
}

async fn concurrent_appends_get_contiguous_seqs_in_sink_order(b: Backend) {
    let b = std::sync::Arc::new(b);
    let channels = ["c/0", "c/1", "c/2"];
    let tasks: Vec<_> = (0..48)
        .map(|i| {
            let b = b.clone();
            let c = name(channels[i % channels.len()]);
            tokio::spawn(async move {
                let mut seqs = Vec::new();
                for j in 0..5 {
                    let two = vec![msg(&format!("{i}-{j}a")), msg(&format!("{i}-{j}b"))];
                    let out = b.store().append(&c, two, keep(10_000)).await.unwrap();
                    assert_eq!(
                        out[1].message.seq,
                        out[0].message.seq + 1,
                        "request is contiguous"
                    );
                    seqs.extend(out.iter().map(|a| a.message.seq));
                }
                seqs
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    for c in channels {
        let seen: Vec<u64> = b
            .sink
            .seen
            .lock()
            .iter()
            .filter(|(name, _)| name == c)
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(seen, (1..=160).collect::<Vec<_>>(), "{c}: sink order");
        let slice = b.store().read(&name(c), ReadFrom::After(0), 1000).await;
        assert_eq!(seqs(&slice.unwrap().messages), seen);
    }
    b.store().close().await;
}

async fn list_channels_in_name_order(b: Backend) {
    let log = b.store();
    for c in ["b", "a/x", "c", "a"] {
        log.append(&name(c), vec![msg("m"), msg("n")], keep(10))
            .await
            .unwrap();
    }
    let all = log.list(None, 10).await.unwrap();
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "a/x", "b", "c"]);
    assert!(all.iter().all(|s| (s.first_seq, s.last_seq) == (1, 2)));
    let page = log.list(Some("a/x"), 1).await.unwrap();
    assert_eq!(page[0].name.as_str(), "b");
    log.close().await;
}

/// Closing while appends are queued: every append either succeeds (stored, and seen by the
/// sink) or is refused as closed; nothing else happens, and a reopened store holds exactly the
/// ones that succeeded.
async fn close_finishes_queued_appends(b: Backend) {
    let log = b.shared();
    let c = name("closing");
    let handles: Vec<_> = (0..20)
        .map(|i| {
            let (log, c) = (log.clone(), c.clone());
            tokio::spawn(async move {
                log.append(&c, vec![msg(&i.to_string())], Retention::default())
                    .await
            })
        })
        .collect();
    tokio::task::yield_now().await;
    log.close().await;
    let mut ok = std::collections::HashSet::new();
    for h in handles {
        match h.await.unwrap() {
            Ok(out) => {
                ok.insert(out[0].message.seq);
            }
            Err(StoreError::Closed) => {}
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    // Every append that succeeded is stored and was seen by the sink; nothing else was.
    assert_eq!(b.sink.seen.lock().len(), ok.len());
    drop(log);
    let b = b.reopen().await;
    assert_eq!(
        b.store().state(&c).await.unwrap().last_seq as usize,
        ok.len()
    );
    b.store().close().await;
}
