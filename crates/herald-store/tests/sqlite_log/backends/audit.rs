//! The audit log through `herald_core::audit::AuditLog`: entries page newest first, filter by
//! app, action and time, and are pruned past the retention (on a write and on demand).

use herald_core::audit::{Actor, AuditEntry, AuditQuery};
use herald_core::tenant::AppId;

use super::Backend;

crate::on_both!(entries_page_newest_first_filter_and_prune);

fn entry_at(time: i64, app: &str, action: &str) -> AuditEntry {
    AuditEntry {
        id: 0,
        time,
        actor: Actor {
            role: "admin".into(),
            key_id: None,
            via: "bearer".into(),
        },
        source: Some("127.0.0.1:1".into()),
        user_agent: None,
        action: action.into(),
        app: Some(AppId::parse(app).unwrap()),
        target: None,
        details: serde_json::json!({}),
        result: "ok".into(),
    }
}

async fn entries_page_newest_first_filter_and_prune(b: Backend) {
    let log = b.store();
    for (t, app, action) in [
        (10, "a", "x"),
        (20, "b", "x"),
        (30, "a", "y"),
        (40, "a", "x"),
    ] {
        log.record_audit(&entry_at(t, app, action), 0)
            .await
            .unwrap();
    }
    let all = |q: AuditQuery| async move { log.audit_entries(&q).await.unwrap() };
    let times = |v: Vec<AuditEntry>| v.iter().map(|e| e.time).collect::<Vec<_>>();
    let q = AuditQuery {
        limit: 2,
        ..AuditQuery::default()
    };
    let first = all(q.clone()).await;
    assert_eq!(times(first.clone()), vec![40, 30]);
    let next = all(AuditQuery {
        before_id: Some(first[1].id),
        ..q.clone()
    })
    .await;
    assert_eq!(times(next), vec![20, 10]);
    let filtered = all(AuditQuery {
        app: Some(AppId::parse("a").unwrap()),
        action: Some("x".into()),
        since: Some(10),
        until: Some(40),
        limit: 10,
        ..AuditQuery::default()
    })
    .await;
    assert_eq!(times(filtered), vec![10]);
    assert_eq!(log.prune_audit(25).await.unwrap(), 2);
    log.record_audit(&entry_at(50, "a", "x"), 35).await.unwrap();
    assert_eq!(
        times(
            all(AuditQuery {
                limit: 10,
                ..AuditQuery::default()
            })
            .await
        ),
        vec![50, 40]
    );
    log.close().await;
}
