//! Signals on the real binary: the first SIGTERM drains in-flight requests, a second exits at once.

mod common;

use common::{post_head, read_reply, Binary};
use std::io::Write;
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
    std::fs::read(common::fixture(
        "delete-graph/sync-chain-database-running.request.json",
    ))
    .unwrap()
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
