//! A Pusher connection as a [`Wire`] of edge's connection driver: WebSocket frames read with
//! edge's codec into the session's commands ([`crate::session`]), the outbox's frames written
//! as text frames (answers as they are, channel messages from their shared Pusher encoding,
//! [`crate::outbound`], skipping the ones that exclude this socket; a presence channel's
//! members frames as Pusher's, [`crate::presence::pusher_frame`], and a watched user's online
//! channel's as watchlist events, `crate::watchlist`), Pusher's keep-alive, and
//! the goodbye (`pusher:error` with Pusher's code, then a close frame with it).
//!
//! **Keep-alive** runs on the roster's ticks (edge's `ping_interval`), so a connection holds no
//! timer: at a tick, a connection that has heard nothing for the activity timeout is sent
//! `pusher:ping`; one whose ping has gone unanswered (nothing heard since) for the pong
//! timeout is closed with 4201 (`keepalive.rs`). The client's own `pusher:ping` is answered
//! with `pusher:pong`, and a WebSocket ping with a pong.

use std::future::Future;
use std::io;
use std::time::{Duration, Instant};

use herald_core::lifecycle::DisconnectReason;
use herald_core::outbox::{Batch, CloseReason, OutFrame, Outbox};
use herald_core::telemetry::telemetry;
use herald_edge::conn::Conn;
use herald_edge::driver::{slow_consumer_goodbye, write_rest, Encoded, Ended, Wire};
use herald_edge::ws::frame::{self, close, FrameError, FrameReader, Incoming, Opcode};

use crate::frame::{codes, error as error_frame, ping as ping_frame};
use crate::session::PusherSession;
use crate::{keepalive, outbound};

/// Most bytes read in one go before other work gets a turn.
const READ_BUDGET: usize = 64 * 1024;
/// Size of the on-stack read buffer; nothing is kept between reads.
const READ_CHUNK: usize = 8 * 1024;

/// How a Pusher connection ends, from the server's side.
#[derive(Debug)]
pub(crate) enum End {
    /// `pusher:error` with this code and message, then a close frame with the code.
    Error(u16, String),
    /// The outbox was closed with this reason.
    Disconnect(CloseReason),
    /// A WebSocket frame the codec refuses: its close code.
    BadFrame(FrameError),
    /// A close frame with this code and nothing else (answering the client's).
    Close(u16),
}

/// One Pusher connection's wire state: the session and the frame parser.
pub(crate) struct PusherWire {
    pub(crate) session: PusherSession,
    pub(crate) reader: FrameReader,
    pub(crate) incoming: Vec<Incoming>,
}

impl PusherWire {
    pub(crate) fn new(session: PusherSession) -> Self {
        PusherWire {
            reader: FrameReader::new(session.edge().settings.max_frame_bytes),
            session,
            incoming: Vec::new(),
        }
    }
}

impl Wire for PusherWire {
    type End = End;
    /// The end offset of each frame in the batch's bytes.
    type Cuts = Vec<usize>;

    fn outbox(&self) -> &Outbox {
        self.session.outbox()
    }

    fn expires(&self) -> Option<u64> {
        None
    }

    fn is_between_frames(&self) -> bool {
        self.reader.is_idle()
    }

    /// Only with a fresh command budget, which the parked form does not keep (as a
    /// WebSocket's).
    fn may_park(&self) -> bool {
        self.session.session.may_park()
    }

    fn has_input(&self) -> bool {
        !self.incoming.is_empty()
    }

    fn handle_input<'a>(
        &'a mut self,
        conn: &'a mut Conn,
    ) -> impl Future<Output = Option<Ended<End>>> + Send + 'a {
        self.session.liveness.heard(Instant::now());
        handle_incoming(conn, &mut self.session, &mut self.incoming)
    }

    fn read(&mut self, conn: &mut Conn) -> Option<Ended<End>> {
        let mut chunk = [0u8; READ_CHUNK];
        let mut budget = READ_BUDGET;
        while budget > 0 {
            match conn.try_read(&mut chunk) {
                Ok(0) => return Some(Ended::Gone),
                Ok(n) => {
                    if let Err(e) = self.reader.feed(&chunk[..n], &mut self.incoming) {
                        return Some(Ended::Wire(End::BadFrame(e)));
                    }
                    budget = budget.saturating_sub(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return Some(Ended::Gone),
            }
        }
        None
    }

    fn encode(&mut self, batch: Batch, active: &mut bool) -> Encoded<Self> {
        // The keep-alive mark is not used: the session keeps when it last heard the client.
        *active = false;
        let mut ends = batch.closed.map(End::Disconnect);
        let ping = batch.ping
            && match keepalive::tick(
                &mut self.session.liveness,
                Instant::now(),
                &self.session.clients.settings,
            ) {
                Ok(ping) => ping,
                Err(end) => {
                    ends = ends.or(Some(end));
                    false
                }
            };
        let mut bytes = Vec::new();
        let mut cuts = Vec::new();
        let mut lag_recorded = false;
        let mut written = 0u64;
        for f in &batch.frames {
            match f {
                // One or several frames (`crate::frame::several`), each a WebSocket frame.
                OutFrame::Control(text) => {
                    for (i, part) in text.split(|b| *b == b'\n').enumerate() {
                        if i > 0 {
                            cuts.push(bytes.len());
                        }
                        frame::encode(&mut bytes, Opcode::Text, part);
                    }
                }
                // A presence channel's members list, joins and leaves, as Pusher's frames; a
                // watched user's online channel's, as watchlist events.
                OutFrame::Presence(herald) => {
                    let watchlist = self.session.watchlist.as_mut();
                    let pusher = match watchlist.and_then(|w| w.on_presence(herald)) {
                        Some(told) => told,
                        None => crate::presence::pusher_frame(herald),
                    };
                    match pusher {
                        Some(pusher) => frame::encode(&mut bytes, Opcode::Text, &pusher),
                        None => continue,
                    }
                }
                // A message's position follows its event (or stands alone when the event is
                // not sent to this socket) in the same cut, for a subscription that asked for
                // positions (`crate::resume`).
                OutFrame::Message(m) | OutFrame::Replayed(m) => {
                    let encoded = outbound::frame_for(m, &self.session.socket_id);
                    let positioned = self.session.positioned.wants(&m.channel);
                    if encoded.is_none() && !positioned {
                        continue;
                    }
                    if let Some(encoded) = encoded {
                        written += 1;
                        if !lag_recorded && matches!(f, OutFrame::Message(_)) {
                            herald_core::message::record_delivery_lag(m);
                            lag_recorded = true;
                        }
                        bytes.extend_from_slice(encoded);
                    }
                    if positioned {
                        crate::resume::push_position(&mut bytes, m);
                    }
                }
            }
            cuts.push(bytes.len());
        }
        if ping {
            frame::encode(&mut bytes, Opcode::Text, &ping_frame());
            cuts.push(bytes.len());
        }
        if written > 0 {
            telemetry().written_pusher.increment(written);
        }
        Encoded {
            bytes,
            cuts,
            ends: ends.map(Ended::Wire),
            last: false,
        }
    }

    fn cut_end(cuts: &Vec<usize>, sent: usize, _rest: &[u8], at: usize) -> usize {
        cuts.iter()
            .find(|&&end| end > sent + at)
            .map_or(at, |end| end - sent)
    }

    fn expired(&mut self) -> Option<Ended<End>> {
        // No token: nothing expires.
        None
    }

    fn goodbye<'a>(
        &'a mut self,
        conn: &'a mut Conn,
        ended: Ended<End>,
    ) -> impl Future<Output = ()> + Send + 'a {
        let reason = match &ended {
            Ended::Wire(End::Disconnect(reason)) => Some(DisconnectReason::from(*reason)),
            Ended::Wire(End::Error(codes::PONG_NOT_RECEIVED, _)) => {
                Some(DisconnectReason::TimedOut)
            }
            _ => None,
        };
        if let Some(reason) = reason {
            self.session.session.set_disconnect_reason(reason);
        }
        self.session.session.close();
        // A code of Pusher's said before the outbox was closed (a failed sign-in, a key gone).
        let ended = match (ended, self.session.registered.farewell()) {
            (Ended::Wire(End::Disconnect(_)), Some((code, message))) => {
                Ended::Wire(End::Error(code, message))
            }
            (ended, _) => ended,
        };
        async move {
            match ended {
                Ended::Wire(end) => goodbye(conn, end, Vec::new()).await,
                Ended::Cut(rest) => {
                    goodbye(conn, End::Disconnect(CloseReason::SlowConsumer), rest).await
                }
                Ended::Gone => {}
            }
        }
    }
}

/// The `pusher:error` and close frame that end a connection (after `cut_frame`, what a cut
/// left of the frame in progress), given a second at most; a slow consumer's goodbye gets
/// edge's slow-consumer grace.
pub(crate) async fn goodbye(stream: &mut Conn, end: End, cut_frame: Vec<u8>) {
    let mut out = cut_frame;
    let (code, message) = match end {
        End::Error(code, message) => (code, Some(message)),
        End::Disconnect(reason) => {
            let (code, message) = disconnect(reason);
            (code, Some(message.to_owned()))
        }
        End::BadFrame(e) => (e.close_code(), None),
        End::Close(code) => (code, None),
    };
    if let Some(message) = message {
        frame::encode(&mut out, Opcode::Text, &error_frame(Some(code), &message));
    }
    frame::encode_close(&mut out, code);
    if code == codes::OVER_CAPACITY {
        return slow_consumer_goodbye(stream, out).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), write_rest(stream, out)).await;
}

/// Pusher's code and message for a connection its outbox closed.
fn disconnect(reason: CloseReason) -> (u16, &'static str) {
    match reason {
        CloseReason::SlowConsumer => (
            codes::OVER_CAPACITY,
            "Over capacity: the connection fell behind its messages; reconnect",
        ),
        CloseReason::StoreUnavailable => (
            codes::RECONNECT,
            "The server cannot serve this connection now; reconnect",
        ),
        CloseReason::Shutdown | CloseReason::ResumeLost => {
            (codes::RECONNECT, "The server is going away; reconnect")
        }
        CloseReason::AppDeleted => (codes::APP_DISABLED, "Application disabled"),
        CloseReason::Revoked
        | CloseReason::SecretChanged
        | CloseReason::DeviceRevoked
        | CloseReason::TokenExpired => (codes::UNAUTHORIZED, "Connection is unauthorized"),
        CloseReason::RateLimited => (
            codes::CLIENT_EVENT_RATE_LIMIT,
            "Rate limit: the connection sent frames faster than the server allows",
        ),
    }
}

/// Runs the commands and control frames read so far; returns how the connection ends, if it
/// does. The driver boxes this future.
async fn handle_incoming(
    stream: &mut Conn,
    session: &mut PusherSession,
    incoming: &mut Vec<Incoming>,
) -> Option<Ended<End>> {
    for message in std::mem::take(incoming) {
        match message {
            Incoming::Text(text) => session.handle(&text).await,
            Incoming::Binary => session.reject_binary(),
            Incoming::Ping(payload) => {
                let mut buf = Vec::with_capacity(payload.len() + 2);
                frame::encode(&mut buf, Opcode::Pong, &payload);
                if write_rest(stream, buf).await.is_err() {
                    return Some(Ended::Gone);
                }
            }
            Incoming::Pong => {}
            Incoming::Close(code) => return Some(Ended::Wire(End::Close(close::echo(code)))),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_ends_after_the_frame_in_progress() {
        let cuts = vec![5, 8, 12];
        assert_eq!(PusherWire::cut_end(&cuts, 0, &[], 0), 5);
        assert_eq!(PusherWire::cut_end(&cuts, 0, &[], 5), 8);
        assert_eq!(PusherWire::cut_end(&cuts, 4, &[], 0), 1);
        assert_eq!(PusherWire::cut_end(&cuts, 4, &[], 1), 4);
        assert_eq!(PusherWire::cut_end(&cuts, 0, &[], 12), 12);
    }

    #[test]
    fn every_close_reason_has_a_pusher_code_of_the_right_range() {
        for reason in [
            CloseReason::SlowConsumer,
            CloseReason::Shutdown,
            CloseReason::AppDeleted,
            CloseReason::Revoked,
            CloseReason::RateLimited,
        ] {
            let (code, _) = disconnect(reason);
            assert!((4000..4400).contains(&code), "{reason:?}: {code}");
        }
        // pusher-js reconnects at once for 4200-4299, after a while for 4100-4199.
        assert_eq!(disconnect(CloseReason::Shutdown).0 / 100, 42);
        assert_eq!(disconnect(CloseReason::SlowConsumer).0 / 100, 41);
    }
}
