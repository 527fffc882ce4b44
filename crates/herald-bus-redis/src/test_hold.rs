//! A hold on the node's feeds task for the server's integration tests, in debug builds only:
//! while the file named by `HERALD_TEST_FEED_HOLD` exists, the node does not start following
//! an app's feed that its first filter asked for (no Redis subscribe, no member, no
//! announcement: [`crate::feeds`]), so a test can make another node's publish land in the
//! window a cluster has before a new filter hears every node (what a loaded machine does
//! now and then, made certain). Unset, it costs one load of a set-once value per app gained;
//! a release build has none of it.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable naming the hold's file.
const VARIABLE: &str = "HERALD_TEST_FEED_HOLD";

/// How often a held task looks whether the file is gone.
const POLL: Duration = Duration::from_millis(5);

/// Returns once the hold's file (if one is named) does not exist.
pub(crate) async fn wait() {
    static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
    let Some(file) = FILE.get_or_init(|| std::env::var_os(VARIABLE).map(PathBuf::from)) else {
        return;
    };
    while file.exists() {
        tokio::time::sleep(POLL).await;
    }
}
