//! A push's provider payloads, rendered once when the push is accepted (so a payload too large
//! for one of its platforms is refused before anything is queued) and kept with the push for
//! the workers: every device of a platform gets the same payload, only the token differs (Web
//! Push encrypts per subscription at send time).

use serde::{Deserialize, Serialize};

use herald_core::error::{ErrorCode, HeraldError};
use herald_providers::apns::{ApnsNotification, ApnsOptions};
use herald_providers::common::{Common, PayloadError};
use herald_providers::fcm::{FcmNotification, FcmOptions};
use herald_providers::webpush::{WebPushNotification, WebPushOptions};

/// Per-platform options of a push body (`"apns"`, `"fcm"`, `"webpush"`).
#[derive(Debug, Clone, Default)]
pub struct PlatformOptions {
    /// APNs options.
    pub apns: Option<ApnsOptions>,
    /// FCM options.
    pub fcm: Option<FcmOptions>,
    /// Web Push options.
    pub webpush: Option<WebPushOptions>,
}

/// The rendered payload of each provider.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Payloads {
    /// For `apns` devices.
    pub apns: ApnsNotification,
    /// For `fcm` devices.
    pub fcm: FcmNotification,
    /// For `webpush` devices.
    pub webpush: WebPushNotification,
}

fn refused(e: PayloadError) -> HeraldError {
    let code = if e.too_large {
        ErrorCode::TooLarge
    } else {
        ErrorCode::BadRequest
    };
    HeraldError::new(code, format!("{}: {}", e.provider, e.message))
}

impl Payloads {
    /// Renders every provider's payload (default options where the push gives none).
    pub fn render(options: &PlatformOptions, common: &Common<'_>) -> Result<Self, HeraldError> {
        Ok(Payloads {
            apns: options
                .apns
                .clone()
                .unwrap_or_default()
                .render(common)
                .map_err(refused)?,
            fcm: options
                .fcm
                .clone()
                .unwrap_or_default()
                .render(common)
                .map_err(refused)?,
            webpush: options
                .webpush
                .clone()
                .unwrap_or_default()
                .render(common)
                .map_err(refused)?,
        })
    }
}
