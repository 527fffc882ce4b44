//! The bench's hand-written frame readers ([`crate::wire`]) run over herald-proto's golden
//! server frames (`crates/herald-proto/tests/vectors/frames.json`), so a protocol change the
//! bench does not follow fails here instead of skewing a benchmark.

use serde_json::Value;

use crate::wire::{self, ServerText, SseEvent};

fn frames() -> Value {
    serde_json::from_str(include_str!("../../herald-proto/tests/vectors/frames.json"))
        .expect("frames.json is JSON")
}

fn cases<'a>(v: &'a Value, transport: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    v["valid"]
        .as_array()
        .expect("valid cases")
        .iter()
        .filter(move |c| c["transport"] == transport)
}

#[test]
fn websocket_frames_are_classified_as_the_contract_says() {
    let v = frames();
    let mut seen = 0;
    for case in cases(&v, "ws") {
        let wire = case["wire"].as_str().unwrap();
        let m = &case["meaning"];
        let has_id = !m["id"].is_null();
        let expected = match (m["frame"].as_str().unwrap(), has_id) {
            ("message", _) => ServerText::Message,
            ("subscribe", true) => ServerText::Subscribed,
            ("publish", true) => ServerText::Published,
            ("subscribe", false) => ServerText::InboxOpened,
            ("ack", true) => ServerText::Acked,
            ("error", answers) => ServerText::Error { answers },
            ("disconnect", _) => ServerText::Disconnect,
            _ => ServerText::Other,
        };
        assert_eq!(wire::classify_ws_text(wire.as_bytes()), expected, "{wire}");
        if expected == ServerText::Message {
            // Bench messages carry their send time in data; the vectors' data do not.
            assert_eq!(wire::find_ts(wire.as_bytes()), None, "{wire}");
            // An inbox message names its log and seq, which an ack repeats.
            let log = m["body"]["channel"].as_str().unwrap_or_default();
            let position = wire::inbox_position(wire.as_bytes());
            if log.starts_with('$') {
                let seq = m["body"]["seq"].as_u64().unwrap();
                assert_eq!(position, Some((log, seq)), "{wire}");
            } else {
                assert_eq!(position, None, "{wire}");
            }
        }
        seen += 1;
    }
    assert!(seen > 10, "the vectors hold WebSocket frames");
}

#[test]
fn sse_events_are_classified_as_the_contract_says() {
    let v = frames();
    for case in cases(&v, "sse") {
        let wire = case["wire"].as_str().unwrap();
        let block = wire
            .strip_suffix("\n\n")
            .expect("an event ends with a blank line");
        let first_data = block
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap()
            .as_bytes();
        let expected = match case["meaning"]["event"].as_str() {
            Some("subscribed") => SseEvent::Subscribed,
            Some("disconnect") => SseEvent::Disconnect(first_data),
            Some(_) => SseEvent::Other,
            None => SseEvent::Message(first_data),
        };
        assert_eq!(wire::sse_classify(block.as_bytes()), expected, "{wire:?}");
    }
}

#[test]
fn poll_answers_read_as_the_contract_says() {
    let v = frames();
    for case in cases(&v, "poll") {
        let wire = case["wire"].as_str().unwrap();
        let body = &case["meaning"]["body"];
        let answer: wire::PollAnswer<'_> = serde_json::from_str(wire).unwrap();
        assert_eq!(answer.cursor, body["cursor"].as_str().unwrap());
        assert_eq!(
            answer.channels.len(),
            body["channels"].as_array().unwrap().len()
        );
        let data: Vec<Value> = answer
            .messages
            .iter()
            .map(|m| serde_json::from_str(m.data.get()).unwrap())
            .collect();
        let expected: Vec<Value> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["data"].clone())
            .collect();
        assert_eq!(data, expected, "{wire}");
    }
}
