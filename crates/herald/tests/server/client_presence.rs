//! `herald-client`'s resuming subscriber on a presence channel, against the real binary: two
//! users see each other join and leave as [`Event::Presence`], the member list
//! ([`Subscriber::members`]) follows, and after the server restarts (kill -9) the list is the
//! one the resubscribe lists, without a user that left while the subscriber was away.

use std::time::Duration;

use herald_client::proto::token::{mint, user_info, ClientClaims};
use herald_client::subscriber::{ChannelOptions, Event, Presence, PresenceMember, Subscriber};
use serde_json::{json, Value};

use crate::support::{Server, SECRET};

/// A token of `sub` for `room-*`, with `user_info` if given.
fn token(sub: &str, info: Option<&str>) -> String {
    mint(
        SECRET.as_bytes(),
        &ClientClaims {
            sub: sub.into(),
            channels: vec!["room-*".into()],
            user_info: info.map(|i| user_info("user_info", i).unwrap()),
            ..Default::default()
        },
    )
}

/// A subscriber of `room-1` with presence (and `member` data, if given).
fn subscriber(s: &Server, token: String, member: Option<Value>) -> Subscriber {
    let mut options = ChannelOptions::default().presence();
    if let Some(member) = member {
        options = options.member(&member);
    }
    Subscriber::builder(s.url(""))
        .token(token)
        .channel_with("room-1", options)
        .backoff(Duration::from_millis(50), Duration::from_millis(300))
        .build()
        .unwrap()
}

/// Reads `subscriber` until a presence event on `room-1` that `wanted` accepts.
async fn presence_until(
    subscriber: &mut Subscriber,
    wanted: impl Fn(&Presence) -> bool,
) -> Presence {
    let read = async {
        loop {
            match subscriber.next().await {
                Ok(Event::Presence(p)) if wanted(&p) => return p,
                Ok(_) => {}
                Err(stopped) => panic!("the subscriber stopped: {stopped}"),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(15), read)
        .await
        .expect("timed out waiting for a presence event")
}

fn member(user: &str, data: Value) -> PresenceMember {
    PresenceMember {
        user: user.into(),
        data,
    }
}

fn users(subscriber: &Subscriber) -> Vec<String> {
    subscriber
        .members("room-1")
        .expect("listed")
        .iter()
        .map(|m| m.user.clone())
        .collect()
}

#[tokio::test]
async fn two_users_see_each_other_join_and_leave_and_the_list_is_right_after_a_restart() {
    let mut s = Server::builder()
        .config("[[namespaces]]\nprefix = \"room-\"\npresence = true\n")
        .start()
        .await;
    let mut ada = subscriber(&s, token("ada", Some(r#"{"name":"Ada"}"#)), None);
    assert_eq!(
        ada.members("room-1"),
        None,
        "nothing listed before subscribing"
    );
    let listed = presence_until(&mut ada, |p| matches!(p, Presence::Members { .. })).await;
    assert_eq!(
        listed,
        Presence::Members {
            channel: "room-1".into(),
            members: vec![member("ada", json!({"name": "Ada"}))],
        }
    );

    // Bob's token has no user_info: his subscribe's member is his data.
    let mut bob = subscriber(&s, token("bob", None), Some(json!({"name": "Bob"})));
    let listed = presence_until(&mut bob, |p| matches!(p, Presence::Members { .. })).await;
    let Presence::Members { members, .. } = listed else {
        unreachable!()
    };
    assert_eq!(
        members,
        [
            member("ada", json!({"name": "Ada"})),
            member("bob", json!({"name": "Bob"}))
        ]
    );
    let joined = presence_until(&mut ada, |p| matches!(p, Presence::Join { .. })).await;
    assert_eq!(
        joined,
        Presence::Join {
            channel: "room-1".into(),
            member: member("bob", json!({"name": "Bob"})),
        }
    );
    assert_eq!(users(&ada), ["ada", "bob"]);
    assert_eq!(users(&bob), ["ada", "bob"]);

    // The server dies; Bob is gone when it is back. No leave reaches Ada, yet her list is
    // right once her resubscribe lists the members again.
    let addr = s.addr;
    s.kill9();
    bob.close().await;
    s.restart_listening_on(addr).await;
    presence_until(&mut ada, |p| matches!(p, Presence::Members { .. })).await;
    assert_eq!(users(&ada), ["ada"], "the list after the restart");

    // Bob comes back and leaves again: a join then a leave.
    let mut bob = subscriber(&s, token("bob", None), Some(json!({"name": "Bob"})));
    presence_until(&mut bob, |p| matches!(p, Presence::Members { .. })).await;
    presence_until(&mut ada, |p| matches!(p, Presence::Join { .. })).await;
    assert_eq!(users(&ada), ["ada", "bob"]);
    bob.close().await;
    let left = presence_until(&mut ada, |p| matches!(p, Presence::Leave { .. })).await;
    assert_eq!(
        left,
        Presence::Leave {
            channel: "room-1".into(),
            user: "bob".into(),
        }
    );
    assert_eq!(users(&ada), ["ada"]);
}
