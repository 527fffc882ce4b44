//! The device registry through the push crate: an audience count reaches exactly the devices
//! the broadcast filter admits (one rule), and a broadcast's count is recorded before the
//! inbox closes.

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
use herald_push::tags::TagExpr;
use herald_push::{Audience, Inbox};
use herald_store::{SqliteLog, SqliteOptions};

use super::RecordingSink;

fn device(id: &str, tags: &[&str], active: bool) -> herald_push::device::DeviceWrite {
    let json = serde_json::json!({
        "platform": "herald", "id": id, "tags": tags, "active": active,
    });
    serde_json::from_value::<Registration>(json)
        .unwrap()
        .into_write()
        .unwrap()
}

async fn with_devices(dir: &std::path::Path) -> Arc<SqliteLog> {
    let log = SqliteLog::open(
        dir,
        SqliteOptions::default(),
        Arc::new(RecordingSink::default()),
    )
    .unwrap();
    add_devices(&log).await;
    log
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
async fn an_audience_count_reaches_exactly_the_devices_the_broadcast_filter_admits() {
    let dir = tempfile::tempdir().unwrap();
    let log = with_devices(dir.path()).await;
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
