//! The server over real loopback sockets: limits, errors, load shedding, timeouts, metrics.

mod common;

use common::{
    get, post, post_head, post_with_headers, read_reply, request, requests_counted, TestServer,
};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

const HOOK: &str = "/delete-graph/sync";
const ADMISSION: &str = "/delete-graph/validate";

fn fixture_body() -> Vec<u8> {
    common::fixture("delete-graph/sync-chain-database-running.request.json")
}

/// A review that `ADMISSION` allows.
fn admission_review() -> Vec<u8> {
    common::fixture("delete-graph/validate-chain-allowed.request.json")
}

#[test]
fn hook_answers_200_with_json() {
    let server = TestServer::start(&[]);
    let reply = post(&server, HOOK, &fixture_body());
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert!(reply.json()["children"].is_array());
}

#[test]
fn oversize_body_is_413_before_it_is_read() {
    let server = TestServer::start(&["--hook-body-limit", "1KiB"]);
    // Content-Length over the limit: answered without sending the body at all.
    let mut s = server.connect();
    s.write_all(post_head(HOOK, "application/json", 10_000).as_bytes())
        .unwrap();
    let reply = read_reply(&mut s);
    assert_eq!(reply.status, 413);
    assert!(reply.json()["error"].as_str().unwrap().contains("1024"));
    // A chunked body that grows past the limit is cut off too.
    let chunk = "x".repeat(2000);
    let raw = format!(
        "POST {HOOK} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len()
    );
    assert_eq!(request(&server, raw.as_bytes()).status, 413);
}

#[test]
fn admission_routes_have_their_own_limit() {
    let server = TestServer::start(&["--admission-body-limit", "100B"]);
    let body = vec![b' '; 101];
    assert_eq!(post(&server, "/delete-graph/validate", &body).status, 413);
    // The hook limit is larger: the same body is read (and is not JSON: 400).
    assert_eq!(post(&server, HOOK, &body).status, 400);
    // A body of exactly the limit is read.
    let reply = post(&server, "/delete-graph/validate", &body[..100]);
    assert_eq!(reply.status, 400, "{:?}", reply.json());
}

/// A body that breaks off in a way HTTP can tell (bad chunking) is a 400 that says the body
/// could not be read, not a 413 or a hook's answer.
#[test]
fn unreadable_body_is_400() {
    let server = TestServer::start(&[]);
    let raw = format!(
        "POST {HOOK} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{{}}\r\nzz\r\n"
    );
    let reply = request(&server, raw.as_bytes());
    assert_eq!(reply.status, 400);
    let error = reply.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error.starts_with("request body could not be read: ") && error.contains("chunk size"),
        "{error}"
    );
}

/// A caller that goes away before its body ends is counted and logged as 499 (nginx's "client
/// closed request"), not as a 400 that `MetahooksRequestsFailing` would take for a broken
/// request: over HTTP/1.1 a connection closed or reset mid-body; over HTTP/2 a stream reset with
/// `CANCEL`, with `INTERNAL_ERROR`, with `NO_ERROR` (which hyper ends without an error, short of
/// its Content-Length), and a connection dropped mid-body. A stream the caller ends short of its
/// Content-Length is a 400.
#[test]
fn a_caller_gone_before_its_body_ends_is_499_not_400() {
    let server = TestServer::start(&[]);
    let body = fixture_body();
    let head = post_head(HOOK, "application/json", body.len());

    let mut closed = server.connect();
    closed.write_all(head.as_bytes()).unwrap();
    closed.write_all(&body[..100]).unwrap();
    closed.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(requests_counted(&server, HOOK, 499, 1), 1);
    // A caller that only closed its side still reads the answer, which says what happened.
    let reply = read_reply(&mut closed);
    assert_eq!(reply.status, 499);
    let error = reply.json()["error"].as_str().unwrap().to_owned();
    assert!(
        error.starts_with("the caller went away before its body ended: ")
            && error.contains("end of file"),
        "{error}"
    );

    // Closed with a linger of zero: a reset.
    let mut stream = server.connect();
    socket2::SockRef::from(&stream)
        .set_linger(Some(Duration::ZERO))
        .unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&body[..100]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    drop(stream);
    assert_eq!(requests_counted(&server, HOOK, 499, 2), 2);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = server.http;
    let counted = |status, n| {
        tokio::task::spawn_blocking(move || {
            requests_counted(&TestServer::at(http), HOOK, status, n)
        })
    };
    runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(http).await.unwrap();
        let (client, connection) = h2::client::handshake(tcp).await.unwrap();
        let connection = tokio::spawn(connection);
        let resets = [
            (3, h2::Reason::CANCEL),
            (4, h2::Reason::INTERNAL_ERROR),
            (5, h2::Reason::NO_ERROR),
        ];
        for (n, reason) in resets {
            let mut stream = h2_body_begun(&client, &body, false).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            stream.send_reset(reason);
            assert_eq!(counted(499, n).await.unwrap(), n, "{reason:?}");
        }
        // A stream that ends short of its Content-Length breaks the protocol: a 400, as bad
        // chunking is over HTTP/1.1. (The stream is kept: dropped, it would be reset before
        // its data went out.)
        let _ended = h2_body_begun(&client, &body, true).await;
        assert_eq!(counted(400, 1).await.unwrap(), 1);
        // A connection dropped mid-body.
        let _open = h2_body_begun(&client, &body, false).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        connection.abort();
        // The socket closes once the task is dropped, which this waits for.
        assert!(connection.await.unwrap_err().is_cancelled());
    });
    assert_eq!(requests_counted(&server, HOOK, 499, 6), 6);
}

/// A POST to `HOOK` over `client` that declares `body`'s length and sends its first 100 bytes,
/// ending the stream there if `end`.
async fn h2_body_begun(
    client: &h2::client::SendRequest<bytes::Bytes>,
    body: &[u8],
    end: bool,
) -> h2::SendStream<bytes::Bytes> {
    let request = http::Request::post(format!("http://x{HOOK}"))
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(())
        .unwrap();
    common::h2_send(client, request, &body[..100], end).await.1
}

#[test]
fn wrong_content_type_is_415() {
    let server = TestServer::start(&[]);
    let body = fixture_body();
    let mut raw = post_head(HOOK, "application/x-www-form-urlencoded", body.len()).into_bytes();
    raw.extend_from_slice(&body);
    let reply = request(&server, &raw);
    assert_eq!(reply.status, 415);
    assert!(reply.json()["error"]
        .as_str()
        .unwrap()
        .contains("application/json"));
}

/// A compressed body is refused by its Content-Encoding (RFC 7694: 415 and the codings taken),
/// not read as JSON that does not parse; `identity` is no coding and is read.
#[test]
fn compressed_body_is_415_naming_the_encoding() {
    let server = TestServer::start(&[]);
    let body = fixture_body();
    for coding in ["gzip", "identity, br"] {
        let reply = post_with_headers(&server, HOOK, &body, &[("Content-Encoding", coding)]);
        assert_eq!(reply.status, 415, "{coding}");
        assert_eq!(reply.header("accept-encoding"), Some("identity"));
        let error = reply.json()["error"].as_str().unwrap().to_owned();
        assert!(
            error.starts_with("Content-Encoding must be identity") && error.contains(coding),
            "{error}"
        );
    }
    let reply = post_with_headers(&server, HOOK, &body, &[("Content-Encoding", "Identity")]);
    assert_eq!(reply.status, 200);
}

#[test]
fn wrong_typed_field_is_400_with_its_path() {
    let server = TestServer::start(&[]);
    let reply = post(
        &server,
        HOOK,
        br#"{"parent": {"metadata": {"name": "s", "generation": "three"}}}"#,
    );
    assert_eq!(reply.status, 400);
    let body = reply.json();
    assert_eq!(body["path"], "parent.metadata.generation");
    assert!(body["error"].as_str().unwrap().contains("expected i64"));

    let reply = post(&server, HOOK, b"not json");
    assert_eq!(reply.status, 400);
    assert!(reply.json()["error"].is_string());

    // A good request behind a byte order mark: the error says what is in the way.
    let reply = post(
        &server,
        HOOK,
        &[b"\xEF\xBB\xBF".as_slice(), &fixture_body()].concat(),
    );
    assert_eq!(reply.status, 400);
    let error = reply.json()["error"].as_str().unwrap().to_owned();
    assert!(error.contains("byte order mark"), "{error}");
}

#[test]
fn unknown_route_is_404_and_wrong_method_405() {
    let server = TestServer::start(&[]);
    let reply = post(&server, "/nope/sync", b"{}");
    assert_eq!(reply.status, 404);
    assert!(reply.json()["error"].is_string());
    let reply = get(&server, HOOK);
    assert_eq!(reply.status, 405);
    assert_eq!(reply.header("allow"), Some("POST"));
    assert_eq!(
        reply.json()["error"],
        "this route takes POST with a JSON body"
    );
    // The admin endpoints answer a wrong method the same way.
    for path in ["/healthz", "/readyz", "/metrics"] {
        let reply = post(&server, path, b"{}");
        assert_eq!(reply.status, 405, "{path}");
        assert_eq!(reply.header("allow"), Some("GET,HEAD"), "{path}");
        assert_eq!(reply.json()["error"], "this route takes GET", "{path}");
    }
}

/// A hook request in flight on its own connection: its head and the first bytes of `body` sent,
/// the rest for the caller to send (`&body[10..]`), and time given to the server to take it.
fn held_in_flight(server: &TestServer, body: &[u8]) -> std::net::TcpStream {
    held_in_flight_on(server, HOOK, body)
}

/// As [`held_in_flight`], on the route `path`.
fn held_in_flight_on(server: &TestServer, path: &str, body: &[u8]) -> std::net::TcpStream {
    let mut slow = server.connect();
    slow.write_all(post_head(path, "application/json", body.len()).as_bytes())
        .unwrap();
    slow.write_all(&body[..10]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    slow
}

/// What `/metrics` says the requests in flight hold of a load-shedding bound, and its limit: the
/// gauges `name` and `name_limit`, with `labels` as the exposition spells them.
fn bound(server: &TestServer, name: &str, labels: &str) -> (u64, u64) {
    let read = |series: String| {
        common::metric(server, &series).unwrap_or_else(|| panic!("no {series} in /metrics"))
    };
    (
        read(format!("{name}{labels}")),
        read(format!("{name}_limit{labels}")),
    )
}

/// The bound of `class` (`--max-in-flight` or `--max-in-flight-admission`) in `/metrics`.
fn in_flight(server: &TestServer, class: &str) -> (u64, u64) {
    let labels = format!("{{class=\"{class}\"}}");
    bound(server, "metahooks_requests_in_flight", &labels)
}

/// The bound of `--max-in-flight-bytes` in `/metrics`.
fn body_bytes_in_flight(server: &TestServer) -> (u64, u64) {
    bound(server, "metahooks_request_body_bytes_in_flight", "")
}

/// Past `--max-in-flight`, a Metacontroller request is a 429 with Retry-After, and `/metrics`
/// shows the bound full before it sheds.
#[test]
fn overload_is_429_with_retry_after() {
    let server = TestServer::start(&["--max-in-flight", "1", "--retry-after", "3"]);
    let body = fixture_body();
    assert_eq!(in_flight(&server, "metacontroller"), (0, 1));
    // The first request holds the only slot while its body trickles in.
    let mut slow = held_in_flight(&server, &body);
    assert_eq!(in_flight(&server, "metacontroller"), (1, 1));
    assert_eq!(in_flight(&server, "admission"), (0, 256));
    let shed = post(&server, HOOK, &body);
    assert_eq!(shed.status, 429);
    assert_eq!(shed.header("retry-after"), Some("3"));
    let error = shed.json()["error"].as_str().unwrap().to_owned();
    assert!(error.contains("--max-in-flight)"), "{error}");
    // Admission has places of its own: the API server would take a 429 as a failed call.
    let review = admission_review();
    assert_eq!(post(&server, ADMISSION, &review).status, 200);
    // The held request still completes normally.
    slow.write_all(&body[10..]).unwrap();
    assert_eq!(read_reply(&mut slow).status, 200);
    // And the slot is free again.
    assert_eq!(in_flight(&server, "metacontroller"), (0, 1));
    assert_eq!(post(&server, HOOK, &body).status, 200);
}

/// `--max-in-flight-admission` bounds admission requests alone: with its one place held, another
/// review is a 429 naming the flag, while Metacontroller's requests are answered.
#[test]
fn admission_overload_is_429_and_leaves_metacontroller_alone() {
    let server = TestServer::start(&["--max-in-flight-admission", "1", "--max-in-flight", "1"]);
    let review = admission_review();
    let mut slow = held_in_flight_on(&server, ADMISSION, &review);
    assert_eq!(in_flight(&server, "admission"), (1, 1));
    assert_eq!(in_flight(&server, "metacontroller"), (0, 1));
    let shed = post(&server, ADMISSION, &review);
    assert_eq!(shed.status, 429);
    let error = shed.json()["error"].as_str().unwrap().to_owned();
    assert!(error.contains("--max-in-flight-admission"), "{error}");
    assert_eq!(post(&server, HOOK, &fixture_body()).status, 200);
    slow.write_all(&review[10..]).unwrap();
    assert_eq!(read_reply(&mut slow).status, 200);
    assert_eq!(in_flight(&server, "admission"), (0, 1));
    assert_eq!(post(&server, ADMISSION, &review).status, 200);
}

/// Hook bodies in flight are held to `--max-in-flight-bytes` (here 6 KiB; the body is about 4
/// KiB, so one fits and two do not): a request whose Content-Length does not fit beside those in
/// flight is a 429 with Retry-After, one that fits is taken, one larger than the whole budget
/// runs alone, and admission requests are not counted; `/metrics` shows the share held, in whole
/// KiB.
#[test]
fn request_bytes_over_the_budget_are_429_with_retry_after() {
    let server = TestServer::start(&["--max-in-flight-bytes", "6KiB", "--retry-after", "2"]);
    let (body, budget) = (fixture_body(), 6 * 1024);
    assert!(body.len() <= budget && 2 * body.len() > budget && body.len() > 2048);
    assert_eq!(body_bytes_in_flight(&server), (0, budget as u64));
    let mut slow = held_in_flight(&server, &body);
    let share = body.len().div_ceil(1024) as u64 * 1024;
    assert_eq!(body_bytes_in_flight(&server), (share, budget as u64));
    let shed = post(&server, HOOK, &body);
    assert_eq!(shed.status, 429);
    assert_eq!(shed.header("retry-after"), Some("2"));
    let error = shed.json()["error"].as_str().unwrap().to_owned();
    assert!(error.contains("--max-in-flight-bytes"), "{error}");
    // A small body fits beside the held one (and is read: a 400, not a 429).
    assert_eq!(post(&server, HOOK, b"{}").status, 400);
    // Admission is not counted (the API server would take a 429 as a failed call): a review
    // larger than what is left is answered.
    let review = common::fixture("delete-graph/validate-invalid-spec-denied.request.json");
    assert!(review.len() > budget - body.len());
    assert_eq!(post(&server, "/delete-graph/validate", &review).status, 200);
    slow.write_all(&body[10..]).unwrap();
    assert_eq!(read_reply(&mut slow).status, 200);
    // The held share is given back.
    assert_eq!(body_bytes_in_flight(&server), (0, budget as u64));
    assert_eq!(post(&server, HOOK, &body).status, 200);

    let small = TestServer::start(&["--max-in-flight-bytes", "2KiB"]);
    assert_eq!(post(&small, HOOK, &body).status, 200);
}

#[test]
fn slow_request_times_out_with_503() {
    let server = TestServer::start(&["--request-timeout", "300ms"]);
    let body = fixture_body();
    let mut slow = server.connect();
    slow.write_all(post_head(HOOK, "application/json", body.len()).as_bytes())
        .unwrap();
    slow.write_all(&body[..10]).unwrap();
    let reply = read_reply(&mut slow);
    assert_eq!(reply.status, 503);
    assert!(reply.header("retry-after").is_some());
}

/// How long from now the server takes to close `s` (a read that ends: EOF or a reset), reading
/// past anything it answers first; `None` if it still holds the connection after the stream's
/// 20 s read timeout.
fn closed_after(s: &mut std::net::TcpStream) -> Option<Duration> {
    closed_after_reading(s).0
}

/// [`closed_after`], with the bytes read before the close.
fn closed_after_reading(s: &mut std::net::TcpStream) -> (Option<Duration>, Vec<u8>) {
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (Some(started.elapsed()), received),
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (Some(started.elapsed()), received)
            }
            Err(_) => return (None, received),
        }
    }
}

const GET_HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";

/// A server with a 300 ms header read timeout and `idle_timeout`, and a connection to it that
/// has been answered once and is kept alive.
fn served_once(idle_timeout: &str) -> (TestServer, std::net::TcpStream) {
    let flags = [
        "--header-read-timeout",
        "300ms",
        "--idle-timeout",
        idle_timeout,
    ];
    let server = TestServer::start(&flags);
    let s = served(&server);
    (server, s)
}

/// A connection to `server` that has been answered once and is kept alive.
fn served(server: &TestServer) -> std::net::TcpStream {
    let mut s = server.connect();
    s.write_all(GET_HEALTHZ).unwrap();
    assert_eq!(read_reply(&mut s).status, 200);
    s
}

#[test]
fn a_slow_head_is_closed_after_the_header_read_timeout() {
    let server = TestServer::start(&["--header-read-timeout", "300ms"]);
    let mut s = server.connect();
    s.write_all(b"POST /delete-graph/sync HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // hyper answers 408 or just closes; either way well before the 20 s read timeout.
    let closed = closed_after(&mut s).expect("closed");
    assert!(closed < Duration::from_secs(5), "closed after {closed:?}");
}

/// A kept-alive connection waits `--idle-timeout` for its next request, not the header read
/// timeout: the Go clients keep theirs 90 s or more, and a close under their next request
/// fails it. The head that then comes has the header read timeout from its first byte (here it
/// comes in two parts, 100 ms apart).
#[test]
fn a_kept_alive_connection_waits_the_idle_timeout() {
    let (_server, mut s) = served_once("2s");
    std::thread::sleep(Duration::from_millis(900));
    let (first, rest) = GET_HEALTHZ.split_at(10);
    s.write_all(first).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(rest).unwrap();
    assert_eq!(read_reply(&mut s).status, 200, "after 900 ms of quiet");
    let closed = closed_after(&mut s).expect("closed after the idle timeout");
    assert!(
        closed >= Duration::from_millis(1500),
        "closed after {closed:?}"
    );
}

/// Once a request's first byte has come, its head has the header read timeout, even on a
/// kept-alive connection.
#[test]
fn a_slow_head_after_an_idle_wait_is_closed_after_the_header_read_timeout() {
    let (_server, mut s) = served_once("60s");
    std::thread::sleep(Duration::from_millis(500));
    s.write_all(b"GET /hea").unwrap();
    let closed = closed_after(&mut s).expect("closed");
    assert!(closed < Duration::from_secs(10), "closed after {closed:?}");
}

/// A connection that brings no request within the header read timeout is closed, whether it
/// sends nothing, stops inside the HTTP/2 preface (where hyper is still telling the protocols
/// apart) or sends the whole preface and no request.
#[test]
fn a_connection_without_a_request_is_closed() {
    let server = TestServer::start(&["--header-read-timeout", "300ms", "--idle-timeout", "60s"]);
    for sent in [&b""[..], b"PRI", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"] {
        let mut s = server.connect();
        s.write_all(sent).unwrap();
        let closed = closed_after(&mut s);
        let sent = String::from_utf8_lossy(sent);
        assert!(
            closed.is_some_and(|c| c < Duration::from_secs(10)),
            "{sent:?}: {closed:?}"
        );
    }
}

/// An HTTP/2 connection that has had no request open for the idle timeout is asked to close
/// with a GOAWAY, and one whose peer does not answer the PING that follows (a peer that has
/// gone away) is closed the header read timeout later: hyper's HTTP/2 server waits for ever.
#[test]
fn an_idle_http2_connection_is_closed_even_when_its_peer_is_gone() {
    let server = TestServer::start(&["--header-read-timeout", "300ms", "--idle-timeout", "1s"]);
    let mut s = server.connect();
    s.write_all(&common::h2_get_healthz()).unwrap();
    let (closed, received) = closed_after_reading(&mut s);
    let closed = closed.expect("closed before the stream's 20 s read timeout");
    // SETTINGS, HEADERS of the answer, GOAWAY and its PING; never answered.
    let types = common::h2_frame_types(&received);
    for (kind, name) in [(0x1, "HEADERS"), (0x7, "GOAWAY"), (0x6, "PING")] {
        assert!(types.contains(&kind), "no {name} in {types:?}");
    }
    assert!(
        closed >= Duration::from_millis(1000) && closed < Duration::from_secs(10),
        "closed after {closed:?}"
    );
}

/// A live HTTP/2 client keeps its connection while a request is open (here one whose body
/// comes after longer than the idle timeout) and while it sends a request within each idle
/// timeout, and sees it end cleanly (GOAWAY, no error) once it has sent none for that long.
#[test]
fn an_http2_connection_lasts_while_it_is_used() {
    let server = TestServer::start(&["--header-read-timeout", "300ms", "--idle-timeout", "1s"]);
    let addr = server.http;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (client, connection) = h2::client::handshake(tcp).await.unwrap();
        let connection = tokio::spawn(connection);
        let request = http::Request::post(format!("http://x{HOOK}"))
            .header("content-type", "application/json")
            .body(())
            .unwrap();
        let (response, mut body) = client.clone().send_request(request, false).unwrap();
        tokio::time::sleep(Duration::from_millis(1300)).await;
        body.send_data(fixture_body().into(), true).unwrap();
        assert_eq!(response.await.unwrap().status(), 200);
        let mut last = Instant::now();
        for _ in 0..3 {
            let request = http::Request::get("http://x/healthz").body(()).unwrap();
            let mut sender = client
                .clone()
                .ready()
                .await
                .expect("the connection still open");
            // Before the request leaves: the server's idle timeout starts after its answer,
            // which the client can only see later (it read 999.9 ms from then once).
            last = Instant::now();
            let (response, _) = sender.send_request(request, true).unwrap();
            assert_eq!(response.await.unwrap().status(), 200);
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        // The client kept: an h2 client whose handles are all dropped closes on its own.
        let ended = tokio::time::timeout(Duration::from_secs(10), connection)
            .await
            .expect("closed within 10 s");
        ended.unwrap().expect("a clean close");
        let quiet = last.elapsed();
        assert!(
            quiet >= Duration::from_millis(1000),
            "closed after {quiet:?}"
        );
        drop(client);
    });
}

/// `GET path` on a new connection, or `None` if the server closes it without an answer.
fn try_get(server: &TestServer, path: &str) -> Option<common::Reply> {
    let mut s = server.connect();
    let head = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(head.as_bytes()).ok()?;
    let mut first = [0u8; 512];
    match s.read(&mut first) {
        Ok(n) if n > 0 => Some(read_reply(&mut (&first[..n]).chain(s))),
        _ => None,
    }
}

/// Past `--max-connections` a new connection is closed as soon as it is accepted, unanswered,
/// and counted; a place comes back when a connection ends.
#[test]
fn connections_past_the_bound_are_closed_and_counted() {
    let server = TestServer::start(&["--max-connections", "2"]);
    let mut held: Vec<_> = (0..2).map(|_| served(&server)).collect();
    assert!(
        try_get(&server, "/healthz").is_none(),
        "a third connection answered"
    );
    held.pop();
    let metrics = (0..100)
        .find_map(|_| {
            try_get(&server, "/metrics").or_else(|| {
                std::thread::sleep(Duration::from_millis(50));
                None
            })
        })
        .expect("a place given back");
    let text = String::from_utf8_lossy(&metrics.body);
    // The connection held and the one asking.
    assert!(text.contains("\nmetahooks_connections 2\n"), "{text}");
    let refused: u64 = text
        .split_once("\nmetahooks_connections_refused_total ")
        .and_then(|(_, rest)| rest.lines().next()?.parse().ok())
        .expect("the refused count");
    assert!(refused >= 1, "{text}");
}

#[test]
fn metrics_count_requests_by_route_and_status() {
    let server = TestServer::start(&[]);
    let before = get(&server, "/metrics");
    assert_eq!(before.status, 200);
    let version = format!(
        "metahooks_build_info{{version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    );
    assert!(String::from_utf8_lossy(&before.body).contains(&version));
    let line = format!("metahooks_requests_total{{route=\"{HOOK}\",status=\"200\"}} 1");
    assert!(!String::from_utf8_lossy(&before.body).contains(&line));
    assert_eq!(post(&server, HOOK, &fixture_body()).status, 200);
    let after = String::from_utf8_lossy(&get(&server, "/metrics").body).into_owned();
    assert!(after.contains(&line), "{after}");
    assert!(after.contains(&format!(
        "metahooks_request_duration_seconds_count{{route=\"{HOOK}\",status=\"200\"}} 1"
    )));
}

/// A sync answer counts the condition it gives its object: a CertificateManager frozen for its
/// missing CA Secret is `Ready` `False` with that reason, one that issues leaves `True`.
#[test]
fn metrics_count_the_condition_each_sync_answer_gives() {
    let server = TestServer::start(&[]);
    for (case, times) in [("ca-secret-missing-freezes", 2), ("step0-issues-leaves", 1)] {
        let body = common::fixture(&format!("cert-rotation/sync-{case}.request.json"));
        for _ in 0..times {
            assert_eq!(post(&server, "/cert-rotation/sync", &body).status, 200);
        }
    }
    let text = String::from_utf8_lossy(&get(&server, "/metrics").body).into_owned();
    let line = |status: &str, reason: &str, n: u32| {
        format!("metahooks_sync_conditions_total{{route=\"/cert-rotation/sync\",condition=\"Ready\",status=\"{status}\",reason=\"{reason}\"}} {n}\n")
    };
    assert!(text.contains(&line("False", "CAUnavailable", 2)), "{text}");
    assert!(text.contains(&line("True", "IssuersReady", 1)), "{text}");
}

/// Each route that keeps the requests it decodes counts how it read each: a request decoded whole
/// the first time, from memory the second; a route that keeps none counts nothing.
#[test]
fn metrics_count_how_each_sync_request_was_read() {
    let server = TestServer::start(&[]);
    let keeping = [
        ("app-discovery/sync", "sync-single-service-created-at-once"),
        ("delete-graph/sync", "sync-chain-database-running"),
        (
            "delete-graph/finalize",
            "finalize-teardown-starts-with-leaf",
        ),
        ("cert-rotation/sync", "sync-step0-issues-leaves"),
        ("mesh-root-certificate/sync", "sync-active-signing"),
    ];
    let other = ("app-discovery/customize", "customize-namespace");
    for (route, fixture) in keeping.into_iter().chain([other]) {
        let controller = route.split('/').next().unwrap();
        let body = common::fixture(&format!("{controller}/{fixture}.request.json"));
        for _ in 0..2 {
            let status = post(&server, &format!("/{route}"), &body).status;
            assert_eq!(status, 200, "{route}");
        }
    }
    let text = String::from_utf8_lossy(&get(&server, "/metrics").body).into_owned();
    let line = |route: &str, read: &str| {
        format!("metahooks_sync_requests_read_total{{route=\"/{route}\",read=\"{read}\"}} 1\n")
    };
    for (route, _) in keeping {
        for read in ["whole", "kept"] {
            assert!(text.contains(&line(route, read)), "{route} {read}: {text}");
        }
    }
    let counted = format!("route=\"/{}\",read", other.0);
    assert!(!text.contains(&counted), "{text}");
}

#[test]
fn health_and_readiness() {
    let server = TestServer::start(&[]);
    assert_eq!(get(&server, "/healthz").status, 200);
    assert_eq!(get(&server, "/readyz").status, 200);
}

/// `[::]`, as the manifests give it, answers over IPv4 and IPv6, on both listeners: one address
/// for a Pod in an IPv4, IPv6 or dual-stack cluster.
#[test]
fn the_unspecified_ipv6_address_serves_both_families() {
    let clock = std::sync::Arc::new(time::OffsetDateTime::now_utc);
    let server = TestServer::start_on("[::]", &["--tls-self-signed"], clock);
    let https = server.https.expect("the HTTPS listener");
    for ip in [
        IpAddr::from(Ipv4Addr::LOCALHOST),
        IpAddr::from(Ipv6Addr::LOCALHOST),
    ] {
        let http = TestServer::at(SocketAddr::new(ip, server.http.port()));
        assert_eq!(get(&http, "/readyz").status, 200, "{ip}");
        let (status, _) = common::tls::https_get(SocketAddr::new(ip, https.port()));
        assert_eq!(status, 200, "{ip}");
    }
}

#[test]
fn bearer_token_guards_metacontroller_routes_only() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    let server = TestServer::start(&["--bearer-token-file", token.to_str().unwrap()]);
    let body = fixture_body();
    let reply = post(&server, HOOK, &body);
    assert_eq!(reply.status, 401);
    assert!(reply.json()["error"].as_str().unwrap().contains("Bearer"));
    let with =
        |value: &str| post_with_headers(&server, HOOK, &body, &[("Authorization", value)]).status;
    for refused in [
        "Bearer wrong",
        "Bearer s3cret-toke",
        "Bearer s3cret-tokeN",
        // Two bytes swapped: their differences cancel out if they are XORed together.
        "Bearer s3cret-tokne",
        "Bearer s3cret-token2",
        "Basic s3cret-token",
        "s3cret-token",
        "Bearer",
    ] {
        assert_eq!(with(refused), 401, "{refused}");
    }
    // The scheme is case-insensitive (RFC 9110 §11.1); more than one space may follow it.
    for accepted in [
        "Bearer s3cret-token",
        "bearer s3cret-token",
        "BEARER  s3cret-token",
    ] {
        assert_eq!(with(accepted), 200, "{accepted}");
    }
    // Admission (the API server authenticates with client certificates) and admin routes are open.
    assert_eq!(post(&server, ADMISSION, &admission_review()).status, 200);
    assert_eq!(get(&server, "/healthz").status, 200);
}

/// The token file holds one token a line and is read again after it changes (a Secret mounted
/// the kubelet's way; the server looks at the file once a second at most): during a rotation both
/// tokens are accepted, then only the new one; a file left without a token keeps the tokens in
/// service.
#[test]
fn bearer_tokens_are_reloaded_and_may_be_several() {
    use common::mounted::{mount_files, swap_data, write_files};
    let dir = tempfile::tempdir().unwrap();
    let version = |name: &str, tokens: &str| {
        write_files(dir.path(), name, &[("token", tokens)]);
        swap_data(dir.path(), name);
        std::thread::sleep(std::time::Duration::from_millis(1100));
    };
    write_files(dir.path(), "..a", &[("token", "old-token\n")]);
    let [token] = mount_files(dir.path(), "..a", ["token"]);
    let server = TestServer::start(&["--bearer-token-file", &token]);
    let body = fixture_body();
    let status = |token: &str| {
        let bearer = format!("Bearer {token}");
        post_with_headers(&server, HOOK, &body, &[("Authorization", &bearer)]).status
    };
    assert_eq!((status("old-token"), status("new-token")), (200, 401));

    version("..b", "old-token\n\n  new-token \r\n");
    assert_eq!((status("old-token"), status("new-token")), (200, 200));
    // Blank lines are no empty token.
    assert_eq!(status(""), 401);

    version("..c", "new-token");
    assert_eq!((status("old-token"), status("new-token")), (401, 200));

    version("..d", " \n\n");
    assert_eq!((status("old-token"), status("new-token")), (401, 200));

    // A token written twice is still accepted.
    version("..e", "new-token\nnew-token\n");
    assert_eq!((status("old-token"), status("new-token")), (401, 200));
}

/// `--etag`: every Metacontroller answer carries the SHA-256 tag of its bytes, and a request
/// naming that tag in `If-None-Match` gets a 304 without a body; any other tag gets the answer.
/// Without the flag, and on admission routes, there are no tags and `If-None-Match` is ignored.
#[test]
fn etag_answers_304_only_to_the_answers_own_tag() {
    let body = fixture_body();
    let plain = TestServer::start(&[]);
    let untagged = post(&plain, HOOK, &body);
    assert_eq!(untagged.status, 200);
    assert_eq!(untagged.header("etag"), None);
    let asked = post_with_headers(&plain, HOOK, &body, &[("If-None-Match", "\"x\"")]);
    assert_eq!((asked.status, asked.body.len()), (200, untagged.body.len()));

    let server = TestServer::start(&["--etag"]);
    let first = post(&server, HOOK, &body);
    assert_eq!(first.status, 200);
    assert_eq!(first.body, untagged.body, "the answer itself is the same");
    let tag = first.header("etag").expect("an ETag").to_owned();
    assert_eq!(tag, metahooks::etag::of(&first.body));

    let again = post_with_headers(&server, HOOK, &body, &[("If-None-Match", &tag)]);
    assert_eq!(again.status, 304);
    assert!(again.body.is_empty());
    assert_eq!(again.header("etag"), Some(tag.as_str()));

    for other in ["\"stale\"", "*", &tag[1..tag.len() - 1]] {
        let reply = post_with_headers(&server, HOOK, &body, &[("If-None-Match", other)]);
        assert_eq!((reply.status, &reply.body), (200, &first.body), "{other}");
    }
    // Another request, another answer: the old tag does not cover it.
    let mut changed: serde_json::Value = serde_json::from_slice(&body).unwrap();
    changed["parent"]["metadata"]["generation"] = 99.into();
    let changed = serde_json::to_vec(&changed).unwrap();
    let reply = post_with_headers(&server, HOOK, &changed, &[("If-None-Match", &tag)]);
    assert_eq!(reply.status, 200);
    assert_ne!(reply.header("etag"), Some(tag.as_str()));

    let admitted = post_with_headers(
        &server,
        ADMISSION,
        &admission_review(),
        &[("If-None-Match", "*")],
    );
    assert_eq!((admitted.status, admitted.header("etag")), (200, None));
    let metrics = String::from_utf8(get(&server, "/metrics").body).unwrap();
    assert!(
        metrics.contains("metahooks_requests_total{route=\"/delete-graph/sync\",status=\"304\"} 1"),
        "{metrics}"
    );
}
