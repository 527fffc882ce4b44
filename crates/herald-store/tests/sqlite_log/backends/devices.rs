//! Devices through `herald_push::registry::DeviceRegistry`, on both backends: an audience count
//! reaches exactly the devices the broadcast filter admits (one rule), devices by id,
//! deactivation of a device whose token is gone (Apple's rule) and listing only the devices a
//! provider can reach.

use herald_core::tenant::AppId;
use herald_push::device::{DeviceWrite, InboxCursor, Registration};
use herald_push::registry::DeviceQuery;
use herald_push::tags::TagExpr;
use herald_push::Audience;

use super::{Backend, Store};

crate::on_both!(
    an_audience_count_reaches_exactly_the_devices_the_broadcast_filter_admits,
    devices_by_id_returns_the_known_ones_in_id_order,
    a_gone_token_deactivates_its_device_unless_a_newer_token_was_registered,
    provider_reachable_lists_active_devices_with_a_provider_token_only,
);

fn device(id: &str, tags: &[&str], active: bool) -> DeviceWrite {
    let json = serde_json::json!({
        "platform": "herald", "id": id, "tags": tags, "active": active,
    });
    serde_json::from_value::<Registration>(json)
        .unwrap()
        .into_write()
        .unwrap()
}

async fn add_devices(log: &dyn Store) {
    let devices = vec![
        device("a", &["sports", "uk"], true),
        device("b", &["muted", "sports"], true),
        device("c", &[], true),
        device("d", &["news"], true),
        device("e", &["sports"], false),
        device("f", &["uk"], false),
    ];
    log.upsert_devices(&AppId::default_app(), devices, InboxCursor::default())
        .await
        .unwrap();
}

fn provider_device(id: &str, platform: &str, token: &str, tags: &[&str]) -> DeviceWrite {
    let json = serde_json::json!({
        "platform": platform, "id": id, "token": token, "tags": tags,
    });
    serde_json::from_value::<Registration>(json)
        .unwrap()
        .into_write()
        .unwrap()
}

fn apns_token(n: u8) -> String {
    format!("{n:02x}").repeat(32)
}

fn fcm_token(n: u8) -> String {
    format!("fcm-token-{n}-{}", "x".repeat(20))
}

async fn an_audience_count_reaches_exactly_the_devices_the_broadcast_filter_admits(b: Backend) {
    let log = b.store();
    add_devices(log).await;
    let app = AppId::default_app();
    let query = herald_push::registry::DeviceQuery {
        limit: 100,
        ..Default::default()
    };
    let all = log.devices(&app, &query).await.unwrap();
    assert_eq!(all.len(), 6);
    let mut audiences = vec![Audience::All];
    for text in [
        "sports",
        "NOT muted",
        "sports AND NOT muted",
        "uk OR news",
        "NOT (sports OR news)",
        "absent",
        "NOT absent",
    ] {
        audiences.push(Audience::Tags(TagExpr::parse(text).unwrap()));
    }
    for audience in audiences {
        let expected = all
            .iter()
            .filter(|d| audience.reaches_tags(d.active, &d.tags))
            .count() as u64;
        let counted = log.count_audience(&app, &audience).await.unwrap();
        assert_eq!(counted, expected, "{audience:?}");
    }
    log.close().await;
}

async fn devices_by_id_returns_the_known_ones_in_id_order(b: Backend) {
    let log = b.store();
    add_devices(log).await;
    let app = AppId::default_app();
    let ids: Vec<String> = ["d", "zz", "a", "d", "e"].map(String::from).to_vec();
    let found = log.devices_by_id(&app, &ids).await.unwrap();
    let names: Vec<_> = found.iter().map(|(d, _)| d.id.as_str()).collect();
    assert_eq!(names, ["a", "d", "e"]);
    assert_eq!(found[1].0.tags, ["news"]);
    assert!(!found[2].0.active);
    let other = AppId::parse("other").unwrap();
    assert!(log.devices_by_id(&other, &ids).await.unwrap().is_empty());
    assert!(log.devices_by_id(&app, &[]).await.unwrap().is_empty());
    log.close().await;
}

async fn a_gone_token_deactivates_its_device_unless_a_newer_token_was_registered(b: Backend) {
    let log = b.store();
    let app = AppId::default_app();
    let (old, new) = (apns_token(1), apns_token(2));
    let stored = log
        .upsert_devices(
            &app,
            vec![provider_device("phone", "apns", &old, &[])],
            InboxCursor::default(),
        )
        .await
        .unwrap();
    let registered = stored[0].0.updated;
    let reason = "apns: Unregistered";

    // Apple saw the token go before it was registered: the device registered it since.
    let before = Some(registered - 1);
    assert!(!log
        .deactivate_gone(&app, "phone", &old, before, reason)
        .await
        .unwrap());
    // Another token than the device holds: nothing changes.
    assert!(!log
        .deactivate_gone(&app, "phone", &new, None, reason)
        .await
        .unwrap());
    assert!(!log
        .deactivate_gone(&app, "nobody", &old, None, reason)
        .await
        .unwrap());
    let (device, _) = log.device(&app, "phone").await.unwrap().unwrap();
    assert!(device.active);
    assert_eq!(device.inactive_reason, None);

    // Gone since after it was registered: deactivated, and says why.
    let after = Some(registered + 1);
    assert!(log
        .deactivate_gone(&app, "phone", &old, after, reason)
        .await
        .unwrap());
    let (device, _) = log.device(&app, "phone").await.unwrap().unwrap();
    assert!(!device.active);
    assert_eq!(device.inactive_reason.as_deref(), Some(reason));
    assert!(!log
        .deactivate_gone(&app, "phone", &old, None, reason)
        .await
        .unwrap());

    // Registered again with the same token and nothing said of `active`: still inactive,
    // still says why.
    let again = log
        .upsert_devices(
            &app,
            vec![provider_device("phone", "apns", &old, &["t"])],
            InboxCursor::default(),
        )
        .await
        .unwrap();
    assert!(!again[0].0.active);
    assert_eq!(again[0].0.inactive_reason.as_deref(), Some(reason));
    // A new token clears the reason (activation stays explicit).
    let renewed = log
        .upsert_devices(
            &app,
            vec![provider_device("phone", "apns", &new, &[])],
            InboxCursor::default(),
        )
        .await
        .unwrap();
    assert_eq!(renewed[0].0.inactive_reason, None);
    assert!(!renewed[0].0.active);

    // Activated again: clears the reason; without a `since` the provider's word is enough.
    let mut write = provider_device("phone", "apns", &new, &[]);
    write.set_active = true;
    let active = log
        .upsert_devices(&app, vec![write], InboxCursor::default())
        .await
        .unwrap();
    assert!(active[0].0.active);
    assert!(log
        .deactivate_gone(&app, "phone", &new, None, "apns: BadDeviceToken")
        .await
        .unwrap());
    let mut write = provider_device("phone", "apns", &new, &[]);
    write.set_active = true;
    let active = log
        .upsert_devices(&app, vec![write], InboxCursor::default())
        .await
        .unwrap();
    assert!(active[0].0.active);
    assert_eq!(active[0].0.inactive_reason, None);
    let (device, _) = log.device(&app, "phone").await.unwrap().unwrap();
    assert_eq!(device.inactive_reason, None);
    log.close().await;
}

async fn provider_reachable_lists_active_devices_with_a_provider_token_only(b: Backend) {
    let log = b.shared();
    add_devices(&*log).await; // herald devices a..f
    let app = AppId::default_app();
    let mut off = provider_device("p3", "apns", &apns_token(3), &["sports"]);
    off.device.active = false;
    off.set_active = true;
    log.upsert_devices(
        &app,
        vec![
            provider_device("p1", "apns", &apns_token(1), &["sports"]),
            provider_device("p2", "fcm", &fcm_token(2), &["news"]),
            off,
            provider_device("p4", "fcm", &fcm_token(4), &["sports"]),
        ],
        InboxCursor::default(),
    )
    .await
    .unwrap();
    let list = |query: DeviceQuery| {
        let log = log.clone();
        let app = app.clone();
        async move {
            log.devices(&app, &query)
                .await
                .unwrap()
                .into_iter()
                .map(|d| d.id)
                .collect::<Vec<_>>()
        }
    };
    let reachable = |limit| DeviceQuery {
        limit,
        provider_reachable: true,
        ..Default::default()
    };
    assert_eq!(list(reachable(100)).await, ["p1", "p2", "p4"]);
    let page = DeviceQuery {
        after: Some("p1".into()),
        ..reachable(1)
    };
    assert_eq!(list(page).await, ["p2"]);
    let sports = DeviceQuery {
        tag: Some("sports".into()),
        ..reachable(100)
    };
    assert_eq!(list(sports).await, ["p1", "p4"]);
    let everything = DeviceQuery {
        limit: 100,
        ..Default::default()
    };
    assert_eq!(list(everything).await.len(), 10, "without the flag: all");
    log.close().await;
}
