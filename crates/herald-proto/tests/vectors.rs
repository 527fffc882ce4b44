//! Replays the golden vectors in `tests/vectors/` both ways: every wire text decodes to its
//! meaning, and every meaning encodes to the exact wire bytes, through the typed forms and
//! through the server's fast encoders. tests/vectors/README.md describes the format.

use std::path::PathBuf;

use herald_proto::command::ClientFrame;
use herald_proto::cursor::{self, Cursor, Epoch};
use herald_proto::error::{ErrorCode, HeraldError};
use herald_proto::frame::{self, HistoryHead, MessageView};
use herald_proto::reply::{
    ErrorBody, HistoryReply, MessageEntry, PollAnswer, ServerBody, ServerFrame, SubscribeReply,
};
use herald_proto::sse::SseEvent;
use herald_proto::token::{self, ClientClaims};
use serde_json::{json, Value};

fn load(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/vectors")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn entries<'a>(v: &'a Value, list: &str) -> impl Iterator<Item = &'a Value> {
    v[list].as_array().expect(list).iter()
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string in {v}"))
}

fn id_of(v: &Value) -> Option<u64> {
    v.as_u64()
}

/// `{"id":N,"<key>":<body>}` with `id` left out when null.
fn keyed(id: &Value, key: &str, body: &Value) -> Value {
    let mut map = serde_json::Map::new();
    if !id.is_null() {
        map.insert("id".into(), id.clone());
    }
    map.insert(key.into(), body.clone());
    Value::Object(map)
}

fn view<'a>(m: &'a MessageEntry<'_>) -> MessageView<'a> {
    MessageView {
        channel: &m.channel,
        seq: m.seq,
        epoch: &m.epoch,
        id: &m.id,
        time: m.time,
        data: m.data.get().as_bytes(),
    }
}

#[test]
fn commands() {
    let v = load("commands.json");
    for case in entries(&v, "valid") {
        let (wire, encoded, m) = (text(case, "wire"), text(case, "encoded"), &case["meaning"]);
        let frame = ClientFrame::parse(wire).unwrap_or_else(|e| panic!("{wire}: {:?}", e.error));
        assert_eq!(frame.id, id_of(&m["id"]), "{wire}");
        assert_eq!(frame.command.name(), text(m, "command"), "{wire}");
        let expected = keyed(&m["id"], text(m, "command"), &m["body"]);
        assert_eq!(serde_json::to_value(&frame).unwrap(), expected, "{wire}");
        assert_eq!(serde_json::to_string(&frame).unwrap(), encoded, "{wire}");
        let again = ClientFrame::parse(encoded).unwrap_or_else(|e| panic!("{encoded}: {e:?}"));
        assert_eq!(serde_json::to_string(&again).unwrap(), encoded);
    }
    for case in entries(&v, "invalid") {
        let wire = text(case, "wire");
        let e = ClientFrame::parse(wire).expect_err(wire);
        let code = ErrorCode::from_wire(text(&case["error"], "code")).unwrap();
        assert_eq!(e.error.code, code, "{wire}: {}", e.error);
        assert_eq!(e.id, id_of(&case["error"]["id"]), "{wire}");
    }
}

#[test]
fn websocket_frames() {
    let v = load("frames.json");
    let mut kinds = std::collections::BTreeSet::new();
    for case in entries(&v, "valid").filter(|c| c["transport"] == "ws") {
        let (wire, m) = (text(case, "wire"), &case["meaning"]);
        let frame = ServerFrame::parse(wire).unwrap_or_else(|e| panic!("{wire}: {e}"));
        kinds.insert(frame.kind());
        assert_eq!(frame.id, id_of(&m["id"]), "{wire}");
        assert_eq!(frame.kind(), text(m, "frame"), "{wire}");
        let expected = keyed(&m["id"], text(m, "frame"), &m["body"]);
        assert_eq!(serde_json::to_value(&frame).unwrap(), expected, "{wire}");
        assert_eq!(
            &frame.encode()[..],
            wire.as_bytes(),
            "typed encode of {wire}"
        );
        assert_eq!(serde_json::to_string(&frame).unwrap(), wire);
        let from_serde: ServerFrame<'_> = serde_json::from_str(wire).unwrap();
        assert_eq!(from_serde, frame);
        // The server's fast paths write the same bytes.
        let fast = match &frame.body {
            ServerBody::Message(m) => frame::ws_message(&frame::message_entry(&view(m))),
            ServerBody::Error(b) => {
                let code = ErrorCode::from_wire(&b.code).unwrap();
                frame::error(frame.id, &HeraldError::new(code, b.message.clone()))
            }
            ServerBody::Disconnect(b) => frame::disconnect(&b.code, &b.message),
            ServerBody::History(h) => frame::reply_json(
                frame.id,
                "history",
                &frame::history(&head(h), &entry_bytes(&h.messages)),
            ),
            _ => frame.encode(),
        };
        assert_eq!(&fast[..], wire.as_bytes(), "fast path of {wire}");
    }
    assert_eq!(
        kinds.len(),
        herald_proto::reply::SERVER_FRAME_KINDS.len(),
        "every server frame has a vector"
    );
    for case in entries(&v, "invalid").filter(|c| c["transport"] == "ws") {
        let wire = text(case, "wire");
        let e = ServerFrame::parse(wire).expect_err(wire);
        assert_eq!(e.code.as_str(), text(case, "error"), "{wire}");
    }
}

fn head<'a>(h: &'a HistoryReply<'_>) -> HistoryHead<'a> {
    HistoryHead {
        channel: &h.channel,
        epoch: &h.epoch,
        seq: h.seq,
        first_seq: h.first_seq,
    }
}

fn entry_bytes(messages: &[MessageEntry<'_>]) -> Vec<bytes::Bytes> {
    messages
        .iter()
        .map(|m| frame::message_entry(&view(m)))
        .collect()
}

#[test]
fn sse_events() {
    let v = load("frames.json");
    for case in entries(&v, "valid").filter(|c| c["transport"] == "sse") {
        let (wire, m) = (text(case, "wire"), &case["meaning"]);
        let block = wire
            .strip_suffix("\n\n")
            .expect("an event ends with a blank line");
        let event = SseEvent::parse(block).unwrap_or_else(|| panic!("{wire:?}"));
        assert_eq!(event.event.as_deref(), m["event"].as_str(), "{wire:?}");
        assert_eq!(event.id.as_deref(), m["id"].as_str(), "{wire:?}");
        let body: Value = serde_json::from_str(&event.data).unwrap();
        assert_eq!(body, m["body"], "{wire:?}");
        assert_eq!(
            &event.encode()[..],
            wire.as_bytes(),
            "typed encode of {wire:?}"
        );
        let fast = match event.event.as_deref() {
            Some("subscribed") => {
                let r: SubscribeReply<'_> = serde_json::from_str(&event.data).unwrap();
                frame::sse_event("subscribed", &r)
            }
            Some("disconnect") => {
                let r: ErrorBody<'_> = serde_json::from_str(&event.data).unwrap();
                frame::sse_event("disconnect", &r)
            }
            Some(other) => panic!("no vector expected for event {other}"),
            None => {
                let entry: MessageEntry<'_> = serde_json::from_str(&event.data).unwrap();
                let mut out = format!("id: {}\n", event.id.as_deref().unwrap()).into_bytes();
                out.extend_from_slice(&frame::sse_data_lines(&frame::message_entry(&view(&entry))));
                out.into()
            }
        };
        assert_eq!(&fast[..], wire.as_bytes(), "fast path of {wire:?}");
    }
}

#[test]
fn poll_answers_and_http_history() {
    let v = load("frames.json");
    for case in entries(&v, "valid") {
        let (wire, body) = (text(case, "wire"), &case["meaning"]["body"]);
        match case["transport"].as_str() {
            Some("poll") => {
                let a: PollAnswer<'_> = serde_json::from_str(wire).unwrap();
                assert_eq!(serde_json::to_value(&a).unwrap(), *body);
                assert_eq!(serde_json::to_string(&a).unwrap(), wire);
                for m in &a.messages {
                    let entry = frame::message_entry(&view(m));
                    assert_eq!(&entry[..], serde_json::to_string(m).unwrap().as_bytes());
                }
            }
            Some("http") => {
                let h: HistoryReply<'_> = serde_json::from_str(wire).unwrap();
                assert_eq!(serde_json::to_value(&h).unwrap(), *body);
                assert_eq!(serde_json::to_string(&h).unwrap(), wire);
                let fast = frame::history(&head(&h), &entry_bytes(&h.messages));
                assert_eq!(fast, wire.as_bytes());
            }
            _ => {}
        }
    }
}

fn position(c: &Cursor) -> Value {
    json!({ "epoch": c.epoch.as_str(), "seq": c.seq })
}

fn cursor_of(v: &Value) -> Cursor {
    Cursor {
        epoch: Epoch::new(text(v, "epoch")),
        seq: v["seq"].as_u64().unwrap(),
    }
}

#[test]
fn cursor_strings() {
    let v = load("cursors.json");
    for case in entries(&v, "valid") {
        let wire = text(case, "wire");
        let channels = case["channels"].as_u64().unwrap() as usize;
        let decoded = cursor::decode(wire, channels).unwrap_or_else(|e| panic!("{wire}: {e}"));
        let meaning: Vec<Value> = decoded
            .iter()
            .map(|p| p.as_ref().map_or(Value::Null, position))
            .collect();
        assert_eq!(Value::Array(meaning), case["meaning"], "{wire:?}");
        if let Some(encoded) = case["encoded"].as_str() {
            let all: Vec<Cursor> = decoded.into_iter().map(Option::unwrap).collect();
            assert_eq!(cursor::encode(&all), encoded, "{wire:?}");
            assert_eq!(
                cursor::decode(encoded, channels).unwrap(),
                all.into_iter().map(Some).collect::<Vec<_>>()
            );
        }
    }
    for case in entries(&v, "invalid") {
        let wire = text(case, "wire");
        let channels = case["channels"].as_u64().unwrap() as usize;
        let e = cursor::decode(wire, channels).expect_err(wire);
        assert_eq!(e.code.as_str(), text(case, "error"), "{wire:?}");
    }
}

#[test]
fn inbox_cursor_strings() {
    let v = load("inbox_cursors.json");
    for case in entries(&v, "valid").chain(entries(&v, "lenient")) {
        let wire = text(case, "wire");
        let (app, device) = cursor::decode_inbox(wire);
        let meaning = json!({ "app": position(&app), "device": position(&device) });
        assert_eq!(meaning, case["meaning"], "{wire:?}");
        let app = cursor_of(&case["meaning"]["app"]);
        let device = cursor_of(&case["meaning"]["device"]);
        assert_eq!(cursor::encode_inbox(&app, &device), text(case, "encoded"));
    }
}

#[test]
fn tokens() {
    let v = load("tokens.json");
    for case in entries(&v, "valid") {
        let secret = text(case, "secret").as_bytes();
        let app = text(case, "app");
        let claims: ClientClaims = serde_json::from_value(case["claims"].clone()).unwrap();
        let minted = token::mint_for_app(secret, app, &claims);
        assert_eq!(minted, text(case, "token"), "{}", case["name"]);
        if app == token::DEFAULT_APP {
            assert_eq!(token::mint(secret, &claims), minted);
        }
        // Decoding the vector's token gives back its claims and app.
        let header = jsonwebtoken::decode_header(&minted).unwrap();
        assert_eq!(
            header.kid.as_deref(),
            (app != token::DEFAULT_APP).then_some(app)
        );
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        let key = jsonwebtoken::DecodingKey::from_secret(secret);
        let data = jsonwebtoken::decode::<ClientClaims>(&minted, &key, &validation).unwrap();
        assert_eq!(data.claims, claims);
        assert_eq!(serde_json::to_value(&claims).unwrap(), case["claims"]);
    }
    // The invalid tokens are the verifier's (herald-core's auth tests replay them).
    assert!(entries(&v, "invalid").count() > 0);
}

#[test]
fn error_codes() {
    let v = load("errors.json");
    let mut seen = Vec::new();
    for case in entries(&v, "valid") {
        let code = ErrorCode::from_wire(text(case, "code")).expect("a known code");
        seen.push(code);
        assert_eq!(code.as_str(), text(case, "code"));
        assert_eq!(
            u64::from(code.http_status()),
            case["status"].as_u64().unwrap()
        );
        let e = HeraldError::new(code, text(case, "message"));
        let (status, body) = herald_proto::http::error_answer(&e);
        assert_eq!(u64::from(status), case["status"].as_u64().unwrap());
        assert_eq!(body, text(case, "http_body").as_bytes());
        assert_eq!(
            &frame::error(Some(1), &e)[..],
            text(case, "ws_frame").as_bytes()
        );
        let back = ServerFrame::parse(text(case, "ws_frame")).unwrap();
        assert_eq!(back.body, ServerBody::Error(ErrorBody::from(&e)));
    }
    assert_eq!(seen, ErrorCode::ALL, "every code, in the documented order");
    for case in entries(&v, "invalid") {
        assert_eq!(ErrorCode::from_wire(text(case, "wire")), None);
    }
}
