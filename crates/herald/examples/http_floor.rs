//! The raw floor of HTTP request/response exchanges on this machine: a responder with no HTTP
//! framework that reads each request (head and `Content-Length` body) and answers a fixed small
//! JSON, on a two-worker tokio runtime like `herald serve`. `scripts/http-floor.sh` drives it and
//! Herald with `wrk` in the same run, so Herald's publish rate can be stated as a ratio to it.
//!
//! ```text
//! cargo run --release -p herald --example http_floor -- 127.0.0.1:7272
//! ```

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 9\r\n\r\n{\"seq\":1}";

/// Answers every complete request in `buf`; returns how many bytes were consumed, or `None` if
/// a request could not be parsed.
fn answer_complete(buf: &[u8], out: &mut Vec<u8>) -> Option<usize> {
    let mut used = 0;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        let head = match req.parse(&buf[used..]).ok()? {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => return Some(used),
        };
        let body = req
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case("content-length"))
            .and_then(|h| {
                std::str::from_utf8(h.value)
                    .ok()?
                    .trim()
                    .parse::<usize>()
                    .ok()
            })
            .unwrap_or(0);
        if buf.len() - used < head + body {
            return Some(used);
        }
        used += head + body;
        out.extend_from_slice(ANSWER);
    }
}

async fn serve(mut tcp: TcpStream) -> std::io::Result<()> {
    tcp.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(4096);
    let mut out = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = tcp.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        let Some(used) = answer_complete(&buf, &mut out) else {
            return Ok(());
        };
        buf.drain(..used);
        if !out.is_empty() {
            tcp.write_all(&out).await?;
            out.clear();
        }
    }
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7272".into());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async {
            let listener = TcpListener::bind(&addr).await?;
            eprintln!("http_floor listening on {}", listener.local_addr()?);
            loop {
                let (tcp, _) = listener.accept().await?;
                tokio::spawn(serve(tcp));
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_each_complete_request_and_keeps_partial_ones() {
        let mut out = Vec::new();
        let two = b"POST /a HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}GET /b HTTP/1.1\r\n\r\nPOST /c HTTP/1.1\r\ncontent-length: 5\r\n\r\n{}";
        let used = answer_complete(two, &mut out).unwrap();
        assert_eq!(out.len(), 2 * ANSWER.len());
        assert_eq!(
            &two[used..],
            b"POST /c HTTP/1.1\r\ncontent-length: 5\r\n\r\n{}"
        );
        assert_eq!(
            answer_complete(b"\x00\x01 nonsense\r\n\r\n", &mut out),
            None
        );
    }
}
