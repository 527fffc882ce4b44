//! What the provider scenarios read and set through the server's API: the app's APNs
//! credentials, a push's provider receipt (`GET /v1/push/{id}`), and the accepted provider sends
//! counted in `/metrics` (a cheap progress signal: the receipt counts a million job rows).

use std::time::{Duration, Instant};

use herald_proto::receipt::ProviderReceipt;

use crate::scenario::Ctx;

/// Sets the `default` app's APNs credentials (`PUT /v1/apps/default/providers/apns`).
pub async fn set_apns_credentials(ctx: &Ctx, key: &str, body: &str) -> anyhow::Result<()> {
    let mut http = ctx.http();
    match http
        .put("/v1/apps/default/providers/apns", key, body.as_bytes())
        .await
    {
        Ok((200 | 201, _)) => Ok(()),
        Ok((status, b)) => anyhow::bail!(
            "setting the APNs credentials: HTTP {status} {}",
            String::from_utf8_lossy(&b[..b.len().min(300)])
        ),
        Err(e) => anyhow::bail!("setting the APNs credentials: {e}"),
    }
}

/// Sends one push and returns its id.
pub async fn push_id(ctx: &Ctx, key: &str, body: String) -> anyhow::Result<String> {
    let mut http = ctx.http();
    match http.post("/v1/push", key, body.as_bytes()).await {
        Ok((202, b)) => {
            let v: serde_json::Value = serde_json::from_slice(&b)?;
            v["id"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| anyhow::anyhow!("push answer without id: {v}"))
        }
        Ok((status, b)) => anyhow::bail!(
            "push: HTTP {status} {}",
            String::from_utf8_lossy(&b[..b.len().min(300)])
        ),
        Err(e) => anyhow::bail!("push: {e}"),
    }
}

/// The provider part of push `id`'s receipt, with how long the request took.
pub async fn provider_receipt(
    ctx: &Ctx,
    key: &str,
    id: &str,
) -> anyhow::Result<(ProviderReceipt, Duration)> {
    let asked = Instant::now();
    let receipt = ctx.publisher(key).receipt(id).await?;
    let took = asked.elapsed();
    let providers = receipt
        .providers
        .ok_or_else(|| anyhow::anyhow!("the receipt of {id} has no provider part"))?;
    Ok((providers, took))
}

/// Jobs of a receipt that have ended, whatever their end (accepted, live, failed, skipped,
/// dead).
pub fn ended(p: &ProviderReceipt) -> u64 {
    p.accepted + p.live + p.failed.values().sum::<u64>() + p.skipped.values().sum::<u64>() + p.dead
}

/// Whether every job of the push has ended: expanded, none queued, `devices` ended.
pub fn settled(p: &ProviderReceipt, devices: u64) -> bool {
    !p.expanding && p.queued == 0 && ended(p) >= devices
}

/// Sends to `provider` accepted so far, summed over apps, from a `/metrics` text
/// (`herald_provider_sends_total{app="...",provider="apns",result="accepted"} N`).
pub fn accepted_sends(metrics: &str, provider: &str) -> u64 {
    let want_provider = format!("provider=\"{provider}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with("herald_provider_sends_total{"))
        .filter(|l| l.contains(&want_provider) && l.contains("result=\"accepted\""))
        .filter_map(|l| l.rsplit(' ').next()?.trim().parse::<f64>().ok())
        .map(|n| n as u64)
        .sum()
}

/// Reads the accepted sends to `provider` from the server's `/metrics`.
pub async fn metrics_accepted(
    http: &mut crate::client::HttpClient,
    key: &str,
    provider: &str,
) -> Option<u64> {
    match http.get("/metrics", key).await {
        Ok((200, body)) => Some(accepted_sends(&String::from_utf8_lossy(&body), provider)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_accepted_sends_of_one_provider() {
        let text = "# TYPE herald_provider_sends_total counter\n\
            herald_provider_sends_total{app=\"default\",provider=\"apns\",result=\"accepted\"} 1000\n\
            herald_provider_sends_total{app=\"other\",provider=\"apns\",result=\"accepted\"} 24\n\
            herald_provider_sends_total{app=\"default\",provider=\"apns\",result=\"retry\"} 7\n\
            herald_provider_sends_total{app=\"default\",provider=\"fcm\",result=\"accepted\"} 5\n\
            herald_provider_send_seconds_count{provider=\"apns\"} 1031\n";
        assert_eq!(accepted_sends(text, "apns"), 1024);
        assert_eq!(accepted_sends(text, "fcm"), 5);
        assert_eq!(accepted_sends(text, "webpush"), 0);
        assert_eq!(accepted_sends("", "apns"), 0);
        assert_eq!(
            accepted_sends(
                "herald_provider_sends_total{provider=\"apns\",result=\"accepted\"} x",
                "apns"
            ),
            0
        );
    }

    #[test]
    fn a_receipt_is_settled_once_every_job_ended() {
        let mut p = ProviderReceipt {
            accepted: 8,
            live: 1,
            ..ProviderReceipt::default()
        };
        p.skipped.insert("inactive".into(), 1);
        assert_eq!(ended(&p), 10);
        assert!(settled(&p, 10));
        assert!(!settled(&p, 11));
        p.queued = 1;
        assert!(!settled(&p, 10));
        p.queued = 0;
        p.expanding = true;
        assert!(!settled(&p, 10));
    }
}
