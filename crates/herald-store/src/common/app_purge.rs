//! The purge of deleted apps, as both backends run it: what an app's deletion leaves for later
//! (its channels, their messages and their retained messages, all keyed by channel name) is
//! deleted by the store's writer a step at a time.
//!
//! **What.** An app marked `deleted` in `apps` (never the default app, which cannot be deleted
//! and whose channels are unscoped) owns every channel whose full name starts with its scope
//! prefix (`shop~`, `herald_core::tenant`): its plain channels and its push logs (`shop~$app`,
//! `shop~$dev/...`). They are found by that prefix's range on the name's index
//! ([`scope_range`]), in the `retained` table and in `channels` (and through a channel's id, its
//! `messages`).
//!
//! **How much at a time.** One step is one transaction (PostgreSQL: one statement for the
//! retained rows) that deletes at most [`PURGE_PAGE`] retained rows, or at most [`PURGE_PAGE`]
//! messages together with the rows of the channels they emptied ([`plan`]): a channel with
//! more messages loses its oldest [`PURGE_PAGE`] (its `first_seq` moves on, as a trim's), so
//! its log stays a contiguous range until its last step deletes its row. The writer runs a
//! step when an app is deleted and then every [`PURGE_PAUSE`] while steps find something, and
//! serves appends between steps, so an app with millions of messages never holds the writer
//! or a lock for long. Its 30 s sweep asks for a step too, so a purge a restart interrupted
//! goes on: nothing is remembered, each step finds what is left ([`PurgeSchedule`]).
//!
//! **Cluster.** Every node's writer purges; the steps are idempotent (a row already deleted is
//! not found again), and on PostgreSQL a step locks the channels' rows it deletes, in name
//! order as appends do, so two nodes (or an append that raced the deletion) take turns.

use std::time::{Duration, Instant};

use herald_core::tenant::AppId;

/// Rows one purge step deletes at most: retained rows, or messages (with the rows of the
/// channels they emptied, at most as many).
pub(crate) const PURGE_PAGE: usize = 1000;

/// How long the writer waits between two purge steps that found something: at most
/// [`PURGE_PAGE`] messages every 250 ms, 4,000 a second.
pub(crate) const PURGE_PAUSE: Duration = Duration::from_millis(250);

/// The range of full channel names `[low, high)` of app `app`'s channels: its scope prefix and
/// the prefix followed by DEL (names are ASCII without DEL; both backends compare bytes).
/// `None` for the default app, whose channels have no prefix, and for an id that is not an
/// app id.
pub(crate) fn scope_range(app: &str) -> Option<(String, String)> {
    let app = AppId::parse(app).ok()?;
    if app.is_default() {
        return None;
    }
    let low = app.scope_prefix();
    let high = format!("{low}\u{7f}");
    Some((low, high))
}

/// What a step does to one channel of a deleted app.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChannelPurge {
    /// Deletes all its messages and its row.
    Drop,
    /// Deletes its messages below this seq, which becomes its `first_seq`.
    TrimBelow(i64),
}

/// What one step does to `channels`, a deleted app's channels in name order as `(first_seq,
/// last_seq)`: drops each whose messages fit in what is left of [`PURGE_PAGE`], and trims the
/// first that does not by what is left, then stops (the rest wait for later steps). Its
/// answer is in `channels`' order and may be shorter.
pub(crate) fn plan(channels: &[(i64, i64)]) -> Vec<ChannelPurge> {
    let mut room = PURGE_PAGE as i64;
    let mut plan = Vec::new();
    for &(first_seq, last_seq) in channels {
        if room == 0 {
            break;
        }
        let held = (last_seq + 1).saturating_sub(first_seq).max(0);
        if held <= room {
            plan.push(ChannelPurge::Drop);
            room -= held;
        } else {
            plan.push(ChannelPurge::TrimBelow(first_seq + room));
            break;
        }
    }
    plan
}

/// When the writer runs its next purge step: after an app's deletion or a sweep asked for one,
/// again [`PURGE_PAUSE`] after each step that deleted something, and not at all once a step
/// found nothing (or failed: the next sweep asks again).
#[derive(Debug, Default)]
pub(crate) struct PurgeSchedule {
    next: Option<Instant>,
}

impl PurgeSchedule {
    /// A step is wanted now (an app was deleted, or the sweep looks for what is left), unless
    /// one is already planned.
    pub(crate) fn want(&mut self) {
        if self.next.is_none() {
            self.next = Some(Instant::now());
        }
    }

    /// Whether a step is due now.
    pub(crate) fn is_due(&self) -> bool {
        self.next.is_some_and(|at| Instant::now() >= at)
    }

    /// A step ran and deleted `deleted` rows (`None`: it failed).
    pub(crate) fn stepped(&mut self, deleted: Option<usize>) {
        self.next = match deleted {
            Some(n) if n > 0 => Some(Instant::now() + PURGE_PAUSE),
            _ => None,
        };
    }

    /// The earlier of `deadline` and the next step's time.
    pub(crate) fn earlier(&self, deadline: Instant) -> Instant {
        self.next.map_or(deadline, |at| at.min(deadline))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_is_the_apps_prefix_and_never_the_default_apps() {
        let (low, high) = scope_range("shop").unwrap();
        assert_eq!((low.as_str(), high.as_str()), ("shop~", "shop~\u{7f}"));
        let inside = |name: &str| name >= low.as_str() && name < high.as_str();
        assert!(inside("shop~news") && inside("shop~$dev/d1") && inside("shop~a~b"));
        assert!(!inside("shop-2~news") && !inside("shop") && !inside("shopx~news"));
        assert!(!inside("sho~news") && !inside("news"));
        assert_eq!(scope_range("default"), None);
        assert_eq!(scope_range("Bad id"), None);
    }

    #[test]
    fn a_step_deletes_at_most_a_page_of_messages_whole_channels_first() {
        let page = PURGE_PAGE as i64;
        // Three small channels, an empty one, then one larger than what is left.
        let channels = [(1, 100), (5, 404), (1, 0), (1, 300), (1, 10 * page)];
        let plan = plan(&channels);
        use ChannelPurge::*;
        assert_eq!(
            plan,
            vec![Drop, Drop, Drop, Drop, TrimBelow(1 + page - 800)]
        );
        // A channel trimmed before: its range starts at its first_seq.
        assert_eq!(
            super::plan(&[(5_000, 9_000)]),
            vec![TrimBelow(5_000 + page)]
        );
        assert_eq!(
            super::plan(&[(1, page), (1, 1)]),
            vec![Drop],
            "the page is full"
        );
        assert_eq!(
            super::plan(&[(7, 6), (1, 1)]),
            vec![Drop, Drop],
            "empty, then one"
        );
        assert!(super::plan(&[]).is_empty());
    }

    #[test]
    fn steps_follow_each_other_while_they_find_something() {
        let far = Instant::now() + Duration::from_secs(3600);
        let mut schedule = PurgeSchedule::default();
        assert!(!schedule.is_due() && schedule.earlier(far) == far);
        schedule.want();
        assert!(schedule.is_due());
        schedule.stepped(Some(10));
        let next = schedule.earlier(far);
        assert!(next < far, "another step");
        schedule.want();
        assert_eq!(schedule.earlier(far), next, "already planned");
        schedule.stepped(Some(0));
        assert_eq!(schedule.earlier(far), far, "nothing left");
        schedule.want();
        schedule.stepped(None);
        assert_eq!(
            schedule.earlier(far),
            far,
            "failed: the next sweep asks again"
        );
    }
}
