//! What the queue reports and keeps: depth per app and provider, how a push's jobs stand
//! (by result and per device), pruning finished jobs of expired pushes, app deletion, and a send
//! job without a provider refused.

use super::*;

crate::on_both!(
    depth_counts_waiting_running_and_dead_jobs_per_app_and_provider,
    a_push_reports_its_jobs_by_result_and_per_device_in_pages,
    a_push_keeps_its_delivery_and_record,
    prune_deletes_finished_sends_of_expired_pushes_only,
    deleting_an_app_deletes_its_jobs_and_no_one_elses,
    a_send_job_without_a_provider_is_refused_and_nothing_is_queued,
);

async fn depth_counts_waiting_running_and_dead_jobs_per_app_and_provider(b: Backend) {
    let q = b.store();
    let before = now_millis();
    q.enqueue(vec![
        send("shop", "p1", Platform::Apns, "a", 0),
        send("shop", "p1", Platform::Apns, "b", 0),
        send("shop", "p1", Platform::Fcm, "c", 9_000),
        send("blog", "p2", Platform::Webpush, "d", 9_000),
        expansion("shop", "p3"),
    ])
    .await
    .unwrap();
    let after = now_millis();
    let leased = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
    let id = |name: &str| leased.iter().find(|j| device_of(j) == name).unwrap().id;
    q.settle(vec![
        (id("a"), done("accepted")),
        (id("b"), Settlement::Dead { reason: "x".into() }),
    ])
    .await
    .unwrap();
    let all = q.depth(None).await.unwrap();
    let row = |app_id: &str, provider: Option<Platform>| {
        all.iter()
            .find(|d| d.app.as_str() == app_id && d.provider == provider)
            .map(|d| (d.queued, d.dead, d.oldest_ms.is_some()))
    };
    assert_eq!(all.len(), 4, "{all:?}");
    assert_eq!(row("shop", Some(Platform::Apns)), Some((0, 1, false)));
    assert_eq!(row("shop", Some(Platform::Fcm)), Some((1, 0, true)));
    assert_eq!(
        row("shop", None),
        Some((1, 0, true)),
        "the running expansion"
    );
    assert_eq!(row("blog", Some(Platform::Webpush)), Some((1, 0, true)));
    for d in &all {
        if let Some(oldest) = d.oldest_ms {
            assert!((before..=after).contains(&oldest), "{d:?}");
        }
    }
    let blog = q.depth(Some(&app("blog"))).await.unwrap();
    assert_eq!(blog.len(), 1);
    assert_eq!(blog[0].provider, Some(Platform::Webpush));
    q.close().await;
}

async fn a_push_reports_its_jobs_by_result_and_per_device_in_pages(b: Backend) {
    let q = b.store();
    let shop = app("shop");
    let names = ["a", "b", "c", "d", "e"];
    q.enqueue(sends("p1", &names)).await.unwrap();
    q.enqueue(sends("p1", &["a"])).await.unwrap(); // again: nothing added
    q.enqueue(sends("other", &["a"])).await.unwrap();
    let leased = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
    assert_eq!(leased.len(), 6);
    let id = |name: &str| {
        leased
            .iter()
            .find(|j| device_of(j) == name && j.job.push == "p1")
            .unwrap()
            .id
    };
    q.settle(vec![
        (id("a"), done("accepted")),
        (id("b"), done("accepted")),
        (id("c"), done("unregistered:Unregistered")),
        (
            id("d"),
            Settlement::Dead {
                reason: "status 500".into(),
            },
        ),
    ])
    .await
    .unwrap();
    let stand = q.push_jobs(&shop, "p1").await.unwrap();
    assert_eq!(
        stand.done,
        vec![
            ("accepted".to_string(), 2),
            ("unregistered:Unregistered".to_string(), 1)
        ]
    );
    assert_eq!((stand.queued, stand.dead, stand.in_doubt), (1, 1, 0));
    assert_eq!(
        q.push_jobs(&app("blog"), "p1").await.unwrap(),
        PushJobs::default()
    );
    let first = q.device_jobs(&shop, "p1", None, 2).await.unwrap();
    assert_eq!(
        first
            .iter()
            .map(|j| (j.device.as_str(), j.state.as_str(), j.result.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("a", "done", Some("accepted")),
            ("b", "done", Some("accepted"))
        ]
    );
    let next = q.device_jobs(&shop, "p1", Some("b"), 10).await.unwrap();
    assert_eq!(
        next.iter()
            .map(|j| (j.device.as_str(), j.state.as_str()))
            .collect::<Vec<_>>(),
        [("c", "done"), ("d", "dead"), ("e", "running")]
    );
    assert!(next
        .iter()
        .all(|j| j.provider == Platform::Apns && j.attempts == 1));
    q.close().await;
}

pub(super) fn receipt(id: &str, expires: i64) -> Receipt {
    Receipt {
        id: id.into(),
        targeted: Some(1),
        delivered: 0,
        pending: 0,
        expired: 0,
        created: 0,
        expires,
        delivery: Some("auto".into()),
        providers: None,
        devices: None,
    }
}

async fn a_push_keeps_its_delivery_and_record(b: Backend) {
    let q = b.store();
    let shop = app("shop");
    q.record_push(&shop, &receipt("p", i64::MAX), Some(b"{\"r\":1}"))
        .await
        .unwrap();
    q.record_push(&shop, &receipt("live", i64::MAX), None)
        .await
        .unwrap();
    let stored = q.receipt(&shop, "p").await.unwrap().unwrap();
    assert_eq!(stored.delivery.as_deref(), Some("auto"));
    assert_eq!(
        q.delivery_record(&shop, "p").await.unwrap().as_deref(),
        Some(&b"{\"r\":1}"[..])
    );
    assert_eq!(q.delivery_record(&shop, "live").await.unwrap(), None);
    assert_eq!(q.delivery_record(&app("other"), "p").await.unwrap(), None);
    q.close().await;
}

async fn prune_deletes_finished_sends_of_expired_pushes_only(b: Backend) {
    let q = b.store();
    let shop = app("shop");
    let day = 24 * 3600 * 1000;
    q.record_push(&shop, &receipt("old", 1_000), None)
        .await
        .unwrap();
    q.record_push(&shop, &receipt("new", i64::MAX), None)
        .await
        .unwrap();
    q.enqueue(sends("old", &["a", "b", "c"])).await.unwrap();
    q.enqueue(sends("new", &["a"])).await.unwrap();
    let leased = q.lease(1_000, 3, 10_000, &[]).await.unwrap();
    q.settle(leased.iter().map(|j| (j.id, done("accepted"))).collect())
        .await
        .unwrap();
    // The three of "old" are done; the one of "new" is still queued.
    assert!(leased.iter().all(|j| j.job.push == "old"));
    assert_eq!(q.prune(1_000).await.unwrap(), 0, "not expired before 1,000");
    let old_done = leased.iter().filter(|j| j.job.push == "old").count() as u64;
    // The sweep keeps them a day after expiry.
    b.trim_expired_at(1_000 + day).await;
    let stand = q.push_jobs(&shop, "old").await.unwrap();
    assert_eq!(stand.done.iter().map(|(_, n)| n).sum::<u64>(), old_done);
    b.trim_expired_at(1_001 + day).await;
    let stand = q.push_jobs(&shop, "old").await.unwrap();
    assert!(stand.done.is_empty(), "{stand:?}");
    assert_eq!(stand.queued, 3 - old_done);
    let new = q.push_jobs(&shop, "new").await.unwrap();
    assert_eq!(new.done.len() as u64 + new.queued, 1, "unexpired push kept");
    // The trait's prune does the same without the day's grace.
    q.enqueue(sends("old", &["z"])).await.unwrap();
    let z = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
    q.settle(z.iter().map(|j| (j.id, done("accepted"))).collect())
        .await
        .unwrap();
    assert_eq!(q.prune(1_001).await.unwrap(), 1);
    assert!(q.push_jobs(&shop, "old").await.unwrap().done.is_empty());
    q.close().await;
}

async fn deleting_an_app_deletes_its_jobs_and_no_one_elses(b: Backend) {
    let q = b.store();
    for id in ["shop", "blog"] {
        let created = q
            .create_app(&App {
                id: app(id),
                name: id.into(),
                token_secret: Some("s".repeat(32)),
                limits: Default::default(),
                created: 1,
            })
            .await
            .unwrap();
        assert!(created);
    }
    q.enqueue(sends("p1", &["a", "b"])).await.unwrap();
    q.enqueue(vec![send("blog", "p1", Platform::Fcm, "a", 0)])
        .await
        .unwrap();
    bury(q, "shop", "p2", 1).await;
    assert!(q.delete_app(&app("shop")).await.unwrap());
    assert!(q.depth(Some(&app("shop"))).await.unwrap().is_empty());
    assert_eq!(
        q.push_jobs(&app("shop"), "p1").await.unwrap(),
        PushJobs::default()
    );
    let left = q.lease(10_000, 10, 10_000, &[]).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].job.app, app("blog"));
    q.close().await;
}

async fn a_send_job_without_a_provider_is_refused_and_nothing_is_queued(b: Backend) {
    let q = b.store();
    let mut bad = send("shop", "p1", Platform::Apns, "b", 0);
    bad.provider = None;
    let good = send("shop", "p1", Platform::Apns, "a", 0);
    assert!(q.enqueue(vec![good, bad]).await.is_err());
    assert!(q.lease(1_000, 10, 10_000, &[]).await.unwrap().is_empty());
    q.close().await;
}
