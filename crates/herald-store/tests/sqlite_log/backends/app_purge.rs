//! Deleting an app, on both backends: its channels (plain ones and its push logs), their
//! messages and its retained messages are purged after it a step at a time, each step
//! bounded; another app's, an app whose id shares its first letters, and the default app's are
//! left as they were.

use bytes::Bytes;
use herald_core::log::{ReadFrom, Retention};
use herald_core::message::{NewMessage, Retain};
use herald_core::name::ChannelName;
use herald_core::tenancy::{App, AppLimits};
use herald_core::tenant::AppId;

use super::Backend;

crate::on_both!(a_deleted_apps_channels_messages_and_retained_messages_are_purged,);

/// The most rows a step deletes or changes: a page of messages and the rows of the channels
/// it emptied (at most as many), or a page of retained rows.
const STEP_MOST: usize = 2 * 1000;

fn app(id: &str) -> App {
    App {
        id: AppId::parse(id).unwrap(),
        name: id.into(),
        token_secret: Some("s".repeat(32)),
        limits: AppLimits::default(),
        created: 1,
    }
}

fn msg(i: usize, retain: Retain) -> NewMessage {
    NewMessage {
        id: None,
        data: Bytes::from(i.to_string()),
        retain,
        hold: None,
    }
}

const KEEP: Retain = Retain::Keep {
    expires_at_ms: None,
};

const HISTORY: Retention = Retention {
    max_messages: 100_000,
    max_age_ms: 0,
};

/// The channels of the test: `(full name, messages, whether its last one is retained)`.
fn channels() -> Vec<(String, usize, bool)> {
    let mut channels = vec![
        // More than a step's page: trimmed a page at a time, then dropped.
        ("shop~news".to_string(), 2_500, true),
        ("shop~$app".to_string(), 3, false),
        ("shop~$dev/d1".to_string(), 2, false),
        ("shop-2~news".to_string(), 3, true),
        ("sho~news".to_string(), 2, true),
        ("other~news".to_string(), 4, true),
        ("news".to_string(), 5, true),
    ];
    // More channels than a step takes: dropped a page of channels at a time.
    for i in 0..1_200 {
        channels.push((format!("shop~room/{i:04}"), 1, i % 2 == 0));
    }
    channels
}

fn purged(name: &str) -> bool {
    name.starts_with("shop~")
}

/// Rows of `table` (`channels`, `retained`: by name; `messages`: by their channel's name) whose
/// name starts with `prefix`, read from the database itself.
async fn rows(b: &Backend, table: &str, prefix: &str) -> i64 {
    let sql = match table {
        "messages" => "SELECT count(*) FROM messages m JOIN channels c ON c.id = m.channel_id \
                       WHERE substr(c.name, 1, length($1)) = $1"
            .to_string(),
        "channels" => "SELECT count(*) FROM channels WHERE substr(name, 1, length($1)) = $1".into(),
        _ => format!("SELECT count(*) FROM {table} WHERE substr(channel, 1, length($1)) = $1"),
    };
    if let Some(dir) = b.sqlite_dir() {
        let db = rusqlite::Connection::open(dir.join(herald_store::DB_FILE_NAME)).unwrap();
        return db
            .query_row(&sql.replace("$1", "?1"), [prefix], |r| r.get(0))
            .unwrap();
    }
    let (client, connection) =
        tokio_postgres::connect(b.postgres_url().unwrap(), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    client.query_one(&sql, &[&prefix]).await.unwrap().get(0)
}

/// Every message in the `messages` table, whatever its channel (an orphan too).
async fn all_messages(b: &Backend) -> i64 {
    let sql = "SELECT count(*) FROM messages";
    if let Some(dir) = b.sqlite_dir() {
        let db = rusqlite::Connection::open(dir.join(herald_store::DB_FILE_NAME)).unwrap();
        return db.query_row(sql, [], |r| r.get(0)).unwrap();
    }
    let (client, connection) =
        tokio_postgres::connect(b.postgres_url().unwrap(), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    client.query_one(sql, &[]).await.unwrap().get(0)
}

async fn a_deleted_apps_channels_messages_and_retained_messages_are_purged(b: Backend) {
    let log = b.store();
    for id in ["shop", "shop-2", "sho", "other"] {
        assert!(log.create_app(&app(id)).await.unwrap());
    }
    let channels = channels();
    // A hundred channels at a time, each's messages in appends of 500.
    for some in channels.chunks(100) {
        let appends = some.iter().map(|(name, count, retained)| async move {
            let channel = herald_core::tenant::parse_full(name).unwrap();
            let messages: Vec<NewMessage> = (0..*count)
                .map(|i| {
                    let last = i + 1 == *count;
                    msg(
                        i,
                        if last && *retained {
                            KEEP
                        } else {
                            Retain::Untouched
                        },
                    )
                })
                .collect();
            for chunk in messages.chunks(500) {
                log.append(&channel, chunk.to_vec(), HISTORY).await.unwrap();
            }
        });
        futures_util::future::join_all(appends).await;
    }
    let kept_messages: usize = (channels.iter())
        .filter(|c| !purged(&c.0))
        .map(|c| c.1)
        .sum();
    let shop_messages: usize = channels.iter().filter(|c| purged(&c.0)).map(|c| c.1).sum();
    assert_eq!(rows(&b, "messages", "shop~").await, shop_messages as i64);
    assert_eq!(rows(&b, "retained", "shop~").await, 601);

    // Nothing of a live app is purged.
    assert_eq!(purge(&b).await, 0);
    assert!(log
        .delete_app(&AppId::parse("shop").unwrap())
        .await
        .unwrap());
    // The writer starts by itself; each step asked for here is bounded all the same.
    let mut steps = 0;
    loop {
        let n = purge(&b).await;
        assert!(n <= STEP_MOST, "a step deleted or changed {n} rows");
        if n == 0 {
            break;
        }
        steps += 1;
        assert!(steps < 100, "the purge does not end");
    }
    for table in ["channels", "messages", "retained"] {
        assert_eq!(
            rows(&b, table, "shop~").await,
            0,
            "{table} of the deleted app"
        );
    }
    assert_eq!(all_messages(&b).await, kept_messages as i64, "no orphan");
    let news = ChannelName::parse("news").unwrap();
    let shop_news = AppId::parse("shop").unwrap().channel(&news);
    assert_eq!(log.state(&shop_news).await.unwrap().last_seq, 0, "no log");
    assert!(log.retained(&shop_news, 1).await.unwrap().is_none());

    // The others are as they were: their messages, their logs' seqs, their retained messages.
    for (name, count, retained) in channels.iter().filter(|c| !purged(&c.0)) {
        let channel = herald_core::tenant::parse_full(name).unwrap();
        let read = log.read(&channel, ReadFrom::After(0), 100).await.unwrap();
        assert_eq!(read.messages.len(), *count, "{name}");
        assert_eq!(log.state(&channel).await.unwrap().last_seq, *count as u64);
        let kept = log.retained(&channel, 1).await.unwrap();
        assert_eq!(
            kept.map(|m| m.seq),
            retained.then_some(*count as u64),
            "{name}"
        );
    }
    // A later step finds nothing, and an append to the deleted app's channel (one that raced
    // its deletion) is found by a later purge.
    assert_eq!(purge(&b).await, 0);
    log.append(&shop_news, vec![msg(1, KEEP)], HISTORY)
        .await
        .unwrap();
    assert_eq!(rows(&b, "channels", "shop~").await, 1);
    for _ in 0..10 {
        if purge(&b).await == 0 {
            break;
        }
    }
    for table in ["channels", "messages", "retained"] {
        assert_eq!(
            rows(&b, table, "shop~").await,
            0,
            "{table} after the late append"
        );
    }
    log.close().await;
}

/// One purge step now: the rows it deleted or changed.
async fn purge(b: &Backend) -> usize {
    b.purge_deleted_apps().await
}
