//! Tails: the events this node queues for an app's endpoints, shown live as the writer queues
//! them (`GET /v1/apps/{id}/hooks/tail`, `herald hooks tail`).
//!
//! [`Tails`] holds a [`tokio::sync::broadcast`] channel per app that someone tails. The writer
//! hands it each batch once the store has queued it (`Tails::wanted` before, `Tails::send`
//! after), so a tail shows only events some endpoint of the app wants, in the order they were
//! queued, and nothing when the store failed (nor a `user.online` that only withdraws an
//! endpoint's held offline, [`Hold::Withdraw`]: it is queued for no endpoint). Nothing is copied while no tail is open (one
//! atomic load per batch).
//!
//! It is this node's events only: in a cluster each node queues the events of the connections
//! it holds (and the transitions it saw first), so a whole app's view is every node's tail.
//!
//! A tail that reads more slowly than events come misses the oldest ones past
//! [`TAIL_BUFFER`]: its next read says how many ([`TailItem::Lagged`]), and it goes on with
//! the newest. At most [`MAX_TAILS`] tails are open on a node at once; past that
//! [`Tails::open`] refuses ([`TooManyTails`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use herald_core::tenant::AppId;
use parking_lot::Mutex;
use tokio::sync::broadcast;

use crate::event::HookEvent;
use crate::store::{Enqueue, Hold};

/// Most tails open on one node at once.
pub const MAX_TAILS: usize = 16;

/// Events a tail may fall behind by before it misses the oldest.
pub const TAIL_BUFFER: usize = 1024;

/// A tail was refused: the node already has [`MAX_TAILS`] open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "this node already has {max} webhook tails open, the most it serves at once; stop one and \
     try again"
)]
pub struct TooManyTails {
    /// The most a node serves at once.
    pub max: usize,
}

/// The tails open on this node, by app (see the [module documentation](self)).
pub struct Tails {
    apps: Mutex<HashMap<AppId, broadcast::Sender<Arc<HookEvent>>>>,
    open: AtomicUsize,
    max: usize,
}

impl Default for Tails {
    fn default() -> Self {
        Tails::new(MAX_TAILS)
    }
}

impl Tails {
    /// No tails yet; at most `max` open at once.
    pub fn new(max: usize) -> Tails {
        Tails {
            apps: Mutex::new(HashMap::new()),
            open: AtomicUsize::new(0),
            max,
        }
    }

    /// How many tails are open.
    pub fn open_count(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Opens a tail of `app`'s events: it gets each event queued from now on.
    pub fn open(self: &Arc<Self>, app: &AppId) -> Result<Tail, TooManyTails> {
        let max = self.max;
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < max).then_some(open + 1)
            })
            .map_err(|_| TooManyTails { max })?;
        let receiver = self
            .apps
            .lock()
            .entry(app.clone())
            .or_insert_with(|| broadcast::channel(TAIL_BUFFER).0)
            .subscribe();
        Ok(Tail {
            receiver,
            slot: Slot {
                tails: self.clone(),
                app: app.clone(),
            },
        })
    }

    /// The events of `events` that some row of `rows` queues (the writer's rows, in event
    /// order) and whose app is tailed: what [`Tails::send`] gets once they are queued. Empty,
    /// at once, when no tail is open.
    pub(crate) fn wanted(&self, events: &[HookEvent], rows: &[Enqueue]) -> Vec<Arc<HookEvent>> {
        if self.open_count() == 0 {
            return Vec::new();
        }
        let apps = self.apps.lock();
        let mut rows = rows.iter().peekable();
        let mut wanted = Vec::new();
        for event in events {
            let id = event.id.as_str();
            let mut queued = false;
            while let Some(row) = rows.next_if(|row| row.event_id == id) {
                // A withdrawal queues nothing for its endpoint.
                queued |= !matches!(row.hold, Some(Hold::Withdraw { .. }));
            }
            if queued && apps.contains_key(&event.app) {
                wanted.push(Arc::new(event.clone()));
            }
        }
        wanted
    }

    /// Hands `events` (from [`Tails::wanted`], now queued) to their apps' tails.
    pub(crate) fn send(&self, events: Vec<Arc<HookEvent>>) {
        if events.is_empty() {
            return;
        }
        let apps = self.apps.lock();
        for event in events {
            if let Some(sender) = apps.get(&event.app) {
                // No receiver left: the tail closed meanwhile.
                let _ = sender.send(event);
            }
        }
    }
}

/// What a tail reads next.
#[derive(Debug, Clone, PartialEq)]
pub enum TailItem {
    /// An event, as it was queued.
    Event(Arc<HookEvent>),
    /// The tail fell behind: this many of the app's events were not shown.
    Lagged(u64),
}

/// One open tail of an app's events; closed when dropped.
pub struct Tail {
    receiver: broadcast::Receiver<Arc<HookEvent>>,
    // Dropped after `receiver`, so the app's channel goes once its last receiver has.
    slot: Slot,
}

impl Tail {
    /// The next event, or how many were missed; `None` once the node's tails are gone.
    pub async fn next(&mut self) -> Option<TailItem> {
        match self.receiver.recv().await {
            Ok(event) => Some(TailItem::Event(event)),
            Err(broadcast::error::RecvError::Lagged(missed)) => Some(TailItem::Lagged(missed)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// The app it tails.
    pub fn app(&self) -> &AppId {
        &self.slot.app
    }
}

/// A tail's place among the node's [`MAX_TAILS`], given back when it closes.
struct Slot {
    tails: Arc<Tails>,
    app: AppId,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut apps = self.tails.apps.lock();
        if apps
            .get(&self.app)
            .is_some_and(|sender| sender.receiver_count() == 0)
        {
            apps.remove(&self.app);
        }
        drop(apps);
        self.tails.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use herald_core::lifecycle::LifecycleEvent;

    use super::*;
    use crate::event::EventType;

    fn vacated(app: &AppId, channel: &str, at_ms: i64) -> HookEvent {
        let event = LifecycleEvent::ChannelVacated {
            channel: app.parse_channel(channel).unwrap(),
        };
        HookEvent::from_lifecycle(&event, at_ms)
    }

    fn row(event: &HookEvent) -> Enqueue {
        Enqueue {
            endpoint: 1,
            event_id: event.id.to_string(),
            kind: event.kind,
            due_ms: event.at_ms,
            payload: String::new(),
            hold: None,
        }
    }

    fn app(id: &str) -> AppId {
        AppId::parse(id).unwrap()
    }

    #[tokio::test]
    async fn a_tail_gets_its_apps_queued_events_in_order_and_nothing_else() {
        let tails = Arc::new(Tails::default());
        let mut shop = tails.open(&app("shop")).unwrap();
        let events = [
            vacated(&app("shop"), "rooms/1", 1),
            vacated(&app("shop"), "lobby", 2),
            vacated(&app("blog"), "posts", 3),
            vacated(&app("shop"), "rooms/2", 4),
        ];
        // The second event matched no endpoint (no row); the last matched two.
        let rows = [
            row(&events[0]),
            row(&events[2]),
            row(&events[3]),
            row(&events[3]),
        ];
        let wanted = tails.wanted(&events, &rows);
        tails.send(wanted);
        for expected in [&events[0], &events[3]] {
            match shop.next().await {
                Some(TailItem::Event(event)) => assert_eq!(&*event, expected),
                other => panic!("expected {expected:?}, read {other:?}"),
            }
        }
        assert!(shop.receiver.is_empty());
        assert_eq!(shop.app(), &app("shop"));
    }

    #[tokio::test]
    async fn a_return_that_only_withdraws_is_not_shown() {
        let tails = Arc::new(Tails::default());
        let mut shop = tails.open(&app("shop")).unwrap();
        let back = LifecycleEvent::UserOnline {
            app: app("shop"),
            sub: "al".into(),
        };
        let online = HookEvent::from_lifecycle(&back, 1);
        let closed = vacated(&app("shop"), "rooms/1", 2);
        let withdrawal = Enqueue {
            hold: Some(Hold::Withdraw { user: "al".into() }),
            ..row(&online)
        };
        let events = [online, closed.clone()];
        tails.send(tails.wanted(&events, &[withdrawal, row(&closed)]));
        match shop.next().await {
            Some(TailItem::Event(event)) => assert_eq!(*event, closed),
            other => panic!("expected {closed:?}, read {other:?}"),
        }
        assert!(shop.receiver.is_empty());
    }

    #[tokio::test]
    async fn a_slow_tail_is_told_how_many_it_missed() {
        let tails = Arc::new(Tails::default());
        let mut tail = tails.open(&app("shop")).unwrap();
        let events: Vec<HookEvent> = (0..TAIL_BUFFER as i64 + 5)
            .map(|i| vacated(&app("shop"), "rooms/1", i))
            .collect();
        let rows: Vec<Enqueue> = events.iter().map(row).collect();
        tails.send(tails.wanted(&events, &rows));
        assert_eq!(tail.next().await, Some(TailItem::Lagged(5)));
        match tail.next().await {
            Some(TailItem::Event(event)) => assert_eq!(*event, events[5]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn at_most_max_tails_are_open_and_a_closed_one_frees_its_place() {
        let tails = Arc::new(Tails::new(2));
        let first = tails.open(&app("shop")).unwrap();
        let _second = tails.open(&app("blog")).unwrap();
        assert_eq!(
            tails.open(&app("shop")).err(),
            Some(TooManyTails { max: 2 })
        );
        drop(first);
        assert_eq!(tails.open_count(), 1);
        assert!(!tails.apps.lock().contains_key(&app("shop")));
        let _third = tails.open(&app("shop")).unwrap();
        assert_eq!(tails.open_count(), 2);
    }

    #[tokio::test]
    async fn the_writer_feeds_the_tail_what_it_queued_for_an_endpoint() {
        use crate::memory::MemoryHookStore;
        use crate::service::tests::{hooks_over, shop};
        use crate::service::HooksConfig;
        use tokio_util::sync::CancellationToken;

        let store = Arc::new(MemoryHookStore::new());
        let hooks = hooks_over(store, HooksConfig::default()).await;
        hooks
            .create(
                &shop(),
                &serde_json::json!({"url": "http://127.0.0.1:9/", "events": ["channel.vacated"],
                        "channels": ["rooms/*"]}),
            )
            .await
            .unwrap();
        let mut tail = hooks.tail(&shop()).unwrap();
        let queued = hooks.take_queue().unwrap();
        let shutdown = CancellationToken::new();
        let writer = tokio::spawn(crate::writer::run_writer(
            hooks.clone(),
            queued,
            shutdown.clone(),
        ));
        // The lobby is no endpoint's: not queued, not shown.
        let events = [vacated(&shop(), "lobby", 1), vacated(&shop(), "rooms/1", 2)];
        for event in &events {
            hooks.queue().try_send(event.clone()).unwrap();
        }
        let read = tokio::time::timeout(std::time::Duration::from_secs(30), tail.next()).await;
        match read.expect("the tail was given nothing") {
            Some(TailItem::Event(event)) => assert_eq!(*event, events[1]),
            other => panic!("{other:?}"),
        }
        shutdown.cancel();
        writer.await.unwrap();
        assert!(tail.receiver.is_empty());
    }

    #[test]
    fn nothing_is_copied_while_no_tail_is_open() {
        let tails = Tails::default();
        let events = [vacated(&app("shop"), "rooms/1", 1)];
        assert!(tails.wanted(&events, &[row(&events[0])]).is_empty());
        assert_eq!(events[0].kind, EventType::ChannelVacated);
    }
}
