//! Broadcast expansion: a page and its cursor move together or not at all, and an expansion
//! interrupted by a crash resumes where it stopped without adding a device twice.

use super::*;

crate::on_both!(an_expansion_is_atomic_and_resumes_after_a_crash_where_it_stopped);

async fn an_expansion_is_atomic_and_resumes_after_a_crash_where_it_stopped(b: Backend) {
    let shop = app("shop");
    let q = b.store();
    q.enqueue(vec![expansion("shop", "b1")]).await.unwrap();
    let job = q.lease(1_000, 10, 500, &[]).await.unwrap().remove(0);
    assert_eq!(job.job.kind, JobKind::Expand { after: None });
    q.expand(
        job.id,
        sends("b1", &["d1", "d2"]),
        Some("d2".into()),
        1_200,
        500,
    )
    .await
    .unwrap();
    // The lease was renewed to 1,700: at 1,600 only the page's two sends are due.
    let page = q.lease(1_600, 10, 100_000, &[]).await.unwrap();
    assert_eq!(page.iter().map(device_of).collect::<Vec<_>>(), ["d1", "d2"]);
    // A page that cannot be added (another app's job) changes nothing, cursor included.
    let mut bad = sends("b1", &["d3"]);
    bad.push(send("blog", "b1", Platform::Apns, "x", 0));
    assert!(q
        .expand(job.id, bad, Some("x".into()), 1_300, 500)
        .await
        .is_err());
    assert!(q.push_jobs(&shop, "b1").await.unwrap().expanding);
    let added = q.device_jobs(&shop, "b1", None, 100).await.unwrap();
    assert_eq!(added.len(), 2, "nothing of the refused page was added");
    // The process stops between two pages; the store is opened again on the same data.
    let b = b.reopen().await;
    let q = b.store();
    let resumed = q.lease(5_000, 10, 500, &[]).await.unwrap();
    assert_eq!(
        resumed.len(),
        1,
        "the page's sends are leased until 101,600"
    );
    let resumed = &resumed[0];
    assert_eq!(resumed.id, job.id);
    assert_eq!(
        resumed.job.kind,
        JobKind::Expand {
            after: Some("d2".into())
        }
    );
    assert_eq!(resumed.attempts, 2);
    // A page repeated (a worker that lost its lease mid-page) adds nothing twice.
    q.expand(resumed.id, sends("b1", &["d2", "d3"]), None, 5_100, 500)
        .await
        .unwrap();
    let devices: Vec<String> = q
        .device_jobs(&shop, "b1", None, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.device)
        .collect();
    assert_eq!(devices, ["d1", "d2", "d3"]);
    let stand = q.push_jobs(&shop, "b1").await.unwrap();
    assert!(!stand.expanding);
    assert_eq!(stand.queued, 3);
    assert!(
        q.expand(resumed.id, vec![], None, 5_200, 500)
            .await
            .is_err(),
        "a finished expansion takes no more pages"
    );
    q.close().await;
}
