//! `herald-pusher`'s client frames: whatever a Pusher client sends parses or is refused without
//! a panic, and every frame the parser accepts, written back as the JSON a client sends, parses
//! to itself.

use herald_pusher::frame::ClientFrame;
use herald_pusher::resume::ResumeAsk;
use serde_json::json;

/// One WebSocket text message of a Pusher connection.
pub fn pusher_frames(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(frame) = ClientFrame::parse(text) else {
        return;
    };
    let again = match &frame {
        ClientFrame::Ping => json!({ "event": "pusher:ping", "data": {} }),
        ClientFrame::Pong => json!({ "event": "pusher:pong", "data": {} }),
        ClientFrame::Subscribe {
            channel,
            auth,
            channel_data,
            resume,
        } => {
            let mut data =
                json!({ "channel": channel, "auth": auth, "channel_data": channel_data });
            match resume {
                None => {}
                Some(ResumeAsk::Positions) => data["herald_positions"] = json!(true),
                Some(ResumeAsk::Since(since)) => {
                    data["herald_since"] =
                        json!({ "epoch": since.epoch.as_str(), "seq": since.seq })
                }
            }
            json!({ "event": "pusher:subscribe", "data": data })
        }
        ClientFrame::Unsubscribe { channel } => {
            json!({ "event": "pusher:unsubscribe", "data": { "channel": channel } })
        }
        ClientFrame::ClientEvent {
            event,
            channel,
            data,
        } => json!({ "event": event, "channel": channel, "data": data }),
        ClientFrame::Signin { auth, user_data } => json!({
            "event": "pusher:signin",
            "data": { "auth": auth, "user_data": user_data },
        }),
        ClientFrame::Other { event } => json!({ "event": event }),
    };
    assert_eq!(
        ClientFrame::parse(&again.to_string()),
        Ok(frame),
        "{text:?} written back as {again}"
    );
}
