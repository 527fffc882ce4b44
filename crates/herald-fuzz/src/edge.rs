//! `herald-edge`'s parsers: the WebSocket frames a client sends (split anywhere, they give the
//! same messages; what the server encodes decodes to itself), and the SSE fast path's look at a
//! fresh connection's first bytes (a request it takes is the same request when only its head is
//! there).

use herald_edge::fuzzing::{encode, sse_head as classify, FrameReader, Incoming, Opcode, SseHead};

/// Messages and the error (if any) of feeding `chunks` in turn to a fresh reader.
fn read(max: usize, chunks: &[&[u8]]) -> (Vec<Incoming>, Option<herald_edge::fuzzing::FrameError>) {
    let mut reader = FrameReader::new(max);
    let mut out = Vec::new();
    for chunk in chunks {
        if let Err(e) = reader.feed(chunk, &mut out) {
            return (out, Some(e));
        }
    }
    (out, None)
}

/// A server-encoded frame turned into the masked client frame with the same payload (mask 0).
fn as_client_frame(server: &[u8]) -> Vec<u8> {
    let header = match server[1] {
        126 => 4,
        127 => 10,
        _ => 2,
    };
    let mut out = server[..header].to_vec();
    out[1] |= 0x80;
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&server[header..]);
    out
}

/// WebSocket frames: byte 0 picks the size limit, byte 1 where the stream is split; the rest is
/// what the client sends.
pub fn ws_frames(data: &[u8]) {
    let [limit, split, stream @ ..] = data else {
        return;
    };
    let max = 64 + usize::from(*limit) * 32;
    let whole = read(max, &[stream]);
    let at = usize::from(*split) * stream.len() / 256;
    let (a, b) = stream.split_at(at);
    assert_eq!(
        read(max, &[a, b]),
        whole,
        "split at {at} changed what was read"
    );
    if stream.len() <= 512 {
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(
            read(max, &bytes),
            whole,
            "byte by byte changed what was read"
        );
    }
    for message in &whole.0 {
        let (opcode, payload) = match message {
            Incoming::Text(text) => (Opcode::Text, text.as_bytes()),
            Incoming::Ping(payload) => (Opcode::Ping, payload.as_slice()),
            _ => continue,
        };
        let mut server = Vec::new();
        encode(&mut server, opcode, payload);
        let again = read(max, &[&as_client_frame(&server)]);
        let expected = match message {
            Incoming::Text(t) => Incoming::Text(t.clone()),
            Incoming::Ping(p) => Incoming::Ping(p.clone()),
            _ => unreachable!("only text and ping are re-encoded"),
        };
        assert_eq!(
            again,
            (vec![expected], None),
            "an encoded frame decodes to itself"
        );
    }
}

/// The SSE fast path's request head: a request it takes is the same request when only the head
/// it measured is there, and that head is within the bytes.
pub fn sse_head(data: &[u8]) {
    let head = classify(data);
    if let SseHead::Sse { len, .. } = &head {
        assert!(
            *len <= data.len(),
            "head of {len} bytes in {} bytes",
            data.len()
        );
        assert_eq!(
            classify(&data[..*len]),
            head,
            "the head alone is the same request"
        );
    }
}
