//! The device registry under the push crate's inbox: a broadcast's audience count is recorded
//! before the inbox closes (on SQLite, the store `Engine::open` opens; the registry's own
//! behaviour runs on both backends in `backends::devices`).

use std::sync::Arc;

use herald_core::engine::Engine;
use herald_core::log::ChannelLog;
use herald_core::namespace::Namespaces;
use herald_core::publish::Publisher;
use herald_core::tenant::AppId;
use herald_core::usage::UsageMeter;
use herald_push::device::{InboxCursor, Registration};
use herald_push::push::PushBody;
use herald_push::registry::DeviceRegistry;
use herald_push::Inbox;
use herald_store::{SqliteLog, SqliteOptions};

fn device(id: &str, tags: &[&str], active: bool) -> herald_push::device::DeviceWrite {
    let json = serde_json::json!({
        "platform": "herald", "id": id, "tags": tags, "active": active,
    });
    serde_json::from_value::<Registration>(json)
        .unwrap()
        .into_write()
        .unwrap()
}

async fn add_devices(log: &SqliteLog) {
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

#[tokio::test]
async fn a_broadcasts_audience_count_is_recorded_before_the_inbox_closes() {
    let dir = tempfile::tempdir().unwrap();
    let app = AppId::default_app();
    let mut namespaces = Namespaces::default();
    herald_push::logs::register(&mut namespaces, herald_push::logs::DEFAULT_RETENTION);
    let (engine, log) = Engine::open(namespaces, |sink| {
        SqliteLog::open(dir.path(), SqliteOptions::default(), sink)
    })
    .unwrap();
    add_devices(&log).await;
    let usage = UsageMeter::new();
    let publisher = Arc::new(Publisher::new(Arc::new(engine), usage.clone(), 4096));
    let inbox = Inbox::new(publisher, log.clone(), usage);
    let push: PushBody =
        serde_json::from_str(r#"{"target":{"tags":"sports AND NOT muted"},"data":1}"#).unwrap();
    let push = push
        .validate(4096, herald_core::message::now_millis())
        .unwrap();
    let accepted = inbox.send(&app, push).await.unwrap();
    assert_eq!(accepted.targeted, None, "counted after the answer");
    inbox.close().await;
    let receipt = log.receipt(&app, &accepted.id).await.unwrap().unwrap();
    assert_eq!(receipt.targeted, Some(1));
    log.close().await;
}
