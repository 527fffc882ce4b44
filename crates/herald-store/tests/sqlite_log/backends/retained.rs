//! Retained messages on both backends (MQTT's RETAIN, `Retain` on an append): kept apart from
//! the history (a count trim, an age sweep and a reopen leave them), replaced only by a later
//! retain, ended by a clear or their expiry, listed by name prefix in name order a page at a
//! time; concurrent retained appends to one channel leave the one with the highest seq; the
//! store's sweep deletes expired rows and cleared markers an hour old, across pages, and
//! nothing else.

use bytes::Bytes;
use herald_core::log::Retention;
use herald_core::message::{now_millis, NewMessage, Retain, SharedMessage};
use herald_core::name::ChannelName;

use super::Backend;

crate::on_both!(
    a_retained_message_outlives_its_history_until_replaced_or_cleared,
    a_retained_message_ends_at_its_expiry,
    retained_messages_are_listed_by_prefix_a_page_at_a_time,
    concurrent_retained_appends_leave_the_highest_seq,
    the_sweep_deletes_expired_rows_and_old_cleared_markers,
);

fn name(s: &str) -> ChannelName {
    ChannelName::parse(s).unwrap()
}

fn msg(data: &str, retain: Retain) -> NewMessage {
    NewMessage {
        id: None,
        data: Bytes::copy_from_slice(data.as_bytes()),
        retain,
        hold: None,
    }
}

const KEEP: Retain = Retain::Keep {
    expires_at_ms: None,
};

fn keep(max_messages: u64) -> Retention {
    Retention {
        max_messages,
        max_age_ms: 3_600_000,
    }
}

fn data(m: &Option<SharedMessage>) -> Option<&[u8]> {
    m.as_ref().map(|m| &m.data[..])
}

async fn a_retained_message_outlives_its_history_until_replaced_or_cleared(b: Backend) {
    let log = b.store();
    let c = name("home/light");
    let now = u64::MAX / 2;
    assert!(log.retained(&c, now).await.unwrap().is_none());
    let first = log
        .append(&c, vec![msg("\"cfg\"", KEEP)], keep(1))
        .await
        .unwrap();
    let stored_at = first[0].message.time;
    // Not retained: the channel's history moves on and is trimmed, by count and by age.
    for i in 0..40 {
        log.append(&c, vec![msg(&i.to_string(), Retain::Untouched)], keep(1))
            .await
            .unwrap();
    }
    b.trim_expired_at(stored_at + 3_600_001).await;
    let state = log.state(&c).await.unwrap();
    assert!(state.first_seq > 1, "the history no longer holds seq 1");
    let b = b.reopen().await;
    let log = b.store();
    let kept = log.retained(&c, now).await.unwrap();
    assert_eq!(data(&kept), Some(&b"\"cfg\""[..]));
    let kept = kept.unwrap();
    assert_eq!((kept.seq, &kept.epoch), (1, &state.epoch));
    assert_eq!(kept.channel, c);
    // A later retain replaces it; a clear ends it.
    log.append(&c, vec![msg("\"v2\"", KEEP)], keep(1))
        .await
        .unwrap();
    assert_eq!(
        data(&log.retained(&c, now).await.unwrap()),
        Some(&b"\"v2\""[..])
    );
    log.append(&c, vec![msg("{}", Retain::Clear)], keep(1))
        .await
        .unwrap();
    assert!(log.retained(&c, now).await.unwrap().is_none());
    log.append(&c, vec![msg("\"v3\"", KEEP)], keep(1))
        .await
        .unwrap();
    assert_eq!(
        data(&log.retained(&c, now).await.unwrap()),
        Some(&b"\"v3\""[..])
    );
    log.close().await;
}

async fn a_retained_message_ends_at_its_expiry(b: Backend) {
    let log = b.store();
    let c = name("expiring");
    let at = 2_000_000_000_000;
    let expiring = Retain::Keep {
        expires_at_ms: Some(at),
    };
    log.append(&c, vec![msg("1", expiring)], keep(10))
        .await
        .unwrap();
    assert!(log.retained(&c, at - 1).await.unwrap().is_some());
    assert!(log.retained(&c, at).await.unwrap().is_none());
    assert!(log
        .retained_under("", None, 10, at)
        .await
        .unwrap()
        .is_empty());
    log.close().await;
}

async fn retained_messages_are_listed_by_prefix_a_page_at_a_time(b: Backend) {
    let log = b.store();
    let now = u64::MAX / 2;
    for i in 0..250 {
        log.append(&name(&format!("h/d{i:03}")), vec![msg("1", KEEP)], keep(10))
            .await
            .unwrap();
    }
    // Not under `h/`: a sibling prefix, a channel never retained, one cleared.
    log.append(&name("hx"), vec![msg("1", KEEP)], keep(10))
        .await
        .unwrap();
    log.append(
        &name("h/plain"),
        vec![msg("1", Retain::Untouched)],
        keep(10),
    )
    .await
    .unwrap();
    log.append(&name("h/d007"), vec![msg("{}", Retain::Clear)], keep(10))
        .await
        .unwrap();
    let mut listed = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = log
            .retained_under("h/", after.as_deref(), 100, now)
            .await
            .unwrap();
        listed.extend(page.iter().map(|m| m.channel.as_str().to_owned()));
        if page.len() < 100 {
            break;
        }
        after = listed.last().cloned();
    }
    let expected: Vec<String> = (0..250)
        .filter(|&i| i != 7)
        .map(|i| format!("h/d{i:03}"))
        .collect();
    assert_eq!(listed, expected);
    log.close().await;
}

async fn concurrent_retained_appends_leave_the_highest_seq(b: Backend) {
    let b = std::sync::Arc::new(b);
    let c = name("contended");
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let (b, c) = (b.clone(), c.clone());
            tokio::spawn(async move {
                b.store()
                    .append(&c, vec![msg(&i.to_string(), KEEP)], keep(1000))
                    .await
                    .unwrap()
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let log = b.store();
    let last = log.state(&c).await.unwrap().last_seq;
    let kept = log.retained(&c, u64::MAX / 2).await.unwrap().unwrap();
    assert_eq!(kept.seq, last);
    log.close().await;
}

/// Rows in the `retained` table, read from the database itself (reads skip expired and cleared
/// ones: only the table shows whether the sweep deleted them).
async fn retained_rows(b: &Backend) -> i64 {
    if let Some(dir) = b.sqlite_dir() {
        let db = rusqlite::Connection::open(dir.join(herald_store::DB_FILE_NAME)).unwrap();
        return db
            .query_row("SELECT count(*) FROM retained", [], |r| r.get(0))
            .unwrap();
    }
    let (client, connection) =
        tokio_postgres::connect(b.postgres_url().unwrap(), tokio_postgres::NoTls)
            .await
            .unwrap();
    tokio::spawn(connection);
    let row = client
        .query_one("SELECT count(*) FROM retained", &[])
        .await
        .unwrap();
    row.get(0)
}

async fn the_sweep_deletes_expired_rows_and_old_cleared_markers(b: Backend) {
    const HOUR: i64 = 3_600_000;
    let t0 = now_millis();
    let at = |ms: i64| Retain::Keep {
        expires_at_ms: Some(u64::try_from(ms).unwrap()),
    };
    // 1,300 channels, more than a sweep step's page of 1,000, kinds interleaved in name order:
    // expiring in half an hour (later than the test takes, so the store's own sweeps leave
    // them), never expiring, expiring in ten hours, cleared (a clear after a retain).
    let soon = t0 + HOUR / 2;
    let kind = |i: usize| i % 13;
    let channel = |i: usize| name(&format!("sweep/c{i:04}"));
    let b = std::sync::Arc::new(b);
    for chunk in (0..1300).collect::<Vec<_>>().chunks(100) {
        let appends = chunk.iter().map(|&i| {
            let b = b.clone();
            async move {
                let retains = match kind(i) {
                    0 => vec![KEEP],
                    1 => vec![at(t0 + 10 * HOUR)],
                    2 => vec![KEEP, Retain::Clear],
                    _ => vec![at(soon)],
                };
                let messages = retains.into_iter().map(|r| msg("1", r)).collect();
                b.store()
                    .append(&channel(i), messages, keep(10))
                    .await
                    .unwrap();
            }
        });
        futures_util::future::join_all(appends).await;
    }
    assert_eq!(retained_rows(&b).await, 1300);
    let count = |k: usize| (0..1300).filter(|&i| kind(i) == k).count() as i64;
    let (kept, later, cleared) = (count(0), count(1), count(2));
    // Past the expiry, within the hour the cleared markers are kept.
    b.trim_expired_at(soon + 60_000).await;
    assert_eq!(
        retained_rows(&b).await,
        kept + later + cleared,
        "the expired rows went"
    );
    // An hour after the clears, the markers go too.
    b.trim_expired_at(now_millis() + HOUR).await;
    assert_eq!(
        retained_rows(&b).await,
        kept + later,
        "the old cleared markers went"
    );
    // What reads answer is as before: the kept and not yet expired ones, nothing cleared.
    let log = b.store();
    let now = u64::try_from(soon + 60_000).unwrap();
    let listed = log.retained_under("sweep/", None, 2000, now).await.unwrap();
    let expected: Vec<ChannelName> = (0..1300).filter(|&i| kind(i) < 2).map(channel).collect();
    let listed: Vec<ChannelName> = listed.iter().map(|m| m.channel.clone()).collect();
    assert_eq!(listed, expected);
    assert!(log.retained(&channel(2), now).await.unwrap().is_none());
    // A cleared channel whose marker went takes a new retained message as any other.
    log.append(&channel(2), vec![msg("\"back\"", KEEP)], keep(10))
        .await
        .unwrap();
    assert_eq!(
        data(&log.retained(&channel(2), now).await.unwrap()),
        Some(&b"\"back\""[..])
    );
    log.close().await;
}
