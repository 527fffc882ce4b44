//! Retained messages on both backends (MQTT's RETAIN, `Retain` on an append): kept apart from
//! the history (a count trim, an age sweep and a reopen leave them), replaced only by a later
//! retain, ended by a clear or their expiry, listed by name prefix in name order a page at a
//! time; concurrent retained appends to one channel leave the one with the highest seq.

use bytes::Bytes;
use herald_core::log::Retention;
use herald_core::message::{NewMessage, Retain, SharedMessage};
use herald_core::name::ChannelName;

use super::Backend;

crate::on_both!(
    a_retained_message_outlives_its_history_until_replaced_or_cleared,
    a_retained_message_ends_at_its_expiry,
    retained_messages_are_listed_by_prefix_a_page_at_a_time,
    concurrent_retained_appends_leave_the_highest_seq,
);

fn name(s: &str) -> ChannelName {
    ChannelName::parse(s).unwrap()
}

fn msg(data: &str, retain: Retain) -> NewMessage {
    NewMessage {
        id: None,
        data: Bytes::copy_from_slice(data.as_bytes()),
        retain,
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
