//! `herald-proto`'s parsers: a client's JSON command frames, alone or in a batch (a parsed frame
//! serialises to JSON that parses to the same frame) and cursor strings (decoded positions encode to a string that
//! decodes to the same positions; the same for the device inbox cursor).

use herald_proto::command::{self, ClientFrame};
use herald_proto::cursor;

/// One WebSocket text frame as a command, or as a batch of commands.
pub fn command_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match command::batch(text) {
        None => command_round_trip(text),
        Some(Ok(commands)) => commands.into_iter().for_each(command_round_trip),
        Some(Err(_)) => {}
    }
}

/// One command: a parsed frame's JSON parses to the same frame.
fn command_round_trip(text: &str) {
    let Ok(frame) = ClientFrame::parse(text) else {
        return;
    };
    let json = serde_json::to_string(&frame).expect("a parsed frame serialises");
    let again = ClientFrame::parse(&json)
        .unwrap_or_else(|e| panic!("a frame's own JSON {json} does not parse: {:?}", e.error));
    let json_again = serde_json::to_string(&again).expect("a parsed frame serialises");
    assert_eq!(json, json_again, "a frame's JSON parses to the same frame");
}

/// A cursor string (SSE `Last-Event-ID`, long-poll `since`) for 1 to 8 channels, and the same
/// text as a device inbox cursor.
pub fn cursor_strings(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let channels = text.len() % 8 + 1;
    if let Ok(positions) = cursor::decode(text, channels) {
        assert_eq!(positions.len(), channels);
        let given: Vec<cursor::Cursor> = positions.iter().flatten().cloned().collect();
        let encoded = cursor::encode(&given);
        let again = cursor::decode(&encoded, channels)
            .unwrap_or_else(|e| panic!("encoded cursor {encoded:?} does not decode: {e:?}"));
        assert_eq!(again, positions, "{text:?} -> {encoded:?}");
    }
    let (app, device) = cursor::decode_inbox(text);
    let encoded = cursor::encode_inbox(&app, &device);
    assert_eq!(
        cursor::decode_inbox(&encoded),
        (app, device),
        "{text:?} -> {encoded:?}"
    );
}
