//! The registries on both backends: apps, keys, limits and usage (`Tenancy`); devices, their
//! tags, users, cursors and acks, receipts, audience counts, deactivation of a gone token and
//! tombstones (`DeviceRegistry`); provider credentials (`CredentialStore`); and deleting an app
//! taking all of it along.

use herald_core::message::{Cursor, Epoch};
use herald_core::tenancy::{App, AppLimits, KeyInfo, Usage};
use herald_core::tenant::AppId;
use herald_push::credentials::StoredCredentials;
use herald_push::device::{DeviceWrite, InboxCursor, Platform, Registration};
use herald_push::registry::{Ack, DeviceQuery, Receipt};
use herald_push::tags::TagExpr;
use herald_push::Audience;

use super::Backend;

crate::on_both!(
    apps_keys_limits_and_usage,
    token_revocations_keep_the_latest_and_forget_the_expired,
    token_keys_round_trip_and_go_with_their_app,
    devices_tags_users_and_audiences,
    a_gone_token_deactivates_unless_registered_since,
    an_update_stores_its_time_and_a_new_token_its_own,
    acks_move_the_cursor_once_and_count_on_receipts,
    a_deleted_device_starts_after_its_tombstone,
    credentials_round_trip_and_go_with_their_app,
);

fn app(id: &str) -> App {
    App {
        id: AppId::parse(id).unwrap(),
        name: id.to_uppercase(),
        token_secret: Some("s".repeat(32)),
        limits: AppLimits {
            max_devices: Some(7),
            ..AppLimits::default()
        },
        created: 123,
    }
}

fn device(json: serde_json::Value) -> DeviceWrite {
    serde_json::from_value::<Registration>(json)
        .unwrap()
        .into_write()
        .unwrap()
}

fn live(id: &str, tags: &[&str], active: bool, user: Option<&str>) -> DeviceWrite {
    let mut json = serde_json::json!({
        "platform": "herald", "id": id, "tags": tags, "active": active,
    });
    if let Some(user) = user {
        json["user"] = user.into();
    }
    device(json)
}

fn apns(id: &str, token: &str) -> DeviceWrite {
    device(serde_json::json!({ "platform": "apns", "id": id, "token": token }))
}

async fn token_keys_round_trip_and_go_with_their_app(b: Backend) {
    use herald_core::token_keys::{AppTokenKeys, KeyAlg, PreviousSecret, PublicKeySpec};
    let s = b.store();
    let shop = app("shop");
    assert!(s.create_app(&shop).await.unwrap());
    let stored = s.token_keys(&shop.id).await.unwrap().expect("shop's keys");
    assert_eq!(stored.secret, shop.token_secret);
    assert!(stored.previous.is_none() && stored.public_keys.is_empty());
    let keys = AppTokenKeys {
        secret: None,
        previous: Some(PreviousSecret {
            secret: "sealed-previous".into(),
            until: 1_900_000_000,
        }),
        public_keys: vec![PublicKeySpec {
            kid: Some("k1".into()),
            alg: KeyAlg::ES256,
            pem: "-----BEGIN PUBLIC KEY-----".into(),
        }],
        jwks_url: Some("https://idp.example/jwks.json".into()),
    };
    assert!(s.set_token_keys(&shop.id, &keys).await.unwrap());
    assert_eq!(s.token_keys(&shop.id).await.unwrap(), Some(keys.clone()));
    let all = s.all_token_keys().await.unwrap();
    assert!(all.contains(&(shop.id.clone(), keys)));
    assert!(all.iter().any(|(app, _)| app.is_default()));
    let ghost = AppId::parse("ghost").unwrap();
    assert!(!s
        .set_token_keys(&ghost, &AppTokenKeys::default())
        .await
        .unwrap());
    assert!(s.delete_app(&shop.id).await.unwrap());
    assert_eq!(s.token_keys(&shop.id).await.unwrap(), None);
    assert!(s
        .all_token_keys()
        .await
        .unwrap()
        .iter()
        .all(|(app, _)| *app != shop.id));
}

async fn token_revocations_keep_the_latest_and_forget_the_expired(b: Backend) {
    use herald_core::revoked::{now_secs, RevokedKind, TokenRevocation};
    let s = b.store();
    let shop = app("shop");
    assert!(s.create_app(&shop).await.unwrap());
    let now = now_secs();
    let revoke = |kind| TokenRevocation {
        app: shop.id.clone(),
        kind,
    };
    let jti = |jti: &str, expires| RevokedKind::Jti {
        jti: jti.into(),
        expires,
    };
    for kind in [
        jti("gone", now - 1),
        jti("t-1", now + 60),
        jti("t-1", now + 30),
        RevokedKind::IssuedBefore(now),
        RevokedKind::IssuedBefore(now - 100),
    ] {
        s.revoke_tokens(&revoke(kind)).await.unwrap();
    }
    assert_eq!(
        s.token_revocations().await.unwrap(),
        vec![
            revoke(RevokedKind::IssuedBefore(now)),
            revoke(jti("t-1", now + 60))
        ]
    );
    assert!(s.delete_app(&shop.id).await.unwrap());
    assert!(s.token_revocations().await.unwrap().is_empty());
}

async fn apps_keys_limits_and_usage(b: Backend) {
    let s = b.store();
    let shop = app("shop");
    assert!(s.create_app(&shop).await.unwrap());
    assert!(!s.create_app(&shop).await.unwrap(), "the id is taken");
    assert!(s.create_app(&app("blog")).await.unwrap());
    let ids: Vec<String> = s
        .apps()
        .await
        .unwrap()
        .iter()
        .map(|a| a.id.to_string())
        .collect();
    assert_eq!(ids, ["blog", "default", "shop"]);
    assert_eq!(s.app(&shop.id).await.unwrap(), Some(shop.clone()));
    // An app's own rate limits are kept with its other limits.
    let limits = AppLimits {
        max_connections: Some(10),
        publish_rate: Some(herald_core::limits::Rate::per_second(5, 10)),
        push_rate: Some(herald_core::limits::Rate::OFF),
        ..AppLimits::default()
    };
    assert!(s.set_limits(&shop.id, limits).await.unwrap());
    assert_eq!(s.app(&shop.id).await.unwrap().unwrap().limits, limits);
    let nobody = AppId::parse("nobody").unwrap();
    assert!(!s.set_limits(&nobody, limits).await.unwrap());

    let hash = format!("{}{}", "ab12".repeat(3), "0".repeat(52));
    let key = KeyInfo {
        app: shop.id.clone(),
        id: hash[..12].to_string(),
        hash: hash.clone(),
        label: "ci".into(),
        created: 5,
    };
    s.add_key(&key).await.unwrap();
    s.add_key(&key).await.unwrap();
    assert_eq!(s.keys().await.unwrap(), std::slice::from_ref(&key));
    assert!(!s.remove_key(&shop.id, "not-a-key-id").await.unwrap());
    assert!(!s.remove_key(&nobody, &key.id).await.unwrap());
    assert!(s.remove_key(&shop.id, &key.id).await.unwrap());
    assert!(s.keys().await.unwrap().is_empty());

    let counted = |published, deliveries, acks, peak_connections| Usage {
        published,
        deliveries,
        acks,
        peak_connections,
    };
    s.add_usage(&shop.id, counted(5, 7, 1, 4)).await.unwrap();
    s.add_usage(&shop.id, counted(3, 2, 0, 2)).await.unwrap();
    assert_eq!(s.usage(&shop.id).await.unwrap(), counted(8, 9, 1, 4));
    s.add_usage(&shop.id, counted(0, 0, 2, 6)).await.unwrap();
    assert_eq!(s.usage(&shop.id).await.unwrap(), counted(8, 9, 3, 6));
    assert_eq!(s.usage(&nobody).await.unwrap(), Usage::default());

    s.add_key(&key).await.unwrap();
    assert!(s.delete_app(&shop.id).await.unwrap());
    assert!(!s.delete_app(&shop.id).await.unwrap());
    assert_eq!(s.app(&shop.id).await.unwrap(), None);
    assert!(s.keys().await.unwrap().is_empty(), "keys go with the app");
    assert_eq!(s.usage(&shop.id).await.unwrap(), Usage::default());
    assert!(
        !s.create_app(&shop).await.unwrap(),
        "a deleted app's id stays reserved"
    );
    s.close().await;
}

async fn devices_tags_users_and_audiences(b: Backend) {
    let s = b.store();
    let a = AppId::default_app();
    let written = s
        .upsert_devices(
            &a,
            vec![
                live("a", &["sports", "uk"], true, Some("ann")),
                live("b", &["muted", "sports"], true, None),
                live("c", &[], true, Some("ann")),
                live("d", &["news"], true, None),
                live("e", &["sports"], false, Some("ann")),
                live("f", &["uk"], false, None),
            ],
            InboxCursor::default(),
        )
        .await
        .unwrap();
    assert!(written.iter().all(|(_, created)| *created));
    assert_eq!(s.device_count(&a).await.unwrap(), 6);
    let again = s
        .upsert_devices(
            &a,
            vec![live("d", &["news", "uk"], true, None)],
            InboxCursor::default(),
        )
        .await
        .unwrap();
    assert!(!again[0].1, "updated, not created");
    assert_eq!(again[0].0.created, written[3].0.created);

    let ids: Vec<String> = ["d", "zz", "a", "d", "e"].map(String::from).to_vec();
    let found = s.devices_by_id(&a, &ids).await.unwrap();
    let names: Vec<_> = found.iter().map(|(d, _)| d.id.as_str()).collect();
    assert_eq!(names, ["a", "d", "e"]);
    assert_eq!(found[1].0.tags, ["news", "uk"]);
    assert!(!found[2].0.active);
    let other = AppId::parse("other").unwrap();
    assert!(s.devices_by_id(&other, &ids).await.unwrap().is_empty());

    let a = &a;
    let list = |q: DeviceQuery| async move {
        let d = s.devices(a, &q).await.unwrap();
        d.into_iter().map(|d| d.id).collect::<Vec<_>>()
    };
    let by_tag = DeviceQuery {
        tag: Some("uk".into()),
        limit: 10,
        ..DeviceQuery::default()
    };
    assert_eq!(list(by_tag).await, ["a", "d", "f"]);
    let page = DeviceQuery {
        after: Some("b".into()),
        limit: 2,
        ..DeviceQuery::default()
    };
    assert_eq!(list(page).await, ["c", "d"]);
    let by_user = DeviceQuery {
        user: Some("ann".into()),
        limit: 10,
        ..DeviceQuery::default()
    };
    assert_eq!(list(by_user).await, ["a", "c", "e"]);
    assert_eq!(
        s.user_devices(a, "ann").await.unwrap(),
        ["a", "c"],
        "active only"
    );

    let count = |audience: Audience| async move { s.count_audience(a, &audience).await.unwrap() };
    assert_eq!(count(Audience::All).await, 4);
    let tags = |e: &str| Audience::Tags(TagExpr::parse(e).unwrap());
    assert_eq!(count(tags("sports")).await, 2);
    assert_eq!(count(tags("sports AND NOT muted")).await, 1);
    assert_eq!(count(tags("NOT muted")).await, 3);
    assert_eq!(count(tags("uk OR news")).await, 2);

    let reachable = DeviceQuery {
        provider_reachable: true,
        limit: 10,
        ..DeviceQuery::default()
    };
    s.upsert_devices(a, vec![apns("p", &"ab".repeat(32))], InboxCursor::default())
        .await
        .unwrap();
    assert_eq!(list(reachable).await, ["p"]);
    s.close().await;
}

async fn a_gone_token_deactivates_unless_registered_since(b: Backend) {
    let s = b.store();
    let a = AppId::default_app();
    let (old, new) = ("01".repeat(32), "02".repeat(32));
    let stored = s
        .upsert_devices(&a, vec![apns("phone", &old)], InboxCursor::default())
        .await
        .unwrap();
    let registered = stored[0].0.updated;
    let reason = "apns: Unregistered";
    let before = Some(registered - 1);
    assert!(!s
        .deactivate_gone(&a, "phone", &old, before, reason)
        .await
        .unwrap());
    assert!(!s
        .deactivate_gone(&a, "phone", &new, None, reason)
        .await
        .unwrap());
    assert!(!s
        .deactivate_gone(&a, "nobody", &old, None, reason)
        .await
        .unwrap());
    let after = Some(registered + 1);
    assert!(s
        .deactivate_gone(&a, "phone", &old, after, reason)
        .await
        .unwrap());
    let (device, _) = s.device(&a, "phone").await.unwrap().unwrap();
    assert!(!device.active);
    assert_eq!(device.inactive_reason.as_deref(), Some(reason));
    let again = s
        .upsert_devices(&a, vec![apns("phone", &old)], InboxCursor::default())
        .await
        .unwrap();
    assert!(!again[0].0.active, "activation stays explicit");
    assert_eq!(again[0].0.inactive_reason.as_deref(), Some(reason));
    let renewed = s
        .upsert_devices(&a, vec![apns("phone", &new)], InboxCursor::default())
        .await
        .unwrap();
    assert_eq!(
        renewed[0].0.inactive_reason, None,
        "a new token clears the reason"
    );
    let mut write = apns("phone", &new);
    write.set_active = true;
    let active = s
        .upsert_devices(&a, vec![write], InboxCursor::default())
        .await
        .unwrap();
    assert!(active[0].0.active);
    s.close().await;
}

async fn acks_move_the_cursor_once_and_count_on_receipts(b: Backend) {
    let s = b.store();
    let a = AppId::default_app();
    s.upsert_devices(&a, vec![live("d", &[], true, None)], InboxCursor::default())
        .await
        .unwrap();
    let receipt = Receipt {
        id: "push-1".into(),
        created: 10,
        expires: 20,
        targeted: Some(3),
        delivered: 0,
        pending: 0,
        expired: 0,
        delivery: Some("auto".into()),
        providers: None,
        devices: None,
    };
    s.record_push(&a, &receipt, Some(&[1, 2, 3])).await.unwrap();
    s.record_push(&a, &receipt, Some(&[9])).await.unwrap();
    assert_eq!(
        s.delivery_record(&a, "push-1").await.unwrap(),
        Some(vec![1, 2, 3])
    );
    assert_eq!(s.delivery_record(&a, "none").await.unwrap(), None);
    s.set_targeted(&a, "push-1", 5).await.unwrap();
    let (_, from) = s.device(&a, "d").await.unwrap().unwrap();
    let mut to = from.clone();
    to.device = Cursor {
        epoch: Epoch::new("abcdefgh"),
        seq: 4,
    };
    let ack = Ack {
        from: from.clone(),
        to: to.clone(),
        pushes: vec!["push-1".into()],
    };
    assert!(s.ack(&a, "d", &ack).await.unwrap());
    assert!(
        !s.ack(&a, "d", &ack).await.unwrap(),
        "the cursor moved already"
    );
    let (_, now) = s.device(&a, "d").await.unwrap().unwrap();
    assert_eq!(now.encode(), to.encode());
    let r = s.receipt(&a, "push-1").await.unwrap().unwrap();
    assert_eq!(
        (r.created, r.expires, r.targeted, r.delivered),
        (10, 20, Some(5), 1)
    );
    assert_eq!(r.delivery.as_deref(), Some("auto"));
    assert!(s.receipt(&a, "none").await.unwrap().is_none());
    s.close().await;
}

async fn a_deleted_device_starts_after_its_tombstone(b: Backend) {
    let s = b.store();
    let a = AppId::default_app();
    s.upsert_devices(
        &a,
        vec![live("d", &["t"], true, None)],
        InboxCursor::default(),
    )
    .await
    .unwrap();
    let head = Cursor {
        epoch: Epoch::new("ep0ep0ep"),
        seq: 9,
    };
    assert!(s.delete_device(&a, "d", head.clone()).await.unwrap());
    assert!(!s.delete_device(&a, "d", head.clone()).await.unwrap());
    assert!(s.device(&a, "d").await.unwrap().is_none());
    let tagged = DeviceQuery {
        tag: Some("t".into()),
        limit: 10,
        ..DeviceQuery::default()
    };
    assert!(s.devices(&a, &tagged).await.unwrap().is_empty());
    let again = s
        .upsert_devices(&a, vec![live("d", &[], true, None)], InboxCursor::default())
        .await
        .unwrap();
    assert!(again[0].1);
    let (_, cursor) = s.device(&a, "d").await.unwrap().unwrap();
    assert_eq!(cursor.device, head, "starts after what it had");
    s.close().await;
}

async fn credentials_round_trip_and_go_with_their_app(b: Backend) {
    let s = b.store();
    let (shop, blog) = (app("shop"), app("blog"));
    s.create_app(&shop).await.unwrap();
    s.create_app(&blog).await.unwrap();
    let creds = |provider, sealed: &[u8], public: &str, updated_ms| StoredCredentials {
        provider,
        sealed: sealed.to_vec(),
        public: public.into(),
        updated_ms,
    };
    let apns = creds(Platform::Apns, &[0, 1, 255, 7], r#"{"key_id":"K1"}"#, 10);
    let vapid = creds(Platform::Webpush, b"sealed", "{}", 11);
    s.put_credentials(&shop.id, apns.clone()).await.unwrap();
    s.put_credentials(&shop.id, vapid.clone()).await.unwrap();
    s.put_credentials(&blog.id, apns.clone()).await.unwrap();
    assert_eq!(
        s.credentials(&shop.id, Platform::Apns).await.unwrap(),
        Some(apns.clone())
    );
    assert_eq!(s.credentials(&shop.id, Platform::Fcm).await.unwrap(), None);
    let newer = creds(Platform::Apns, b"rotated", "{}", 12);
    s.put_credentials(&shop.id, newer.clone()).await.unwrap();
    let all = s.all_credentials(&shop.id).await.unwrap();
    assert_eq!(all, [newer, vapid]);
    assert!(s
        .delete_credentials(&shop.id, Platform::Webpush)
        .await
        .unwrap());
    assert!(!s
        .delete_credentials(&shop.id, Platform::Webpush)
        .await
        .unwrap());
    s.delete_app(&shop.id).await.unwrap();
    assert!(s.all_credentials(&shop.id).await.unwrap().is_empty());
    assert_eq!(s.all_credentials(&blog.id).await.unwrap(), [apns]);
    s.close().await;
}

/// An update is stored with the time it answers (not the device's creation time), and a token
/// that changes is dated by that update, so a provider's "gone since" older than the new token
/// does not deactivate it.
async fn an_update_stores_its_time_and_a_new_token_its_own(b: Backend) {
    let s = b.store();
    let a = AppId::default_app();
    let (old, new) = ("03".repeat(32), "04".repeat(32));
    let first = s
        .upsert_devices(&a, vec![apns("tablet", &old)], InboxCursor::default())
        .await
        .unwrap();
    let created = first[0].0.created;
    // The clock must move on (milliseconds) for the update to have a later time.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let second = s
        .upsert_devices(&a, vec![apns("tablet", &new)], InboxCursor::default())
        .await
        .unwrap();
    let answered = second[0].0.updated;
    assert!(answered > created, "{answered} <= {created}");
    let (stored, _) = s.device(&a, "tablet").await.unwrap().unwrap();
    assert_eq!((stored.created, stored.updated), (created, answered));
    assert!(
        !s.deactivate_gone(&a, "tablet", &new, Some(answered - 1), "apns: Unregistered")
            .await
            .unwrap(),
        "the new token was registered after the provider's time"
    );
    assert!(s
        .deactivate_gone(&a, "tablet", &new, Some(answered), "apns: Unregistered")
        .await
        .unwrap());
}
