//! Settling leased jobs (done, retried, dead; anything not leased left alone) and dead letters
//! (listed, replayed, dropped, per app).

use super::*;

crate::on_both!(
    settle_finishes_retries_or_buries_leased_jobs_and_ignores_the_rest,
    dead_letters_are_listed_replayed_and_dropped_per_app,
);

async fn settle_finishes_retries_or_buries_leased_jobs_and_ignores_the_rest(b: Backend) {
    let q = b.store();
    let shop = app("shop");
    q.enqueue(
        ["a", "b", "c", "d"]
            .iter()
            .map(|d| send("shop", "p1", Platform::Apns, d, 0))
            .collect(),
    )
    .await
    .unwrap();
    let leased = q.lease(1_000, 3, 10_000, &[]).await.unwrap();
    let id = |name: &str| leased.iter().find(|j| device_of(j) == name).unwrap().id;
    let unleased = q.device_jobs(&shop, "p1", Some("c"), 1).await.unwrap();
    assert_eq!(unleased[0].device, "d");
    assert_eq!(unleased[0].state, "queued");
    let all = q.dead_letters(&shop, None, 10).await.unwrap();
    assert!(all.is_empty());
    q.settle(vec![
        (id("a"), done("accepted")),
        (
            id("b"),
            Settlement::Retry {
                due_ms: 2_000,
                reason: "status 503".into(),
            },
        ),
        (
            id("c"),
            Settlement::Dead {
                reason: "rejected:BadDeviceToken".into(),
            },
        ),
    ])
    .await
    .unwrap();
    // "a" is done, "b" queued again, "c" dead, and no job has id 999,999: all left alone.
    q.settle(
        ["a", "b", "c"]
            .into_iter()
            .map(|n| (id(n), done("live")))
            .chain([(999_999, done("live"))])
            .collect(),
    )
    .await
    .unwrap();
    let d = q.device_jobs(&shop, "p1", Some("c"), 1).await.unwrap();
    assert_eq!(d[0].state, "queued");
    let stand = q.push_jobs(&shop, "p1").await.unwrap();
    assert_eq!(
        stand,
        PushJobs {
            done: vec![("accepted".into(), 1)],
            queued: 2,
            dead: 1,
            in_doubt: 0,
            expanding: false,
        }
    );
    let jobs = q.device_jobs(&shop, "p1", None, 10).await.unwrap();
    let b = jobs.iter().find(|j| j.device == "b").unwrap();
    assert_eq!(
        (b.state.as_str(), b.result.as_deref()),
        ("queued", Some("status 503"))
    );
    let d_leased = q.lease(1_999, 10, 100_000, &[]).await.unwrap();
    assert_eq!(d_leased.iter().map(device_of).collect::<Vec<_>>(), ["d"]);
    let retried = q.lease(2_000, 10, 100_000, &[]).await.unwrap();
    assert_eq!(retried.iter().map(device_of).collect::<Vec<_>>(), ["b"]);
    assert_eq!(retried[0].attempts, 2);
    let dead = q.dead_letters(&shop, None, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].reason, "rejected:BadDeviceToken");
    assert_eq!(dead[0].attempts, 1);
    assert!(dead[0].died_ms > 0);
    q.close().await;
}

async fn dead_letters_are_listed_replayed_and_dropped_per_app(b: Backend) {
    let q = b.store();
    let (shop, blog) = (app("shop"), app("blog"));
    let mine = bury(q, "shop", "p1", 3).await;
    let theirs = bury(q, "blog", "p2", 1).await;
    let page = q.dead_letters(&shop, None, 2).await.unwrap();
    assert_eq!(page.iter().map(|d| d.id).collect::<Vec<_>>(), mine[..2]);
    let rest = q.dead_letters(&shop, Some(page[1].id), 2).await.unwrap();
    assert_eq!(rest.iter().map(|d| d.id).collect::<Vec<_>>(), mine[2..]);
    assert_eq!(rest[0].job.app, shop);
    assert_eq!(rest[0].job.provider, Some(Platform::Webpush));

    assert!(
        !q.replay(&shop, theirs[0], 5_000).await.unwrap(),
        "other app's"
    );
    assert!(!q.drop_dead(&shop, theirs[0]).await.unwrap(), "other app's");
    assert_eq!(q.dead_letters(&blog, None, 10).await.unwrap().len(), 1);

    assert!(q.replay(&shop, mine[0], 5_000).await.unwrap());
    assert!(
        !q.replay(&shop, mine[0], 5_000).await.unwrap(),
        "no longer dead"
    );
    assert!(q.lease(4_999, 10, 10_000, &[]).await.unwrap().is_empty());
    let replayed = q.lease(5_000, 10, 10_000, &[]).await.unwrap();
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0].id, mine[0]);
    assert_eq!(replayed[0].attempts, 1, "attempts start again");

    assert!(q.drop_dead(&shop, mine[1]).await.unwrap());
    assert!(!q.drop_dead(&shop, mine[1]).await.unwrap());
    let left = q.dead_letters(&shop, None, 10).await.unwrap();
    assert_eq!(left.iter().map(|d| d.id).collect::<Vec<_>>(), [mine[2]]);
    q.close().await;
}
