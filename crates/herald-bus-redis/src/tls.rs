//! TLS to Redis: which URLs ask for it (`rediss://`), and the rustls configuration the bus's
//! connections use then. The server's certificate is verified against the public web roots
//! plus the extra CA certificates [`crate::BusOptions::tls_ca_pem`] gives (a private CA, a
//! test's self-signed certificate); the system's certificate store is not read.

use std::sync::Arc;

use fred::types::config::{TlsConfig, TlsConnector, TlsHostMapping};
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use crate::error::{redact, BusError};

/// The scheme of a Redis URL that asks for TLS.
const TLS_SCHEME: &str = "rediss://";
/// The scheme of a plain Redis URL.
const PLAIN_SCHEME: &str = "redis://";

/// Whether the bus's URLs ask for TLS: all of them (`rediss://`) or none. A mix is refused, as
/// one client config serves every node.
pub(crate) fn wants_tls(urls: &[String]) -> Result<bool, BusError> {
    let tls = urls.iter().filter(|u| uses_tls(u)).count();
    match tls {
        0 => Ok(false),
        n if n == urls.len() => Ok(true),
        _ => {
            let plain = urls
                .iter()
                .find(|u| !uses_tls(u))
                .map_or("", String::as_str);
            Err(BusError::Url {
                url: redact(plain),
                reason: "some bus URLs are rediss:// (TLS) and this one is not: use one scheme \
                         for every node"
                    .into(),
            })
        }
    }
}

fn uses_tls(url: &str) -> bool {
    url.get(..TLS_SCHEME.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(TLS_SCHEME))
}

/// `url` with `rediss://` replaced by `redis://`, for the URL parser: the bus sets the TLS
/// configuration itself (the parser's own would read the system's certificate store).
pub(crate) fn plain_url(url: &str) -> String {
    if uses_tls(url) {
        format!("{PLAIN_SCHEME}{}", &url[TLS_SCHEME.len()..])
    } else {
        url.to_owned()
    }
}

/// The TLS configuration of the bus's connections: the web roots plus every certificate in
/// `extra_ca_pem`. Cluster nodes are verified under the name or address the cluster announces.
pub(crate) fn config(extra_ca_pem: Option<&[u8]>) -> Result<TlsConfig, BusError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(pem) = extra_ca_pem {
        for cert in certificates(pem)? {
            roots.add(cert).map_err(|e| BusError::Tls(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| BusError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConfig {
        connector: TlsConnector::from(client),
        hostnames: TlsHostMapping::None,
    })
}

/// A connection error's text, with a hint when it is the server's certificate that did not
/// verify (rustls says `InvalidCertificate(...)`).
pub(crate) fn explain(details: &str) -> String {
    if details.contains("InvalidCertificate") {
        format!(
            "{details}: the server's TLS certificate did not verify against the web roots and \
             the extra CA given (Herald's redis_ca_file)"
        )
    } else {
        details.to_owned()
    }
}

/// Every certificate in `pem`; none is an error.
fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, BusError> {
    let certs: Vec<_> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| BusError::Tls(format!("the CA file is not PEM: {e}")))?;
    if certs.is_empty() {
        return Err(BusError::Tls("the CA file holds no PEM certificate".into()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_scheme_decides_and_a_mix_is_refused() {
        assert!(!wants_tls(&urls(&["redis://a:6379"])).unwrap());
        assert!(wants_tls(&urls(&["rediss://a:6380", "REDISS://b:6380"])).unwrap());
        let e = wants_tls(&urls(&["rediss://a:6380", "redis://:secret@b:6379"])).unwrap_err();
        let shown = e.to_string();
        assert!(
            shown.contains("rediss://") && !shown.contains("secret"),
            "{shown}"
        );
    }

    #[test]
    fn the_tls_scheme_is_stripped_for_the_parser_only() {
        assert_eq!(plain_url("rediss://:pw@h:6380/0"), "redis://:pw@h:6380/0");
        assert_eq!(plain_url("redis://h:6379"), "redis://h:6379");
    }

    #[test]
    fn a_ca_file_without_a_certificate_is_refused() {
        assert!(config(None).is_ok());
        let e = config(Some(b"not a certificate")).unwrap_err();
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
    }
}
