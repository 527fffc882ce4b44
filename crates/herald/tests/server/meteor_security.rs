//! Meteor's defect 8 (issue 13) against the real server: a published text reaches every built-in
//! mode as the same string (read by a real JavaScript engine, node, where the mode puts it in a
//! script), `/disconnect/<hostid>` from another address closes nothing, and `meteor_channels`
//! limits what the subscriber port may subscribe to.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support;

use serde_json::json;
use support::meteor::Subscriber;
use support::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const DEACON_CONF: &str = include_str!("../../../../docs/examples/meteord-deacon.conf");

/// Every context a text could break out of: both quotes, backslashes, the end of the script
/// element, an HTML comment opener, JavaScript's line terminators, and non-ASCII text.
const HOSTILE: &str =
    "q\" s' b\\ </script><script>alert(1)</script> </SCRIPT > <!-- \u{2028}|\u{2029} \
                       line\nbreak\r\ttab é€😀 {\"json\":[1]} &amp; \u{1}\u{7f}";

async fn meteor_server(extra: &[(&str, &str)]) -> Server {
    let mut b = Server::builder()
        .arg("--meteor")
        .arg("127.0.0.1:0")
        .file_arg("--meteor-conf", "meteord.conf", DEACON_CONF);
    for (k, v) in extra {
        b = b.env(k, v);
    }
    b.start().await
}

/// The body of the first `<script>` element that calls `p(1,`, cut where an HTML parser ends
/// it: at the first `</script` in any case.
fn script_calling_p(page: &str) -> String {
    let start = page
        .find("<script>p(1,")
        .unwrap_or_else(|| panic!("no p(1, ...) script in {page:?}"))
        + "<script>".len();
    let rest = &page[start..];
    let end = rest
        .to_ascii_lowercase()
        .find("</script")
        .expect("the script element ends");
    rest[..end].to_owned()
}

/// Runs `script` in node with `p(id, channel, text)` defined; returns every `text` it got.
async fn texts_seen_by_node(script: String) -> Vec<String> {
    let run = tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new("node")
            .arg("-e")
            .arg(
                "const src = require('fs').readFileSync(0, 'utf8'); const got = [];\
                 new Function('p', src)((id, ch, text) => got.push(text));\
                 process.stdout.write(JSON.stringify(got));",
            )
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("node is installed (the browser tests and the TypeScript SDK use it)");
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), script.as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    });
    let out = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("node answers")
        .unwrap();
    assert!(
        out.status.success(),
        "node failed on the served script: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn a_hostile_text_reaches_every_builtin_mode_as_the_same_string() {
    let server = Server::builder()
        .arg("--meteor")
        .arg("127.0.0.1:0")
        .start()
        .await;
    let port = server.meteor.unwrap();
    server.publish("news", json!(HOSTILE)).await;
    for mode in [
        "iframe",
        "xhrinteractive",
        "stream",
        "simplepoll",
        "smartpoll",
        "longpoll",
    ] {
        let mut s = Subscriber::get(port, &format!("/push/h{mode}/{mode}/news.r1")).await;
        // Pings may come first; the escaped text holds no `);</script>`.
        s.until("<script>p(1,").await;
        let page = format!("<script>p(1,{}", s.until(");</script>\r\n").await);
        let script = script_calling_p(&page);
        assert_eq!(
            texts_seen_by_node(script.clone()).await,
            vec![HOSTILE.to_string()],
            "{mode}: {script:?}"
        );
    }
    // The Flash modes are not HTML: their records carry the text as it is.
    let mut s = Subscriber::get(port, "/push/hf/flash/news.r1").await;
    assert!(s.until("\0").await.starts_with("CH/news/1"));
    assert_eq!(s.until("\0").await, format!("1/news/{HOSTILE}\0"));
    let mut s = Subscriber::get(port, "/push/hl/flashloadvars/news.r1").await;
    let got = s.read_to_close().await;
    assert!(
        got.ends_with(&format!("CH/news/1\n1/news/{HOSTILE}\n")),
        "{got:?}"
    );
}

#[tokio::test]
async fn deacons_lines_carry_the_text_as_it_is() {
    let server = meteor_server(&[]).await;
    let port = server.meteor.unwrap();
    server.publish("news", json!("say \"hi\" </script>")).await;
    let mut deacon = Subscriber::get(port, "/push/dev1/longpoll/news.r1").await;
    assert_eq!(
        deacon.read_to_close().await,
        "HTTP/1.1 200 OK\r\nChannel(\"news\".1)\r\nm.p.<1>.\"news\".\"{[say \"hi\" </script>]}\"\r\n"
    );
}

/// Sends `GET <path>` from the loopback address `from` and reads the answer to its end.
async fn get_from(from: [u8; 4], to: SocketAddr, path: &str) -> String {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from((from, 0))).unwrap();
    let mut tcp = socket
        .connect(to)
        .await
        .expect("connect from another address");
    tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut got))
        .await
        .expect("the server closes after answering")
        .unwrap();
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn disconnect_from_another_address_closes_nothing() {
    let server = meteor_server(&[]).await;
    let port = server.meteor.unwrap();
    let mut phone = Subscriber::get(port, "/push/phone7/deaconstream/news").await;
    phone.until("Channel(\"news\".0)\r\n").await;

    // A stranger (another address) gets the same answer as anyone, and the phone stays.
    let answer = get_from([127, 0, 0, 2], port, "/disconnect/phone7").await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
    server.publish("news", json!("still here")).await;
    let got = phone.until("{[still here]}\"\r\n").await;
    assert!(
        !got.contains("m.sd"),
        "the stranger's disconnect closed it: {got:?}"
    );

    // From the subscriber's own address (what meteor.js does from the page), it closes.
    let answer = get_from([127, 0, 0, 1], port, "/disconnect/phone7").await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer:?}");
    assert!(phone.read_to_close().await.ends_with("m.sd\r\n"));
}

#[tokio::test]
async fn meteor_channels_limits_what_the_subscriber_port_reads() {
    let server = meteor_server(&[("HERALD_METEOR_CHANNELS", "public/*,news")]).await;
    let port = server.meteor.unwrap();
    for refused in [
        "/push/h/longpoll/secret",
        "/push/h/longpoll/public%2Fa%2Fdeeper",
        "/push/h/longpoll/news/secret",
    ] {
        let mut s = Subscriber::get(port, refused).await;
        let got = s.read_to_close().await;
        assert!(
            got.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{refused}: {got:?}"
        );
    }
    let mut s = Subscriber::get(port, "/push/h/longpoll/public%2Fa/news").await;
    s.until("HTTP/1.1 200 OK\r\nChannel(\"public%2Fa\".0\"news\".0)\r\n")
        .await;
    server.publish("public/a", json!("open")).await;
    assert_eq!(
        s.read_to_close().await,
        "m.p.<1>.\"public%2Fa\".\"{[open]}\"\r\n"
    );
}
