//! The values of a set of credentials, given by the operator (a migration from Pusher,
//! Reverb or soketi keeps its app's values) or generated as Pusher makes them: an app id of
//! digits, a key and a secret of 20 lower-case hex digits each.

use rand::Rng;

use super::PusherError;

/// The longest app id and key accepted.
pub const MAX_ID_LEN: usize = 64;

/// The longest secret accepted.
pub const MAX_SECRET_LEN: usize = 256;

/// How many digits a generated app id has (Pusher's have seven).
const GENERATED_APP_ID_DIGITS: u32 = 7;

/// Checks an app id or key: 1 to [`MAX_ID_LEN`] characters of `A-Z a-z 0-9 _ - .` (Pusher's
/// ids are digits and its keys hex; Reverb's and soketi's are words such as `app-key`), so
/// it fits in a URL path and a query as it is.
pub fn check_id(field: &str, value: &str) -> Result<(), PusherError> {
    if value.is_empty() || value.len() > MAX_ID_LEN {
        return Err(PusherError::bad_input(
            field,
            format!("must be 1 to {MAX_ID_LEN} characters, not {}", value.len()),
        ));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        return Err(PusherError::bad_input(
            field,
            format!("{c:?} is not allowed (only A-Z a-z 0-9 _ - .)"),
        ));
    }
    Ok(())
}

/// Checks a secret: 1 to [`MAX_SECRET_LEN`] visible ASCII characters (no spaces).
pub fn check_secret(value: &str) -> Result<(), PusherError> {
    if value.is_empty() || value.len() > MAX_SECRET_LEN {
        return Err(PusherError::bad_input(
            "secret",
            format!("must be 1 to {MAX_SECRET_LEN} characters"),
        ));
    }
    if !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(PusherError::bad_input(
            "secret",
            "only visible ASCII characters, without spaces",
        ));
    }
    Ok(())
}

/// A new app id: 7 digits (`GENERATED_APP_ID_DIGITS`), not starting with 0.
pub fn generate_app_id() -> String {
    let low = 10u64.pow(GENERATED_APP_ID_DIGITS - 1);
    rand::thread_rng().gen_range(low..low * 10).to_string()
}

/// A new key or secret: 20 lower-case hex digits (80 random bits).
pub fn generate_hex20() -> String {
    let mut bytes = [0u8; 10];
    rand::thread_rng().fill(&mut bytes);
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_values_look_like_pushers() {
        let id = generate_app_id();
        assert_eq!(id.len(), 7);
        assert!(id.bytes().all(|b| b.is_ascii_digit()) && !id.starts_with('0'));
        let key = generate_hex20();
        assert_eq!(key.len(), 20);
        assert!(key.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
        assert_ne!(key, generate_hex20());
        check_id("app_id", &id).unwrap();
        check_id("key", &key).unwrap();
        check_secret(&key).unwrap();
    }

    #[test]
    fn given_values_from_other_servers_are_accepted() {
        for id in ["1234567", "app-id", "my_app.1"] {
            check_id("app_id", id).unwrap();
        }
        check_secret("app-secret").unwrap();
        let e = check_id("key", "a b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "key: ' ' is not allowed (only A-Z a-z 0-9 _ - .)"
        );
        assert!(check_id("app_id", "").is_err());
        assert!(check_id("app_id", &"1".repeat(65)).is_err());
        assert!(check_secret("with space").is_err());
        assert!(check_secret("").is_err());
    }
}
