//! The buffer a wire encodes a batch into ([`super::Wire::encode`]), reused from one write to the
//! next: each thread keeps the last buffer it wrote whole, so a connection's write in the common
//! case (the socket takes everything at once) neither allocates nor frees a buffer, and encodes
//! into memory the thread touched a moment ago.
//!
//! Why: a burst's writers write each connection once per round over all of them, a buffer of a
//! few KiB each time. The allocator's thread caches keep objects of at most 1 KiB
//! (`tcache_max:1024`, `.cargo/config.toml`, for idle memory), so every such buffer went through
//! the arena's locked path twice per write. A buffer with more room than [`KEPT_AT_MOST`] (a
//! large catch-up batch) is freed as before, so a thread keeps at most that much.

use std::cell::Cell;

/// The most room a thread's kept buffer has; a larger one is freed after its write.
pub const KEPT_AT_MOST: usize = 32 * 1024;

thread_local! {
    /// This thread's spare buffer (empty, with no room, when it has none).
    static SPARE: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// An empty buffer with room for at least `capacity` bytes: this thread's spare one when it
/// has one (grown if it must be), else a new one. The driver gives it back once the socket
/// took all of it.
pub fn write_buffer(capacity: usize) -> Vec<u8> {
    let mut buf = SPARE.take();
    buf.clear();
    buf.reserve(capacity);
    buf
}

/// Keeps `buf`, written whole, as this thread's spare buffer, unless it has more room than
/// [`KEPT_AT_MOST`] or none at all.
pub(crate) fn recycle(buf: Vec<u8>) {
    if (1..=KEPT_AT_MOST).contains(&buf.capacity()) {
        SPARE.set(buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_written_whole_is_handed_out_again_on_its_thread() {
        let mut buf = write_buffer(2000);
        buf.extend_from_slice(b"frames");
        let (ptr, room) = (buf.as_ptr(), buf.capacity());
        recycle(buf);
        let again = write_buffer(100);
        assert!(again.is_empty(), "handed out empty");
        assert_eq!(again.as_ptr(), ptr, "the same allocation");
        assert_eq!(again.capacity(), room);
        // Taken: the next one is another buffer.
        let other = write_buffer(100);
        assert_ne!(other.as_ptr(), ptr);
        // Another thread has a spare of its own.
        recycle(again);
        let elsewhere = std::thread::spawn(|| write_buffer(10).capacity())
            .join()
            .unwrap();
        assert!(elsewhere < room);
    }

    #[test]
    fn a_large_buffer_is_not_kept() {
        let _ = write_buffer(0); // this thread's spare, if any, taken
        let large = Vec::<u8>::with_capacity(KEPT_AT_MOST + 1);
        recycle(large);
        assert_eq!(write_buffer(0).capacity(), 0, "freed, not kept");
        let grown = write_buffer(KEPT_AT_MOST * 2);
        assert!(grown.capacity() >= KEPT_AT_MOST * 2);
    }
}
