//! Holds for the server's integration tests, in debug builds only: a hold is named by an
//! environment variable whose value is a file's path, and while that file exists the part of
//! the server that asks [`TestHold::is_held`] waits, so a test can make a race certain (the
//! fan-out thread holding a gather, `HERALD_TEST_FANOUT_HOLD`; a cluster node not starting an
//! app's feed, `HERALD_TEST_FEED_HOLD` in herald-bus-redis). Unset, a hold costs one load of
//! a set-once value each time it is asked; a release build has none of it.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// How often a held part looks whether the file is gone.
pub const POLL: Duration = Duration::from_millis(5);

/// One hold, by the environment variable naming its file.
pub struct TestHold {
    variable: &'static str,
    file: OnceLock<Option<PathBuf>>,
}

impl TestHold {
    /// The hold whose file `variable` names (read once, when first asked).
    pub const fn new(variable: &'static str) -> TestHold {
        TestHold {
            variable,
            file: OnceLock::new(),
        }
    }

    /// Whether the hold's file (if the variable names one) exists now.
    pub fn is_held(&self) -> bool {
        self.file
            .get_or_init(|| std::env::var_os(self.variable).map(PathBuf::from))
            .as_ref()
            .is_some_and(|file| file.exists())
    }

    /// Returns once the hold's file does not exist (blocking the thread).
    pub fn wait(&self) {
        while self.is_held() {
            std::thread::sleep(POLL);
        }
    }
}
