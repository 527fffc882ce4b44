//! Pusher's HTTP API as the bench's publishers use it against any Pusher-protocol server (Herald,
//! Sockudo): an app's credentials ([`PusherApp`]) and a trigger, `POST /apps/{app_id}/events`
//! with one event on one channel, signed as Pusher documents ("server API authentication"):
//! `auth_key`, `auth_timestamp`, `auth_version=1.0` and `body_md5` in the query, and
//! `auth_signature`, the hex HMAC-SHA256 with the app's secret of the method, the path and those
//! parameters sorted by name (`POST\n/apps/ID/events\nauth_key=...&...`).

use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use sha2::Sha256;

/// An app's Pusher credentials: what a backend signs its HTTP API requests with and what
/// pusher-js connects with (the key).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PusherApp {
    /// The app id of the HTTP API's paths (`/apps/{app_id}/events`).
    pub app_id: String,
    /// The key clients connect with (`/app/{key}`) and requests name as `auth_key`.
    pub key: String,
    /// The secret that signs requests.
    pub secret: String,
}

/// The event name every bench trigger carries.
pub const EVENT_NAME: &str = "bench";

impl PusherApp {
    /// The signed path and query of a trigger whose JSON body is `body`, at unix time
    /// `timestamp` (seconds; Pusher servers accept 600 s either way).
    pub fn events_path(&self, body: &[u8], timestamp: u64) -> String {
        let path = format!("/apps/{}/events", self.app_id);
        let query = format!(
            "auth_key={}&auth_timestamp={timestamp}&auth_version=1.0&body_md5={}",
            self.key,
            hex::encode(Md5::digest(body))
        );
        let signature = self.sign(&format!("POST\n{path}\n{query}"));
        format!("{path}?{query}&auth_signature={signature}")
    }

    /// The hex HMAC-SHA256 of `text` with the app's secret.
    fn sign(&self, text: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.secret.as_bytes())
            .expect("HMAC takes a key of any length");
        mac.update(text.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

/// The body of a trigger of one [`EVENT_NAME`] event on `channel` whose data is the bench's
/// stamp (`{"ts":N}`), which Pusher's HTTP API carries as a JSON-encoded string.
pub fn trigger_body(channel: &str, sent_ns: u64) -> String {
    format!(
        "{{\"name\":\"{EVENT_NAME}\",\"channel\":\"{channel}\",\"data\":\"{{\\\"ts\\\":{sent_ns}}}\"}}"
    )
}

/// The unix time in seconds (for `auth_timestamp`).
pub fn unix_seconds() -> u64 {
    crate::wire::now_ns() / 1_000_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pusher's own worked example ("server API authentication"): key `278d425bdf160c739803`,
    /// secret `7ad3773142a6692b25b8`, app 3, a trigger to `project-3` at timestamp 1353088179.
    #[test]
    fn a_trigger_is_signed_as_pushers_documented_example() {
        let app = PusherApp {
            app_id: "3".into(),
            key: "278d425bdf160c739803".into(),
            secret: "7ad3773142a6692b25b8".into(),
        };
        let body = br#"{"name":"foo","channels":["project-3"],"data":"{\"some\":\"data\"}"}"#;
        assert_eq!(
            app.events_path(body, 1353088179),
            "/apps/3/events?auth_key=278d425bdf160c739803&auth_timestamp=1353088179\
             &auth_version=1.0&body_md5=ec365a775a4cd0599faeb73354201b6f\
             &auth_signature=da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c"
        );
    }

    #[test]
    fn a_trigger_body_carries_the_stamp_as_a_json_string() {
        let body = trigger_body("bench-abc-fanout", 1763772000123456789);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["name"], EVENT_NAME);
        assert_eq!(v["channel"], "bench-abc-fanout");
        // The data is a string holding the stamp, as the Pusher subscribers read it back.
        let data: serde_json::Value = serde_json::from_str(v["data"].as_str().unwrap()).unwrap();
        assert_eq!(data["ts"], 1763772000123456789u64);
    }
}
