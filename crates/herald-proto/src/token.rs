//! Client tokens as the contract defines them: the claims (`sub`, `exp`, `channels`, `publish`,
//! `device`, `iat`, `jti`, `user_info`) and minting, HS256 over the app's token secret, with the app id as the header's
//! `kid` for every app but `default`, and the grammars of the claims a minter checks (device
//! ids, channel patterns). Verifying belongs to the server (`herald-core`'s auth).

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, HeraldError};

/// Claims of a client token. Every claim is optional; empty ones are left out of the token.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct ClientClaims {
    /// Who the client is (user id); shown to nobody else, except as its member id on the
    /// presence channels it subscribes to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sub: String,
    /// Expiry, seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    /// Patterns of channels the client may subscribe to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channels: Vec<String>,
    /// Patterns of channels the client may publish to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publish: Vec<String>,
    /// The device this token is for: a device token receives that device's inbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// When the token was issued, seconds since the Unix epoch: a revocation of every token
    /// issued before a time matches it (a token without `iat` counts as issued at 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// The token's own id, to revoke it by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    /// What a presence channel shows of the user (its member data): a JSON object, kept as
    /// it was signed. Only presence channels read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_info: Option<UserInfo>,
}

/// A token's `user_info` claim: JSON text kept byte for byte as it was signed (compared by
/// that text).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserInfo(pub Box<serde_json::value::RawValue>);

impl PartialEq for UserInfo {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl Eq for UserInfo {}

/// Longest device id, in bytes.
pub const MAX_DEVICE_ID_LEN: usize = 64;

/// Longest channel pattern, in bytes (as long as the longest channel name).
pub const MAX_PATTERN_LEN: usize = 255;

/// Checks a device id: 1 to 64 bytes of `A-Z a-z 0-9 _ - . :` (`device_invalid` otherwise).
pub fn check_device_id(id: &str) -> Result<(), HeraldError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_DEVICE_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'));
    if ok {
        Ok(())
    } else {
        Err(HeraldError::new(
            ErrorCode::DeviceInvalid,
            format!(
                "invalid device id {:?}: use 1 to {MAX_DEVICE_ID_LEN} of A-Z a-z 0-9 _ - . :",
                id.chars().take(80).collect::<String>()
            ),
        ))
    }
}

/// Checks that a channel pattern can match channel names: 1 to 255 bytes of the channel-name
/// characters (`A-Z a-z 0-9 _ - . : @ = /`) and `*`, and no empty segment (`bad_request`
/// otherwise). Matching never needs this (any string matches literally); minting a token does,
/// so a mistyped pattern is refused instead of silently matching nothing.
pub fn check_pattern(pattern: &str) -> Result<(), HeraldError> {
    let why = if pattern.is_empty() || pattern.len() > MAX_PATTERN_LEN {
        Some("it must be 1 to 255 bytes")
    } else if !pattern.bytes().all(|b| {
        b.is_ascii_alphanumeric()
            || matches!(b, b'_' | b'-' | b'.' | b':' | b'@' | b'=' | b'/' | b'*')
    }) {
        Some("only A-Z a-z 0-9, _ - . : @ = / and * are allowed")
    } else if pattern.split('/').any(str::is_empty) {
        Some("a '/' may not start or end it or follow another '/'")
    } else if pattern.split('/').any(|s| s == "." || s == "..") {
        Some("a segment may not be '.' or '..'")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => Err(HeraldError::bad_request(format!(
            "invalid channel pattern {:?}: {why}",
            pattern.chars().take(64).collect::<String>()
        ))),
    }
}

/// Longest token id (`jti`), in bytes.
pub const MAX_JTI_LEN: usize = 128;

/// Checks a token id: 1 to 128 bytes of printable ASCII without spaces (`bad_request`
/// otherwise).
pub fn check_jti(jti: &str) -> Result<(), HeraldError> {
    if !jti.is_empty() && jti.len() <= MAX_JTI_LEN && jti.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(HeraldError::bad_request(format!(
            "invalid token id (jti) {:?}: use 1 to {MAX_JTI_LEN} printable ASCII characters \
             without spaces",
            jti.chars().take(40).collect::<String>()
        )))
    }
}

/// Largest `user_info` a minter signs, in bytes of compact JSON: the default
/// `presence_max_data_bytes`, the most member data a presence channel takes unless its
/// namespace allows more. Tokens travel in URLs (SSE and long-poll take `?token=`), so they stay
/// short; a namespace allowing larger data takes it from the subscribe's `member` or from a
/// token the backend signs itself.
pub const MAX_USER_INFO_BYTES: usize = 1_024;

/// Makes a `user_info` claim of `text`: a JSON object of at most [`MAX_USER_INFO_BYTES`] bytes
/// of compact JSON (`bad_request` otherwise, naming `what`, e.g. `user_info` or
/// `--user-info`), kept as given (members in their order, strings byte for byte) without the
/// whitespace between its tokens.
pub fn user_info(what: &str, text: &str) -> Result<UserInfo, HeraldError> {
    if let Err(e) = serde_json::from_str::<&serde_json::value::RawValue>(text) {
        return Err(HeraldError::bad_request(format!(
            "{what} is not JSON ({e}): give a JSON object, e.g. {{\"name\":\"Alice\"}}"
        )));
    }
    let kind = match text.trim_start().as_bytes().first() {
        Some(b'{') => None,
        Some(b'[') => Some("an array"),
        Some(b'"') => Some("a string"),
        Some(b't' | b'f') => Some("a boolean"),
        Some(b'n') => Some("null"),
        _ => Some("a number"),
    };
    if let Some(kind) = kind {
        return Err(HeraldError::bad_request(format!(
            "{what} must be a JSON object ({{\"name\":\"Alice\"}}), not {kind}"
        )));
    }
    let text = compact_json(text);
    if text.len() > MAX_USER_INFO_BYTES {
        return Err(HeraldError::bad_request(format!(
            "{what} is {} bytes of JSON; a token's user_info may be at most \
             {MAX_USER_INFO_BYTES} bytes",
            text.len()
        )));
    }
    let raw = serde_json::value::RawValue::from_string(text)
        .expect("valid JSON without the whitespace between its tokens is JSON");
    Ok(UserInfo(raw))
}

/// Valid JSON text without the whitespace between its tokens (strings kept byte for byte): one
/// line, as a token's `user_info` is signed and an SSE `data:` line needs.
pub fn compact_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !c.is_ascii_whitespace() {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

/// The checks a minter makes before signing: every pattern, the device id and the token id.
pub fn check_claims(claims: &ClientClaims) -> Result<(), HeraldError> {
    for pattern in claims.channels.iter().chain(&claims.publish) {
        check_pattern(pattern)?;
    }
    if let Some(device) = &claims.device {
        check_device_id(device)?;
    }
    if let Some(jti) = &claims.jti {
        check_jti(jti)?;
    }
    Ok(())
}

/// The app id that needs no `kid` in a token's header.
pub const DEFAULT_APP: &str = "default";

/// Signs a token for the `default` app (no `kid`) with its secret.
pub fn mint(secret: &[u8], claims: &ClientClaims) -> String {
    mint_for_app(secret, DEFAULT_APP, claims)
}

/// Signs a token for `app` with that app's secret: the header's `kid` names the app, so the
/// server knows which secret verifies it (none for [`DEFAULT_APP`]).
pub fn mint_for_app(secret: &[u8], app: &str, claims: &ClientClaims) -> String {
    let mut header = Header::new(Algorithm::HS256);
    if app != DEFAULT_APP {
        header.kid = Some(app.to_string());
    }
    jsonwebtoken::encode(&header, claims, &EncodingKey::from_secret(secret))
        .expect("HS256 signing of plain claims cannot fail")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_is_a_bounded_object_kept_in_order_and_compact() {
        let info = user_info("user_info", r#" { "name" : "A l\"ice", "n": [1, 2] } "#).unwrap();
        assert_eq!(info.0.get(), r#"{"name":"A l\"ice","n":[1,2]}"#);
        for (text, says) in [
            ("[1]", "not an array"),
            (r#""x""#, "not a string"),
            ("3", "not a number"),
            ("-3", "not a number"),
            ("true", "not a boolean"),
            ("null", "not null"),
        ] {
            let e = user_info("user_info", text).unwrap_err();
            assert_eq!(e.code, ErrorCode::BadRequest);
            assert!(
                e.message.contains("user_info must be a JSON object"),
                "{}",
                e.message
            );
            assert!(e.message.contains(says), "{}", e.message);
        }
        let e = user_info("--user-info", "{name: 1}").unwrap_err();
        assert!(
            e.message.starts_with("--user-info is not JSON"),
            "{}",
            e.message
        );
        // The cap counts the compact text: 1,024 bytes pass, 1,025 do not.
        let at = |n: usize| format!(r#"{{ "a": "{}" }}"#, "x".repeat(n - r#"{"a":""}"#.len()));
        assert!(user_info("user_info", &at(MAX_USER_INFO_BYTES)).is_ok());
        let e = user_info("--user-info", &at(MAX_USER_INFO_BYTES + 1)).unwrap_err();
        assert!(
            e.message.contains("--user-info is 1025 bytes") && e.message.contains("at most 1024"),
            "{}",
            e.message
        );
    }

    #[test]
    fn minting_is_deterministic_and_names_the_app() {
        let claims = ClientClaims {
            sub: "alice".into(),
            ..Default::default()
        };
        assert_eq!(mint(b"s", &claims), mint(b"s", &claims));
        assert_ne!(mint(b"s", &claims), mint(b"t", &claims));
        let header = mint_for_app(b"s", "shop", &claims);
        let header = header.split('.').next().unwrap();
        assert_ne!(header, mint(b"s", &claims).split('.').next().unwrap());
    }

    #[test]
    fn patterns_a_token_may_carry() {
        for good in [
            "news",
            "chat/*",
            "chat/**",
            "**",
            "prices/EUR*",
            "a/*/c",
            "a/**/b",
            "u:42/@x",
        ] {
            assert!(check_pattern(good).is_ok(), "{good}");
        }
        for (bad, why) in [
            ("", "1 to 255 bytes"),
            ("news room", "are allowed"),
            ("chat/", "may not start or end"),
            ("/chat", "may not start or end"),
            ("a//b", "may not start or end"),
            ("a/../b", "may not be '.' or '..'"),
            ("..", "may not be '.' or '..'"),
            ("$device", "are allowed"),
        ] {
            let e = check_pattern(bad).unwrap_err();
            assert!(e.message.contains(why), "{bad}: {}", e.message);
        }
        assert!(check_pattern(&"a".repeat(256)).is_err());
    }
}
