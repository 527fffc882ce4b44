//! A batch without idempotency keys (the common one) stored in **one statement**, run as its own
//! implicit transaction: one round trip to PostgreSQL instead of four (`BEGIN`, the row
//! reservation, the insert, `COMMIT`), and the channels' rows stay locked only while PostgreSQL
//! runs it, never across a network round trip. Another node appending to the same channel
//! waits for that, not for this node's next message to cross the network.
//!
//! [`STORE`] is the reservation of [`super::append`] (the `INSERT .. ON CONFLICT .. RETURNING`
//! that creates, locks in name order and advances each channel's row) with the messages'
//! `INSERT` attached as a data-modifying `WITH` query reading the reserved rows: each
//! message's seq is its channel's new `last_seq` minus how many of the batch's messages of that
//! channel come after it. The answer arrives once PostgreSQL has committed it (the driver waits
//! for the end of the implicit transaction), so a publish is still answered only once its row
//! is committed, and a failure stores nothing.
//!
//! A count trim is due when a channel holds too many messages; it runs after the commit, as
//! one more statement that moves `first_seq` (never back) and deletes below it: trimming
//! later than the append only keeps a few messages longer, and two nodes trimming one channel
//! at once agree. A trim that fails is logged and left to the channel's next append; the
//! batch's messages are committed either way. A trim commits without waiting for its
//! write-ahead log to reach the disk (`synchronous_commit` off for its transaction alone): it
//! locks the channel's row, which every other node's append to the channel waits for, and a
//! flush would hold that row through an fsync for nothing a publisher was promised. A crash
//! can lose only trims no later commit flushed (the log is written in order, so the next
//! append's flush carries them), and a lost trim only keeps its messages longer, as a failed
//! one does.

use std::sync::Arc;

use deadpool_postgres::GenericClient;
use herald_core::log::{Appended, StoreError};
use herald_core::message::{Epoch, Retain, StoredMessage};

use super::append::{count_trim_target, plan, ChannelColumns, Committed, Requested};
use super::pg_error;
use crate::common::values::{seq_from_db, seq_to_db};

/// Reserves the seqs (creating, locking in name order and advancing each channel's row) and
/// stores the messages, in one statement. `$1..$5`: per channel, name, epoch for a new row,
/// message count, retention; `$6..$8`: per message, its channel's name, how many of the
/// batch's messages of that channel follow it, its data; `$9`: the time.
const STORE: &str = "WITH reserved AS ( \
     INSERT INTO channels (name, epoch, last_seq, first_seq, max_messages, max_age_ms) \
     SELECT n, e, c, 1, mm, ma \
     FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) \
         AS r(n, e, c, mm, ma) \
     ORDER BY n \
     ON CONFLICT (name) DO UPDATE SET last_seq = channels.last_seq + excluded.last_seq, \
         max_messages = excluded.max_messages, max_age_ms = excluded.max_age_ms \
     RETURNING name, id, epoch, last_seq, first_seq \
 ), stored AS ( \
     INSERT INTO messages (channel_id, seq, client_id, time, data) \
     SELECT r.id, r.last_seq - m.behind, NULL, $9, m.d \
     FROM unnest($6::text[], $7::bigint[], $8::bytea[]) AS m(n, behind, d) \
     JOIN reserved r ON r.name = m.n COLLATE \"C\" \
 ) \
 SELECT name, id, epoch, last_seq, first_seq FROM reserved";

/// Moves a channel's `first_seq` up to `$3` and deletes its messages from `$2` (its first
/// retained seq when the append ran, or lower) up to `$3`, in one statement; nothing at all
/// when `first_seq` is already there. Several nodes appending to one channel often find the
/// same trim due: the first one's trim is done and the others' touch neither the row (no new
/// row version of a channel every append locks) nor the messages' index. Its implicit
/// transaction commits without waiting for the flush (`lazy`: `set_config(.., true)` lasts
/// until that transaction ends, and the `UPDATE` reads it first, as a one-time filter).
const TRIM: &str = "WITH lazy AS ( \
     SELECT set_config('synchronous_commit', 'off', true) \
 ), moved AS ( \
     UPDATE channels SET first_seq = $3 \
     WHERE id = $1 AND first_seq < $3 AND EXISTS (SELECT FROM lazy) RETURNING id \
 ) \
 DELETE FROM messages WHERE channel_id = (SELECT id FROM moved) AND seq >= $2 AND seq < $3";

/// Whether [`store`] can take `requests`: no message carries an idempotency key (a key must
/// be looked up once its channel's row is locked, which [`super::append::store`] does), a
/// retain (its retained row is written in that transaction too) or a session's hold (too).
pub(crate) fn applies(requests: &[Requested<'_>]) -> bool {
    requests.iter().all(|r| {
        r.messages
            .iter()
            .all(|m| m.id.is_none() && m.retain == Retain::Untouched && m.hold.is_none())
    })
}

/// A count trim due after the batch: the channel, the first retained seq the append saw, and
/// the seq to keep from.
pub(crate) struct Trim {
    channel_id: i64,
    from: u64,
    to: u64,
}

/// Stores `requests` (none keyed: see [`applies`]) in one statement, committed when it
/// returns; answers what each message became and the count trims now due.
pub(crate) async fn store(
    client: &impl GenericClient,
    requests: &[Requested<'_>],
    now_ms: i64,
) -> Result<(Committed, Vec<Trim>), StoreError> {
    let plans = plan(requests);
    let ChannelColumns {
        names,
        epochs,
        counts,
        max_messages,
        max_ages,
    } = ChannelColumns::of(&plans, |p| p.positions.len() as i64);
    let size: usize = plans.iter().map(|p| p.positions.len()).sum();
    let mut message_channels: Vec<&str> = Vec::with_capacity(size);
    let mut behind: Vec<i64> = Vec::with_capacity(size);
    let mut data: Vec<&[u8]> = Vec::with_capacity(size);
    for plan in &plans {
        let count = plan.positions.len();
        for (i, &(r, m)) in plan.positions.iter().enumerate() {
            message_channels.push(plan.name.as_str());
            behind.push((count - 1 - i) as i64);
            data.push(&requests[r].messages[m].data[..]);
        }
    }
    let statement = client.prepare_cached(STORE).await.map_err(pg_error)?;
    let returned = client
        .query(
            &statement,
            &[
                &names,
                &epochs,
                &counts,
                &max_messages,
                &max_ages,
                &message_channels,
                &behind,
                &data,
                &now_ms,
            ],
        )
        .await
        .map_err(pg_error)?;
    let mut rows = std::collections::HashMap::with_capacity(returned.len());
    for row in &returned {
        let name: &str = row.try_get(0).map_err(pg_error)?;
        let epoch: String = row.try_get(2).map_err(pg_error)?;
        let last_seq = seq_from_db(row.try_get(3).map_err(pg_error)?)?;
        let first_seq = seq_from_db(row.try_get(4).map_err(pg_error)?)?;
        let id: i64 = row.try_get(1).map_err(pg_error)?;
        rows.insert(
            name.to_owned(),
            (id, Epoch::new(&epoch), last_seq, first_seq),
        );
    }
    let mut results: Vec<Vec<Option<Appended>>> = requests
        .iter()
        .map(|r| vec![None; r.messages.len()])
        .collect();
    let mut new_messages = Vec::with_capacity(size);
    let mut trims = Vec::new();
    for plan in &plans {
        let (id, epoch, last_seq, first_seq) = rows
            .get(plan.name.as_str())
            .ok_or_else(|| StoreError::failed("a channel's row was not reserved"))?;
        let mut seq = last_seq.saturating_sub(plan.positions.len() as u64);
        for &(r, m) in &plan.positions {
            seq += 1;
            let message = &requests[r].messages[m];
            let stored = Arc::new(StoredMessage::new(
                plan.name.clone(),
                epoch.clone(),
                seq,
                None,
                now_ms,
                message.data.clone(),
            ));
            new_messages.push(stored.clone());
            results[r][m] = Some(Appended {
                message: stored,
                duplicate: false,
            });
        }
        if let Some(to) = count_trim_target(*first_seq, *last_seq, plan.retention) {
            trims.push(Trim {
                channel_id: *id,
                from: *first_seq,
                to,
            });
        }
    }
    let results = results
        .into_iter()
        .map(|r| r.into_iter().collect::<Option<Vec<_>>>())
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| StoreError::failed("an append lost a message"))?;
    Ok((
        Committed {
            results,
            new_messages,
        },
        trims,
    ))
}

/// Runs the count trims [`store`] found due, each one statement; a failure is logged (the
/// channel's next append finds the trim due again).
pub(crate) async fn trim(client: &impl GenericClient, trims: &[Trim]) {
    if trims.is_empty() {
        return;
    }
    let statement = match client.prepare_cached(TRIM).await {
        Ok(statement) => statement,
        Err(err) => {
            tracing::debug!(error = %err, "count trim not prepared");
            return;
        }
    };
    for trim in trims {
        let (from, to) = (seq_to_db(trim.from), seq_to_db(trim.to));
        if let Err(err) = client
            .execute(&statement, &[&trim.channel_id, &from, &to])
            .await
        {
            tracing::debug!(error = %err, channel_id = trim.channel_id, "count trim failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::{connect, schema};
    use herald_core::log::Retention;
    use herald_core::message::NewMessage;
    use herald_core::ChannelName;

    /// The channel row's version (`xmin` changes with every new row version) and `first_seq`.
    async fn row(client: &deadpool_postgres::Client) -> (String, i64) {
        let row = client
            .query_one(
                "SELECT xmin::text, first_seq FROM channels WHERE name = 'news'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    }

    /// A fresh PostgreSQL with the schema, and channel `news` stored 27 messages with a limit
    /// of 10: the store's answer's trims (the server is stopped when its guard is dropped).
    async fn news_stored_past_its_limit() -> (
        herald_testkit::Postgres,
        deadpool_postgres::Client,
        Vec<Trim>,
    ) {
        let server = tokio::task::spawn_blocking(herald_testkit::Postgres::start)
            .await
            .unwrap()
            .expect("start PostgreSQL (scripts/install-services.sh installs it)");
        let connection = connect::parse(&server.create_database("herald").unwrap()).unwrap();
        schema::migrate(&mut connect::connect_once(&connection).await.unwrap())
            .await
            .unwrap();
        let pool = connect::pool(&connection, 1).unwrap();
        let client = pool.get().await.unwrap();
        let channel = ChannelName::parse("news").unwrap();
        let messages: Vec<NewMessage> = (0..27)
            .map(|i| NewMessage {
                id: None,
                data: bytes::Bytes::from(format!("{i}")),
                retain: Default::default(),
                hold: None,
            })
            .collect();
        let requested = [Requested {
            channel: &channel,
            messages: &messages,
            retention: Retention {
                max_messages: 10,
                max_age_ms: 0,
            },
        }];
        let (_, trims) = store(&client, &requested, 1).await.unwrap();
        (server, client, trims)
    }

    /// Two nodes that both found the same count trim due: the second one's trim, run after the
    /// first, changes nothing, not even the channel row's version; a stale, lower trim never
    /// moves `first_seq` back.
    #[tokio::test]
    async fn a_trim_already_done_by_another_node_leaves_the_channel_row_alone() {
        let (_server, client, trims) = news_stored_past_its_limit().await;
        assert_eq!(
            trims.len(),
            1,
            "27 messages over a limit of 10 (+16) are due a trim"
        );
        assert_eq!((trims[0].from, trims[0].to), (1, 18));

        trim(&client, &trims).await;
        let (version, first_seq) = row(&client).await;
        assert_eq!(first_seq, 18);
        let count: i64 = client
            .query_one("SELECT count(*) FROM messages", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(count, 10);

        // The other node's copy of the same trim, and an older one.
        trim(&client, &trims).await;
        let stale = [Trim {
            channel_id: trims[0].channel_id,
            from: 1,
            to: 12,
        }];
        trim(&client, &stale).await;
        assert_eq!(
            row(&client).await,
            (version, 18),
            "a trim already done writes no new version of the channel's row"
        );
    }

    /// A trim's transaction commits without waiting for its write-ahead log's flush: run inside
    /// a transaction of the test's, the trim leaves `synchronous_commit` off in it (the
    /// setting its own implicit transaction commits with), and still moves the row and deletes.
    #[tokio::test]
    async fn a_trim_commits_without_waiting_for_the_flush() {
        let (_server, mut client, trims) = news_stored_past_its_limit().await;
        assert_eq!(trims.len(), 1);
        let setting = |row: tokio_postgres::Row| row.get::<_, String>(0);

        let tx = client.transaction().await.unwrap();
        assert_eq!(
            setting(tx.query_one("SHOW synchronous_commit", &[]).await.unwrap()),
            "on",
            "the server's default"
        );
        trim(&tx, &trims).await;
        assert_eq!(
            setting(tx.query_one("SHOW synchronous_commit", &[]).await.unwrap()),
            "off",
            "the trim's transaction commits without waiting for the flush"
        );
        tx.commit().await.unwrap();
        assert_eq!(row(&client).await.1, 18, "the trim moved the row");
        let count: i64 = client
            .query_one("SELECT count(*) FROM messages", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(count, 10, "and deleted the messages below it");
        assert_eq!(
            setting(
                client
                    .query_one("SHOW synchronous_commit", &[])
                    .await
                    .unwrap()
            ),
            "on",
            "the connection's own setting is untouched once that transaction ends"
        );
    }
}
