//! Meteor compatibility against the real server, over real sockets: controller to Deacon-style
//! long-poll, HTTP API to Meteor stream, controller to WebSocket, exact catch-up with `.r` and
//! `.b`, subscriber counts, host-id replacement, static files, shutdown lines, passwords, and
//! bad input answered with the protocol's error.

use crate::support;

use serde_json::json;
use support::meteor::{Controller, Subscriber};
use support::{Server, Ws};

const DEACON_CONF: &str = include_str!("../../../../docs/examples/meteord-deacon.conf");

/// A server with both Meteor ports, and Deacon's configuration when `deacon`.
async fn meteor_server(deacon: bool) -> Server {
    let b = Server::builder()
        .arg("--meteor")
        .arg("127.0.0.1:0")
        .arg("--meteor-control")
        .arg("127.0.0.1:0");
    let b = if deacon {
        b.file_arg("--meteor-conf", "meteord.conf", DEACON_CONF)
    } else {
        b
    };
    b.start().await
}

fn ports(s: &Server) -> (std::net::SocketAddr, std::net::SocketAddr) {
    (s.meteor.unwrap(), s.meteor_control.unwrap())
}

#[tokio::test]
async fn controller_to_deacon_longpoll_and_exact_resume() {
    let server = meteor_server(true).await;
    let (sub_port, ctl_port) = ports(&server);
    let mut ctl = Controller::connect(ctl_port).await;

    let mut deacon = Subscriber::get(sub_port, "/push/dev1/longpoll/news").await;
    let head = deacon.until("\r\n").await;
    assert_eq!(head, "HTTP/1.1 200 OK\r\n");
    assert_eq!(deacon.until("\r\n").await, "Channel(\"news\".0)\r\n");
    assert_eq!(ctl.command("ADDMESSAGE news hello deacon").await, "OK\t1");
    assert_eq!(
        deacon.read_to_close().await,
        "m.p.<1>.\"news\".\"{[hello deacon]}\"\r\n",
        "one message, then the long-poll closes (MaxMessages 1)"
    );

    // Two messages while Deacon is away; it comes back asking for id 2 on.
    assert_eq!(ctl.command("ADDMESSAGE news two").await, "OK\t2");
    assert_eq!(ctl.command("ADDMESSAGE news three").await, "OK\t3");
    let mut deacon = Subscriber::get(sub_port, "/push/dev1/longpoll/news.r2").await;
    let got = deacon.read_to_close().await;
    assert_eq!(
        got,
        "HTTP/1.1 200 OK\r\nChannel(\"news\".3)\r\n\
         m.p.<2>.\"news\".\"{[two]}\"\r\nm.p.<3>.\"news\".\"{[three]}\"\r\n"
    );

    // Up to date: the next poll waits for the next message only.
    let mut deacon = Subscriber::get(sub_port, "/push/dev1/longpoll/news.r4").await;
    deacon.until("Channel(\"news\".3)\r\n").await;
    assert_eq!(ctl.command("ADDMESSAGE news four").await, "OK\t4");
    assert_eq!(
        deacon.read_to_close().await,
        "m.p.<4>.\"news\".\"{[four]}\"\r\n"
    );
}

#[tokio::test]
async fn http_api_to_meteor_stream_subscriber() {
    let server = meteor_server(false).await;
    let (sub_port, _) = ports(&server);
    let mut stream = Subscriber::get(sub_port, "/push/browser1/xhrinteractive/news?nc=1").await;
    stream.until("<script>ch(\"news\", 0);</script>\r\n").await;
    server
        .publish("news", json!({ "t": "hi", "n": [1, 2] }))
        .await;
    server.publish("news", json!("plain text")).await;
    // Pings (every 3 s by default) may come in between; wait for each message line. The text
    // sits in a JavaScript string, so its quotes are escaped (meteor_security.rs has the rest).
    let object = "<script>p(1,\"news\",\"{\\\"n\\\":[1,2],\\\"t\\\":\\\"hi\\\"}\");</script>\r\n";
    let got = stream.until(object).await;
    assert!(
        !got.contains("p(2,"),
        "object data arrives as compact JSON text, first: {got:?}"
    );
    stream
        .until("<script>p(2,\"news\",\"plain text\");</script>\r\n")
        .await;
}

#[tokio::test]
async fn controller_to_websocket_and_slash_names() {
    let server = meteor_server(false).await;
    let (sub_port, ctl_port) = ports(&server);
    let token = server.token(&["chat/*"], &[]);
    let mut ws = Ws::connect(&server.ws_url(&format!("?token={token}"))).await;
    let r = ws
        .request("subscribe", json!({ "channel": "chat/room-1" }))
        .await;
    assert_eq!(r["subscribe"]["channel"], "chat/room-1", "{r}");
    let mut meteor = Subscriber::get(sub_port, "/push/h1/stream/chat%2Froom-1").await;
    meteor.until("ch(\"chat%2Froom-1\", 0);</script>\r\n").await;

    let mut ctl = Controller::connect(ctl_port).await;
    assert_eq!(
        ctl.command("ADDMESSAGE chat/room-1 {\"x\": 1} & text")
            .await,
        "OK\t1"
    );
    let m = loop {
        let v = ws.recv().await.expect("ws closed");
        if v.get("message").is_some() {
            break v;
        }
    };
    assert_eq!(m["message"]["data"], json!("{\"x\": 1} & text"));
    assert_eq!(m["message"]["seq"], 1);
    let line = "<script>p(1,\"chat%2Froom-1\",\"{\\\"x\\\": 1} \\u0026 text\");</script>\r\n";
    let got = meteor.until(line).await;
    assert!(!got.contains("p(2,"), "{got:?}");
}

#[tokio::test]
async fn catch_up_with_b_and_r_has_no_gap_or_duplicate() {
    let server = meteor_server(true).await;
    let (sub_port, _) = ports(&server);
    for i in 1..=5 {
        server.publish("feed", json!(format!("m{i}"))).await;
    }
    let mut last_two = Subscriber::get(sub_port, "/push/a/deaconstream/feed.b2").await;
    last_two.until("Channel(\"feed\".5)\r\n").await;
    assert_eq!(
        last_two.until("{[m5]}\"\r\n").await,
        "m.p.<4>.\"feed\".\"{[m4]}\"\r\nm.p.<5>.\"feed\".\"{[m5]}\"\r\n"
    );

    // A stream that had seen up to 3 comes back asking for 4 on; then 6 is published.
    let mut resumed = Subscriber::get(sub_port, "/push/b/deaconstream/feed.r4").await;
    resumed.until("Channel(\"feed\".5)\r\n").await;
    server.publish("feed", json!("m6")).await;
    let got = resumed.until("{[m6]}\"\r\n").await;
    assert_eq!(
        got,
        "m.p.<4>.\"feed\".\"{[m4]}\"\r\nm.p.<5>.\"feed\".\"{[m5]}\"\r\n\
         m.p.<6>.\"feed\".\"{[m6]}\"\r\n"
    );

    let mut everything = Subscriber::get(sub_port, "/push/c/deaconstream/feed.h").await;
    let got = everything.until("{[m6]}\"\r\n").await;
    let ids: Vec<&str> = got.matches("m.p.<").collect();
    assert_eq!(ids.len(), 6, "{got}");
}

#[tokio::test]
async fn count_subscribers_counts_meteor_subscribers() {
    let server = meteor_server(false).await;
    let (sub_port, ctl_port) = ports(&server);
    let mut ctl = Controller::connect(ctl_port).await;
    assert_eq!(ctl.command("COUNTSUBSCRIBERS room").await, "OK 0");
    let mut a = Subscriber::get(sub_port, "/push/a/stream/room").await;
    a.until("ch(\"room\"").await;
    let mut b = Subscriber::get(sub_port, "/push/b/iframe/room/other").await;
    b.until("ch(\"other\"").await;
    assert_eq!(ctl.command("COUNTSUBSCRIBERS room").await, "OK 2");
    assert_eq!(ctl.command("COUNTSUBSCRIBERS other").await, "OK 1");
    let metrics = server.metrics().await;
    for line in [
        "herald_connections{transport=\"meteor\"} 2",
        "herald_connections{transport=\"meteor_control\"} 1",
    ] {
        assert!(
            metrics.contains(line),
            "{line} missing from /metrics:\n{metrics}"
        );
    }
    drop(a);
    let mut n = String::new();
    for _ in 0..100 {
        n = ctl.command("COUNTSUBSCRIBERS room").await;
        if n == "OK 1" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(n, "OK 1", "a closed subscriber is no longer counted");

    ctl.command("ADDMESSAGE room x").await;
    let (status, stats) = server.get("/v1/apps/default/stats").await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(
        stats["usage"]["published"], 1,
        "a controller's message counts in the default app's usage: {stats}"
    );
    let channels = ctl.listing("LISTCHANNELS").await;
    assert_eq!(channels, vec!["room(1/1)".to_string()]);
    let stats = ctl.listing("SHOWSTATS").await;
    assert!(stats.iter().any(|l| l == "channel_count: 1"), "{stats:?}");
    assert!(stats.iter().any(|l| l == "unique_messages: 1"), "{stats:?}");
    assert!(stats.iter().any(|l| l.starts_with("uptime: ")), "{stats:?}");
}

#[tokio::test]
async fn bad_requests_get_the_protocols_error_and_the_server_lives_on() {
    let server = meteor_server(true).await;
    let (sub_port, ctl_port) = ports(&server);
    let bad: Vec<Vec<u8>> = vec![
        b"GET /push/h/nosuchmode/news HTTP/1.1\r\n\r\n".to_vec(),
        b"GET /push/h/longpoll/bad%2 HTTP/1.1\r\n\r\n".to_vec(),
        b"GET /push/h/longpoll/bad%FFname HTTP/1.1\r\n\r\n".to_vec(),
        b"GET /push/h/longpoll/news.x9 HTTP/1.1\r\n\r\n".to_vec(),
        b"GET /push/h/longpoll HTTP/1.1\r\n\r\n".to_vec(),
        b"POST /push/h/longpoll/news HTTP/1.1\r\n\r\n".to_vec(),
        b"\xff\xfe garbage \x00\r\n\r\n".to_vec(),
        [b"GET /".to_vec(), vec![b'a'; 20_000]].concat(),
    ];
    for request in bad {
        let mut s = Subscriber::raw(sub_port, &request).await;
        let got = s.read_to_close().await;
        assert!(
            got.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{:?} -> {got:?}",
            String::from_utf8_lossy(&request[..request.len().min(60)])
        );
    }
    let mut ctl = Controller::connect(ctl_port).await;
    for line in [
        "HELLO",
        "ADDMESSAGE",
        "ADDMESSAGE news",
        "QUIT now",
        "",
        "\u{0}\u{1}",
    ] {
        assert_eq!(
            ctl.command(line).await,
            "ERR Invalid command syntax",
            "{line:?}"
        );
    }
    let reply = ctl.command("ADDMESSAGE bad*name text").await;
    assert!(reply.starts_with("ERR invalid channel name"), "{reply}");
    assert_eq!(ctl.command("QUIT").await, "OK");
    assert_eq!(ctl.line().await, None, "QUIT closes the connection");

    let mut ctl = Controller::connect(ctl_port).await;
    ctl.send(&"x".repeat(100_000)).await;
    assert_eq!(ctl.line().await.as_deref(), Some("ERR Line too long"));

    let (status, _) = server.get("/healthz").await;
    assert_eq!(status, 200, "the server is still serving");
    let mut ok = Subscriber::get(sub_port, "/push/h/longpoll/news").await;
    ok.until("HTTP/1.1 200 OK\r\n").await;
}

#[tokio::test]
async fn same_hostid_replaces_and_disconnect_closes() {
    let server = meteor_server(true).await;
    let (sub_port, _) = ports(&server);
    let mut first = Subscriber::get(sub_port, "/push/phone7/deaconstream/news").await;
    first.until("Channel(").await;
    let mut second = Subscriber::get(sub_port, "/push/phone7/deaconstream/news").await;
    second.until("Channel(").await;
    assert!(first.read_to_close().await.ends_with("m.sd\r\n"));

    let mut bye = Subscriber::get(sub_port, "/disconnect/phone7").await;
    assert!(bye.read_to_close().await.starts_with("HTTP/1.1 200 OK"));
    assert!(second.read_to_close().await.ends_with("m.sd\r\n"));
}

#[tokio::test]
async fn polls_answer_with_what_is_stored_and_close() {
    let server = meteor_server(false).await;
    let (sub_port, ctl_port) = ports(&server);
    let mut ctl = Controller::connect(ctl_port).await;
    ctl.command("ADDMESSAGE p one").await;
    ctl.command("ADDMESSAGE p two").await;
    let mut poll = Subscriber::get(sub_port, "/push/x/simplepoll/p.r2").await;
    let got = poll.read_to_close().await;
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(
        got.ends_with("<script>ch(\"p\", 2);</script>\r\n<script>p(2,\"p\",\"two\");</script>\r\n"),
        "{got}"
    );
}

#[tokio::test]
async fn document_root_serves_files_and_refuses_traversal() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("public_html");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("meteor.js"), "Meteor = {};").unwrap();
    std::fs::write(root.join("index.html"), "<html></html>").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "private").unwrap();
    let server = Server::builder()
        .arg("--meteor")
        .arg("127.0.0.1:0")
        .arg("--meteor-document-root")
        .arg(root.to_str().unwrap())
        .start()
        .await;
    let port = server.meteor.unwrap();
    let got = Subscriber::get(port, "/meteor.js")
        .await
        .read_to_close()
        .await;
    assert!(got.starts_with("HTTP/1.1 200 OK\r\n"), "{got}");
    assert!(got.contains("Content-Type: text/javascript"), "{got}");
    assert!(got.ends_with("\r\n\r\nMeteor = {};"), "{got}");
    let got = Subscriber::get(port, "/").await.read_to_close().await;
    assert!(got.ends_with("<html></html>"), "{got}");
    for path in [
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/a/../../secret.txt",
    ] {
        let got = Subscriber::get(port, path).await.read_to_close().await;
        assert!(got.starts_with("HTTP/1.1 404 Not Found"), "{path}: {got}");
        assert!(!got.contains("private"), "{path}");
    }
}

#[tokio::test]
async fn shutdown_sends_the_shutdown_line() {
    let mut server = meteor_server(true).await;
    let (sub_port, _) = ports(&server);
    let mut s = Subscriber::get(sub_port, "/push/z/deaconstream/news").await;
    s.until("Channel(").await;
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(s.read_to_close().await.ends_with("m.sd\r\n"));
}

#[tokio::test]
async fn pings_and_max_time_follow_the_conf() {
    let conf = "PingInterval 1\nMaxTime 2\n[lp]\nPersist 1\nPingMessage ping~~\\n\n\
                SubscriberShutdownMsg bye\\n\nHeaderTemplate ~status~\\n\n";
    let server = Server::builder()
        .arg("--meteor")
        .arg("127.0.0.1:0")
        .file_arg("--meteor-conf", "m.conf", conf)
        .start()
        .await;
    let mut s = Subscriber::get(server.meteor.unwrap(), "/push/q/lp/news").await;
    assert_eq!(s.until("\n").await, "200 OK\n");
    assert_eq!(s.until("\n").await, "ping~\n");
    let rest = s.read_to_close().await;
    assert!(
        !rest.contains("bye"),
        "MaxTime closes without the shutdown line: {rest:?}"
    );
}

#[tokio::test]
async fn controller_password() {
    let server = Server::builder()
        .arg("--meteor-control")
        .arg("127.0.0.1:0")
        .env("HERALD_METEOR_CONTROL_PASSWORD", "s3cret")
        .start()
        .await;
    let port = server.meteor_control.unwrap();
    let mut ctl = Controller::connect(port).await;
    assert_eq!(
        ctl.command("ADDMESSAGE news hi").await,
        "ERR Authentication failed"
    );
    assert_eq!(ctl.line().await, None);
    let mut ctl = Controller::connect(port).await;
    assert_eq!(ctl.command("AUTH s3cret").await, "OK");
    assert_eq!(ctl.command("ADDMESSAGE news hi").await, "OK\t1");
}

#[tokio::test]
async fn r_older_than_retention_starts_at_the_oldest_stored_as_meteor_did() {
    let conf = "MaxMessagesPerChannel 2\nPingInterval 0\n[s]\nPersist 1\n\
                HeaderTemplate ~status~\\n\nMessageTemplate ~id~:~text~\\n\n";
    let server = Server::builder()
        .arg("--meteor")
        .arg("127.0.0.1:0")
        .arg("--meteor-control")
        .arg("127.0.0.1:0")
        .file_arg("--meteor-conf", "m.conf", conf)
        .start()
        .await;
    let (sub_port, ctl_port) = ports(&server);
    let mut ctl = Controller::connect(ctl_port).await;
    // The store trims a channel once it holds 16 more than its limit, down to the limit.
    for i in 1..=19 {
        assert_eq!(
            ctl.command(&format!("ADDMESSAGE c m{i}")).await,
            format!("OK\t{i}")
        );
    }
    let mut old = Subscriber::get(sub_port, "/push/a/s/c.r1").await;
    assert_eq!(old.until("m19\n").await, "200 OK\n18:m18\n19:m19\n");
    // An id beyond the newest (say, one a client kept from the old Meteor server) waits.
    let mut ahead = Subscriber::get(sub_port, "/push/b/s/c.r9000").await;
    ahead.until("200 OK\n").await;
    assert_eq!(ctl.command("ADDMESSAGE c m20").await, "OK\t20");
    assert_eq!(ahead.until("m20\n").await, "20:m20\n");
    assert_eq!(old.until("m20\n").await, "20:m20\n");
}
