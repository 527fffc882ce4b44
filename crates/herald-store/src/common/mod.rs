//! What both backends share, written once: everything about the stored data that does not
//! depend on the SQL dialect or the driver. Each backend (`crate::sqlite`, `crate::postgres`)
//! keeps only its SQL and its driver glue (connections, transactions, the writer's loop, how a
//! driver's row implements [`row::StoredRow`]).
//!
//! Modules: `row` (reading a column from either driver's row), `values` (converting ids, seqs,
//! counts and JSON between Rust and SQL values), `log` (channel and message rows, a read's
//! bounds), `writer` (the request types both writers take,
//! the age-sweep interval, handing a commit to the sink), `tenancy` (apps), `token_keys`,
//! `revocations`, `credentials`, `audit` (the audit query, built for either placeholder style),
//! `devices` (device rows), `jobs` (job columns, constants, row decoding, the rows a push adds),
//! `job_counts` (the counters per push) and `job_state` (how each change of a job's state moves
//! them), `hooks` (webhook endpoint and queued event rows, an endpoint's room in its queue),
//! `pusher` (Pusher credentials rows), `mqtt_sessions` (MQTT persistent sessions' rows),
//! `retained` (retained messages' rows), `app_purge` (what a deleted app left, deleted a step
//! at a time).

pub(crate) mod app_purge;
pub(crate) mod audit;
pub(crate) mod credentials;
pub(crate) mod devices;
pub(crate) mod hooks;
pub(crate) mod job_counts;
pub(crate) mod job_state;
pub(crate) mod jobs;
pub(crate) mod log;
pub(crate) mod mqtt_sessions;
pub(crate) mod pusher;
pub(crate) mod retained;
pub(crate) mod revocations;
pub(crate) mod row;
pub(crate) mod tenancy;
pub(crate) mod token_keys;
pub(crate) mod values;
pub(crate) mod writer;

/// `columns` (a list like `"id, app, push"`) with each name qualified by `table` (`"j.id, j.app,
/// j.push"`), for a query that joins tables with columns of the same names.
pub(crate) fn qualified(columns: &str, table: &str) -> String {
    columns
        .split(", ")
        .map(|c| format!("{table}.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}
