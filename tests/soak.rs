//! Bounded load and fault tests on loopback. `make soak` runs them at full length
//! (SOAK_SECONDS=60, 256 connections); CI runs the same tests for a few seconds.
//! Each checks: zero 5xx, zero wrong answers, and what the fault must not break.

mod common;

use common::{post_head, read_reply, TestServer};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn seconds() -> u64 {
    std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3)
}

fn connections() -> usize {
    std::env::var("SOAK_CONNECTIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

/// The requests of the mix: (route, body, expected status, expected children count).
fn mix() -> Vec<(&'static str, Vec<u8>, u16, Option<usize>)> {
    vec![
        (
            "/delete-graph/sync",
            common::fixture("delete-graph/sync-chain-all-running.request.json"),
            200,
            Some(3),
        ),
        (
            "/app-discovery/sync",
            common::fixture("app-discovery/sync-multi-service-due-creates-app.request.json"),
            200,
            Some(1),
        ),
        (
            "/delete-graph/validate",
            common::fixture("delete-graph/validate-cycle-denied.request.json"),
            200,
            None,
        ),
        ("/delete-graph/sync", b"{\"parent\": 3}".to_vec(), 400, None),
        ("/app-discovery/sync", b"not json".to_vec(), 400, None),
        ("/nowhere", b"{}".to_vec(), 404, None),
    ]
}

fn send(addr: SocketAddr, route: &str, body: &[u8]) -> std::io::Result<common::Reply> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    let mut raw = post_head(route, "application/json", body.len()).into_bytes();
    raw.extend_from_slice(body);
    s.write_all(&raw)?;
    Ok(read_reply(&mut s))
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or(0)
}

struct Load {
    ok: AtomicU64,
    wrong: AtomicU64,
    latencies: Latencies,
}

/// Latencies counted in buckets of 10 µs up to 100 ms, the last bucket holding the rest. Its size
/// is fixed before the load starts, so that the test's own record does not grow the process's
/// RSS, which the memory check reads: a list of every latency grew it by 4 bytes a request, and
/// a soak of four minutes failed on that alone.
struct Latencies(Vec<AtomicU64>);

impl Latencies {
    const BUCKET_MICROS: u128 = 10;
    const BUCKETS: usize = 10_000;

    fn new() -> Self {
        Latencies((0..Self::BUCKETS).map(|_| AtomicU64::new(0)).collect())
    }

    fn record(&self, latency: Duration) {
        let bucket = (latency.as_micros() / Self::BUCKET_MICROS).min(Self::BUCKETS as u128 - 1);
        self.0[bucket as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The 99th percentile in µs, as the upper bound of its bucket; 0 with nothing recorded.
    fn p99(&self) -> u128 {
        let counts: Vec<u64> = self.0.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let rank = counts.iter().sum::<u64>() * 99 / 100;
        let mut below = 0;
        for (bucket, count) in counts.iter().enumerate() {
            below += count;
            if below > rank {
                return (bucket as u128 + 1) * Self::BUCKET_MICROS;
            }
        }
        0
    }
}

/// `n` client threads sending the mix until `stop`; returns the counters.
fn load(
    addr: SocketAddr,
    n: usize,
    stop: Arc<AtomicBool>,
) -> (Arc<Load>, Vec<std::thread::JoinHandle<()>>) {
    let state = Arc::new(Load {
        ok: AtomicU64::new(0),
        wrong: AtomicU64::new(0),
        latencies: Latencies::new(),
    });
    let requests = Arc::new(mix());
    let handles = (0..n)
        .map(|t| {
            let (state, stop, requests) = (state.clone(), stop.clone(), requests.clone());
            std::thread::spawn(move || {
                let mut i = t;
                while !stop.load(Ordering::Relaxed) {
                    let (route, body, status, children) = &requests[i % requests.len()];
                    i += 1;
                    let start = Instant::now();
                    match send(addr, route, body) {
                        Ok(reply) => {
                            let right = reply.status == *status
                                && !reply.body.is_empty()
                                && children.is_none_or(|c| {
                                    reply.json()["children"].as_array().map(Vec::len) == Some(c)
                                });
                            if right { &state.ok } else { &state.wrong }
                                .fetch_add(1, Ordering::Relaxed);
                            state.latencies.record(start.elapsed());
                        }
                        Err(_) => {
                            state.wrong.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    (state, handles)
}

#[test]
fn the_latency_record_gives_the_bucket_of_the_99th_percentile() {
    let latencies = Latencies::new();
    assert_eq!(latencies.p99(), 0);
    for _ in 0..99 {
        latencies.record(Duration::from_micros(104));
    }
    latencies.record(Duration::from_millis(5));
    // Of 100, the 99th percentile is the slowest; with one more fast one, a fast one.
    assert_eq!(latencies.p99(), 5_010);
    latencies.record(Duration::from_micros(95));
    assert_eq!(latencies.p99(), 110);
    latencies.record(Duration::from_secs(3));
    assert_eq!(
        latencies.0[Latencies::BUCKETS - 1].load(Ordering::Relaxed),
        1
    );
}

#[test]
fn mixed_load_has_no_5xx_no_wrong_answer_and_stable_memory() {
    let server = TestServer::start(&["--max-in-flight", "4096"]);
    let stop = Arc::new(AtomicBool::new(false));
    let (state, handles) = load(server.http, connections(), stop.clone());
    let total = seconds().max(3);
    std::thread::sleep(Duration::from_secs(total / 3));
    let warm = rss_kb();
    std::thread::sleep(Duration::from_secs(total - total / 3));
    let end = rss_kb();
    stop.store(true, Ordering::Relaxed);
    handles.into_iter().for_each(|h| h.join().unwrap());
    let ok = state.ok.load(Ordering::Relaxed);
    let wrong = state.wrong.load(Ordering::Relaxed);
    eprintln!(
        "soak: {ok} right answers, {wrong} wrong, RSS {warm} kB after warm-up, {end} kB at the end"
    );
    assert!(ok > 100, "load ran");
    assert_eq!(wrong, 0, "every answer right, none 5xx");
    assert!(
        end <= warm + warm / 4 + 8 * 1024,
        "RSS grew from {warm} kB to {end} kB"
    );
}

#[test]
fn slow_header_connections_do_not_starve_normal_traffic() {
    let server = TestServer::start(&["--header-read-timeout", "30s", "--max-in-flight", "4096"]);
    let measure = |label: &str| {
        let stop = Arc::new(AtomicBool::new(false));
        let (state, handles) = load(server.http, 8, stop.clone());
        std::thread::sleep(Duration::from_secs(seconds().clamp(2, 10)));
        stop.store(true, Ordering::Relaxed);
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(state.wrong.load(Ordering::Relaxed), 0, "{label}");
        state.latencies.p99()
    };
    let quiet = measure("quiet");
    // 500 connections that send half a request head and then nothing.
    let slow: Vec<TcpStream> = (0..500)
        .map(|_| {
            let mut s = TcpStream::connect(server.http).unwrap();
            s.write_all(b"POST /delete-graph/sync HTTP/1.1\r\nHost: x\r\nContent-")
                .unwrap();
            s
        })
        .collect();
    let loaded = measure("with 500 slow-header connections");
    drop(slow);
    eprintln!("p99 quiet {quiet} µs, with 500 slow-header connections {loaded} µs");
    assert!(
        loaded <= quiet * 2 + 2_000,
        "p99 went from {quiet} µs to {loaded} µs"
    );
}

#[test]
fn certificate_swapped_kubelet_style_in_the_middle_of_the_load_fails_no_request() {
    use common::mounted::swap_data;
    use common::tls::{der_of, https_request, mount, write_version};
    let dir = tempfile::tempdir().unwrap();
    let first = write_version(dir.path(), "..v1");
    let (cert, key) = mount(dir.path(), "..v1");
    let server = TestServer::start(&[
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--max-in-flight",
        "4096",
    ]);
    let addr = server.https.unwrap();
    let body = common::fixture("delete-graph/sync-chain-all-running.request.json");
    let mut raw = post_head("/delete-graph/sync", "application/json", body.len()).into_bytes();
    raw.extend_from_slice(&body);
    let raw = Arc::new(raw);
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let seen_new = Arc::new(AtomicU64::new(0));
    let second_der = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..connections().min(32))
        .map(|_| {
            let (stop, raw, ok, failed, seen_new, second_der) = (
                stop.clone(),
                raw.clone(),
                ok.clone(),
                failed.clone(),
                seen_new.clone(),
                second_der.clone(),
            );
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match https_request(addr, None, &raw) {
                        Ok((reply, cert)) if reply.status == 200 => {
                            ok.fetch_add(1, Ordering::Relaxed);
                            if *second_der.lock().unwrap() == cert {
                                seen_new.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    let half = Duration::from_millis(seconds().max(2) * 500);
    std::thread::sleep(half);
    let second = write_version(dir.path(), "..v2");
    *second_der.lock().unwrap() = der_of(&second);
    swap_data(dir.path(), "..v2");
    std::thread::sleep(half);
    stop.store(true, Ordering::Relaxed);
    handles.into_iter().for_each(|h| h.join().unwrap());
    assert_ne!(der_of(&first), der_of(&second));
    let (ok, failed, seen_new) = (
        ok.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        seen_new.load(Ordering::Relaxed),
    );
    eprintln!(
        "TLS swap under load: {ok} answered, {failed} failed, {seen_new} on the new certificate"
    );
    assert_eq!(failed, 0);
    assert!(seen_new > 0, "the new certificate is served after the swap");
}

#[test]
fn sigterm_in_the_middle_of_the_load_answers_every_request_it_accepted() {
    let mut bin = common::Binary::start(&["--max-in-flight", "4096"]);
    let addr = bin.addr;
    let body = Arc::new(common::fixture(
        "delete-graph/sync-chain-all-running.request.json",
    ));
    let (answered, broken) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let handles: Vec<_> = (0..connections().min(32))
        .map(|_| {
            let (body, answered, broken) = (body.clone(), answered.clone(), broken.clone());
            std::thread::spawn(move || loop {
                let Ok(mut s) = TcpStream::connect(addr) else {
                    return;
                };
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut raw =
                    post_head("/delete-graph/sync", "application/json", body.len()).into_bytes();
                raw.extend_from_slice(&body);
                if s.write_all(&raw).is_err() {
                    return; // closed before the request was read: never accepted
                }
                let mut first = [0u8; 1];
                use std::io::Read;
                match s.read(&mut first) {
                    Ok(1) => {
                        let reply = read_reply(&mut (&first[..]).chain(&mut s));
                        if reply.status == 200 && reply.json()["children"].is_array() {
                            answered.fetch_add(1, Ordering::Relaxed);
                        } else {
                            broken.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // Reset or closed with no byte: the listener went away before accepting it.
                    _ => return,
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let before = answered.load(Ordering::Relaxed);
    bin.signal("-TERM");
    handles.into_iter().for_each(|h| h.join().unwrap());
    let status = bin.child.wait().unwrap();
    let (answered, broken) = (
        answered.load(Ordering::Relaxed),
        broken.load(Ordering::Relaxed),
    );
    eprintln!(
        "SIGTERM under load: {answered} answered ({before} before the signal), {broken} broken"
    );
    assert!(before > 0);
    assert_eq!(broken, 0, "a started response was cut or wrong");
    assert!(status.success(), "drained and exited cleanly");
}
