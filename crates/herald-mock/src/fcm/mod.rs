//! A mock of Firebase Cloud Messaging HTTP v1 over TLS and HTTP/2, on one port: Google's OAuth2
//! token endpoint (`POST /token`, checking the service account's RS256 assertion) and
//! `POST /v1/projects/{p}/messages:send` (checking the bearer token it issued and the message's
//! shape), with scripted failures per registration token.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use herald_mock::fcm::{test_account, FcmMock, FcmMockOptions, Scripted};
//! let mock = FcmMock::start(FcmMockOptions::default()).await?;
//! let account_json = test_account(&mock.url()); // hand to herald_providers::fcm
//! mock.script("gone-token", Scripted::once(404, "UNREGISTERED"));
//! # Ok(()) }
//! ```

mod account;
mod handler;
mod state;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::DecodingKey;

pub use account::{
    test_account, TEST_CLIENT_EMAIL, TEST_PRIVATE_KEY_PEM, TEST_PROJECT_ID, TEST_PUBLIC_KEY_PEM,
};
pub use state::{ReceivedMessage, Scripted};

use crate::server::{serve, Handler, Reply, RunningServer, ServerOptions};
use handler::Accounts;
use state::State;

/// How the FCM mock behaves.
#[derive(Debug, Clone)]
pub struct FcmMockOptions {
    /// Where to listen (default `127.0.0.1:0`).
    pub bind: SocketAddr,
    /// The project `messages:send` accepts (default [`TEST_PROJECT_ID`]).
    pub project_id: String,
    /// Service accounts whose assertions the token endpoint accepts: client e-mail and RSA
    /// public key (SPKI PEM). Default: the test account.
    pub accounts: Vec<(String, String)>,
    /// The `expires_in` the token endpoint announces, seconds (default 3600). Set it low to
    /// make clients refresh early.
    pub expires_in: u64,
    /// How long an issued token is really accepted (default one hour).
    pub token_lifetime: Duration,
    /// How many accepted messages [`FcmMock::received`] keeps (the oldest go first).
    pub keep_received: usize,
    /// Accept-loop settings.
    pub server: ServerOptions,
}

impl Default for FcmMockOptions {
    fn default() -> Self {
        FcmMockOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            project_id: TEST_PROJECT_ID.to_string(),
            accounts: vec![(
                TEST_CLIENT_EMAIL.to_string(),
                TEST_PUBLIC_KEY_PEM.to_string(),
            )],
            expires_in: 3600,
            token_lifetime: Duration::from_secs(3600),
            keep_received: 1000,
            server: ServerOptions::default(),
        }
    }
}

/// A running FCM mock.
pub struct FcmMock {
    server: RunningServer,
    /// The mock's self-signed certificate, PEM: the client's extra CA.
    pub cert_pem: String,
    state: Arc<State>,
}

impl std::fmt::Debug for FcmMock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FcmMock({})", self.url())
    }
}

impl FcmMock {
    /// Starts the mock.
    pub async fn start(options: FcmMockOptions) -> std::io::Result<FcmMock> {
        let invalid = |e: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, e);
        let mut keys = Vec::new();
        for (email, pem) in &options.accounts {
            let key = DecodingKey::from_rsa_pem(pem.as_bytes())
                .map_err(|e| invalid(format!("public key of {email}: {e}")))?;
            keys.push((email.clone(), key));
        }
        let accounts = Arc::new(Accounts(keys));
        let tls = crate::tls::self_signed(&[]).map_err(|e| invalid(e.to_string()))?;
        let listener = tokio::net::TcpListener::bind(options.bind).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::new(
            options.project_id.clone(),
            format!("{}/token", url_of(addr)),
            options.expires_in,
            options.token_lifetime,
            options.keep_received.max(1),
        ));
        let handler_state = state.clone();
        let handler: Handler = Arc::new(move |request, body| {
            Reply::Now(handler::handle(&handler_state, &accounts, &request, &body))
        });
        let server = serve(listener, &tls, options.server, handler)?;
        Ok(FcmMock {
            server,
            cert_pem: tls.cert_pem,
            state,
        })
    }

    /// `https://127.0.0.1:PORT`: the FCM endpoint to configure (the token URI is
    /// `{url}/token`).
    pub fn url(&self) -> String {
        url_of(self.server.addr)
    }

    /// Answers sends to `token` with `answer` instead of accepting them.
    pub fn script(&self, token: &str, answer: Scripted) {
        self.state.script(token, answer);
    }

    /// Forgets every access token issued so far: the next send with one gets a 401.
    pub fn revoke_tokens(&self) {
        self.state.revoke_all();
    }

    /// Requests the token endpoint received.
    pub fn token_requests(&self) -> u64 {
        self.state.token_requests.load(Ordering::Relaxed)
    }

    /// Messages accepted.
    pub fn accepted(&self) -> u64 {
        self.state.accepted.load(Ordering::Relaxed)
    }

    /// Sends refused for a missing, unknown or expired access token.
    pub fn unauthenticated(&self) -> u64 {
        self.state.unauthenticated.load(Ordering::Relaxed)
    }

    /// The last accepted messages, oldest first.
    pub fn received(&self) -> Vec<ReceivedMessage> {
        self.state.received()
    }

    /// Stops the mock.
    pub fn stop(self) {
        self.server.stop();
    }
}

fn url_of(addr: SocketAddr) -> String {
    format!("https://{addr}")
}
