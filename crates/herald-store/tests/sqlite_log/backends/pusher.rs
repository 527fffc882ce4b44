//! Pusher credentials through `herald_pusher::PusherCredentialStore`, on both backends: one
//! set per app, found by app, key and Pusher app id, the sealed bytes untouched; the app id
//! and the key each unique across apps (a create that runs into either says which); the secret
//! replaced with and without a previous one; deleted, and gone with their app; kept across a
//! reopen.

use herald_core::tenancy::App;
use herald_core::tenant::AppId;
use herald_pusher::credentials::store::CreatePusherError;
use herald_pusher::credentials::StoredPusherCredentials;

use super::Backend;

crate::on_both!(
    pusher_credentials_are_one_set_per_app_with_unique_ids_and_keys,
    pusher_credentials_rotate_and_go_with_their_app
);

fn set(app: &AppId, app_id: &str, key: &str, secret: &[u8]) -> StoredPusherCredentials {
    StoredPusherCredentials {
        app: app.clone(),
        app_id: app_id.into(),
        key: key.into(),
        secret: secret.to_vec(),
        previous_secret: None,
        created_ms: 1_700_000_000_123,
    }
}

async fn pusher_credentials_are_one_set_per_app_with_unique_ids_and_keys(b: Backend) {
    let pusher = b.pusher();
    let (shop, blog) = (AppId::parse("shop").unwrap(), AppId::parse("blog").unwrap());
    let shops = set(&shop, "1234567", "278d425bdf160c739803", &[0, 1, 255, 7]);
    pusher
        .create_pusher_credentials(shops.clone())
        .await
        .unwrap();
    assert_eq!(
        pusher.pusher_credentials(&shop).await.unwrap(),
        Some(shops.clone())
    );
    assert_eq!(
        pusher
            .pusher_credentials_by_key("278d425bdf160c739803")
            .await
            .unwrap(),
        Some(shops.clone())
    );
    assert_eq!(
        pusher
            .pusher_credentials_by_app_id("1234567")
            .await
            .unwrap(),
        Some(shops.clone())
    );
    assert_eq!(pusher.pusher_credentials(&blog).await.unwrap(), None);
    assert_eq!(
        pusher.pusher_credentials_by_key("1234567").await.unwrap(),
        None
    );
    // Case matters: keys and ids are compared as bytes.
    assert_eq!(
        pusher
            .pusher_credentials_by_key("278D425BDF160C739803")
            .await
            .unwrap(),
        None
    );

    let again = pusher
        .create_pusher_credentials(set(&shop, "other", "other-key", b"s"))
        .await
        .unwrap_err();
    assert!(
        matches!(again, CreatePusherError::AppHasCredentials),
        "{again:?}"
    );
    let same_id = pusher
        .create_pusher_credentials(set(&blog, "1234567", "blog-key", b"s"))
        .await
        .unwrap_err();
    assert!(
        matches!(same_id, CreatePusherError::AppIdTaken),
        "{same_id:?}"
    );
    let same_key = pusher
        .create_pusher_credentials(set(&blog, "app-id", "278d425bdf160c739803", b"s"))
        .await
        .unwrap_err();
    assert!(
        matches!(same_key, CreatePusherError::KeyTaken),
        "{same_key:?}"
    );
    assert_eq!(pusher.pusher_credentials(&blog).await.unwrap(), None);

    // Values another server made (soketi's defaults) are kept as they are.
    let blogs = set(&blog, "app-id", "app-key", b"sealed");
    pusher
        .create_pusher_credentials(blogs.clone())
        .await
        .unwrap();
    assert_eq!(
        pusher.pusher_credentials_by_app_id("app-id").await.unwrap(),
        Some(blogs)
    );

    let b = b.reopen().await;
    assert_eq!(
        b.pusher().pusher_credentials(&shop).await.unwrap(),
        Some(shops)
    );
}

async fn pusher_credentials_rotate_and_go_with_their_app(b: Backend) {
    let shop = AppId::parse("shop").unwrap();
    b.store()
        .create_app(&App {
            id: shop.clone(),
            name: "shop".into(),
            token_secret: Some("t".repeat(32)),
            limits: Default::default(),
            created: 1,
        })
        .await
        .unwrap();
    let pusher = b.pusher();
    pusher
        .create_pusher_credentials(set(&shop, "42", "k", b"first"))
        .await
        .unwrap();
    assert!(pusher
        .replace_pusher_secret(&shop, b"second".to_vec(), Some((b"first".to_vec(), 5_000)))
        .await
        .unwrap());
    let rotated = pusher
        .pusher_credentials_by_key("k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rotated.secret, b"second");
    assert_eq!(rotated.previous_secret, Some((b"first".to_vec(), 5_000)));
    assert!(pusher
        .replace_pusher_secret(&shop, b"third".to_vec(), None)
        .await
        .unwrap());
    let rotated = pusher.pusher_credentials(&shop).await.unwrap().unwrap();
    assert_eq!(
        (rotated.secret, rotated.previous_secret),
        (b"third".to_vec(), None)
    );
    let nobody = AppId::parse("nobody").unwrap();
    assert!(!pusher
        .replace_pusher_secret(&nobody, b"x".to_vec(), None)
        .await
        .unwrap());

    assert!(pusher.delete_pusher_credentials(&shop).await.unwrap());
    assert!(!pusher.delete_pusher_credentials(&shop).await.unwrap());
    assert_eq!(
        pusher.pusher_credentials_by_app_id("42").await.unwrap(),
        None
    );

    // Deleting the app deletes its set, and frees its app id and key.
    pusher
        .create_pusher_credentials(set(&shop, "42", "k", b"again"))
        .await
        .unwrap();
    assert!(b.store().delete_app(&shop).await.unwrap());
    assert_eq!(pusher.pusher_credentials_by_key("k").await.unwrap(), None);
    let blog = AppId::parse("blog").unwrap();
    pusher
        .create_pusher_credentials(set(&blog, "42", "k", b"blog's"))
        .await
        .unwrap();
}
