//! Which channels have a log in this database, kept in memory so that a subscribe to a channel
//! that never had a message (a subscribe storm to new channels, every user its own subjects)
//! is answered without a read: no hand-off to the blocking pool, no SQLite lock.
//!
//! [`KnownChannels`] is a Bloom filter of the names in the `channels` table: it may say a
//! channel has a log when it has none (then the store reads, as it always did), but never the
//! reverse. A `channels` row exists once a channel's first message was appended, and only the
//! writer thread creates rows; it adds the name here before the transaction that creates the
//! row commits, so before the commit sink hands the message to the hub. A subscriber registers
//! with the hub before it asks, so a "no log" answer it gets is either true of the committed
//! database or about a message the hub will still deliver to it.
//!
//! That holds because one process writes a SQLite database: the writer's seq cache assumes it
//! too, and the server takes the data directory's lock (`herald-server`'s `data_dir.rs`). The
//! PostgreSQL store, which other nodes write, has no such set and keeps reading.
//!
//! At open the names already stored are added by a background thread; until it has finished,
//! every channel may have a log. The filter grows by layers, each holding twice the channels of
//! the last, at 16 bits per channel it can hold (10 rounded up to a power of two) and 7 probes:
//! under 1 % false "may have", 2–4 bytes per stored channel (about 34 MB for 10 million).

use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use herald_core::name::ChannelName;
use parking_lot::RwLock;

use crate::sqlite::{backend, schema};

/// Channels the first layer holds at its fill.
const FIRST_LAYER_CHANNELS: usize = 1 << 16;
/// Bits per channel at a layer's fill, before rounding the layer up to a power of two.
const BITS_PER_CHANNEL: usize = 10;
/// Bits set (and tested) per channel.
const PROBES: u64 = 7;
/// Names added per write-lock hold while loading the stored ones.
const LOAD_CHUNK: usize = 4096;

/// One Bloom filter of a fixed size; full at `capacity` channels.
struct Layer {
    bits: Vec<u64>,
    /// Number of bits - 1 (a power of two - 1).
    mask: u64,
    capacity: usize,
    count: usize,
}

impl Layer {
    fn new(capacity: usize) -> Self {
        let nbits = (capacity * BITS_PER_CHANNEL).next_power_of_two().max(64);
        Layer {
            bits: vec![0; nbits / 64],
            mask: nbits as u64 - 1,
            capacity,
            count: 0,
        }
    }

    /// The (word, bit) pairs of `hash` in a layer of `mask + 1` bits (double hashing).
    fn probes(mask: u64, hash: u64) -> impl Iterator<Item = (usize, u64)> {
        let step = hash.rotate_left(32) | 1;
        (0..PROBES).map(move |i| {
            let bit = hash.wrapping_add(i.wrapping_mul(step)) & mask;
            ((bit / 64) as usize, 1u64 << (bit % 64))
        })
    }

    fn contains(&self, hash: u64) -> bool {
        Self::probes(self.mask, hash).all(|(word, bit)| self.bits[word] & bit != 0)
    }

    fn insert(&mut self, hash: u64) {
        for (word, bit) in Self::probes(self.mask, hash) {
            self.bits[word] |= bit;
        }
        self.count += 1;
    }
}

/// The channels that may have a log (see the module docs).
pub(crate) struct KnownChannels {
    hasher: RandomState,
    layers: RwLock<Vec<Layer>>,
    /// Set once the names stored at open are all in; until then every channel may have a log.
    loaded: AtomicBool,
    /// The same, for those who wait for it (tests).
    loaded_signal: tokio::sync::watch::Sender<bool>,
}

impl Default for KnownChannels {
    fn default() -> Self {
        KnownChannels {
            hasher: RandomState::new(),
            layers: RwLock::new(vec![Layer::new(FIRST_LAYER_CHANNELS)]),
            loaded: AtomicBool::new(false),
            loaded_signal: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl KnownChannels {
    /// An empty set that answers "may have a log" until [`KnownChannels::load`] has run.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(KnownChannels::default())
    }

    /// False only if `channel` certainly has no log (no `channels` row) in this database.
    pub(crate) fn may_have_log(&self, channel: &ChannelName) -> bool {
        if !self.loaded.load(Ordering::Acquire) {
            return true;
        }
        let hash = self.hasher.hash_one(channel.as_str());
        self.layers.read().iter().any(|layer| layer.contains(hash))
    }

    /// Adds a channel whose row the writer is creating.
    pub(crate) fn add(&self, channel: &ChannelName) {
        self.add_all(std::iter::once(channel.as_str()));
    }

    fn add_all<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        let mut layers = self.layers.write();
        for name in names {
            let hash = self.hasher.hash_one(name);
            let last = layers.last_mut().filter(|l| l.count < l.capacity);
            match last {
                Some(layer) => layer.insert(hash),
                None => {
                    let capacity = layers
                        .last()
                        .map_or(FIRST_LAYER_CHANNELS, |l| l.capacity * 2);
                    let mut layer = Layer::new(capacity);
                    layer.insert(hash);
                    layers.push(layer);
                }
            }
        }
    }

    /// Adds every channel stored in the database at `path`, then starts answering.
    pub(crate) fn load(&self, path: &Path) -> Result<usize, herald_core::log::StoreError> {
        let conn = schema::open_reader(path)?;
        let mut stmt = conn.prepare("SELECT name FROM channels").map_err(backend)?;
        let mut rows = stmt.query([]).map_err(backend)?;
        let mut chunk: Vec<String> = Vec::with_capacity(LOAD_CHUNK);
        let mut total = 0;
        while let Some(row) = rows.next().map_err(backend)? {
            chunk.push(row.get(0).map_err(backend)?);
            if chunk.len() == LOAD_CHUNK {
                total += chunk.len();
                self.add_all(chunk.iter().map(String::as_str));
                chunk.clear();
            }
        }
        total += chunk.len();
        self.add_all(chunk.iter().map(String::as_str));
        self.loaded.store(true, Ordering::Release);
        self.loaded_signal.send_replace(true);
        Ok(total)
    }

    /// Returns once the names stored at open are all in (never, if loading them failed).
    pub(crate) async fn wait_loaded(&self) {
        let mut loaded = self.loaded_signal.subscribe();
        let _ = loaded.wait_for(|done| *done).await;
    }

    /// Loads the stored channels on a thread of its own (see [`KnownChannels::load`]); on a
    /// failure the set keeps answering "may have a log", which only costs reads.
    pub(crate) fn load_in_background(self: &Arc<Self>, path: &Path) {
        let known = self.clone();
        let path = path.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("herald-store-known".into())
            .spawn(move || match known.load(&path) {
                Ok(n) => tracing::debug!(channels = n, "known channels loaded"),
                Err(e) => tracing::warn!(
                    error = %e,
                    "cannot load the stored channel names; every subscribe reads the store"
                ),
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start loading the stored channel names");
        }
    }

    #[cfg(test)]
    fn loaded_empty() -> Self {
        let known = KnownChannels::default();
        known.loaded.store(true, Ordering::Release);
        known
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> ChannelName {
        ChannelName::parse(s).unwrap()
    }

    #[test]
    fn unloaded_says_maybe_to_everything() {
        let known = KnownChannels::default();
        assert!(known.may_have_log(&name("never")));
    }

    #[test]
    fn every_added_channel_may_have_a_log_across_growth() {
        let known = KnownChannels::loaded_empty();
        let n = FIRST_LAYER_CHANNELS * 3 + 17;
        let names: Vec<String> = (0..n).map(|i| format!("c/{i}")).collect();
        for (i, n) in names.iter().enumerate() {
            if i % 2 == 0 {
                known.add(&name(n));
            }
        }
        known.add_all(names.iter().skip(1).step_by(2).map(String::as_str));
        assert!(known.layers.read().len() >= 2, "the filter grew");
        assert!(names.iter().all(|n| known.may_have_log(&name(n))));
        let strangers = (0..10_000)
            .filter(|i| known.may_have_log(&name(&format!("other/{i}"))))
            .count();
        assert!(strangers < 500, "{strangers} of 10,000 false positives");
    }
}
