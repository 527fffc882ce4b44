//! Herald's WebSocket as a [`Wire`] of the connection driver ([`crate::driver`]): frames read
//! into the session's commands, the outbox's frames written as text frames (with a ping frame
//! when the roster asks for one), a client that answered no ping since the last tick closed with
//! 4002, and the goodbye (a `disconnect` text frame and a close frame).

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::time::Duration;

use herald_core::lifecycle::DisconnectReason;
use herald_core::outbox::{Batch, CloseReason, OutFrame, Outbox};
use herald_core::telemetry::telemetry;

use super::frame::{self, close, FrameReader, Incoming, Opcode};
use super::session::Session;
use crate::conn::Conn;
use crate::driver::{Encoded, Ended, Wire};
use crate::socket::{slow_consumer_goodbye, write_rest};

/// Close code when a peer answered nothing for a whole ping interval.
const CLOSE_KEEPALIVE_TIMEOUT: u16 = 4002;
/// Most bytes read in one go before other work (writes, timers) gets a turn.
const READ_BUDGET: usize = 64 * 1024;
/// Size of the on-stack read buffer; nothing is kept between reads.
const READ_CHUNK: usize = 8 * 1024;

/// How a WebSocket connection ends, from the server's side (besides [`Ended::Gone`] and a
/// slow consumer's [`Ended::Cut`]).
#[derive(Debug)]
pub(super) enum End {
    /// Send a `disconnect` frame with this reason, then close with its code.
    Disconnect(CloseReason),
    /// Tell the client about a frame error, then close with its code.
    BadFrame(frame::FrameError),
    /// Close with this code and nothing else.
    Close(u16),
}

/// One WebSocket connection's wire state: the session and the frame parser.
pub(super) struct WsWire {
    pub(super) session: Session,
    pub(super) reader: FrameReader,
    pub(super) incoming: Vec<Incoming>,
}

impl WsWire {
    /// The state of a connection between frames, around `session`.
    pub(super) fn new(session: Session) -> Self {
        WsWire {
            reader: FrameReader::new(session.edge().settings.max_frame_bytes),
            session,
            incoming: Vec::new(),
        }
    }
}

impl Wire for WsWire {
    type End = End;
    /// The batch's frames (and whether a ping followed them): their encoded sizes say where
    /// each frame ends.
    type Cuts = (VecDeque<OutFrame>, bool);

    fn outbox(&self) -> &Outbox {
        self.session.outbox()
    }

    fn expires(&self) -> Option<u64> {
        self.session.expires()
    }

    fn is_between_frames(&self) -> bool {
        self.reader.is_idle()
    }

    /// Its parked form keeps no command budget: one still refilling stays in its task.
    fn may_park(&self) -> bool {
        self.session.may_park()
    }

    fn has_input(&self) -> bool {
        !self.incoming.is_empty()
    }

    fn handle_input<'a>(
        &'a mut self,
        conn: &'a mut Conn,
    ) -> impl Future<Output = Option<Ended<End>>> + Send + 'a {
        handle_incoming(conn, &mut self.session, &mut self.incoming)
    }

    fn read(&mut self, conn: &mut Conn) -> Option<Ended<End>> {
        match read_available(conn, &mut self.reader, &mut self.incoming) {
            Ok(true) => None,
            Ok(false) => Some(Ended::Gone),
            Err(ReadError::Frame(e)) => Some(Ended::Wire(End::BadFrame(e))),
            Err(ReadError::Io) => Some(Ended::Gone),
        }
    }

    fn encode(&mut self, batch: Batch, heard_since_ping: &mut bool) -> Encoded<Self> {
        let (closed, ping) = (batch.closed, batch.ping);
        let mut ends = closed.map(End::Disconnect);
        let ping = ping && {
            if !*heard_since_ping {
                ends = ends.or(Some(End::Close(CLOSE_KEEPALIVE_TIMEOUT)));
            }
            std::mem::take(heard_since_ping)
        };
        let bytes = encode_frames(&batch.frames, ping);
        Encoded {
            bytes,
            cuts: (batch.frames, ping),
            ends: ends.map(Ended::Wire),
            last: false,
        }
    }

    /// After the first frame end past what is written, counted over the batch's frames as
    /// encoded (only a cut pays for this).
    fn cut_end((frames, ping): &Self::Cuts, sent: usize, _rest: &[u8], at: usize) -> usize {
        let sizes = frames
            .iter()
            .map(|f| payload(f).len())
            .chain(ping.then_some(0));
        let mut end = 0;
        for size in sizes {
            end += frame::encoded_len(size);
            if end > sent + at {
                return end - sent;
            }
        }
        at
    }

    fn expired(&mut self) -> Option<Ended<End>> {
        Some(Ended::Wire(End::Disconnect(CloseReason::TokenExpired)))
    }

    fn goodbye<'a>(
        &'a mut self,
        conn: &'a mut Conn,
        ended: Ended<End>,
    ) -> impl Future<Output = ()> + Send + 'a {
        let max_frame = self.session.edge().settings.max_frame_bytes;
        // What the lifecycle's `disconnected` says, when the outbox's close reason does not
        // (a client closing, or gone, is `closed`, the default).
        let reason = match &ended {
            Ended::Wire(End::Disconnect(reason)) => Some(DisconnectReason::from(*reason)),
            Ended::Wire(End::Close(CLOSE_KEEPALIVE_TIMEOUT)) => Some(DisconnectReason::TimedOut),
            _ => None,
        };
        if let Some(reason) = reason {
            self.session.set_disconnect_reason(reason);
        }
        self.session.close();
        async move {
            match ended {
                Ended::Wire(end) => goodbye(conn, end, max_frame, Vec::new()).await,
                Ended::Cut(rest) => {
                    let end = End::Disconnect(CloseReason::SlowConsumer);
                    goodbye(conn, end, max_frame, rest).await
                }
                Ended::Gone => {}
            }
        }
    }
}

/// Tells the client why the connection ends (a `disconnect` frame and a close frame, as `end`
/// calls for), giving the socket a second at most; a slow consumer's goodbye, after what a cut
/// left of the frame in progress (`cut_frame`), gets [`crate::driver::SLOW_CONSUMER_GRACE`].
async fn goodbye(stream: &mut Conn, end: End, max_frame: usize, cut_frame: Vec<u8>) {
    let mut goodbye = cut_frame;
    match end {
        End::Disconnect(reason @ CloseReason::SlowConsumer) => {
            let text = herald_proto::frame::disconnect(reason.code(), reason.message());
            frame::encode(&mut goodbye, Opcode::Text, &text);
            frame::encode_close(&mut goodbye, disconnect_code(reason));
            return slow_consumer_goodbye(stream, goodbye).await;
        }
        End::Disconnect(reason) => {
            let text = herald_proto::frame::disconnect(reason.code(), reason.message());
            frame::encode(&mut goodbye, Opcode::Text, &text);
            frame::encode_close(&mut goodbye, disconnect_code(reason));
        }
        End::BadFrame(e) => {
            let code = match e {
                frame::FrameError::TooBig(_) => "too_large",
                _ => "bad_request",
            };
            let text = herald_proto::frame::disconnect(code, &e.describe(max_frame));
            frame::encode(&mut goodbye, Opcode::Text, &text);
            frame::encode_close(&mut goodbye, e.close_code());
        }
        End::Close(code) => frame::encode_close(&mut goodbye, code),
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), write_rest(stream, goodbye)).await;
}

/// Runs the commands and control frames read so far; returns how the connection ends, if it
/// does. The driver boxes this future, so the (large) command futures exist only while
/// commands run, not in every idle connection.
async fn handle_incoming(
    stream: &mut Conn,
    session: &mut Session,
    incoming: &mut Vec<Incoming>,
) -> Option<Ended<End>> {
    let messages = std::mem::take(incoming);
    // Consecutive commands are handed over together (a run of subscribes runs side by side),
    // before what follows them.
    for run in messages.chunk_by(|a, b| a.text().is_some() && b.text().is_some()) {
        match &run[0] {
            Incoming::Text(_) => session.handle(run.iter().filter_map(Incoming::text)).await,
            Incoming::Binary => session.reject_binary(),
            Incoming::Ping(payload) => {
                let mut buf = Vec::with_capacity(payload.len() + 2);
                frame::encode(&mut buf, Opcode::Pong, payload);
                if write_rest(stream, buf).await.is_err() {
                    return Some(Ended::Gone);
                }
            }
            Incoming::Pong => {}
            Incoming::Close(code) => return Some(Ended::Wire(End::Close(close::echo(*code)))),
        }
    }
    None
}

enum ReadError {
    Frame(frame::FrameError),
    Io,
}

/// Reads what the socket has (up to a budget) through a stack buffer and parses it. Returns
/// false when the peer closed the connection.
fn read_available(
    stream: &mut Conn,
    reader: &mut FrameReader,
    incoming: &mut Vec<Incoming>,
) -> Result<bool, ReadError> {
    let mut chunk = [0u8; READ_CHUNK];
    let mut budget = READ_BUDGET;
    while budget > 0 {
        match stream.try_read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                reader
                    .feed(&chunk[..n], incoming)
                    .map_err(ReadError::Frame)?;
                budget = budget.saturating_sub(n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(ReadError::Io),
        }
    }
    Ok(true)
}

/// A queued frame's text payload, borrowed (a message's from its shared frame cache).
fn payload(frame: &OutFrame) -> &[u8] {
    match frame {
        OutFrame::Control(b) | OutFrame::Presence(b) => b,
        OutFrame::Message(m) | OutFrame::Replayed(m) => herald_core::frames::ws_message_ref(m),
    }
}

/// Encodes a batch of frames (and a ping after them, if `ping`) into one buffer, sized up
/// front; empty when there is nothing to write.
fn encode_frames(frames: &VecDeque<OutFrame>, ping: bool) -> Vec<u8> {
    if frames.is_empty() && !ping {
        return Vec::new();
    }
    let mut messages = 0u64;
    let mut lag_recorded = false;
    let size = frames.iter().map(|f| payload(f).len() + 10).sum::<usize>() + 2;
    let mut buf = Vec::with_capacity(size);
    for f in frames {
        match f {
            OutFrame::Control(_) | OutFrame::Presence(_) => {}
            OutFrame::Message(m) => {
                if !lag_recorded {
                    herald_core::message::record_delivery_lag(m);
                    lag_recorded = true;
                }
                messages += 1;
            }
            OutFrame::Replayed(_) => messages += 1,
        }
        frame::encode(&mut buf, Opcode::Text, payload(f));
    }
    if ping {
        frame::encode(&mut buf, Opcode::Ping, b"");
    }
    telemetry().written_ws.increment(messages);
    buf
}

/// The close code that goes with a `disconnect` reason.
pub(super) fn disconnect_code(reason: CloseReason) -> u16 {
    match reason {
        CloseReason::SlowConsumer => 4008,
        CloseReason::Shutdown => close::GOING_AWAY,
        CloseReason::TokenExpired => 4001,
        CloseReason::Revoked
        | CloseReason::AppDeleted
        | CloseReason::SecretChanged
        | CloseReason::DeviceRevoked => 4003,
        CloseReason::RateLimited => 4029,
        CloseReason::ResumeLost => 4010,
        CloseReason::StoreUnavailable => 1011,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn control(text: &'static str) -> OutFrame {
        OutFrame::Control(Bytes::from_static(text.as_bytes()))
    }

    #[test]
    fn a_cut_ends_after_the_frame_in_progress() {
        // Three frames of 2 + 3, 2 + 1 and 2 + 0 bytes, and a ping (2 bytes).
        let frames: VecDeque<OutFrame> = [control("abc"), control("d"), control("")].into();
        let cuts = (frames, true);
        let bytes = encode_frames(&cuts.0, true);
        assert_eq!(bytes.len(), 5 + 3 + 2 + 2);
        // Nothing sent yet: the first frame is in progress, and stays whole.
        assert_eq!(WsWire::cut_end(&cuts, 0, &bytes, 0), 5);
        assert_eq!(WsWire::cut_end(&cuts, 0, &bytes, 1), 5);
        assert_eq!(WsWire::cut_end(&cuts, 0, &bytes, 5), 8);
        // Four bytes went out at once: offsets count from the rest.
        assert_eq!(WsWire::cut_end(&cuts, 4, &bytes[4..], 0), 1);
        assert_eq!(WsWire::cut_end(&cuts, 4, &bytes[4..], 1), 4);
        // The ping is a frame too; past the end, nothing more.
        assert_eq!(WsWire::cut_end(&cuts, 0, &bytes, 10), 12);
        assert_eq!(WsWire::cut_end(&cuts, 0, &bytes, 12), 12);
    }
}
