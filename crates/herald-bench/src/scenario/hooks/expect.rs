//! What the receiver must have, from what the clients did, and how far what it has differs.
//!
//! Per client `i` that had `c` connections accepted and `s` subscriptions acknowledged (over
//! all rounds): `c` `client.connected` and `client.disconnected`; `s` `client.subscribed`,
//! `channel.occupied`, `client.unsubscribed` and `channel.vacated` (its channel is its own).
//! Presence is debounced: a reconnect within the endpoint's offline delay withdraws the pending
//! `user.offline` and the `user.online` after it, so how many pairs arrive depends on timing.
//! What must arrive is what is certain: at least one `user.online`, at most `c`, and as many
//! `user.offline` as `user.online` (a withdrawal takes one of each; the last disconnect has no
//! reconnect after it, so its offline comes once the delay passed), in strict alternation per
//! user: online, offline, online, ..., starting with an online (the store's contract,
//! herald-hooks' `store` module doc), and ending with an offline, as the user's last action
//! was a disconnect. Anything else is unexpected. Events with the same id count once; repeats
//! are duplicates (at-least-once delivery), not errors.

use super::churn::Done;
use super::receiver::{Tally, CYCLE_TYPES};

/// What the run registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// An endpoint wanting every event type.
    All,
    /// An endpoint wanting only channel events, for a channel pattern no client uses: nothing
    /// may arrive.
    MatchingNothing,
    /// No endpoint (the baseline of the A/B comparison): nothing is received.
    NoHooks,
}

/// One event type's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Event type.
    pub kind: &'static str,
    /// Distinct events that must arrive.
    pub expected: u64,
    /// Distinct events received about this run's clients.
    pub received: u64,
    /// Repeats of events already received.
    pub duplicates: u64,
    /// Expected events not received.
    pub missing: u64,
    /// Distinct events received beyond the expectation.
    pub unexpected: u64,
}

/// The comparison of the whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Per event type (the six cycle types, then `user.online`, `user.offline`).
    pub rows: Vec<Row>,
    /// Sum of the rows' missing.
    pub missing: u64,
    /// Sum of the rows' unexpected, and users whose presence events were out of order, and
    /// events of a type the run never causes.
    pub unexpected: u64,
    /// Users whose presence events did not alternate (an offline first or after an offline,
    /// or two onlines in a row).
    pub out_of_order_users: u64,
    /// Users who connected but are online as the receiver hears it (their last presence event
    /// is an online, or none came), though their last action was a disconnect: their last
    /// `user.offline` is missing (counted in `missing` too).
    pub final_online_users: u64,
    /// Reconnects whose offline and online were withdrawn by the debounce (connections minus
    /// online events, over the users).
    pub withdrawn_pairs: u64,
}

/// Compares what `done` says the clients did with what `tally` received, under `mode`.
pub fn compare(done: &Done, tally: &Tally, mode: Mode) -> Comparison {
    let names = CYCLE_TYPES
        .iter()
        .copied()
        .chain(["user.online", "user.offline"]);
    let mut rows: Vec<Row> = names
        .enumerate()
        .map(|(k, kind)| Row {
            kind,
            expected: 0,
            received: 0,
            duplicates: tally.duplicates[k],
            missing: 0,
            unexpected: 0,
        })
        .collect();
    let mut out = Comparison::default();
    for (i, got) in tally.clients.iter().enumerate() {
        let c = done.connected.get(i).copied().unwrap_or(0);
        let s = done.subscribed.get(i).copied().unwrap_or(0);
        let mut want = match mode {
            Mode::All => [c, s, s, s, s, c, 0, 0],
            Mode::MatchingNothing | Mode::NoHooks => [0; 8],
        };
        if mode == Mode::All && c > 0 {
            // At least one pair, at most one per connection, each online answered by an
            // offline.
            let pairs = got.online.clamp(1, c);
            want[6] = pairs;
            want[7] = pairs;
            out.withdrawn_pairs += c - pairs;
        }
        if got.out_of_order {
            out.out_of_order_users += 1;
        }
        if mode == Mode::All && c > 0 && (got.online_now || got.online == 0) {
            out.final_online_users += 1;
        }
        let have = [
            got.cycle[0],
            got.cycle[1],
            got.cycle[2],
            got.cycle[3],
            got.cycle[4],
            got.cycle[5],
            got.online,
            got.offline,
        ];
        for (k, row) in rows.iter_mut().enumerate() {
            row.expected += want[k];
            row.received += have[k];
            row.missing += want[k].saturating_sub(have[k]);
            row.unexpected += have[k].saturating_sub(want[k]);
        }
    }
    out.missing = rows.iter().map(|r| r.missing).sum();
    out.unexpected = rows.iter().map(|r| r.unexpected).sum::<u64>()
        + out.out_of_order_users
        + tally.unexpected_types;
    out.rows = rows;
    out
}

#[cfg(test)]
mod tests {
    use super::super::receiver::Received;
    use super::*;

    fn done(connected: Vec<u64>, subscribed: Vec<u64>) -> Done {
        Done {
            connected,
            subscribed,
            ..Default::default()
        }
    }

    fn client(cycle: [u64; 6], online: u64, offline: u64) -> Received {
        Received {
            cycle,
            online,
            offline,
            online_now: online > offline,
            ..Default::default()
        }
    }

    #[test]
    fn hooks_expectation_counts_every_cycle_and_debounced_presence() {
        // Client 0: 3 rounds, every pair sent; client 1: 3 rounds, two reconnects within the
        // delay (one pair); client 2: its last offline has not arrived yet.
        let d = done(vec![3, 3, 2], vec![3, 3, 2]);
        let tally = Tally {
            clients: vec![
                client([3; 6], 3, 3),
                client([3; 6], 1, 1),
                client([2; 6], 2, 1),
            ],
            ..Default::default()
        };
        let c = compare(&d, &tally, Mode::All);
        assert_eq!(c.missing, 1, "client 2's last user.offline: {c:?}");
        assert_eq!(c.final_online_users, 1, "client 2 is still heard online");
        assert_eq!(c.unexpected, 0);
        assert_eq!(c.withdrawn_pairs, 2);
        let online = &c.rows[6];
        assert_eq!(
            (online.kind, online.expected, online.received),
            ("user.online", 6, 6)
        );
        assert_eq!(
            c.rows[0].expected, 8,
            "client.connected per round per client"
        );
    }

    #[test]
    fn hooks_expectation_reports_missing_cycle_events_and_a_user_never_online() {
        let d = done(vec![2], vec![2]);
        let tally = Tally {
            clients: vec![client([2, 2, 1, 2, 2, 2], 0, 0)],
            ..Default::default()
        };
        let c = compare(&d, &tally, Mode::All);
        // One channel.occupied, the user.online and its user.offline.
        assert_eq!(c.missing, 3, "{c:?}");
        assert_eq!(c.final_online_users, 1, "never heard offline");
    }

    #[test]
    fn hooks_expectation_counts_presence_out_of_alternation_as_unexpected() {
        let d = done(vec![2], vec![2]);
        let mut twice = client([2; 6], 2, 2);
        twice.out_of_order = true;
        let tally = Tally {
            clients: vec![twice],
            ..Default::default()
        };
        let c = compare(&d, &tally, Mode::All);
        assert_eq!((c.missing, c.out_of_order_users, c.unexpected), (0, 1, 1));
    }

    #[test]
    fn hooks_matching_nothing_expects_nothing() {
        let d = done(vec![2, 2], vec![2, 2]);
        let mut quiet = Tally {
            clients: vec![Received::default(); 2],
            ..Default::default()
        };
        assert_eq!(compare(&d, &quiet, Mode::MatchingNothing).unexpected, 0);
        quiet.clients[1] = client([0, 0, 1, 0, 0, 0], 0, 0);
        let c = compare(&d, &quiet, Mode::MatchingNothing);
        assert_eq!((c.missing, c.unexpected), (0, 1));
    }
}
