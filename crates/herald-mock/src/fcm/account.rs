//! The service account tests use with the FCM mock: a fixed RSA key pair generated once with
//! `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048` and kept in `src/testdata/`.
//! A fixed key is fine here: it signs nothing but requests to this mock, and neither ring nor
//! rcgen can generate RSA keys (a fixed key spares a dependency on the `rsa` crate).

/// The test account's private key, PKCS#8 PEM.
pub const TEST_PRIVATE_KEY_PEM: &str = include_str!("../testdata/fcm_test_service_account_key.pem");
/// The test account's public key, SPKI PEM: what the mock verifies assertions with.
pub const TEST_PUBLIC_KEY_PEM: &str = include_str!("../testdata/fcm_test_service_account_pub.pem");
/// The test account's e-mail (the assertions' issuer).
pub const TEST_CLIENT_EMAIL: &str = "herald-test@herald-test.iam.gserviceaccount.com";
/// The test account's Firebase project.
pub const TEST_PROJECT_ID: &str = "herald-test";

/// A service-account JSON key file, shaped like the one Google gives, for the test account with
/// its `token_uri` pointing at the mock at `mock_url` (`https://127.0.0.1:PORT`).
pub fn test_account(mock_url: &str) -> String {
    serde_json::json!({
        "type": "service_account",
        "project_id": TEST_PROJECT_ID,
        "private_key_id": "0000000000000000000000000000000000000000",
        "private_key": TEST_PRIVATE_KEY_PEM,
        "client_email": TEST_CLIENT_EMAIL,
        "client_id": "100000000000000000000",
        "auth_uri": "https://accounts.google.com/o/oauth2/auth",
        "token_uri": format!("{}/token", mock_url.trim_end_matches('/')),
    })
    .to_string()
}
