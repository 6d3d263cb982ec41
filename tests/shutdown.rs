//! Signals on the real binary: the first SIGTERM drains in-flight requests (after the shutdown
//! delay, answering all the while), a second exits at once.

mod common;

use common::{post_head, read_reply, Binary};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::{Duration, Instant};

fn wait_exit(child: &mut Child, within: Duration) -> Option<i32> {
    let start = Instant::now();
    while start.elapsed() < within {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status.code().unwrap_or(-1));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn body() -> Vec<u8> {
    common::fixture("delete-graph/sync-chain-database-running.request.json")
}

#[test]
fn in_flight_request_completes_across_sigterm() {
    let mut bin = Binary::start(&["--drain-timeout", "10s"]);
    let body = body();
    let mut slow = TcpStream::connect(bin.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    slow.write_all(post_head("/delete-graph/sync", "application/json", body.len()).as_bytes())
        .unwrap();
    slow.write_all(&body[..100]).unwrap();
    std::thread::sleep(Duration::from_millis(200));

    bin.signal("-TERM");
    std::thread::sleep(Duration::from_millis(300));
    // No longer accepting new connections...
    assert!(
        TcpStream::connect(bin.addr).is_err(),
        "listener still open after SIGTERM"
    );
    // ...but the accepted request is answered.
    slow.write_all(&body[100..]).unwrap();
    let reply = read_reply(&mut slow);
    assert_eq!(reply.status, 200);
    assert!(reply.json()["children"].is_array());
    assert_eq!(wait_exit(&mut bin.child, Duration::from_secs(10)), Some(0));
}

/// The handlers are in place before the `listening` line: a SIGTERM sent the moment it appears
/// drains and exits 0, rather than meeting the default action (killed, nothing drained).
#[test]
fn a_sigterm_at_the_listening_line_drains() {
    for _ in 0..5 {
        let mut bin = Binary::start(&[]);
        bin.signal("-TERM");
        assert_eq!(wait_exit(&mut bin.child, Duration::from_secs(10)), Some(0));
    }
}

#[test]
fn second_signal_exits_at_once() {
    let mut bin = Binary::start(&["--drain-timeout", "10s"]);
    let body = body();
    let mut slow = TcpStream::connect(bin.addr).unwrap();
    slow.write_all(post_head("/delete-graph/sync", "application/json", body.len()).as_bytes())
        .unwrap();
    slow.write_all(&body[..100]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    bin.signal("-TERM");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        wait_exit(&mut bin.child, Duration::from_millis(200)),
        None,
        "draining"
    );
    bin.signal("-TERM");
    assert_eq!(wait_exit(&mut bin.child, Duration::from_secs(3)), Some(1));
}

/// An HTTP/2 peer that has gone (it answers nothing, not even the GOAWAY's PING) holds the drain
/// for the header read timeout after its last answer, not for the drain timeout.
#[test]
fn a_gone_http2_peer_does_not_hold_the_drain() {
    let mut bin = Binary::start(&["--drain-timeout", "20s", "--header-read-timeout", "300ms"]);
    let mut gone = TcpStream::connect(bin.addr).unwrap();
    gone.write_all(&common::h2_get_healthz()).unwrap();
    // Until the answer's HEADERS.
    let mut received = Vec::new();
    let mut buf = [0u8; 512];
    while !common::h2_frame_types(&received).contains(&0x1) {
        let n = gone.read(&mut buf).unwrap();
        assert!(n > 0, "closed before the answer");
        received.extend_from_slice(&buf[..n]);
    }
    let signalled = Instant::now();
    bin.signal("-TERM");
    assert_eq!(wait_exit(&mut bin.child, Duration::from_secs(10)), Some(0));
    let took = signalled.elapsed();
    assert!(took < Duration::from_secs(5), "exited after {took:?}");
}

/// Sends a hook request on a connection kept alive and reads its answer.
fn post_kept_alive(stream: &mut TcpStream, body: &[u8]) -> common::Reply {
    let head = post_head("/delete-graph/sync", "application/json", body.len())
        .replace("Connection: close\r\n", "");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    read_reply(stream)
}

/// With `--shutdown-delay`, the first SIGTERM makes the server unready, but it goes on accepting
/// and answering until the delay ends (a Service still sends it new connections until its
/// endpoints drop the Pod); an answer on a connection kept alive then closes that connection, so
/// that the client's next request opens one to another replica. After the delay it drains and
/// exits as without one.
#[test]
fn shutdown_delay_keeps_answering_and_closes_kept_connections() {
    let mut bin = Binary::start(&[
        "--shutdown-delay",
        "2s",
        "--drain-timeout",
        "10s",
        "--tls-self-signed",
        "--tls-listen",
        "127.0.0.1:0",
    ]);
    let https = bin.https.expect("an HTTPS listener");
    let body = body();
    let mut kept = TcpStream::connect(bin.addr).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let reply = post_kept_alive(&mut kept, &body);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("connection"), None);

    bin.signal("-TERM");
    std::thread::sleep(Duration::from_millis(300));
    // Both listeners still accepting, and no longer ready.
    TcpStream::connect(https).expect("HTTPS accepting during the shutdown delay");
    let mut probe = TcpStream::connect(bin.addr).expect("accepting during the shutdown delay");
    probe
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .unwrap();
    assert_eq!(read_reply(&mut probe).status, 503);
    // The kept connection is answered once more, and closed after that answer.
    let reply = post_kept_alive(&mut kept, &body);
    assert_eq!(reply.status, 200);
    assert!(reply.json()["children"].is_array());
    assert_eq!(reply.header("connection"), Some("close"));
    assert_eq!(
        kept.read(&mut [0u8; 1]).unwrap(),
        0,
        "closed after the answer"
    );

    assert_eq!(wait_exit(&mut bin.child, Duration::from_secs(10)), Some(0));
}
