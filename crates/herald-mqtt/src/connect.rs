//! CONNECT: who the client is and what the connection is allowed, answered with CONNACK.
//!
//! - **Version**: [`crate::packet::decode`] already refused what Herald does not speak (3.1's
//!   `MQIsdp` and other levels, with the CONNACK its version understands); here the CONNECT is
//!   3.1.1 or 5.0.
//! - **Client identifier**: an empty one is assigned (v5 tells the client in Assigned Client
//!   Identifier [MQTT-3.2.2-16]); 3.1.1 refuses an empty one with Clean Session 0 with return
//!   code 0x02 [MQTT-3.1.3-8].
//! - **Session**: Clean Start and the Session Expiry Interval asked for (3.1.1: Clean Session
//!   0 asks for a session that never expires) are handed on; `crate::session` opens the
//!   session and says Session Present.
//! - **Authentication**: the user name is the app id (`default`: the default app; empty or
//!   absent: the app the credential itself names, so a client that sends only a token needs
//!   none); the password is a publisher API key of the app (any of its keys, whatever its form:
//!   publish and subscribe anywhere in it), checked first, or else a client token of that app
//!   (its channel patterns are the client's permissions). Without a password the client is anonymous
//!   (its user name, whatever it is, not read), allowed only with `mqtt.allow_anonymous`, in `mqtt.anonymous_app` under its rules
//!   ([`crate::access`]); with `mqtt.anonymous_ignores_unknown_passwords` too, so is a client
//!   whose password is not shaped like a credential ([`looks_like_credential`]), as Mosquitto
//!   takes any password with `allow_anonymous` and no password file. Refusals: no
//!   credentials, 0x87 Not authorized (3.1.1: 0x05); bad ones (a token or key that fails),
//!   0x86 Bad User Name or Password (3.1.1: 0x04), each with a reason string in v5. Enhanced
//!   authentication (v5 Authentication Method) is not offered: 0x8C Bad authentication method.
//! - **CONNACK** (v5) announces what the server holds the client to: Receive Maximum, Maximum
//!   Packet Size, Topic Alias Maximum, Retain Available, Wildcard Subscription Available, Shared
//!   Subscription Available (`shared.rs`), no subscription identifiers, and Server Keep Alive
//!   when it caps the client's.
//! - **Keep-alive**: a client asking for more than `mqtt.max_keep_alive`, or for 0, is held to
//!   `max_keep_alive`; v5 is told so in Server Keep Alive, 3.1.1 (whose CONNACK cannot say it)
//!   is closed after one and a half times `max_keep_alive` without a packet all the same.
//! - **Will**: kept, its topic checked and the client's permission to publish there (0x87 Not
//!   authorized, 3.1.1: 0x05, otherwise); `will.rs` publishes it when the connection ends
//!   abnormally.

use std::num::{NonZeroU16, NonZeroU32};
use std::sync::Arc;

use herald_core::auth::Client;
use herald_core::pattern::PatternSet;
use herald_core::tenant::AppId;
use herald_core::usage::ConnectionGuard;
use herald_core::ErrorCode;
use herald_edge::Edge;

use crate::access::Rules;
use crate::packet::{ConnAck, ConnAckProperties, Connect, ProtocolVersion, ReasonCode, Will};
use crate::settings::MqttSettings;

/// An authenticated client, with the anonymous rules when it is anonymous.
type Authenticated = (Client, Option<Arc<Rules>>);
/// A refusal's reason code and reason string.
type Refusal = (ReasonCode, String);

/// A CONNECT the server accepts: the client, its usage count and what the connection keeps.
pub(crate) struct Accepted {
    /// The authenticated (or anonymous) client.
    pub(crate) client: Client,
    /// Counts the connection in its app's usage.
    pub(crate) counted: ConnectionGuard,
    /// The client identifier (assigned when the client sent none).
    pub(crate) client_id: String,
    /// The anonymous mode's rules, for an anonymous client.
    pub(crate) anonymous: Option<Arc<Rules>>,
    /// The keep-alive the server holds the client to, in seconds (0: none): the client's, or
    /// `max_keep_alive` when it asked for more or for none.
    pub(crate) keep_alive: u16,
    /// The will, published when the connection ends abnormally (`will.rs`).
    pub(crate) will: Option<Will>,
    /// Clean Start (3.1.1: Clean Session): a stored session is discarded.
    pub(crate) clean_start: bool,
    /// The Session Expiry Interval asked for, in seconds: v5's property; 3.1.1's Clean Session
    /// 0 asks for never (`u32::MAX`), Clean Session 1 for 0.
    pub(crate) session_expiry: u32,
    /// The CONNACK to send (its Session Present is set once the session is opened).
    pub(crate) connack: ConnAck,
}

/// Decides on `connect`: the accepted connection, or the CONNACK that refuses it.
pub(crate) async fn accept(
    edge: &Edge,
    settings: &MqttSettings,
    connect: Connect,
) -> Result<Accepted, ConnAck> {
    let v5 = connect.protocol_version == ProtocolVersion::V5;
    let clean_start = connect.clean_start;
    let session_expiry = match (v5, clean_start) {
        (true, _) => connect.properties.session_expiry_interval,
        (false, true) => 0,
        (false, false) => u32::MAX,
    };
    let refuse = |code: ReasonCode, why: String| refusal(code, why);
    let mut assigned = None;
    let client_id = if connect.client_id.is_empty() {
        if !v5 && !connect.clean_start {
            return Err(refuse(
                ReasonCode::ClientIdentifierNotValid,
                "an empty client identifier needs Clean Session 1 [MQTT-3.1.3-8]".into(),
            ));
        }
        let id = herald_core::auth::generate_secret("herald-");
        assigned = v5.then(|| id.clone());
        id
    } else {
        connect.client_id
    };
    if connect.properties.authentication_method.is_some() {
        return Err(refuse(
            ReasonCode::BadAuthenticationMethod,
            "enhanced authentication is not offered: send the token or API key as the password"
                .into(),
        ));
    }
    if let Some(will) = &connect.will {
        if let Err(e) =
            crate::topic_map::topic_to_channel(&AppId::default_app(), will.topic.as_str())
        {
            return Err(refuse(
                ReasonCode::TopicNameInvalid,
                format!("the will's topic: {e}"),
            ));
        }
    }
    let (client, anonymous) = authenticate(
        edge,
        settings,
        connect.username.as_deref(),
        connect.password.as_deref(),
    )
    .await
    .map_err(|(code, why)| refuse(code, why))?;
    if let Some(will) = &connect.will {
        may_publish_will(&client, anonymous.as_deref(), will.topic.as_str())
            .map_err(|why| refuse(ReasonCode::NotAuthorized, why))?;
    }
    let counted = edge.usage.connect(&client.app).map_err(|e| {
        let code = match e.code {
            ErrorCode::LimitExceeded | ErrorCode::RateLimited => ReasonCode::QuotaExceeded,
            _ => ReasonCode::ServerUnavailable,
        };
        refuse(code, e.message)
    })?;
    // A client asking for more than `max_keep_alive`, or for none, is held to it: v5 is told
    // (Server Keep Alive); 3.1.1 cannot be, and is closed after one and a half times it of
    // silence all the same (as Mosquitto's `max_keepalive` caps it).
    let max = settings.max_keep_alive;
    let capped = max > 0 && (connect.keep_alive == 0 || connect.keep_alive > max);
    let keep_alive = if capped { max } else { connect.keep_alive };
    let connack = ConnAck {
        session_present: false,
        reason_code: ReasonCode::Success,
        properties: ConnAckProperties {
            receive_maximum: NonZeroU16::new(settings.receive_maximum).unwrap_or(NonZeroU16::MAX),
            maximum_packet_size: NonZeroU32::new(settings.max_packet_size),
            topic_alias_maximum: settings.max_topic_aliases,
            retain_available: true,
            wildcard_subscription_available: true,
            shared_subscription_available: true,
            subscription_identifiers_available: true,
            assigned_client_identifier: assigned,
            server_keep_alive: (v5 && capped).then_some(keep_alive),
            ..ConnAckProperties::default()
        },
    };
    Ok(Accepted {
        client,
        counted,
        client_id,
        anonymous,
        keep_alive,
        will: connect.will,
        clean_start,
        session_expiry,
        connack,
    })
}

/// Whether `client` may publish its will to `topic`: checked once, at CONNECT, as Mosquitto
/// checks a will against its ACL (the will is published with these permissions when the
/// connection ends; `will.rs`).
fn may_publish_will(client: &Client, anonymous: Option<&Rules>, topic: &str) -> Result<(), String> {
    let channel = crate::topic_map::topic_to_channel(&client.app, topic)
        .map_err(|e| format!("the will's topic: {e}"))?;
    client
        .check_publish(channel.public())
        .map_err(|e| format!("the will's topic: {}", e.message))?;
    if anonymous.is_some_and(|rules| !rules.may_publish(topic)) {
        return Err(format!(
            "anonymous clients may not publish to {topic:?} (the will's topic)"
        ));
    }
    Ok(())
}

/// A refusing CONNACK with `code` and, in v5, `why` as its reason string (CONNACK may carry
/// one whatever the client asked [MQTT-3.1.2-29]).
fn refusal(code: ReasonCode, why: String) -> ConnAck {
    ConnAck {
        session_present: false,
        reason_code: code,
        properties: ConnAckProperties {
            reason_string: Some(why),
            ..ConnAckProperties::default()
        },
    }
}

/// Who presents `password` for the app `username` names: a client token's client, a publisher
/// API key's, or (without a password, when allowed) an anonymous client with its rules.
async fn authenticate(
    edge: &Edge,
    settings: &MqttSettings,
    username: Option<&str>,
    password: Option<&[u8]>,
) -> Result<Authenticated, Refusal> {
    let bad = |why: String| (ReasonCode::BadUserNameOrPassword, why);
    // An anonymous client's user name is not read (Mosquitto's `allow_anonymous` takes any,
    // and devices keep theirs: Tasmota sends `DVES_USER`), so it is parsed only once a
    // credential is to be checked against it.
    let Some(password) = password else {
        if !settings.allow_anonymous {
            return Err((
                ReasonCode::NotAuthorized,
                "credentials are required: the user name is the app id, the password a client \
                 token or a publisher API key"
                    .into(),
            ));
        }
        return anonymous(settings);
    };
    let ignored = settings.allow_anonymous && settings.anonymous_ignores_unknown_passwords;
    if ignored
        && !looks_like_credential(password)
        && (std::str::from_utf8(password).ok())
            .and_then(|key| edge.api_keys.check(key))
            .is_none()
    {
        // No credential of Herald's (nor a configured API key of another form): the client
        // is anonymous, as without a password.
        return anonymous(settings);
    }
    let named = match username {
        None | Some("") => None,
        Some(name) => Some(
            AppId::parse(name)
                .map_err(|e| bad(format!("the user name is the app id: {}", e.message)))?,
        ),
    };
    let password = std::str::from_utf8(password)
        .map_err(|_| bad("the password is not UTF-8 text (a token or an API key)".into()))?;
    // A publisher API key whatever it looks like (a configured `api_key` may be any 16 bytes
    // or more), then a client token.
    let client = if let Some(app) = edge.api_keys.check(password) {
        api_key_client(app)
    } else if password.starts_with("hk_") {
        return Err(bad("the publisher API key is not valid".into()));
    } else {
        edge.tokens.prepare(password).await;
        edge.tokens
            .verify(password)
            .map_err(|e| bad(format!("the token: {}", e.message)))?
    };
    if let Some(named) = named {
        if named != client.app {
            return Err(bad(format!(
                "the credential is for app {:?}, the user name says {:?}",
                client.app.as_str(),
                named.as_str()
            )));
        }
    }
    Ok((client, None))
}

/// Whether `password` is shaped like a Herald credential: a publisher API key (`hk_…`; a
/// configured `api_key` of another form is one when it matches, [`authenticate`] checks that
/// first) or a JWT (three dot-separated parts of base64url, the first not empty). Only its
/// form is looked at: a credential of that form which fails is refused, not taken as no
/// password (`mqtt.anonymous_ignores_unknown_passwords`).
fn looks_like_credential(password: &[u8]) -> bool {
    if password.starts_with(b"hk_") {
        return true;
    }
    let base64url = |part: &[u8]| {
        part.iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let mut parts = password.split(|&b| b == b'.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    !header.is_empty() && base64url(header) && base64url(claims) && base64url(signature)
}

/// The client a publisher API key of `app` acts as: every channel of the app, both ways, no
/// expiry. (Herald's API keys have no client form elsewhere; a key removed later does not
/// close a connection it opened: phase 2.)
fn api_key_client(app: AppId) -> Client {
    Client {
        app,
        device: None,
        sub: String::new(),
        expires: None,
        subscribe: PatternSet::all(),
        publish: PatternSet::all(),
        token: Default::default(),
        user_info: None,
    }
}

/// An anonymous client in the anonymous app, limited by the anonymous rules (the client's own
/// patterns allow everything: the rules decide, per topic).
fn anonymous(settings: &MqttSettings) -> Result<Authenticated, Refusal> {
    let unavailable = |why: String| (ReasonCode::ServerUnavailable, why);
    let app = AppId::parse(&settings.anonymous_app)
        .map_err(|e| unavailable(format!("mqtt.anonymous_app: {}", e.message)))?;
    let rules = Rules::new(settings.anonymous_rules.clone())
        .map_err(|e| unavailable(format!("mqtt.anonymous_rules: rule {}: {}", e.index, e.why)))?;
    let mut client = Client::anonymous();
    client.app = app;
    client.publish = PatternSet::all();
    Ok((client, Some(Arc::new(rules))))
}

#[cfg(test)]
mod tests {
    use super::looks_like_credential;

    #[test]
    fn a_credential_is_known_by_its_form() {
        for credential in [
            "hk_0123456789abcdef",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
            "eyJhbGciOiJub25lIn0.e30.",
        ] {
            assert!(looks_like_credential(credential.as_bytes()), "{credential}");
        }
        for junk in [
            "secret",
            "",
            "a.b",
            "a.b.c.d",
            ".e30.x",
            "pass word.x.y",
            "p@ss.w.d",
        ] {
            assert!(!looks_like_credential(junk.as_bytes()), "{junk}");
        }
        assert!(!looks_like_credential(&[0xff, 0xfe]));
    }
}
