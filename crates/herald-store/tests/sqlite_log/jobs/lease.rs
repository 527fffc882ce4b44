//! Leasing: due jobs oldest due first up to the limit, a lapsed lease making its job due again
//! in doubt, paused app and provider pairs skipped.

use super::*;

crate::on_both!(
    lease_takes_due_jobs_oldest_due_first_up_to_the_limit,
    a_lapsed_lease_makes_the_job_due_again_in_doubt_with_its_attempt_counted,
    paused_app_and_provider_pairs_are_skipped,
);

async fn lease_takes_due_jobs_oldest_due_first_up_to_the_limit(b: Backend) {
    let q = b.store();
    let jobs = [
        ("a", 300),
        ("b", 100),
        ("c", 200),
        ("d", 50),
        ("later", 5_000),
    ];
    q.enqueue(
        jobs.iter()
            .map(|(d, due)| send("shop", "p1", Platform::Apns, d, *due))
            .collect(),
    )
    .await
    .unwrap();
    let first = q.lease(1_000, 2, 10_000, &[]).await.unwrap();
    let names: Vec<_> = first.iter().map(device_of).collect();
    assert_eq!(names, ["d", "b"]);
    assert!(first.iter().all(|j| j.attempts == 1 && !j.in_doubt));
    assert_eq!(first[0].job.due_ms, 50, "a job is handed out as it was due");
    assert_eq!(first[0].job.seq, 7, "with the push's seq it was added with");
    let rest = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
    let names: Vec<_> = rest.iter().map(device_of).collect();
    assert_eq!(names, ["c", "a"], "leased jobs are not handed out again");
    assert!(q.lease(1_000, 10, 10_000, &[]).await.unwrap().is_empty());
    assert!(q.lease(1_000, 0, 10_000, &[]).await.unwrap().is_empty());
    let later = q.lease(5_000, 10, 10_000, &[]).await.unwrap();
    assert_eq!(later.len(), 1);
    assert_eq!(device_of(&later[0]), "later");
    q.close().await;
}

async fn a_lapsed_lease_makes_the_job_due_again_in_doubt_with_its_attempt_counted(b: Backend) {
    let q = b.store();
    q.enqueue(vec![send("shop", "p1", Platform::Fcm, "a", 0)])
        .await
        .unwrap();
    let first = q.lease(1_000, 10, 500, &[]).await.unwrap();
    assert_eq!(first.len(), 1);
    assert!(q.lease(1_499, 10, 500, &[]).await.unwrap().is_empty());
    let again = q.lease(1_500, 10, 500, &[]).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, first[0].id);
    assert_eq!(again[0].attempts, 2);
    assert!(again[0].in_doubt);
    let stand = q.push_jobs(&app("shop"), "p1").await.unwrap();
    assert_eq!(stand.in_doubt, 1);
    assert_eq!(stand.queued, 1);
    let per_device = q.device_jobs(&app("shop"), "p1", None, 10).await.unwrap();
    assert_eq!(per_device[0].state, "running");
    assert!(per_device[0].in_doubt);
    // Settled at last: it stays in doubt (the receipt says a duplicate was possible).
    q.settle(vec![(again[0].id, done("accepted"))])
        .await
        .unwrap();
    let stand = q.push_jobs(&app("shop"), "p1").await.unwrap();
    assert_eq!(stand.done, vec![("accepted".to_string(), 1)]);
    assert_eq!(stand.in_doubt, 1);
    q.close().await;
}

async fn paused_app_and_provider_pairs_are_skipped(b: Backend) {
    let q = b.store();
    q.enqueue(vec![
        send("shop", "p1", Platform::Apns, "a", 0),
        send("shop", "p1", Platform::Fcm, "b", 1),
        send("blog", "p2", Platform::Apns, "c", 2),
        expansion("shop", "p3"),
    ])
    .await
    .unwrap();
    let paused = [(app("shop"), Platform::Apns), (app("blog"), Platform::Fcm)];
    let leased = q.lease(1_000, 10, 10_000, &paused).await.unwrap();
    let mut names: Vec<_> = leased.iter().map(device_of).collect();
    names.sort_unstable();
    assert_eq!(names, ["(expand)", "b", "c"]);
    let resumed = q.lease(1_000, 10, 10_000, &[]).await.unwrap();
    assert_eq!(resumed.len(), 1);
    assert_eq!(device_of(&resumed[0]), "a");
    q.close().await;
}
