//! Signals on the real binary: the first SIGTERM drains in-flight requests, a second exits at once.

mod common;

use common::{post_head, read_reply};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

struct Binary {
    child: Child,
    addr: SocketAddr,
}

fn start() -> Binary {
    let mut child = Command::new(env!("CARGO_BIN_EXE_metahooks"))
        .args([
            "--log-format",
            "json",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--drain-timeout",
            "10s",
        ])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let addr = loop {
        let line = rx.recv_timeout(Duration::from_secs(20)).expect("log line");
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if v["message"] == "listening" {
            break v["http"].as_str().unwrap().parse().unwrap();
        }
    };
    Binary { child, addr }
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

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
    let mut bin = start();
    let body = body();
    let mut slow = TcpStream::connect(bin.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    slow.write_all(post_head("/delete-graph/sync", "application/json", body.len()).as_bytes())
        .unwrap();
    slow.write_all(&body[..100]).unwrap();
    std::thread::sleep(Duration::from_millis(200));

    signal(&bin.child, "-TERM");
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
    let mut bin = start();
    let body = body();
    let mut slow = TcpStream::connect(bin.addr).unwrap();
    slow.write_all(post_head("/delete-graph/sync", "application/json", body.len()).as_bytes())
        .unwrap();
    slow.write_all(&body[..100]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    signal(&bin.child, "-TERM");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        wait_exit(&mut bin.child, Duration::from_millis(200)),
        None,
        "draining"
    );
    signal(&bin.child, "-TERM");
    assert_eq!(wait_exit(&mut bin.child, Duration::from_secs(3)), Some(1));
}
