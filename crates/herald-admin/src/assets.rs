//! The embedded dashboard files and their routes: `GET /admin` (and `/admin/`) answers
//! `index.html`, never cached; `GET /admin/assets/{file}` answers a bundled file, cached for a
//! year when its name carries a content hash (`admin-3F2A9C1B.js`). Every answer carries the
//! Content-Security-Policy below: scripts and styles only from this origin (no inline script),
//! requests only to this origin, and no framing.

use axum::extract::Path;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

mod files {
    include!(concat!(env!("OUT_DIR"), "/files.rs"));
}

/// The policy every dashboard answer carries.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; \
     base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `Cache-Control` of files whose names carry a content hash: a new build has new names.
pub const CACHE_HASHED: &str = "public, max-age=31536000, immutable";

/// `Cache-Control` of `index.html` (which names the current hashed files) and of any file
/// without a hash in its name: revalidated on every load.
pub const CACHE_NONE: &str = "no-cache";

/// The page the dashboard starts from.
pub const INDEX: &str = "index.html";

/// A committed asset's bytes, by file name.
pub fn file(name: &str) -> Option<&'static [u8]> {
    files::FILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, bytes)| *bytes)
}

/// The names of every embedded file.
pub fn names() -> impl Iterator<Item = &'static str> {
    files::FILES.iter().map(|(name, _)| *name)
}

/// The `Content-Type` a file is served with, from its extension.
pub fn content_type(name: &str) -> &'static str {
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("map") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// Whether a file name carries a content hash: `stem-HASH.ext`, HASH 8 or more letters and
/// digits (esbuild's `[name]-[hash]`).
pub fn is_hashed(name: &str) -> bool {
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    stem.rsplit_once('-')
        .is_some_and(|(_, hash)| hash.len() >= 8 && hash.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// The dashboard's routes, to merge into the server's router.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/admin", get(index))
        .route("/admin/", get(index))
        .route("/admin/assets/{file}", get(asset))
}

async fn index() -> Response {
    serve(INDEX)
}

async fn asset(Path(name): Path<String>) -> Response {
    if name == INDEX {
        // The page has one address: /admin.
        return serve_missing();
    }
    serve(&name)
}

fn serve(name: &str) -> Response {
    let Some(bytes) = file(name) else {
        return serve_missing();
    };
    let cache = if name != INDEX && is_hashed(name) {
        CACHE_HASHED
    } else {
        CACHE_NONE
    };
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, content_type(name)),
            (header::CACHE_CONTROL, cache),
        ],
        bytes,
    )
        .into_response();
    protect(response.headers_mut());
    response
}

fn serve_missing() -> Response {
    let mut response = (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "application/json")],
        r#"{"error":{"code":"not_found","message":"no such dashboard file"}}"#,
    )
        .into_response();
    protect(response.headers_mut());
    response
}

/// The security headers of every dashboard answer.
fn protect(headers: &mut axum::http::HeaderMap) {
    let set = [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names_are_recognised() {
        assert!(is_hashed("admin-3F2A9C1B.js"));
        assert!(is_hashed("admin-ABCDEFGH12.css"));
        assert!(!is_hashed("index.html"));
        assert!(!is_hashed("admin.js"));
        assert!(!is_hashed("admin-1.js"));
        assert!(!is_hashed("a-b_c-d.e.js"));
    }

    #[test]
    fn the_build_is_embedded_and_the_index_names_only_embedded_files() {
        let index = std::str::from_utf8(file(INDEX).expect("index.html is embedded")).unwrap();
        let mut named = 0;
        for part in index.split("assets/").skip(1) {
            let name: String = part
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
                .collect();
            assert!(
                file(&name).is_some(),
                "index.html names {name}, not embedded"
            );
            assert!(is_hashed(&name), "{name} has no content hash");
            named += 1;
        }
        assert!(named >= 2, "index.html names its script and its styles");
        assert!(!index.contains("<script>"), "no inline script");
    }
}
