//! URLs that tenants give, checked when they are given: a Web Push endpoint or a JWKS URL whose
//! host is, or resolves to, an address the operator's rule refuses (loopback, private,
//! link-local, metadata...) is refused with `400` and the reason, before it is stored. The
//! same rule is applied again at every connection (`herald_push::Destinations`), so a name
//! that changes its answer later is refused then.

use std::collections::BTreeSet;

use futures_util::future::join_all;
use herald_core::HeraldError;
use herald_push::device::{DeviceWrite, Platform};

use crate::Api;

/// The host of `url` (without IPv6 brackets), or `None` if it has none.
fn host_of(url: &str) -> Option<String> {
    let uri: axum::http::Uri = url.parse().ok()?;
    Some(uri.authority()?.host().to_string())
}

/// Refuses `url` (a tenant's, named `field` in the error) when its host may not be reached.
pub(crate) async fn check_url(api: &Api, field: &str, url: &str) -> Result<(), HeraldError> {
    let Some(host) = host_of(url) else {
        return Ok(());
    };
    api.destinations
        .check_host(&host)
        .await
        .map_err(|e| HeraldError::bad_request(format!("{field}: {e}")))
}

/// Refuses a registration whose Web Push endpoint may not be reached. Each distinct host is
/// checked once, all at once; the error names the device in a batch (`devices[3].token`).
pub(crate) async fn check_devices(api: &Api, devices: &[DeviceWrite]) -> Result<(), HeraldError> {
    let endpoints: Vec<(usize, String)> = devices
        .iter()
        .enumerate()
        .filter(|(_, d)| d.device.platform == Platform::Webpush)
        .filter_map(|(i, d)| Some((i, host_of(d.device.token.as_deref()?)?)))
        .collect();
    let hosts: BTreeSet<&str> = endpoints.iter().map(|(_, h)| h.as_str()).collect();
    let checks = join_all(hosts.iter().map(|h| api.destinations.check_host(h))).await;
    let Some((host, refusal)) = hosts
        .into_iter()
        .zip(checks)
        .find_map(|(host, check)| Some((host, check.err()?)))
    else {
        return Ok(());
    };
    let field = match devices.len() {
        1 => "token".to_string(),
        _ => {
            let index = endpoints
                .iter()
                .find(|(_, h)| h == host)
                .map_or(0, |(i, _)| *i);
            format!("devices[{index}].token")
        }
    };
    Err(HeraldError::bad_request(format!("{field}: {refusal}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_come_out_of_urls() {
        assert_eq!(
            host_of("https://fcm.googleapis.com/fcm/send/x").as_deref(),
            Some("fcm.googleapis.com")
        );
        assert_eq!(host_of("https://[::1]:9/x").as_deref(), Some("[::1]"));
        assert_eq!(
            host_of("https://169.254.169.254/latest").as_deref(),
            Some("169.254.169.254")
        );
        assert_eq!(host_of("not a url"), None);
    }
}
