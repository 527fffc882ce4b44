//! Pusher's signatures, all HMAC-SHA256 in lower-case hex, checked in constant time:
//!
//! - the HTTP API's request signature ([`request_string`], [`body_md5`]): `auth_signature` is
//!   `HMAC(secret, "METHOD\nPATH\nQUERY")`, QUERY being every query parameter but
//!   `auth_signature`, keys lower-cased, sorted by key, written `key=value` (values as sent,
//!   percent-decoded, never escaped again) and joined with `&` (Pusher's "server API
//!   authentication");
//! - a private or presence channel's authorisation ([`channel_auth_string`],
//!   [`check_key_signature`]): `key:HMAC(secret, "socket_id:channel[:channel_data]")`;
//! - a user's sign-in ([`signin_string`]): `key:HMAC(secret, "socket_id::user::user_data")`.
//!
//! A check takes every secret the credentials accept at the time (the current one, and the
//! one being rotated out while its overlap lasts) and compares each signature with
//! `hmac`'s `verify_slice`, which takes the same time wherever the bytes differ.

use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

fn mac(secret: &[u8]) -> HmacSha256 {
    // HMAC takes a key of any length: this never fails.
    HmacSha256::new_from_slice(secret).expect("HMAC-SHA256 takes a key of any length")
}

/// `HMAC-SHA256(secret, message)` in lower-case hex.
pub fn hmac_sha256_hex(secret: &[u8], message: &[u8]) -> String {
    let mut mac = mac(secret);
    mac.update(message);
    hex::encode(mac.finalize().into_bytes())
}

/// Whether `given_hex` is `HMAC-SHA256(secret, message)` in hex (either case), for one of
/// `secrets`. Each comparison takes the same time wherever the bytes differ; text that is
/// not 64 hex digits matches nothing.
pub fn verify_hmac_hex<'a>(
    secrets: impl IntoIterator<Item = &'a [u8]>,
    message: &[u8],
    given_hex: &str,
) -> bool {
    let Ok(given) = hex::decode(given_hex) else {
        return false;
    };
    let mut matched = false;
    for secret in secrets {
        let mut mac = mac(secret);
        mac.update(message);
        // Every secret is tried: how long a check takes does not say which one matched.
        matched |= mac.verify_slice(&given).is_ok();
    }
    matched
}

/// The MD5 of `body` in lower-case hex: a request's `body_md5`.
pub fn body_md5(body: &[u8]) -> String {
    hex::encode(Md5::digest(body))
}

/// Whether `given` is the hex MD5 of `body` (either case), compared in constant time.
pub fn body_md5_matches(body: &[u8], given: &str) -> bool {
    use subtle::ConstantTimeEq;
    let expected = body_md5(body);
    let given = given.to_ascii_lowercase();
    expected.as_bytes().ct_eq(given.as_bytes()).into()
}

/// The string an HTTP API request's `auth_signature` signs: `METHOD\nPATH\nQUERY`, QUERY
/// being `params` but `auth_signature` (any case), keys lower-cased, sorted by key (then
/// value, so a repeated key has one order), `key=value` joined by `&`, nothing escaped.
pub fn request_string<'a>(
    method: &str,
    path: &str,
    params: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let mut pairs: Vec<(String, &str)> = params
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .filter(|(k, _)| k != "auth_signature")
        .collect();
    pairs.sort();
    let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!(
        "{}\n{path}\n{}",
        method.to_ascii_uppercase(),
        query.join("&")
    )
}

/// The string a private or presence channel's authorisation signs:
/// `socket_id:channel`, then `:channel_data` for a presence channel.
pub fn channel_auth_string(socket_id: &str, channel: &str, channel_data: Option<&str>) -> String {
    match channel_data {
        Some(data) => format!("{socket_id}:{channel}:{data}"),
        None => format!("{socket_id}:{channel}"),
    }
}

/// The string a user's sign-in signs: `socket_id::user::user_data`.
pub fn signin_string(socket_id: &str, user_data: &str) -> String {
    format!("{socket_id}::user::{user_data}")
}

/// `key:HMAC-SHA256(secret, signed)` in hex: what an app's backend answers a channel
/// authorisation or a sign-in with (and what tests sign with).
pub fn key_signature(key: &str, secret: &[u8], signed: &str) -> String {
    format!("{key}:{}", hmac_sha256_hex(secret, signed.as_bytes()))
}

/// Whether `auth` is `key:HMAC-SHA256(secret, signed)` for `key` and one of `secrets`; the
/// key is compared in constant time too.
pub fn check_key_signature<'a>(
    key: &str,
    secrets: impl IntoIterator<Item = &'a [u8]>,
    signed: &str,
    auth: &str,
) -> bool {
    use subtle::ConstantTimeEq;
    let Some((given_key, signature)) = auth.split_once(':') else {
        return false;
    };
    let key_matches: bool = given_key.as_bytes().ct_eq(key.as_bytes()).into();
    let signature_matches = verify_hmac_hex(secrets, signed.as_bytes(), signature);
    key_matches & signature_matches
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pusher's own worked example ("server API authentication"): key `278d425bdf160c739803`,
    /// secret `7ad3773142a6692b25b8`, a trigger to `project-3` at timestamp 1353088179.
    #[test]
    fn pushers_documented_example_signs_alike() {
        let body = r#"{"name":"foo","channels":["project-3"],"data":"{\"some\":\"data\"}"}"#;
        assert_eq!(
            body_md5(body.as_bytes()),
            "ec365a775a4cd0599faeb73354201b6f"
        );
        let signed = request_string(
            "POST",
            "/apps/3/events",
            [
                ("auth_version", "1.0"),
                ("auth_key", "278d425bdf160c739803"),
                ("auth_timestamp", "1353088179"),
                ("body_md5", "ec365a775a4cd0599faeb73354201b6f"),
                ("auth_signature", "ignored"),
            ],
        );
        assert_eq!(
            signed,
            "POST\n/apps/3/events\nauth_key=278d425bdf160c739803&auth_timestamp=1353088179\
             &auth_version=1.0&body_md5=ec365a775a4cd0599faeb73354201b6f"
        );
        let signature = hmac_sha256_hex(b"7ad3773142a6692b25b8", signed.as_bytes());
        assert_eq!(
            signature,
            "da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c"
        );
        assert!(verify_hmac_hex(
            [&b"wrong"[..], b"7ad3773142a6692b25b8"],
            signed.as_bytes(),
            &signature.to_uppercase()
        ));
        assert!(!verify_hmac_hex(
            [&b"wrong"[..]],
            signed.as_bytes(),
            &signature
        ));
        assert!(!verify_hmac_hex(
            [&b"7ad3773142a6692b25b8"[..]],
            signed.as_bytes(),
            "not hex"
        ));
    }

    #[test]
    fn query_keys_are_lowercased_and_sorted_without_escaping() {
        let signed = request_string(
            "get",
            "/apps/1/channels",
            [
                ("Name", "Something else"),
                ("auth_key", "foo"),
                ("AUTH_SIGNATURE", "x"),
            ],
        );
        assert_eq!(
            signed,
            "GET\n/apps/1/channels\nauth_key=foo&name=Something else"
        );
    }

    /// Pusher's documented channel authorisation example (key `278d425bdf160c739803`,
    /// secret `7ad3773142a6692b25b8`, socket `1234.1234`, channel `private-foobar`).
    #[test]
    fn channel_auth_is_pushers_example() {
        let (key, secret) = ("278d425bdf160c739803", &b"7ad3773142a6692b25b8"[..]);
        let signed = channel_auth_string("1234.1234", "private-foobar", None);
        assert_eq!(signed, "1234.1234:private-foobar");
        let auth = key_signature(key, secret, &signed);
        assert_eq!(
            auth,
            "278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"
        );
        assert!(check_key_signature(key, [secret], &signed, &auth));
        assert!(!check_key_signature("other", [secret], &signed, &auth));
        let other = channel_auth_string("1234.1235", "private-foobar", None);
        assert!(!check_key_signature(key, [secret], &other, &auth));
        assert!(!check_key_signature(key, [secret], &signed, "no colon"));
        let presence = channel_auth_string("1.2", "presence-x", Some(r#"{"user_id":7}"#));
        assert_eq!(presence, r#"1.2:presence-x:{"user_id":7}"#);
        assert_eq!(
            signin_string("1.2", r#"{"id":"u"}"#),
            r#"1.2::user::{"id":"u"}"#
        );
    }

    #[test]
    fn body_md5_compares_either_case() {
        assert!(body_md5_matches(b"", "D41D8CD98F00B204E9800998ECF8427E"));
        assert!(!body_md5_matches(b"x", "d41d8cd98f00b204e9800998ecf8427e"));
        assert!(!body_md5_matches(b"", "d41d"));
    }
}
