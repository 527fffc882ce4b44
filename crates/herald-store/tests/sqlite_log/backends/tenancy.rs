//! Apps, usage and token revocations through `herald_core::tenancy::Tenancy`, on both backends:
//! an app read by id and gone once deleted, usage added as increments with the peak the largest,
//! revocations kept across a reopen with the expired ones forgotten.

use herald_core::revoked::{now_secs, RevokedKind, TokenRevocation};
use herald_core::tenancy::{App, AppLimits, Usage};
use herald_core::tenant::AppId;

use super::Backend;

crate::on_both!(
    one_app_is_read_by_id_and_a_deleted_one_is_gone,
    usage_increments_add_and_the_peak_is_the_largest,
    revocations_survive_a_reopen_and_expired_ones_are_forgotten,
);

async fn one_app_is_read_by_id_and_a_deleted_one_is_gone(b: Backend) {
    let log = b.store();
    let shop = AppId::parse("shop").unwrap();
    let app = App {
        id: shop.clone(),
        name: "Shop".into(),
        token_secret: Some("s".repeat(32)),
        limits: AppLimits {
            max_devices: Some(7),
            ..AppLimits::default()
        },
        created: 123,
    };
    assert!(log.create_app(&app).await.unwrap());
    let read = log.app(&shop).await.unwrap().expect("stored");
    assert_eq!(
        (read.name.as_str(), read.created, read.limits.max_devices),
        ("Shop", 123, Some(7))
    );
    assert_eq!(read.token_secret, app.token_secret);
    let other = AppId::parse("other").unwrap();
    assert!(log.app(&other).await.unwrap().is_none());
    assert!(log.delete_app(&shop).await.unwrap());
    assert!(log.app(&shop).await.unwrap().is_none(), "deleted");
    log.close().await;
}

async fn usage_increments_add_and_the_peak_is_the_largest(b: Backend) {
    let log = b.store();
    let app = AppId::parse("shop").unwrap();
    let counted = |published, deliveries, acks, peak_connections| Usage {
        published,
        deliveries,
        acks,
        peak_connections,
    };
    log.add_usage(&app, counted(5, 7, 1, 4)).await.unwrap();
    log.add_usage(&app, counted(3, 2, 0, 2)).await.unwrap();
    assert_eq!(log.usage(&app).await.unwrap(), counted(8, 9, 1, 4));
    log.add_usage(&app, counted(0, 0, 2, 6)).await.unwrap();
    assert_eq!(log.usage(&app).await.unwrap(), counted(8, 9, 3, 6));
    log.close().await;
}

async fn revocations_survive_a_reopen_and_expired_ones_are_forgotten(b: Backend) {
    let shop = AppId::parse("shop").unwrap();
    let now = now_secs();
    let jti = |jti: &str, expires| TokenRevocation {
        app: shop.clone(),
        kind: RevokedKind::Jti {
            jti: jti.into(),
            expires,
        },
    };
    let before = |t| TokenRevocation {
        app: shop.clone(),
        kind: RevokedKind::IssuedBefore(t),
    };
    let log = b.store();
    log.revoke_tokens(&jti("gone", now - 1)).await.unwrap();
    log.revoke_tokens(&jti("t-1", now + 60)).await.unwrap();
    log.revoke_tokens(&jti("t-1", now + 30)).await.unwrap();
    log.revoke_tokens(&before(now)).await.unwrap();
    log.revoke_tokens(&before(now - 100)).await.unwrap();
    let b = b.reopen().await;
    let log = b.store();
    assert_eq!(
        log.token_revocations().await.unwrap(),
        vec![before(now), jti("t-1", now + 60)],
        "the later expiry and the later time are kept; the expired one is gone"
    );
    log.delete_app(&shop).await.unwrap();
    assert!(log.token_revocations().await.unwrap().is_empty());
    log.close().await;
}
