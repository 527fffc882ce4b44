//! The subscriber port's static files, as Meteor serves them: a `GET` of any path outside the
//! push prefix answers the file of that path under the document root (the directory index for a
//! folder), so Meteor's browser client (`meteor.js`, `stream.html`, `poll.html`) loads from the
//! same host and port it streams from. Paths may hold only `A-Z a-z 0-9 - _ . /` and never `..`;
//! the file found must lie inside the root after symlinks are resolved. Anything else is a 404.

use std::path::{Path, PathBuf};

/// Largest file served.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// A folder served under `/`.
#[derive(Debug, Clone)]
pub struct DocumentRoot {
    root: PathBuf,
    index: String,
}

/// A file to send: its bytes and content type.
pub struct Document {
    /// The file's bytes.
    pub body: Vec<u8>,
    /// `Content-Type` without the charset.
    pub content_type: &'static str,
}

/// Whether a requested path may name a file: Meteor's character set and no `..`.
pub fn is_safe(path: &str) -> bool {
    path.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'))
        && !path.contains("..")
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("js") => "text/javascript",
        Some("css") => "text/css",
        Some("xml") => "text/xml",
        Some("txt") => "text/plain",
        Some("json") => "application/json",
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("swf") => "application/x-shockwave-flash",
        _ => "text/html",
    }
}

impl DocumentRoot {
    /// Serves `root`, with `index` for folders.
    pub fn new(root: PathBuf, index: &str) -> DocumentRoot {
        DocumentRoot {
            root,
            index: index.to_owned(),
        }
    }

    /// The document at request path `path`, or `None` (404).
    pub async fn get(&self, path: &str) -> Option<Document> {
        let relative = path.trim_matches('/');
        if !is_safe(relative) {
            return None;
        }
        let root = tokio::fs::canonicalize(&self.root).await.ok()?;
        let mut file = root.join(relative);
        if tokio::fs::metadata(&file).await.ok()?.is_dir() {
            if self.index.is_empty() || !is_safe(&self.index) {
                return None;
            }
            file.push(&self.index);
        }
        let file = tokio::fs::canonicalize(&file).await.ok()?;
        if !file.starts_with(&root) {
            return None;
        }
        let meta = tokio::fs::metadata(&file).await.ok()?;
        if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
            return None;
        }
        let body = tokio::fs::read(&file).await.ok()?;
        Some(Document {
            body,
            content_type: content_type(&file),
        })
    }
}

/// The response head Meteor writes for a document (or a 404 with `length` 0).
pub fn head(status: &str, content_type: &str, length: usize) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nServer: {server}\r\nContent-Type: {content_type}; charset=utf-8\r\n\
         Pragma: no-cache\r\nCache-Control: no-cache, no-store, must-revalidate\r\n\
         Expires: Thu, 1 Jan 1970 00:00:00 GMT\r\nContent-Length: {length}\r\n\r\n",
        server = super::session::SERVER_NAME,
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn serves_inside_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("public");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("meteor.js"), "var Meteor = {};").unwrap();
        std::fs::write(root.join("sub/index.html"), "<p>hi</p>").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "no").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link.txt")).unwrap();
        let docs = DocumentRoot::new(root, "index.html");
        let js = docs.get("/meteor.js").await.unwrap();
        assert_eq!(js.content_type, "text/javascript");
        assert_eq!(js.body, b"var Meteor = {};");
        assert_eq!(docs.get("/sub/").await.unwrap().body, b"<p>hi</p>");
        for bad in [
            "/../secret.txt",
            "/sub/../../secret.txt",
            "/%2e%2e/secret.txt",
            "/link.txt",
            "/missing.html",
            "/sub\\..\\..\\secret.txt",
        ] {
            assert!(docs.get(bad).await.is_none(), "{bad}");
        }
    }

    #[test]
    fn safe_paths() {
        assert!(is_safe("a/b-c_d.js"));
        assert!(!is_safe("a/../b"));
        assert!(!is_safe("a b"));
        assert!(!is_safe("a%2e"));
    }
}
