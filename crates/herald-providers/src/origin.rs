//! An `https` URL split into what a provider client needs: the origin it connects to (host and
//! port, one [`H2Pool`](crate::h2pool::H2Pool) each) and the path it posts to.

/// An `https://host[:port]/path` URL, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpsUrl {
    /// The host name or IP address (IPv6 without brackets), for TCP and TLS.
    pub host: String,
    /// The port (443 when the URL gives none).
    pub port: u16,
    /// `https://host[:port]` as written in the URL: a VAPID `aud`, a pool's key.
    pub origin: String,
    /// The path and query (`/` when the URL has none).
    pub path: String,
}

impl HttpsUrl {
    /// Parses `url`; anything but an absolute `https` URL with a host is an error saying why.
    pub fn parse(url: &str) -> Result<Self, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e| format!("not a URL ({e}): {url:?}"))?;
        if uri.scheme_str() != Some("https") {
            return Err(format!("not an https URL: {url:?}"));
        }
        let authority = uri
            .authority()
            .ok_or_else(|| format!("the URL has no host: {url:?}"))?;
        if authority.as_str().contains('@') {
            return Err(format!("the URL may not carry credentials: {url:?}"));
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if host.is_empty() {
            return Err(format!("the URL has no host: {url:?}"));
        }
        let port = authority.port_u16().unwrap_or(443);
        let path = uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/".to_string());
        Ok(HttpsUrl {
            origin: format!("https://{}", authority.as_str()),
            host,
            port,
            path,
        })
    }

    /// The absolute URL of `path` on this origin (what an HTTP/2 request's `:authority` and
    /// `:path` are taken from).
    pub fn at(&self, path: &str) -> String {
        format!("{}{}", self.origin, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_origin_and_path() {
        let u = HttpsUrl::parse("https://127.0.0.1:8443/push/abc?x=1").unwrap();
        assert_eq!(u.host, "127.0.0.1");
        assert_eq!(u.port, 8443);
        assert_eq!(u.origin, "https://127.0.0.1:8443");
        assert_eq!(u.path, "/push/abc?x=1");
        let u = HttpsUrl::parse("https://fcm.googleapis.com").unwrap();
        assert_eq!((u.port, u.path.as_str()), (443, "/"));
        let u = HttpsUrl::parse("https://[::1]:9/p").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.origin, "https://[::1]:9");
    }

    #[test]
    fn refuses_what_is_not_https() {
        for bad in [
            "http://a/b",
            "a/b",
            "",
            "https:///x",
            "https://u:p@h/x",
            "ftp://h",
        ] {
            assert!(HttpsUrl::parse(bad).is_err(), "{bad}");
        }
    }
}
