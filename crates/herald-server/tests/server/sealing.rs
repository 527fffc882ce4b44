//! App token secrets at rest: a secret an older Herald stored in plain text is sealed with the
//! server key when the server opens the store, and still verifies the tokens it signed.

use std::sync::Arc;

use herald_core::auth::hash_api_key;
use herald_core::log::{ChannelLog, CommitSink};
use herald_core::message::SharedMessage;
use herald_core::tenancy::{App, AppLimits, KeyInfo, Tenancy};
use herald_core::tenant::AppId;
use herald_store::{SqliteLog, SqliteOptions};
use serde_json::{json, Value};

use crate::support::{settings, start};

struct NoSink;

impl CommitSink for NoSink {
    fn committed(&self, _: &[SharedMessage]) {}
}

/// Whether any of the store's files holds `secret`.
fn stored_in_plain_text(data: &std::path::Path, secret: &str) -> bool {
    std::fs::read_dir(data).unwrap().any(|entry| {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        name.starts_with(herald_store::DB_FILE_NAME)
            && std::fs::read(&path)
                .unwrap()
                .windows(secret.len())
                .any(|w| w == secret.as_bytes())
    })
}

#[tokio::test]
async fn a_plain_text_token_secret_of_an_older_herald_is_sealed_when_the_server_opens_it() {
    const OLD_SECRET: &str = "hs_plain_text_secret_of_an_older_herald";
    const SHOP_KEY: &str = "hk_shop_publisher_key_0123456789";
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let shop = AppId::parse("shop").unwrap();
    {
        let log = SqliteLog::open(&data, SqliteOptions::default(), Arc::new(NoSink)).unwrap();
        let app = App {
            id: shop.clone(),
            name: "Shop".into(),
            token_secret: Some(OLD_SECRET.into()),
            limits: AppLimits::default(),
            created: 0,
        };
        assert!(log.create_app(&app).await.unwrap());
        let hash = hash_api_key(SHOP_KEY);
        let key = KeyInfo {
            app: shop.clone(),
            id: hash[..12].to_owned(),
            hash,
            label: String::new(),
            created: 0,
        };
        log.add_key(&key).await.unwrap();
        log.close().await;
    }
    assert!(stored_in_plain_text(&data, OLD_SECRET), "the older layout");

    let server = start(settings(&data)).await;
    let r = reqwest::Client::new()
        .post(format!("http://{}/v1/tokens", server.http_addr()))
        .bearer_auth(SHOP_KEY)
        .json(&json!({ "sub": "alice" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let minted: Value = r.json().await.unwrap();
    let token = minted["token"].as_str().unwrap();
    let verified = jsonwebtoken::decode::<Value>(
        token,
        &jsonwebtoken::DecodingKey::from_secret(OLD_SECRET.as_bytes()),
        &jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256),
    );
    assert!(verified.is_ok(), "the sealed secret is the same secret");
    server.shutdown().await.unwrap();
    assert!(!stored_in_plain_text(&data, OLD_SECRET), "sealed at start");
}
