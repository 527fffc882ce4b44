//! A hold on the fan-out thread for the server's integration tests, in debug builds only:
//! while the file named by `HERALD_TEST_FANOUT_HOLD` exists, the thread does not deliver the
//! commits it gathered, so a test can make a publish answered before a SUBSCRIBE reach the
//! hub after it (what a burst does now and then, made certain). Unset, it costs one load of a
//! set-once value per gather; a release build has none of it.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable naming the hold's file.
const VARIABLE: &str = "HERALD_TEST_FANOUT_HOLD";

/// How often a held thread looks whether the file is gone.
const POLL: Duration = Duration::from_millis(5);

/// Returns once the hold's file (if one is named) does not exist.
pub(super) fn wait() {
    static FILE: OnceLock<Option<PathBuf>> = OnceLock::new();
    let Some(file) = FILE.get_or_init(|| std::env::var_os(VARIABLE).map(PathBuf::from)) else {
        return;
    };
    while file.exists() {
        std::thread::sleep(POLL);
    }
}
