//! At most one log line per key every period, counting the lines held back meanwhile: a
//! destination whose every job fails writes a line every few seconds, not one per job, and
//! the next line says how many were held back.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Keys remembered at most; past it, the windows long past are forgotten first.
const MOST_KEYS: usize = 4096;

/// When the last line of one key was written, and how many were held back since.
struct Window {
    written: Instant,
    held_back: u64,
}

/// Admits log lines per key (see the module documentation).
pub struct LineLimiter<K> {
    every: Duration,
    windows: Mutex<HashMap<K, Window>>,
}

impl<K: Eq + Hash> LineLimiter<K> {
    /// At most one line per key every `every`.
    pub fn new(every: Duration) -> Self {
        LineLimiter {
            every,
            windows: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a line for `key` may be written at `now`: `Some` with how many were held back
    /// since the last one, or `None` (this one is held back).
    pub fn admit(&self, key: K, now: Instant) -> Option<u64> {
        let mut windows = self.windows.lock();
        match windows.get_mut(&key) {
            Some(window) if now.duration_since(window.written) < self.every => {
                window.held_back += 1;
                None
            }
            Some(window) => {
                let held_back = std::mem::take(&mut window.held_back);
                window.written = now;
                Some(held_back)
            }
            None => {
                // Keys come and go (apps, endpoints): forget the windows long past first.
                if windows.len() >= MOST_KEYS {
                    windows.retain(|_, w| now.duration_since(w.written) < self.every);
                }
                windows.insert(
                    key,
                    Window {
                        written: now,
                        held_back: 0,
                    },
                );
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_key_every_period_counting_the_rest() {
        let every = Duration::from_secs(10);
        let lines = LineLimiter::new(every);
        let start = Instant::now();
        assert_eq!(lines.admit("a", start), Some(0));
        for _ in 0..3 {
            assert_eq!(lines.admit("a", start), None);
        }
        assert_eq!(lines.admit("b", start), Some(0));
        assert_eq!(lines.admit("a", start + every), Some(3));
        assert_eq!(lines.admit("a", start + every), None);
    }
}
