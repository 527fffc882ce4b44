use std::sync::Arc;

use herald_proto::reply::{PresenceEvent, ServerBody, ServerFrame};

use super::*;
use crate::hub::Hub;
use crate::lifecycle::Recorded;
use crate::outbox::{OutFrame, Outbox};
use crate::tenant::AppId;

fn room() -> ChannelName {
    AppId::parse("shop")
        .unwrap()
        .parse_channel("room/1")
        .unwrap()
}

fn limits(max_members: u32) -> PresenceLimits {
    PresenceLimits {
        max_members,
        ..PresenceLimits::default()
    }
}

/// The presence frames queued to `outbox`, as (event, users, data of a join).
fn frames(outbox: &Outbox) -> Vec<(PresenceEvent, Vec<String>, Option<String>)> {
    outbox
        .take()
        .0
        .into_iter()
        .filter_map(|f| match f {
            OutFrame::Presence(bytes) => Some(bytes),
            _ => None,
        })
        .map(|bytes| {
            let text = std::str::from_utf8(&bytes).unwrap().to_string();
            let frame = ServerFrame::parse(&text).unwrap();
            assert_eq!(&frame.encode()[..], &bytes[..], "the typed frame's bytes");
            let ServerBody::Presence(p) = frame.body else {
                panic!("not a presence frame: {text}");
            };
            assert_eq!(p.channel, "room/1", "the app's name for the channel");
            // The body the other transports write is the frame's.
            let body = frame_body(&bytes);
            assert_eq!(
                is_members_frame(&bytes),
                text.contains(r#""event":"members""#)
            );
            let again: herald_proto::reply::PresenceFrame = serde_json::from_slice(&body).unwrap();
            assert_eq!(again, p);
            let users = match (&p.members, &p.user) {
                (Some(members), _) => members.iter().map(|m| m.user.to_string()).collect(),
                (None, Some(user)) => vec![user.to_string()],
                (None, None) => vec![],
            };
            (p.event, users, p.data.map(|d| d.get().to_string()))
        })
        .collect()
}

#[test]
fn a_user_is_one_member_however_many_subscriptions_it_holds() {
    let hub = Hub::new();
    let recorded = Recorded::new();
    hub.lifecycle().join(recorded.clone());
    let presence = hub.presence();
    let ch = room();
    let first = presence
        .join(&ch, &limits(10), "alice", Arc::from(r#"{"n":1}"#))
        .unwrap();
    let second = presence
        .join(&ch, &limits(10), "alice", Arc::from(r#"{"n":2}"#))
        .unwrap();
    let members = presence.members(&ch).unwrap();
    assert_eq!(members.len(), 1, "one member for two subscriptions");
    assert_eq!(&*members[0].data, r#"{"n":1}"#, "the first one's data");
    drop(first);
    assert_eq!(presence.members(&ch).unwrap().len(), 1, "still a member");
    drop(second);
    assert_eq!(presence.members(&ch), None, "gone with its last");
    assert_eq!(
        recorded.summary(),
        ["member+room/1:alice", "member-room/1:alice"],
        "added once, removed once"
    );
    match &recorded.events()[0] {
        LifecycleEvent::MemberAdded { data, .. } => assert_eq!(&**data, r#"{"n":1}"#),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_watcher_gets_the_members_first_then_joins_and_leaves() {
    let hub = Hub::new();
    let presence = hub.presence();
    let ch = room();
    let bob = presence
        .join(&ch, &limits(10), "bob", Arc::from("{}"))
        .unwrap();
    let outbox = Outbox::new(1 << 20);
    let mut alice = presence
        .join(&ch, &limits(10), "alice", Arc::from(r#"{"name":"Alice"}"#))
        .unwrap();
    assert!(frames(&outbox).is_empty(), "nothing before it watches");
    alice.watch(&outbox).await;
    let carol = presence
        .join(&ch, &limits(10), "carol", Arc::from(r#"{"c":true}"#))
        .unwrap();
    let carol_again = presence
        .join(&ch, &limits(10), "carol", Arc::from("{}"))
        .unwrap();
    drop(carol);
    drop(bob);
    drop(carol_again);
    assert_eq!(
        frames(&outbox),
        [
            (
                PresenceEvent::Members,
                vec!["bob".to_string(), "alice".into()],
                None
            ),
            (
                PresenceEvent::Join,
                vec!["carol".into()],
                Some(r#"{"c":true}"#.into())
            ),
            (PresenceEvent::Leave, vec!["bob".into()], None),
            (PresenceEvent::Leave, vec!["carol".into()], None),
        ]
    );
    alice.unwatch();
    let _dave = presence
        .join(&ch, &limits(10), "dave", Arc::from("{}"))
        .unwrap();
    assert!(frames(&outbox).is_empty(), "no frames once it stopped");
}

#[test]
fn a_full_channel_refuses_a_new_user_but_not_one_already_there() {
    let hub = Hub::new();
    let presence = hub.presence();
    let ch = room();
    let _a = presence
        .join(&ch, &limits(2), "a", Arc::from("{}"))
        .unwrap();
    let b = presence
        .join(&ch, &limits(2), "b", Arc::from("{}"))
        .unwrap();
    let refused = presence
        .join(&ch, &limits(2), "c", Arc::from("{}"))
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::LimitExceeded);
    assert!(
        refused.message.contains("presence_max_members"),
        "{refused}"
    );
    assert!(
        presence.join(&ch, &limits(2), "a", Arc::from("{}")).is_ok(),
        "a second subscription of a member is no new member"
    );
    drop(b);
    assert!(presence.join(&ch, &limits(2), "c", Arc::from("{}")).is_ok());
}

#[test]
fn member_data_comes_from_the_token_first_then_the_subscribe_within_its_limit() {
    let small = PresenceLimits {
        max_members: 10,
        max_data_bytes: 16,
    };
    let from_token = member_data(Some(r#"{"role":"admin"}"#), Some(r#"{"role":"x"}"#), &small);
    assert_eq!(&*from_token.unwrap(), r#"{"role":"admin"}"#);
    let given = member_data(None, Some(r#" {"role":"x"} "#), &small).unwrap();
    assert_eq!(&*given, r#"{"role":"x"}"#);
    assert_eq!(&*member_data(None, None, &small).unwrap(), "{}");
    let spread = member_data(None, Some("{\n \"a b\" : [1, 2]\r\n}"), &small).unwrap();
    assert_eq!(&*spread, r#"{"a b":[1,2]}"#, "one line, strings kept");
    let big = member_data(None, Some(r#"{"name":"a long name"}"#), &small).unwrap_err();
    assert_eq!(big.code, ErrorCode::TooLarge);
    assert!(big.message.contains("at most 16 bytes"), "{big}");
    assert!(big.message.contains("presence_max_data_bytes"), "{big}");
    let token_big = member_data(Some(r#"{"name":"a long name"}"#), None, &small).unwrap_err();
    assert!(token_big.message.contains("user_info"), "{token_big}");
    for not_object in ["[1]", "\"x\"", "3", "{oops"] {
        let e = member_data(None, Some(not_object), &small).unwrap_err();
        assert_eq!(e.code, ErrorCode::BadRequest, "{not_object}");
    }
}

#[test]
fn unsubscribing_from_the_hub_gives_the_membership_back() {
    let hub = Hub::new();
    let ch = room();
    let outbox = Outbox::new(1 << 20);
    let (sub, _) = hub.subscribe(&ch, outbox.clone());
    let membership = hub
        .presence()
        .join(&ch, &limits(10), "alice", Arc::from("{}"))
        .unwrap();
    sub.set_presence(membership);
    assert_eq!(hub.presence().members(&ch).map(|m| m.len()), Some(1));
    assert!(hub.unsubscribe(&ch, sub.id()));
    assert_eq!(hub.presence().members(&ch), None);
    // A subscription to any other channel holds none.
    let (other, _) = hub.subscribe(&ch, outbox);
    assert!(other.take_presence().is_none());
}

/// A relay that holds every change, as a cluster's would.
struct Holding(parking_lot::Mutex<Vec<MemberChange>>);

impl PresenceRelay for Holding {
    fn relay(&self, _: &ChannelName, change: &MemberChange) -> Relayed {
        self.0.lock().push(change.clone());
        Relayed::Held
    }
}

#[tokio::test]
async fn a_relay_that_holds_changes_delivers_them_itself() {
    let hub = Hub::new();
    let recorded = Recorded::new();
    hub.lifecycle().join(recorded.clone());
    let relay = Arc::new(Holding(Default::default()));
    assert!(hub.presence().set_relay(relay.clone()));
    let ch = room();
    let outbox = Outbox::new(1 << 20);
    let mut alice = hub
        .presence()
        .join(&ch, &limits(10), "alice", Arc::from("{}"))
        .unwrap();
    alice.watch(&outbox).await;
    let bob = hub
        .presence()
        .join(&ch, &limits(10), "bob", Arc::from("{}"))
        .unwrap();
    assert!(recorded.events().is_empty(), "held");
    assert_eq!(frames(&outbox).len(), 1, "the members list only");
    let held = relay.0.lock().clone();
    assert_eq!(held.len(), 2);
    hub.presence().deliver(&ch, held[1].clone());
    assert_eq!(recorded.summary(), ["member+room/1:bob"]);
    assert_eq!(frames(&outbox)[0].0, PresenceEvent::Join);
    drop(bob);
}

/// A cluster's relay: holds changes, judges joins by a shared list, answers that list.
struct Cluster {
    listed: parking_lot::Mutex<Listed>,
    max: usize,
}

impl PresenceRelay for Cluster {
    fn relay(&self, _: &ChannelName, _: &MemberChange) -> Relayed {
        Relayed::Held
    }

    fn admission(
        &self,
        _: &ChannelName,
        user: &str,
        data: &Arc<str>,
        _: &PresenceLimits,
    ) -> Option<Pending<Result<(), HeraldError>>> {
        let mut listed = self.listed.lock();
        let verdict = if listed.members.len() >= self.max {
            Err(HeraldError::new(
                ErrorCode::LimitExceeded,
                "full across nodes",
            ))
        } else {
            listed.members.push(Member {
                user: user.into(),
                data: data.clone(),
            });
            listed.version += 1;
            Ok(())
        };
        Some(Box::pin(async move { verdict }))
    }

    fn members(&self, _: &ChannelName) -> Option<Pending<Result<Listed, HeraldError>>> {
        let listed = self.listed.lock().clone();
        Some(Box::pin(async move { Ok(listed) }))
    }
}

#[tokio::test]
async fn in_a_cluster_the_relay_judges_joins_lists_members_and_orders_frames_by_version() {
    let hub = Hub::new();
    let other_node = Member {
        user: "zed".into(),
        data: Arc::from("{}"),
    };
    let relay = Arc::new(Cluster {
        listed: parking_lot::Mutex::new(Listed {
            members: vec![other_node],
            version: 7,
        }),
        max: 2,
    });
    assert!(hub.presence().set_relay(relay.clone()));
    let ch = room();
    let presence = hub.presence();
    let mut alice = presence
        .join(&ch, &limits(10), "alice", Arc::from("{}"))
        .unwrap()
        .admitted()
        .await
        .unwrap();
    // Full across nodes, though this node holds one member.
    let refused = presence
        .join(&ch, &limits(10), "bob", Arc::from("{}"))
        .unwrap()
        .admitted()
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::LimitExceeded);
    assert_eq!(
        presence.members(&ch).unwrap().len(),
        1,
        "bob's share given back"
    );
    // A change delivered before the watch began, newer than the list the watch reads.
    let carol = MemberChange::Added {
        user: "carol".into(),
        data: Arc::from("{}"),
    };
    presence.deliver_frame(&ch, &carol, 9);
    let outbox = Outbox::new(1 << 20);
    alice.watch(&outbox).await;
    let got = frames(&outbox);
    assert_eq!(got[0].0, PresenceEvent::Members);
    assert_eq!(got[0].1, ["zed", "alice"], "the cluster's list");
    assert_eq!(
        got[1].1,
        ["carol"],
        "then the change the list did not include"
    );
    assert_eq!(got.len(), 2);
    // A version delivered already, or older than the list, is not sent again.
    presence.deliver_frame(&ch, &carol, 9);
    presence.deliver_frame(&ch, &MemberChange::Removed { user: "x".into() }, 8);
    assert!(frames(&outbox).is_empty());
    presence.deliver_frame(&ch, &MemberChange::Removed { user: "zed".into() }, 10);
    assert_eq!(frames(&outbox)[0].0, PresenceEvent::Leave);
    assert_eq!(presence.listed(&ch).await.len(), 2, "the relay's list");
}

#[test]
fn a_subscription_pays_one_pointer_for_presence() {
    // The membership is boxed, beside the catch-up behind the one pointer a subscription
    // keeps aside (null for a live subscription on any other channel); 48 bytes in all.
    assert!(size_of::<Membership>() > 16, "worth boxing");
    assert_eq!(size_of::<crate::hub::Subscription>(), 48);
}

/// A relay whose verdicts are given by the test, counting what it was asked.
#[derive(Default)]
struct Judging {
    asked: parking_lot::Mutex<Vec<tokio::sync::oneshot::Sender<Result<(), HeraldError>>>>,
}

impl PresenceRelay for Judging {
    fn relay(&self, _: &ChannelName, _: &MemberChange) -> Relayed {
        Relayed::Held
    }

    fn admission(
        &self,
        _: &ChannelName,
        _: &str,
        _: &Arc<str>,
        _: &PresenceLimits,
    ) -> Option<Pending<Result<(), HeraldError>>> {
        let (tell, verdict) = tokio::sync::oneshot::channel();
        self.asked.lock().push(tell);
        Some(Box::pin(async move { verdict.await.unwrap() }))
    }
}

#[tokio::test]
async fn a_second_subscription_awaits_the_cluster_until_the_first_was_admitted() {
    let hub = Hub::new();
    let relay = Arc::new(Judging::default());
    assert!(hub.presence().set_relay(relay.clone()));
    let ch = room();
    let presence = hub.presence();
    let join = || {
        presence
            .join(&ch, &limits(10), "alice", Arc::from("{}"))
            .unwrap()
    };
    let (first, second) = (join(), join());
    assert_eq!(relay.asked.lock().len(), 2, "the second is judged too");
    // The cluster is full: both are refused, and alice is no member here any more.
    for tell in relay.asked.lock().drain(..) {
        let full = HeraldError::new(ErrorCode::LimitExceeded, "full across nodes");
        tell.send(Err(full)).unwrap();
    }
    assert!(first.admitted().await.is_err());
    assert!(second.admitted().await.is_err());
    assert_eq!(presence.members(&ch), None);
    // Admitted once: later subscriptions of alice are not asked about.
    let third = join();
    relay.asked.lock().pop().unwrap().send(Ok(())).unwrap();
    let _third = third.admitted().await.unwrap();
    let _fourth = join().admitted().await.unwrap();
    assert!(relay.asked.lock().is_empty());
}

#[tokio::test]
async fn an_observer_watches_the_members_without_being_one() {
    let hub = Hub::new();
    let recorded = Recorded::new();
    hub.lifecycle().join(recorded.clone());
    let presence = hub.presence();
    let ch = room();
    let bob = presence
        .join(&ch, &limits(1), "bob", Arc::from("{}"))
        .unwrap();
    let outbox = Outbox::new(1 << 20);
    let mut observer = presence.observe(&ch);
    observer.watch(&outbox).await;
    assert_eq!(
        presence.members(&ch).unwrap().len(),
        1,
        "the observer is no member (and the channel of one member is not full for it)"
    );
    drop(bob);
    let alice = presence
        .join(&ch, &limits(1), "alice", Arc::from("{}"))
        .unwrap();
    assert_eq!(
        frames(&outbox),
        [
            (PresenceEvent::Members, vec!["bob".to_string()], None),
            (PresenceEvent::Leave, vec!["bob".into()], None),
            (PresenceEvent::Join, vec!["alice".into()], Some("{}".into())),
        ]
    );
    drop(observer);
    drop(alice);
    assert!(frames(&outbox).is_empty(), "no frames once it is dropped");
    assert_eq!(presence.members(&ch), None);
    assert_eq!(
        recorded.summary(),
        [
            "member+room/1:bob",
            "member-room/1:bob",
            "member+room/1:alice",
            "member-room/1:alice"
        ],
        "the observer adds and removes no one"
    );
}
