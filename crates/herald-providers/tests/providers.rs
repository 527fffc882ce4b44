//! Provider clients against the real mock providers (TLS, HTTP/2) from `herald-mock`: one test
//! program, a module per provider.

mod providers {
    pub mod apns;
    pub mod fcm;
    pub mod webpush;
}

/// Every test is bounded in time.
pub async fn bounded<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(std::time::Duration::from_secs(30), future)
        .await
        .expect("the test took over 30 s")
}
