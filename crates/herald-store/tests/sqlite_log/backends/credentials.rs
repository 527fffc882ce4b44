//! Provider credentials through `herald_push::credentials::CredentialStore`, on both backends:
//! stored as given (sealed bytes untouched), per app and provider, replaced, deleted, and gone
//! with their app.

use herald_core::tenancy::App;
use herald_core::tenant::AppId;
use herald_push::credentials::StoredCredentials;
use herald_push::device::Platform;

use super::Backend;

crate::on_both!(credentials_round_trip_per_app_and_provider_and_go_with_their_app);

fn creds(provider: Platform, sealed: &[u8], public: &str, updated_ms: i64) -> StoredCredentials {
    StoredCredentials {
        provider,
        sealed: sealed.to_vec(),
        public: public.into(),
        updated_ms,
    }
}

async fn credentials_round_trip_per_app_and_provider_and_go_with_their_app(b: Backend) {
    let store = b.store();
    let (shop, blog) = (AppId::parse("shop").unwrap(), AppId::parse("blog").unwrap());
    for app in [&shop, &blog] {
        store
            .create_app(&App {
                id: app.clone(),
                name: app.as_str().into(),
                token_secret: Some("t".repeat(32)),
                limits: Default::default(),
                created: 1,
            })
            .await
            .unwrap();
    }
    let apns = creds(Platform::Apns, &[0, 1, 255, 7], r#"{"key_id":"K1"}"#, 10);
    let vapid = creds(
        Platform::Webpush,
        b"sealed-vapid",
        r#"{"public_key":"BP"}"#,
        11,
    );
    store.put_credentials(&shop, apns.clone()).await.unwrap();
    store.put_credentials(&shop, vapid.clone()).await.unwrap();
    let blogs = creds(Platform::Apns, b"blog's", "{}", 12);
    store.put_credentials(&blog, blogs.clone()).await.unwrap();

    assert_eq!(
        store.credentials(&shop, Platform::Apns).await.unwrap(),
        Some(apns)
    );
    assert_eq!(store.credentials(&shop, Platform::Fcm).await.unwrap(), None);
    assert_eq!(
        store.all_credentials(&shop).await.unwrap(),
        vec![
            creds(Platform::Apns, &[0, 1, 255, 7], r#"{"key_id":"K1"}"#, 10),
            vapid.clone()
        ]
    );

    let rotated = creds(Platform::Apns, b"new key", r#"{"key_id":"K2"}"#, 20);
    store.put_credentials(&shop, rotated.clone()).await.unwrap();
    assert_eq!(
        store.credentials(&shop, Platform::Apns).await.unwrap(),
        Some(rotated)
    );
    assert_eq!(
        store.credentials(&blog, Platform::Apns).await.unwrap(),
        Some(blogs.clone()),
        "another app's credentials are its own"
    );

    assert!(store
        .delete_credentials(&shop, Platform::Webpush)
        .await
        .unwrap());
    assert!(!store
        .delete_credentials(&shop, Platform::Webpush)
        .await
        .unwrap());
    assert_eq!(store.all_credentials(&shop).await.unwrap().len(), 1);

    assert!(store.delete_app(&shop).await.unwrap());
    assert!(store.all_credentials(&shop).await.unwrap().is_empty());
    assert_eq!(store.all_credentials(&blog).await.unwrap(), vec![blogs]);
    store.close().await;
}
