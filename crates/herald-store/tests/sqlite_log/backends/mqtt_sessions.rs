//! MQTT persistent sessions through `herald_mqtt::session::store::MqttSessionStore`, on both
//! backends: a session started, its subscriptions, positions (written again in place) and
//! outbound QoS 2 packet ids read back, also after a reopen; a new start replaces everything;
//! an ended session expires after its interval and the sweep deletes only expired ones; every
//! session counted as disconnected at start; a delete; deleting the app deletes its sessions;
//! a session's will stored, listed as waiting once no connection holds its session, taken
//! once, kept by the sweep of its expired session; the sessions a lost cluster node held ended
//! at its time of death, once, with their wills listed, and QoS 1 packet ids kept beside QoS 2
//! ones; inbound QoS 2 packet ids held by their messages' appends (with their key numbers, a
//! large one kept whole; a duplicate's append holds too; of one append's two holds of an id
//! the last) until released with their key number (a later message's hold of the id stays),
//! kept across a reopen, per session, gone with a new start, an expired session's sweep and a
//! delete; releases riding a later append of the session (any QoS, a duplicate's too, several
//! sessions' in one append) delete their holds in its transaction, with their key number only,
//! before the append's own hold.

use bytes::Bytes;
use herald_core::log::Retention;
use herald_core::message::{HeldPacket, NewMessage, SessionHold};
use herald_core::name::ChannelName;
use herald_core::tenancy::App;
use herald_core::tenant::AppId;
use herald_mqtt::session::store::{
    SessionKey, SessionWrite, StoredHeldQoS2, StoredInflight, StoredPosition, StoredSession,
    StoredSubscription, StoredWill, WaitingWill,
};

use super::Backend;

crate::on_both!(
    mqtt_sessions_keep_subscriptions_positions_and_qos2_ids,
    mqtt_sessions_expire_after_their_interval_and_go_with_their_app,
    mqtt_wills_wait_with_their_sessions_and_are_taken_once,
    mqtt_sessions_of_a_lost_node_end_once_with_their_wills_listed,
    mqtt_sessions_hold_inbound_qos2_ids_until_released,
    mqtt_sessions_release_inbound_qos2_ids_riding_a_later_append,
    mqtt_sessions_keep_the_retain_flag_of_in_flight_messages
);

fn key(app: &AppId, id: &str) -> SessionKey {
    SessionKey {
        app: app.clone(),
        client_id: id.into(),
    }
}

fn position(key: &SessionKey, channel: &str, epoch: &str, seq: u64) -> SessionWrite {
    SessionWrite::Position {
        key: key.clone(),
        position: StoredPosition {
            channel: channel.into(),
            epoch: epoch.into(),
            seq,
        },
    }
}

fn subscription(filter: &str, qos: u8) -> StoredSubscription {
    StoredSubscription {
        filter: filter.into(),
        qos,
        no_local: false,
        retain_as_published: false,
        retain_handling: 0,
        subscription_identifier: None,
        // A wildcard filter keeps when it was made (herald-mqtt's offline replay).
        since_ms: filter.contains(['+', '#']).then_some(1_700_000_000_000),
    }
}

fn inflight(packet_id: u16, channel: &str, seq: u64, released: bool) -> StoredInflight {
    StoredInflight {
        packet_id,
        qos: 2,
        channel: channel.into(),
        epoch: "e1".into(),
        seq,
        released,
        retain: Some(false),
    }
}

/// Whether an in-flight message went with RETAIN set is read back as written: set, unset, or
/// unknown (a row written before the store kept it: NULL), also after a reopen; the write
/// that marks a QoS 2 message released keeps it.
async fn mqtt_sessions_keep_the_retain_flag_of_in_flight_messages(b: Backend) {
    let store = b.mqtt_sessions();
    let app = AppId::default_app();
    let k = key(&app, "retaining");
    let with = |packet_id, retain, released| StoredInflight {
        retain,
        ..inflight(packet_id, "news", u64::from(packet_id), released)
    };
    let mut writes = vec![SessionWrite::Start {
        key: k.clone(),
        expiry_ms: 3_600_000,
        node: None,
    }];
    for (id, retain) in [
        (1, Some(true)),
        (2, Some(false)),
        (3, None),
        (4, Some(true)),
    ] {
        writes.push(SessionWrite::Inflight {
            key: k.clone(),
            inflight: with(id, retain, false),
        });
    }
    writes.push(SessionWrite::Inflight {
        key: k.clone(),
        inflight: with(4, Some(true), true),
    });
    store.write_mqtt_sessions(writes).await.unwrap();
    let expected = vec![
        with(1, Some(true), false),
        with(2, Some(false), false),
        with(3, None, false),
        with(4, Some(true), true),
    ];
    let read = store
        .mqtt_session(&app, "retaining")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.inflight, expected);
    let b = b.reopen().await;
    let read = b.mqtt_sessions().mqtt_session(&app, "retaining").await;
    assert_eq!(read.unwrap().unwrap().inflight, expected, "after a reopen");
}

async fn mqtt_sessions_keep_subscriptions_positions_and_qos2_ids(b: Backend) {
    let store = b.mqtt_sessions();
    let app = AppId::default_app();
    let k = key(&app, "sensor-1");
    assert_eq!(store.mqtt_session(&app, "sensor-1").await.unwrap(), None);
    let mut rich = subscription("=caf=C3=A9/x", 2);
    rich.no_local = true;
    rich.retain_as_published = true;
    rich.retain_handling = 2;
    rich.subscription_identifier = Some(7);
    store
        .write_mqtt_sessions(vec![
            SessionWrite::Start {
                key: k.clone(),
                expiry_ms: 3_600_000,
                node: None,
            },
            SessionWrite::Subscriptions {
                key: k.clone(),
                subscriptions: vec![subscription("news", 1), rich.clone()],
            },
            position(&k, "news", "e1", 3),
            position(&k, "sport", "e2", 9),
            position(&k, "news", "e1", 5),
            SessionWrite::Inflight {
                key: k.clone(),
                inflight: inflight(12, "news", 6, false),
            },
            SessionWrite::Inflight {
                key: k.clone(),
                inflight: inflight(3, "sport", 10, false),
            },
            SessionWrite::Inflight {
                key: k.clone(),
                inflight: inflight(3, "sport", 10, true),
            },
            SessionWrite::Inflight {
                key: k.clone(),
                inflight: inflight(40, "news", 7, false),
            },
            SessionWrite::Completed {
                key: k.clone(),
                packet_id: 40,
            },
        ])
        .await
        .unwrap();
    let expected = StoredSession {
        expiry_ms: 3_600_000,
        disconnected_ms: None,
        subscriptions: vec![subscription("news", 1), rich],
        positions: vec![
            StoredPosition {
                channel: "news".into(),
                epoch: "e1".into(),
                seq: 5,
            },
            StoredPosition {
                channel: "sport".into(),
                epoch: "e2".into(),
                seq: 9,
            },
        ],
        inflight: vec![
            inflight(3, "sport", 10, true),
            inflight(12, "news", 6, false),
        ],
        held_qos2: vec![],
    };
    assert_eq!(
        store.mqtt_session(&app, "sensor-1").await.unwrap().as_ref(),
        Some(&expected)
    );
    // Another client id, and the same id in another app, are other sessions.
    assert_eq!(store.mqtt_session(&app, "sensor-2").await.unwrap(), None);
    let shop = AppId::parse("shop").unwrap();
    assert_eq!(store.mqtt_session(&shop, "sensor-1").await.unwrap(), None);

    // Kept across a reopen.
    let b = b.reopen().await;
    let store = b.mqtt_sessions();
    assert_eq!(
        store.mqtt_session(&app, "sensor-1").await.unwrap().as_ref(),
        Some(&expected)
    );

    // Unfollowing forgets a position; ending records when; resuming clears it.
    store
        .write_mqtt_sessions(vec![
            SessionWrite::Unfollowed {
                key: k.clone(),
                channel: "sport".into(),
            },
            SessionWrite::Ended {
                key: k.clone(),
                at_ms: 1_000,
                expiry_ms: 60_000,
            },
        ])
        .await
        .unwrap();
    let ended = store.mqtt_session(&app, "sensor-1").await.unwrap().unwrap();
    assert_eq!(ended.positions.len(), 1);
    assert_eq!(
        (ended.disconnected_ms, ended.expiry_ms),
        (Some(1_000), 60_000)
    );
    assert!(!ended.expired(60_999) && ended.expired(61_000));
    store
        .write_mqtt_sessions(vec![SessionWrite::Resume {
            key: k.clone(),
            expiry_ms: 5_000,
            node: None,
        }])
        .await
        .unwrap();
    let resumed = store.mqtt_session(&app, "sensor-1").await.unwrap().unwrap();
    assert_eq!((resumed.disconnected_ms, resumed.expiry_ms), (None, 5_000));
    assert_eq!(resumed.subscriptions, expected.subscriptions);

    // A new start replaces everything.
    store
        .write_mqtt_sessions(vec![SessionWrite::Start {
            key: k.clone(),
            expiry_ms: 10,
            node: None,
        }])
        .await
        .unwrap();
    assert_eq!(
        store.mqtt_session(&app, "sensor-1").await.unwrap(),
        Some(StoredSession {
            expiry_ms: 10,
            disconnected_ms: None,
            subscriptions: vec![],
            positions: vec![],
            inflight: vec![],
            held_qos2: vec![],
        })
    );
    // Deleted.
    store
        .write_mqtt_sessions(vec![SessionWrite::Delete { key: k.clone() }])
        .await
        .unwrap();
    assert_eq!(store.mqtt_session(&app, "sensor-1").await.unwrap(), None);
}

async fn mqtt_sessions_expire_after_their_interval_and_go_with_their_app(b: Backend) {
    let store = b.mqtt_sessions();
    let shop = AppId::parse("shop").unwrap();
    b.store()
        .create_app(&App {
            id: shop.clone(),
            name: "shop".into(),
            token_secret: Some("t".repeat(32)),
            limits: Default::default(),
            created: 1,
        })
        .await
        .unwrap();
    let app = AppId::default_app();
    let (short, long, held) = (key(&app, "short"), key(&app, "long"), key(&app, "held"));
    let in_shop = key(&shop, "short");
    let mut writes = Vec::new();
    for (k, expiry_ms) in [
        (&short, 1_000),
        (&long, 100_000),
        (&held, 1_000),
        (&in_shop, 100_000),
    ] {
        writes.push(SessionWrite::Start {
            key: k.clone(),
            expiry_ms,
            node: None,
        });
        writes.push(position(k, "news", "e", 1));
        writes.push(SessionWrite::Inflight {
            key: k.clone(),
            inflight: inflight(1, "news", 2, false),
        });
    }
    for k in [&short, &long] {
        writes.push(SessionWrite::Ended {
            key: k.clone(),
            at_ms: 10_000,
            expiry_ms: if *k == short { 1_000 } else { 100_000 },
        });
    }
    store.write_mqtt_sessions(writes).await.unwrap();

    // At 10,999 nothing has expired; at 11,000 `short` has (`held` is connected).
    store
        .write_mqtt_sessions(vec![SessionWrite::Sweep { now_ms: 10_999 }])
        .await
        .unwrap();
    assert!(store.mqtt_session(&app, "short").await.unwrap().is_some());
    store
        .write_mqtt_sessions(vec![SessionWrite::Sweep { now_ms: 11_000 }])
        .await
        .unwrap();
    assert_eq!(store.mqtt_session(&app, "short").await.unwrap(), None);
    assert!(store.mqtt_session(&app, "long").await.unwrap().is_some());
    assert!(store.mqtt_session(&app, "held").await.unwrap().is_some());

    // A start after a stop: the sessions no connection ended are disconnected from then.
    store
        .write_mqtt_sessions(vec![SessionWrite::AllDisconnected { at_ms: 50_000 }])
        .await
        .unwrap();
    let held_now = store.mqtt_session(&app, "held").await.unwrap().unwrap();
    assert_eq!(held_now.disconnected_ms, Some(50_000));
    let long_now = store.mqtt_session(&app, "long").await.unwrap().unwrap();
    assert_eq!(
        long_now.disconnected_ms,
        Some(10_000),
        "already ended: unchanged"
    );
    store
        .write_mqtt_sessions(vec![SessionWrite::Sweep { now_ms: 51_000 }])
        .await
        .unwrap();
    assert_eq!(store.mqtt_session(&app, "held").await.unwrap(), None);
    // Its positions and packet ids went with it: a new session of that id starts empty.
    store
        .write_mqtt_sessions(vec![SessionWrite::Start {
            key: held.clone(),
            expiry_ms: 1,
            node: None,
        }])
        .await
        .unwrap();
    let fresh = store.mqtt_session(&app, "held").await.unwrap().unwrap();
    assert!(fresh.positions.is_empty() && fresh.inflight.is_empty());

    // Deleting the app deletes its sessions, and only its.
    assert!(store.mqtt_session(&shop, "short").await.unwrap().is_some());
    assert!(b.store().delete_app(&shop).await.unwrap());
    assert_eq!(store.mqtt_session(&shop, "short").await.unwrap(), None);
    assert!(store.mqtt_session(&app, "long").await.unwrap().is_some());
}

fn will(payload: &[u8], delay_ms: i64) -> StoredWill {
    StoredWill {
        will: payload.to_vec(),
        delay_ms,
    }
}

async fn mqtt_wills_wait_with_their_sessions_and_are_taken_once(b: Backend) {
    let store = b.mqtt_sessions();
    let app = AppId::default_app();
    let (live, ended, short, gone) = (
        key(&app, "live"),
        key(&app, "ended"),
        key(&app, "short"),
        key(&app, "gone"),
    );
    let expiry = |k: &SessionKey| match k.client_id.as_str() {
        "short" => 1_000,
        "gone" => 500,
        _ => 100_000,
    };
    let mut writes = Vec::new();
    for k in [&live, &ended, &short, &gone] {
        writes.push(SessionWrite::Start {
            key: k.clone(),
            expiry_ms: expiry(k),
            node: None,
        });
        writes.push(SessionWrite::Will {
            key: k.clone(),
            will: will(k.client_id.as_bytes(), 5_000),
        });
    }
    // Stored again: replaced.
    writes.push(SessionWrite::Will {
        key: ended.clone(),
        will: will(b"\x00ended", 2_000),
    });
    for k in [&ended, &short, &gone] {
        writes.push(SessionWrite::Ended {
            key: k.clone(),
            at_ms: 10_000,
            expiry_ms: expiry(k),
        });
    }
    store.write_mqtt_sessions(writes).await.unwrap();
    // `gone` expires (its session swept, its will kept: due at once).
    store
        .write_mqtt_sessions(vec![SessionWrite::Sweep { now_ms: 10_600 }])
        .await
        .unwrap();
    assert_eq!(store.mqtt_session(&app, "gone").await.unwrap(), None);
    let mut waiting = store.mqtt_wills_waiting().await.unwrap();
    waiting.sort_by(|a, b| a.key.client_id.cmp(&b.key.client_id));
    assert_eq!(
        waiting,
        [
            WaitingWill {
                key: ended.clone(),
                will: will(b"\x00ended", 2_000),
                due_ms: 12_000,
            },
            WaitingWill {
                key: gone.clone(),
                will: will(b"gone", 5_000),
                due_ms: 0,
            },
            WaitingWill {
                key: short.clone(),
                will: will(b"short", 5_000),
                due_ms: 11_000,
            },
        ],
        "the live session's is not listed; the delay or the expiry, whichever is first"
    );
    // Taken once.
    assert_eq!(
        store.take_mqtt_will(&ended).await.unwrap(),
        Some(will(b"\x00ended", 2_000))
    );
    assert_eq!(store.take_mqtt_will(&ended).await.unwrap(), None);
    // Discarded; deleted with its session; the live one kept across a reopen.
    store
        .write_mqtt_sessions(vec![
            SessionWrite::WillDiscarded { key: short.clone() },
            SessionWrite::Delete { key: gone.clone() },
        ])
        .await
        .unwrap();
    assert_eq!(store.mqtt_wills_waiting().await.unwrap(), []);
    let b = b.reopen().await;
    let store = b.mqtt_sessions();
    store
        .write_mqtt_sessions(vec![SessionWrite::AllDisconnected { at_ms: 50_000 }])
        .await
        .unwrap();
    let waiting = store.mqtt_wills_waiting().await.unwrap();
    assert_eq!(
        waiting,
        [WaitingWill {
            key: live.clone(),
            will: will(b"live", 5_000),
            due_ms: 55_000,
        }]
    );
    assert_eq!(store.take_mqtt_will(&short).await.unwrap(), None);
    assert_eq!(
        store.take_mqtt_will(&live).await.unwrap(),
        Some(will(b"live", 5_000))
    );
}

async fn mqtt_sessions_of_a_lost_node_end_once_with_their_wills_listed(b: Backend) {
    let store = b.mqtt_sessions();
    let app = AppId::default_app();
    let (lost, waited, moved, elsewhere) = (
        key(&app, "lost"),
        key(&app, "waited"),
        key(&app, "moved"),
        key(&app, "elsewhere"),
    );
    let (dead, alive) = (0xdead_0001_u64, 0xa11e_0001_u64);
    let start = |k: &SessionKey, node: u64| SessionWrite::Start {
        key: k.clone(),
        expiry_ms: 60_000,
        node: Some(node),
    };
    let mut writes = vec![
        start(&lost, dead),
        start(&waited, dead),
        start(&moved, dead),
        start(&elsewhere, alive),
    ];
    for k in [&lost, &waited, &moved, &elsewhere] {
        writes.push(SessionWrite::Will {
            key: k.clone(),
            will: will(k.client_id.as_bytes(), 5_000),
        });
    }
    // `waited` ended on the dead node (its will waiting there); `moved` resumed on another.
    writes.push(SessionWrite::Ended {
        key: waited.clone(),
        at_ms: 1_000,
        expiry_ms: 60_000,
    });
    writes.push(SessionWrite::Resume {
        key: moved.clone(),
        expiry_ms: 60_000,
        node: Some(alive),
    });
    // A QoS 1 packet id beside a QoS 2 one.
    writes.push(SessionWrite::Inflight {
        key: lost.clone(),
        inflight: StoredInflight {
            qos: 1,
            ..inflight(7, "news", 3, false)
        },
    });
    writes.push(SessionWrite::Inflight {
        key: lost.clone(),
        inflight: inflight(8, "news", 4, false),
    });
    store.write_mqtt_sessions(writes).await.unwrap();

    let mut wills = store.end_mqtt_node(dead, 2_000).await.unwrap();
    wills.sort_by(|a, b| a.key.client_id.cmp(&b.key.client_id));
    assert_eq!(
        wills,
        [
            WaitingWill {
                key: lost.clone(),
                will: will(b"lost", 5_000),
                due_ms: 7_000,
            },
            WaitingWill {
                key: waited.clone(),
                will: will(b"waited", 5_000),
                due_ms: 6_000,
            },
        ],
        "the dead node's sessions' wills, due from their end; not the moved or other node's"
    );
    let ended = store.mqtt_session(&app, "lost").await.unwrap().unwrap();
    assert_eq!(
        ended.disconnected_ms,
        Some(2_000),
        "ended at the time of death"
    );
    assert_eq!(
        ended.inflight,
        [
            StoredInflight {
                qos: 1,
                ..inflight(7, "news", 3, false)
            },
            inflight(8, "news", 4, false)
        ]
    );
    let kept = store.mqtt_session(&app, "waited").await.unwrap().unwrap();
    assert_eq!(
        kept.disconnected_ms,
        Some(1_000),
        "already ended: unchanged"
    );
    for id in ["moved", "elsewhere"] {
        let live = store.mqtt_session(&app, id).await.unwrap().unwrap();
        assert_eq!(live.disconnected_ms, None, "{id} is held by a live node");
    }
    // A second call ends nothing more: the sessions keep the first time of death.
    store.end_mqtt_node(dead, 9_000).await.unwrap();
    let again = store.mqtt_session(&app, "lost").await.unwrap().unwrap();
    assert_eq!(again.disconnected_ms, Some(2_000));
    // A QoS 1 id acknowledged is deleted like a QoS 2 one completed.
    store
        .write_mqtt_sessions(vec![SessionWrite::Completed {
            key: lost.clone(),
            packet_id: 7,
        }])
        .await
        .unwrap();
    let after = store.mqtt_session(&app, "lost").await.unwrap().unwrap();
    assert_eq!(after.inflight, [inflight(8, "news", 4, false)]);
}

/// A QoS 2 message of session `key` appended to `meters` with the key numbered `n` and the
/// session's hold of `packet_id` (herald-mqtt's `inbound.rs`); whether it was a duplicate.
async fn held(b: &Backend, key: &SessionKey, packet_id: u16, n: u64) -> bool {
    held_all(b, &[(key, packet_id, n)]).await[0]
}

/// [`held`] for several messages in one append (in order); whether each was a duplicate.
async fn held_all(b: &Backend, holds: &[(&SessionKey, u16, u64)]) -> Vec<bool> {
    let messages = holds
        .iter()
        .map(|&(key, packet_id, n)| NewMessage {
            id: Some(format!("mqtt:{}:{packet_id}:{n}", key.client_id)),
            data: Bytes::from(format!("{n}")),
            retain: Default::default(),
            hold: Some(Box::new(SessionHold {
                app: key.app.clone(),
                client_id: key.client_id.clone(),
                held: Some(HeldPacket { packet_id, n }),
                released: Vec::new(),
            })),
        })
        .collect();
    append(b, messages).await
}

fn released(key: &SessionKey, packet_id: u16, n: u64) -> SessionWrite {
    SessionWrite::ReleasedQoS2 {
        key: key.clone(),
        held: StoredHeldQoS2 { packet_id, n },
    }
}

async fn mqtt_sessions_hold_inbound_qos2_ids_until_released(b: Backend) {
    let store = b.mqtt_sessions();
    let app = AppId::default_app();
    let (k, other) = (key(&app, "pub-1"), key(&app, "pub-2"));
    // A key number is a connection's start time in microseconds, counted on.
    let n = 1_764_500_000_000_000_u64;
    let mut writes = Vec::new();
    for k in [&k, &other] {
        writes.push(SessionWrite::Start {
            key: k.clone(),
            expiry_ms: 60_000,
            node: None,
        });
    }
    store.write_mqtt_sessions(writes).await.unwrap();
    // Each hold is written by its message's append, in its transaction.
    let fresh = held_all(
        &b,
        &[
            (&k, 7, n),
            (&k, 65535, n + 1),
            (&k, 3, n + 2),
            (&other, 7, 1),
        ],
    )
    .await;
    assert_eq!(fresh, [false; 4]);
    let ids = |s: Option<StoredSession>| s.unwrap().held_qos2;
    let three = StoredHeldQoS2 {
        packet_id: 3,
        n: n + 2,
    };
    let seven = StoredHeldQoS2 { packet_id: 7, n };
    let top = StoredHeldQoS2 {
        packet_id: 65535,
        n: n + 1,
    };
    assert_eq!(
        ids(store.mqtt_session(&app, "pub-1").await.unwrap()),
        [three, seven, top]
    );
    store
        .write_mqtt_sessions(vec![
            released(&k, 3, n + 2),
            // Released ids of another session, ids never held, and an id held for another
            // message (another key number) change nothing.
            released(&other, 65535, n + 1),
            released(&k, 9, n),
            released(&k, 7, n + 9),
        ])
        .await
        .unwrap();
    assert_eq!(
        ids(store.mqtt_session(&app, "pub-1").await.unwrap()),
        [seven, top]
    );
    assert_eq!(
        ids(store.mqtt_session(&app, "pub-2").await.unwrap()),
        vec![StoredHeldQoS2 { packet_id: 7, n: 1 }]
    );

    // Kept across a reopen. A resend appended again with its key is a duplicate, and holds
    // again (a release queued meanwhile may have gone); a later message's append replaces
    // the hold of its id, which the release of the message before then leaves alone.
    let b = b.reopen().await;
    let store = b.mqtt_sessions();
    assert_eq!(
        ids(store.mqtt_session(&app, "pub-1").await.unwrap()),
        [seven, top]
    );
    store
        .write_mqtt_sessions(vec![released(&k, 7, n)])
        .await
        .unwrap();
    assert!(held(&b, &k, 7, n).await, "the resend is the message stored");
    assert_eq!(
        ids(store.mqtt_session(&app, "pub-1").await.unwrap()),
        [seven, top]
    );
    assert!(!held(&b, &k, 65535, n + 5).await, "a new message");
    store
        .write_mqtt_sessions(vec![released(&k, 65535, n + 1), released(&k, 7, n)])
        .await
        .unwrap();
    assert_eq!(
        ids(store.mqtt_session(&app, "pub-1").await.unwrap()),
        vec![StoredHeldQoS2 {
            packet_id: 65535,
            n: n + 5
        }]
    );
    // Two messages of one append holding the same id: the last one's hold.
    assert_eq!(
        held_all(&b, &[(&k, 4, n + 6), (&k, 4, n + 7)]).await,
        [false; 2]
    );
    assert_eq!(
        ids(store.mqtt_session(&app, "pub-1").await.unwrap()),
        [
            StoredHeldQoS2 {
                packet_id: 4,
                n: n + 7
            },
            StoredHeldQoS2 {
                packet_id: 65535,
                n: n + 5
            }
        ]
    );

    // A new start forgets them.
    store
        .write_mqtt_sessions(vec![SessionWrite::Start {
            key: k.clone(),
            expiry_ms: 1_000,
            node: None,
        }])
        .await
        .unwrap();
    assert!(!held(&b, &k, 8, 2).await);
    assert_eq!(
        ids(store.mqtt_session(&app, "pub-1").await.unwrap()),
        vec![StoredHeldQoS2 { packet_id: 8, n: 2 }]
    );
    // An expired session's sweep and a delete take them with the session.
    store
        .write_mqtt_sessions(vec![
            SessionWrite::Ended {
                key: k.clone(),
                at_ms: 10_000,
                expiry_ms: 1_000,
            },
            SessionWrite::Sweep { now_ms: 11_000 },
            SessionWrite::Delete { key: other.clone() },
        ])
        .await
        .unwrap();
    assert_eq!(store.mqtt_session(&app, "pub-1").await.unwrap(), None);
    assert_eq!(store.mqtt_session(&app, "pub-2").await.unwrap(), None);
}

/// One message of an append by session `key` (herald-mqtt's `inbound.rs`): stored with the key
/// `mqtt:{client}:{tag}` (a QoS 2 one's `{packet id}:{n}`), holding `held` if it is a QoS 2
/// message, carrying the releases `released`.
fn riding(
    key: &SessionKey,
    tag: &str,
    held: Option<HeldPacket>,
    released: &[HeldPacket],
) -> NewMessage {
    NewMessage {
        id: Some(format!("mqtt:{}:{tag}", key.client_id)),
        data: Bytes::from(tag.to_owned()),
        retain: Default::default(),
        hold: Some(Box::new(SessionHold {
            app: key.app.clone(),
            client_id: key.client_id.clone(),
            held,
            released: released.to_vec(),
        })),
    }
}

/// Appends `messages` to `meters`; whether each was a duplicate.
async fn append(b: &Backend, messages: Vec<NewMessage>) -> Vec<bool> {
    let meters = ChannelName::parse("meters").unwrap();
    let appended = b
        .store()
        .append(&meters, messages, Retention::default())
        .await
        .unwrap();
    appended.iter().map(|a| a.duplicate).collect()
}

async fn mqtt_sessions_release_inbound_qos2_ids_riding_a_later_append(b: Backend) {
    let store = b.mqtt_sessions();
    let app = AppId::default_app();
    let (k, other) = (key(&app, "rider-1"), key(&app, "rider-2"));
    let start = |k: &SessionKey| SessionWrite::Start {
        key: k.clone(),
        expiry_ms: 60_000,
        node: None,
    };
    store
        .write_mqtt_sessions(vec![start(&k), start(&other)])
        .await
        .unwrap();
    let h = |packet_id, n| HeldPacket { packet_id, n };
    let ids = |s: Option<StoredSession>| s.unwrap().held_qos2;
    assert_eq!(
        held_all(&b, &[(&k, 7, 1), (&k, 8, 2), (&k, 9, 3), (&other, 7, 1)]).await,
        [false; 4]
    );

    // A QoS 1 message's append carries two releases: they go; one with another key number
    // and another session's id are left alone.
    let fresh = append(
        &b,
        vec![riding(&k, "q1:4", None, &[h(7, 1), h(8, 2), h(9, 99)])],
    )
    .await;
    assert_eq!(fresh, [false]);
    assert_eq!(
        ids(store.mqtt_session(&app, "rider-1").await.unwrap()),
        [h(9, 3)]
    );
    assert_eq!(
        ids(store.mqtt_session(&app, "rider-2").await.unwrap()),
        [h(7, 1)]
    );

    // A QoS 2 message reusing a released id at once: the release of the id's message before
    // rides its append and leaves the new hold (releases go first, and by key number).
    append(&b, vec![riding(&k, "9:5", Some(h(9, 5)), &[h(9, 3)])]).await;
    assert_eq!(
        ids(store.mqtt_session(&app, "rider-1").await.unwrap()),
        [h(9, 5)]
    );
    // A duplicate's append (a resend of that message) writes what it carries too; so does an
    // append holding messages of two sessions, each carrying its own releases.
    let dup = append(&b, vec![riding(&k, "9:5", Some(h(9, 5)), &[h(9, 3)])]).await;
    assert_eq!(dup, [true]);
    append(
        &b,
        vec![
            riding(&other, "q0:2", None, &[h(7, 1)]),
            riding(&k, "3:6", Some(h(3, 6)), &[h(9, 5)]),
        ],
    )
    .await;
    assert_eq!(
        ids(store.mqtt_session(&app, "rider-1").await.unwrap()),
        [h(3, 6)]
    );
    assert_eq!(ids(store.mqtt_session(&app, "rider-2").await.unwrap()), []);
    // Kept across a reopen, as any commit.
    let b = b.reopen().await;
    assert_eq!(
        ids(b
            .mqtt_sessions()
            .mqtt_session(&app, "rider-1")
            .await
            .unwrap()),
        [h(3, 6)]
    );
}
