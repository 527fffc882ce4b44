//! The process's allocator (jemalloc, whose settings are built in: .cargo/config.toml) and
//! what the main runtime does for it when its threads go quiet
//! ([`worker_goes_idle`], [`BLOCKING_THREAD_KEEP_ALIVE`]).
//!
//! jemalloc keeps a cache of freed objects in each thread, which only that thread's next
//! allocations empty: a thread that goes quiet keeps what it cached, and no purge reaches it.
//! After a wave of connections parks (each connection's task freed on a worker), the workers'
//! and the blocking pool's caches held what those tasks freed for as long as the server
//! stayed idle (docs/benchmarks/history.md, "Session 35" and "Session 36"). So a worker
//! about to park hands its cache back to the arenas (at most once a millisecond, so a burst
//! whose workers park between deliveries pays for it at most a thousand times a second), and
//! a blocking thread (the store's reads at every MQTT CONNECT) idle for two seconds exits,
//! which flushes its cache and gives back its stack's pages.

use std::time::Duration;

/// How long a thread of the main runtime's blocking pool waits for work before it exits
/// (tokio's default: 10 seconds). A storm of MQTT CONNECTs reads each session on the pool
/// and leaves a dozen or more threads, each with its cache and stack.
pub const BLOCKING_THREAD_KEEP_ALIVE: Duration = Duration::from_secs(2);

#[cfg(not(target_env = "msvc"))]
mod jemalloc {
    use std::cell::Cell;
    use std::sync::LazyLock;
    use std::time::{Duration, Instant};

    use tikv_jemalloc_ctl::{Access, AsName, Mib};

    /// The least time between two flushes of one worker's cache.
    const FLUSH_AT_MOST_EVERY: Duration = Duration::from_millis(1);

    /// `thread.tcache.enabled`, looked up once. Turning a thread's cache off flushes it
    /// (and frees it); turning it on again gives the thread a fresh, empty one. It is the
    /// safe interface's way to flush (`thread.tcache.flush` takes no value, which the safe
    /// interface cannot write).
    static TCACHE_ENABLED: LazyLock<Option<Mib<[usize; 3]>>> =
        LazyLock::new(|| b"thread.tcache.enabled\0".name().mib().ok());

    thread_local! {
        static LAST_FLUSH: Cell<Option<Instant>> = const { Cell::new(None) };
    }

    pub(super) fn flush_thread_cache() {
        let Some(mib) = TCACHE_ENABLED.as_ref() else {
            return;
        };
        let now = Instant::now();
        let due = LAST_FLUSH
            .get()
            .is_none_or(|last| now - last >= FLUSH_AT_MOST_EVERY);
        if !due {
            return;
        }
        LAST_FLUSH.set(Some(now));
        // A thread whose cache is off (an operator's `tcache:false`) is left as it is.
        if mib.read().unwrap_or(false) {
            let _ = mib.write(false);
            let _ = mib.write(true);
        }
    }
}

/// Called by each worker of the main runtime just before it parks: hands what its cache of
/// freed objects holds back to the allocator's arenas (see the module docs).
pub fn worker_goes_idle() {
    #[cfg(not(target_env = "msvc"))]
    jemalloc::flush_thread_cache();
}

#[cfg(all(test, not(target_env = "msvc")))]
mod tests {
    use tikv_jemalloc_ctl::{Access, AsName};

    fn cache_enabled() -> bool {
        b"thread.tcache.enabled\0"
            .name()
            .read()
            .expect("jemalloc's mallctl")
    }

    #[test]
    fn a_flush_leaves_the_threads_cache_on_and_an_operators_off() {
        // The test binary runs on jemalloc too (main.rs's global allocator).
        std::thread::spawn(|| {
            let freed: Vec<Box<[u8; 48]>> = (0..100).map(|_| Box::new([7; 48])).collect();
            drop(freed);
            assert!(cache_enabled(), "jemalloc's default");
            super::worker_goes_idle();
            assert!(cache_enabled(), "flushed, and on again");
            let again: Vec<Box<[u8; 48]>> = (0..100).map(|_| Box::new([8; 48])).collect();
            assert!(again.iter().all(|b| b[47] == 8));
            // A thread whose cache is off stays so (as with `_RJEM_MALLOC_CONF=tcache:false`).
            b"thread.tcache.enabled\0"
                .name()
                .write(false)
                .expect("jemalloc's mallctl");
            std::thread::sleep(std::time::Duration::from_millis(2));
            super::worker_goes_idle();
            assert!(!cache_enabled(), "left off");
        })
        .join()
        .expect("the test thread");
    }
}
