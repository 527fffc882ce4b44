//! Cache events on the wire. An event names the app and what changed; a token secret never
//! travels: [`CacheEvent::TokenSecretSet`] and [`CacheEvent::TokenKeysSet`] are sent as "this
//! app's token keys changed" and each receiving node reads them from its store.
//!
//! ```text
//! u8 version (1), u64 origin node, u8 kind, u8 app length, app bytes, then by kind:
//!   1 key added:     u16 length, key hash (SHA-256 hex)
//!   2 key removed:   u16 length, key id
//!   3 app created:   limits
//!   4 app deleted:   -
//!   5 secret set:    -
//!   6 limits changed: limits
//!   7 credentials changed: u16 length, provider
//!   8 disconnect:    u8 reason (1 revoked, 2 device revoked), target
//!   9 tokens revoked: u8 1, u16 length, jti, u64 expires | u8 2, u64 issued before
//! limits: for max_devices, max_connections, max_message_bytes, ack_window_ms:
//!   u8 0 (none) | u8 1, u64 value
//!   then for publish_rate, push_rate, registration_rate (absent from older nodes' events,
//!   read as none): u8 0 (none) | u8 1, u16 length, the rate as text ("10/s burst 20", "off")
//! target: u8 0 (all) | u8 1, u16 length, sub | u8 2, u16 length, device
//!   | u8 3, u16 length, jti | u8 4, u64 issued before
//! ```

use bytes::{BufMut, Bytes, BytesMut};
use herald_core::caches::CacheEvent;
use herald_core::limits::Rate;
use herald_core::live::Target;
use herald_core::outbox::CloseReason;
use herald_core::revoked::{RevokedKind, TokenRevocation};
use herald_core::tenancy::AppLimits;
use herald_core::tenant::AppId;

use crate::codec::{put_str16, Reader};
use crate::error::DecodeError;

const VERSION: u8 = 1;

/// An event as received from another node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// Applied as it is.
    Event(CacheEvent),
    /// The app's token secret changed: read it from the store.
    SecretChanged(AppId),
}

/// Encodes `event` as sent by node `origin`.
pub fn encode_event(origin: u64, event: &CacheEvent) -> Bytes {
    let mut out = BytesMut::with_capacity(96);
    out.put_u8(VERSION);
    out.put_u64(origin);
    let (kind, app) = match event {
        CacheEvent::KeyAdded { app, .. } => (1, app),
        CacheEvent::KeyRemoved { app, .. } => (2, app),
        CacheEvent::AppCreated { app, .. } => (3, app),
        CacheEvent::AppDeleted { app } => (4, app),
        CacheEvent::TokenSecretSet { app, .. } | CacheEvent::TokenKeysSet { app, .. } => (5, app),
        CacheEvent::LimitsChanged { app, .. } => (6, app),
        CacheEvent::CredentialsChanged { app, .. } => (7, app),
        CacheEvent::Disconnect { app, .. } => (8, app),
        CacheEvent::TokensRevoked(revocation) => (9, &revocation.app),
    };
    out.put_u8(kind);
    let app = app.as_str();
    out.put_u8(app.len().min(255) as u8);
    out.put_slice(&app.as_bytes()[..app.len().min(255)]);
    match event {
        CacheEvent::KeyAdded { hash, .. } => put_str16(&mut out, hash),
        CacheEvent::KeyRemoved { key_id, .. } => put_str16(&mut out, key_id),
        CacheEvent::AppCreated { limits, .. } | CacheEvent::LimitsChanged { limits, .. } => {
            put_limits(&mut out, limits)
        }
        CacheEvent::CredentialsChanged { provider, .. } => put_str16(&mut out, provider),
        CacheEvent::AppDeleted { .. }
        | CacheEvent::TokenSecretSet { .. }
        | CacheEvent::TokenKeysSet { .. } => {}
        CacheEvent::Disconnect { target, reason, .. } => {
            out.put_u8(match reason {
                CloseReason::DeviceRevoked => 2,
                _ => 1,
            });
            put_target(&mut out, target);
        }
        CacheEvent::TokensRevoked(revocation) => match &revocation.kind {
            RevokedKind::Jti { jti, expires } => {
                out.put_u8(1);
                put_str16(&mut out, jti);
                out.put_u64(*expires);
            }
            RevokedKind::IssuedBefore(t) => {
                out.put_u8(2);
                out.put_u64(*t);
            }
        },
    }
    out.freeze()
}

/// Parses an event; returns its origin node and what to do.
pub fn decode_event(payload: &Bytes) -> Result<(u64, Received), DecodeError> {
    let mut r = Reader(payload.clone());
    if r.u8()? != VERSION {
        return Err(DecodeError::Version);
    }
    let origin = r.u64()?;
    let kind = r.u8()?;
    let app_len = usize::from(r.u8()?);
    let app = AppId::parse(&r.string(app_len)?).map_err(|_| DecodeError::App)?;
    let received = match kind {
        1 => Received::Event(CacheEvent::KeyAdded {
            app,
            hash: r.str16()?,
        }),
        2 => Received::Event(CacheEvent::KeyRemoved {
            app,
            key_id: r.str16()?,
        }),
        3 => Received::Event(CacheEvent::AppCreated {
            app,
            limits: read_limits(&mut r)?,
        }),
        4 => Received::Event(CacheEvent::AppDeleted { app }),
        5 => Received::SecretChanged(app),
        6 => Received::Event(CacheEvent::LimitsChanged {
            app,
            limits: read_limits(&mut r)?,
        }),
        7 => Received::Event(CacheEvent::CredentialsChanged {
            app,
            provider: r.str16()?,
        }),
        8 => Received::Event(CacheEvent::Disconnect {
            app,
            reason: match r.u8()? {
                1 => CloseReason::Revoked,
                2 => CloseReason::DeviceRevoked,
                _ => return Err(DecodeError::Malformed("disconnect reason")),
            },
            target: read_target(&mut r)?,
        }),
        9 => {
            let kind = match r.u8()? {
                1 => RevokedKind::Jti {
                    jti: r.str16()?,
                    expires: r.u64()?,
                },
                2 => RevokedKind::IssuedBefore(r.u64()?),
                _ => return Err(DecodeError::Malformed("revocation kind")),
            };
            Received::Event(CacheEvent::TokensRevoked(TokenRevocation { app, kind }))
        }
        _ => return Err(DecodeError::Malformed("event kind")),
    };
    if !r.is_empty() {
        return Err(DecodeError::Malformed("trailing bytes"));
    }
    Ok((origin, received))
}

fn put_target(out: &mut BytesMut, target: &Target) {
    match target {
        Target::All => out.put_u8(0),
        Target::Sub(sub) => {
            out.put_u8(1);
            put_str16(out, sub);
        }
        Target::Device(device) => {
            out.put_u8(2);
            put_str16(out, device);
        }
        Target::Jti(jti) => {
            out.put_u8(3);
            put_str16(out, jti);
        }
        Target::IssuedBefore(t) => {
            out.put_u8(4);
            out.put_u64(*t);
        }
    }
}

fn read_target(r: &mut Reader) -> Result<Target, DecodeError> {
    Ok(match r.u8()? {
        0 => Target::All,
        1 => Target::Sub(r.str16()?),
        2 => Target::Device(r.str16()?),
        3 => Target::Jti(r.str16()?),
        4 => Target::IssuedBefore(r.u64()?),
        _ => return Err(DecodeError::Malformed("disconnect target")),
    })
}

fn put_limits(out: &mut BytesMut, limits: &AppLimits) {
    for value in [
        limits.max_devices,
        limits.max_connections,
        limits.max_message_bytes.map(|b| b as u64),
        limits.ack_window_ms,
    ] {
        match value {
            Some(v) => {
                out.put_u8(1);
                out.put_u64(v);
            }
            None => out.put_u8(0),
        }
    }
    for rate in [
        limits.publish_rate,
        limits.push_rate,
        limits.registration_rate,
    ] {
        match rate {
            Some(rate) => {
                out.put_u8(1);
                put_str16(out, &rate.to_string());
            }
            None => out.put_u8(0),
        }
    }
}

/// A rate of the limits (none at the end of an older node's event).
fn read_rate(r: &mut Reader) -> Result<Option<Rate>, DecodeError> {
    if r.is_empty() {
        return Ok(None);
    }
    match r.u8()? {
        0 => Ok(None),
        1 => r
            .str16()?
            .parse()
            .map(Some)
            .map_err(|_| DecodeError::Malformed("rate")),
        _ => Err(DecodeError::Malformed("rate flag")),
    }
}

fn read_limits(r: &mut Reader) -> Result<AppLimits, DecodeError> {
    let mut read = || -> Result<Option<u64>, DecodeError> {
        match r.u8()? {
            0 => Ok(None),
            1 => Ok(Some(r.u64()?)),
            _ => Err(DecodeError::Malformed("limit flag")),
        }
    };
    Ok(AppLimits {
        max_devices: read()?,
        max_connections: read()?,
        max_message_bytes: read()?.map(|b| usize::try_from(b).unwrap_or(usize::MAX)),
        ack_window_ms: read()?,
        publish_rate: read_rate(r)?,
        push_rate: read_rate(r)?,
        registration_rate: read_rate(r)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use herald_core::caches::TokenSecret;
    use proptest::prelude::*;

    #[test]
    fn events_round_trip_and_secrets_stay_home() {
        let app = AppId::parse("shop").unwrap();
        let limits = AppLimits {
            max_devices: Some(3),
            max_connections: None,
            max_message_bytes: Some(4096),
            ack_window_ms: Some(250),
            publish_rate: Some(Rate::per_second(5, 10)),
            push_rate: Some(Rate::OFF),
            registration_rate: None,
        };
        let events = [
            CacheEvent::KeyAdded {
                app: app.clone(),
                hash: "ab".repeat(32),
            },
            CacheEvent::KeyRemoved {
                app: app.clone(),
                key_id: "abababababab".into(),
            },
            CacheEvent::AppCreated {
                app: app.clone(),
                limits,
            },
            CacheEvent::LimitsChanged {
                app: app.clone(),
                limits: AppLimits::default(),
            },
            CacheEvent::AppDeleted { app: app.clone() },
            CacheEvent::CredentialsChanged {
                app: app.clone(),
                provider: "apns".into(),
            },
            CacheEvent::Disconnect {
                app: app.clone(),
                target: Target::All,
                reason: CloseReason::Revoked,
            },
            CacheEvent::Disconnect {
                app: app.clone(),
                target: Target::Device("phone-1".into()),
                reason: CloseReason::DeviceRevoked,
            },
            CacheEvent::Disconnect {
                app: app.clone(),
                target: Target::Sub("alice".into()),
                reason: CloseReason::Revoked,
            },
            CacheEvent::TokensRevoked(TokenRevocation {
                app: app.clone(),
                kind: RevokedKind::Jti {
                    jti: "t-1".into(),
                    expires: 1_800_000_000,
                },
            }),
            CacheEvent::TokensRevoked(TokenRevocation {
                app: app.clone(),
                kind: RevokedKind::IssuedBefore(1_700_000_000),
            }),
        ];
        for event in events {
            let (origin, got) = decode_event(&encode_event(9, &event)).unwrap();
            assert_eq!(origin, 9);
            assert_eq!(got, Received::Event(event));
        }
        let secret = CacheEvent::TokenSecretSet {
            app: app.clone(),
            secret: TokenSecret("hs_very_secret".into()),
        };
        let payload = encode_event(9, &secret);
        assert!(!payload.windows(14).any(|w| w == b"hs_very_secret"));
        assert_eq!(
            decode_event(&payload).unwrap().1,
            Received::SecretChanged(app)
        );
    }

    proptest! {
        #[test]
        fn nothing_malformed_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = decode_event(&Bytes::from(bytes.clone()));
            let mut versioned = vec![VERSION];
            versioned.extend(bytes);
            let _ = decode_event(&Bytes::from(versioned));
        }
    }
}
