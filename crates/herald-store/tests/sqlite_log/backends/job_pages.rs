//! A broadcast's pages sent directly, on both backends: the in-flight mark (moves forward only,
//! renews the lease, kept across a lapsed lease), and a page written once its sends answered
//! (rows in the state each send left, devices that already had a job left out, direct sends
//! counted without a row, a page for another push refused, the expansion finished).

use herald_core::tenant::AppId;
use herald_push::device::Platform;
use herald_push::jobs::{ExpandedPage, JobKind, NewJob, PageJob, PushJobs, Settlement};

use super::Backend;

crate::on_both!(
    an_in_flight_mark_only_moves_forward_and_survives_a_lapsed_lease,
    a_page_sent_directly_leaves_rows_and_counts_as_its_sends_ended,
);

fn app(id: &str) -> AppId {
    AppId::parse(id).unwrap()
}

fn send(push: &str, device: &str, due_ms: i64) -> NewJob {
    NewJob {
        app: app("shop"),
        push: push.into(),
        provider: Some(Platform::Apns),
        kind: JobKind::Send {
            device: device.into(),
        },
        seq: 3,
        due_ms,
    }
}

fn expansion(push: &str) -> NewJob {
    NewJob {
        app: app("shop"),
        push: push.into(),
        provider: None,
        kind: JobKind::Expand { after: None },
        seq: 3,
        due_ms: 0,
    }
}

fn row(device: &str, sent: Option<Settlement>, in_doubt: bool) -> PageJob {
    PageJob {
        job: send("b", device, 3_000),
        sent,
        in_doubt,
    }
}

async fn an_in_flight_mark_only_moves_forward_and_survives_a_lapsed_lease(b: Backend) {
    let q = b.store();
    q.enqueue(vec![expansion("b"), send("b", "d02", 10_000)])
        .await
        .unwrap();
    let job = q.lease(1_000, 10, 500, &[]).await.unwrap().remove(0);
    assert_eq!(job.in_flight_until, None);
    q.mark_in_flight(job.id, "d05", 1_100, 500).await.unwrap();
    q.mark_in_flight(job.id, "d03", 1_200, 500).await.unwrap();
    q.mark_in_flight(job.id, "", 1_300, 500).await.unwrap();
    assert!(
        q.lease(1_799, 10, 500, &[]).await.unwrap().is_empty(),
        "each mark renewed the lease, to 1,800 at last"
    );
    let again = q.lease(1_800, 10, 500, &[]).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, job.id);
    assert_eq!(again[0].in_flight_until.as_deref(), Some("d05"));
    assert_eq!(again[0].attempts, 2);
    // Byte order, as device ids sort: "d10" is after "d05", "D99" before it.
    q.mark_in_flight(job.id, "D99", 1_900, 500).await.unwrap();
    q.mark_in_flight(job.id, "d10", 1_900, 500).await.unwrap();
    let send_job = q.lease(10_000, 10, 500, &[]).await.unwrap();
    let send_job = send_job
        .iter()
        .find(|j| matches!(j.job.kind, JobKind::Send { .. }))
        .expect("the send is due at 10,000");
    assert!(
        q.mark_in_flight(send_job.id, "d99", 10_000, 500)
            .await
            .is_err(),
        "not an expansion"
    );
    assert!(q.mark_in_flight(999_999, "d99", 10_000, 500).await.is_err());
    let lapsed = q.lease(20_000, 10, 500, &[]).await.unwrap();
    let expand = lapsed.iter().find(|j| j.id == job.id).unwrap();
    assert_eq!(expand.in_flight_until.as_deref(), Some("d10"));
    q.expand_page(job.id, ExpandedPage::default(), None, 20_100, 500)
        .await
        .unwrap();
    assert!(
        q.mark_in_flight(job.id, "d99", 20_200, 500).await.is_err(),
        "finished"
    );
    q.close().await;
}

async fn a_page_sent_directly_leaves_rows_and_counts_as_its_sends_ended(b: Backend) {
    let q = b.store();
    let shop = app("shop");
    q.enqueue(vec![expansion("b"), send("b", "d02", 10_000)])
        .await
        .unwrap();
    let job = q.lease(1_000, 10, 500, &[]).await.unwrap().remove(0);
    q.mark_in_flight(job.id, "d06", 1_100, 500).await.unwrap();
    let dead = Settlement::Dead {
        reason: "rejected:BadDeviceToken".into(),
    };
    let retry = Settlement::Retry {
        due_ms: 5_000,
        reason: "status 503".into(),
    };
    let unregistered = Settlement::Done {
        result: "unregistered:Unregistered".into(),
    };
    let accepted = Settlement::Done {
        result: "accepted".into(),
    };
    let page = ExpandedPage {
        jobs: vec![
            row("d02", Some(accepted), false),
            row("d03", Some(retry), true),
            row("d04", Some(dead), false),
            row("d05", None, false),
            row("d06", Some(unregistered), false),
        ],
        counted: vec![("accepted".into(), 3)],
    };
    q.expand_page(job.id, page, Some("d06".into()), 1_200, 500)
        .await
        .unwrap();
    let expected = PushJobs {
        done: vec![
            ("accepted".into(), 3),
            ("unregistered:Unregistered".into(), 1),
        ],
        queued: 3,
        dead: 1,
        in_doubt: 1,
        expanding: true,
    };
    assert_eq!(q.push_jobs(&shop, "b").await.unwrap(), expected);
    let devices = q.device_jobs(&shop, "b", None, 10).await.unwrap();
    let got: Vec<_> = devices
        .iter()
        .map(|d| {
            (
                d.device.as_str(),
                d.state.as_str(),
                d.result.as_deref(),
                d.attempts,
                d.in_doubt,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("d02", "queued", None, 0, false),
            ("d03", "queued", Some("status 503"), 1, true),
            ("d04", "dead", Some("rejected:BadDeviceToken"), 1, false),
            ("d05", "queued", None, 0, false),
            ("d06", "done", Some("unregistered:Unregistered"), 1, false),
        ],
        "d02 had a job already: the page's row for it was left out"
    );
    // A page holding a row of another push changes nothing.
    let mut stray = row("d07", None, false);
    stray.job.push = "other".into();
    let refused = ExpandedPage {
        jobs: vec![row("d08", None, false), stray],
        counted: vec![("accepted".into(), 1)],
    };
    assert!(q
        .expand_page(job.id, refused, Some("d08".into()), 1_300, 500)
        .await
        .is_err());
    assert_eq!(q.push_jobs(&shop, "b").await.unwrap(), expected);
    // The retried row and the untried one come due at their times; the expansion resumes.
    let due: Vec<_> = q.lease(3_000, 10, 500, &[]).await.unwrap();
    let mut due: Vec<_> = due
        .iter()
        .map(|j| match &j.job.kind {
            JobKind::Send { device } => device.clone(),
            JobKind::Expand { after } => format!("expand after {after:?}"),
        })
        .collect();
    due.sort();
    assert_eq!(due, ["d05", "expand after Some(\"d06\")"]);
    let last = ExpandedPage {
        jobs: Vec::new(),
        counted: vec![("accepted".into(), 2)],
    };
    q.expand_page(job.id, last, None, 3_100, 500).await.unwrap();
    let stand = q.push_jobs(&shop, "b").await.unwrap();
    assert!(!stand.expanding);
    assert_eq!(stand.done[0], ("accepted".to_string(), 5));
    assert!(
        q.expand_page(job.id, ExpandedPage::default(), None, 3_200, 500)
            .await
            .is_err(),
        "a finished expansion takes no more pages"
    );
    q.close().await;
}
