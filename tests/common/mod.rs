//! Helpers shared by the integration tests: an in-process server on loopback port 0, a tiny
//! HTTP/1.1 client over std sockets (so tests can send partial bodies), a TLS client that
//! reports the certificate the server presented, files mounted the kubelet's way, and two
//! workloads of the mesh talking mutual TLS with what their leaf Secrets mount, and the random
//! source of the simulator's random walks.
#![allow(dead_code)]

pub mod mesh_tls;
pub mod mounted;
pub mod tls;
pub mod walk;

use metahooks::config::ServeConfig;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

/// The top-level fields of Metacontroller's typed answer of a composite's sync or finalize hook
/// (contract §5.2), of a decorator's (§7.2) and of a customize hook (§6.2).
pub const COMPOSITE_ANSWER_FIELDS: &[&str] =
    &["status", "children", "resyncAfterSeconds", "finalized"];
pub const DECORATOR_ANSWER_FIELDS: &[&str] = &[
    "labels",
    "annotations",
    "status",
    "attachments",
    "resyncAfterSeconds",
    "finalized",
];
pub const CUSTOMIZE_ANSWER_FIELDS: &[&str] = &["relatedResources"];

/// The first ten lowercase hex digits of SHA-256 over `text`: the hash the specs cut names and
/// versions from (delete-graph §3, app-discovery §4.2).
pub fn sha256_hex10(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref()[..5]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A server running on its own runtime thread; stopped and drained on drop.
pub struct TestServer {
    pub http: SocketAddr,
    pub https: Option<SocketAddr>,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts `metahooks serve` with these flags plus loopback port-0 listeners.
    pub fn start(flags: &[&str]) -> TestServer {
        Self::start_with_clock(flags, std::sync::Arc::new(time::OffsetDateTime::now_utc))
    }

    /// As [`TestServer::start`], with hooks reading `now` from `clock`.
    pub fn start_with_clock(flags: &[&str], clock: metahooks::Clock) -> TestServer {
        Self::start_on("127.0.0.1", flags, clock)
    }

    /// As [`TestServer::start_with_clock`], both listeners on port 0 of `ip` (`[::]`, ...).
    pub fn start_on(ip: &str, flags: &[&str], clock: metahooks::Clock) -> TestServer {
        let any_port = format!("{ip}:0");
        let mut args = vec!["--listen", &any_port, "--tls-listen", &any_port];
        args.extend_from_slice(flags);
        let config = ServeConfig::from_args(&args).expect("flags");
        let (addr_tx, addr_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let server = metahooks::start_with_clock(&config, clock)
                    .await
                    .expect("server starts");
                addr_tx.send((server.http_addr, server.https_addr)).unwrap();
                let _ = tokio::task::spawn_blocking(move || stop_rx.recv()).await;
                server.shutdown();
                server.wait().await.unwrap();
            });
        });
        let (http, https) = addr_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("server address");
        TestServer {
            http,
            https,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// A handle on a server someone else runs (the client functions only need the address).
    pub fn at(http: SocketAddr) -> TestServer {
        TestServer {
            http,
            https: None,
            stop: None,
            thread: None,
        }
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.http).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A parsed HTTP/1.1 response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
}

/// Head of a POST with a JSON body of `len` bytes.
pub fn post_head(path: &str, content_type: &str, len: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
    )
}

/// Sends one request on a new connection and reads the whole response.
pub fn request(server: &TestServer, raw: &[u8]) -> Reply {
    let mut s = server.connect();
    s.write_all(raw).unwrap();
    read_reply(&mut s)
}

pub fn post(server: &TestServer, path: &str, body: &[u8]) -> Reply {
    post_with_headers(server, path, body, &[])
}

/// A JSON POST with these headers besides the usual ones.
pub fn post_with_headers(
    server: &TestServer,
    path: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> Reply {
    let head = post_head(path, "application/json", body.len());
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let mut raw = head
        .replacen("\r\n", &format!("\r\n{extra}"), 1)
        .into_bytes();
    raw.extend_from_slice(body);
    request(server, &raw)
}

pub fn get(server: &TestServer, path: &str) -> Reply {
    request(
        server,
        format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

/// The value of one series of `/metrics`, named with its labels as the exposition spells them
/// (`metahooks_connections`, `metahooks_requests_in_flight{class="admission"}`), if it is there.
pub fn metric<T: std::str::FromStr>(server: &TestServer, series: &str) -> Option<T> {
    let text = String::from_utf8(get(server, "/metrics").body).unwrap();
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))?;
    match value.parse() {
        Ok(value) => Some(value),
        Err(_) => panic!("{series} is not a number: {value}"),
    }
}

/// Reads a response of a `Connection: close` exchange (Content-Length or read to end).
pub fn read_reply(s: &mut impl Read) -> Reply {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut chunk).expect("read response");
        assert!(
            n > 0,
            "connection closed before a response: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let mut body = buf[head_end + 4..].to_vec();
    let len = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse::<usize>().unwrap());
    loop {
        if len.is_some_and(|l| body.len() >= l) {
            break;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    Reply {
        status,
        headers,
        body,
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The path of a file or directory under `fixtures/`.
pub fn fixture_path(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// The bytes of a fixture file under `fixtures/`.
pub fn fixture(rel: &str) -> Vec<u8> {
    let path = fixture_path(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The real `metahooks serve` binary on a loopback port-0 listener with JSON logs (stderr is
/// drained on a thread), for tests that send it signals.
pub struct Binary {
    pub child: std::process::Child,
    pub addr: SocketAddr,
    /// The HTTPS listener's address, when the flags start one.
    pub https: Option<SocketAddr>,
}

/// A test that fails half-way leaves no server running (it would hold the test run's output
/// open); one that has exited already is left as it is.
impl Drop for Binary {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Binary {
    /// Starts the binary with these `serve` flags and waits for its `listening` log line.
    pub fn start(flags: &[&str]) -> Binary {
        use std::io::{BufRead, BufReader};
        use std::process::{Command, Stdio};
        let mut args = vec!["--log-format", "json", "serve", "--listen", "127.0.0.1:0"];
        args.extend_from_slice(flags);
        let child = Command::new(env!("CARGO_BIN_EXE_metahooks"))
            .args(&args)
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Owned from here on, so that a panic below stops the process (Drop).
        let mut bin = Binary {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            https: None,
        };
        let stderr = bin.child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let listening = loop {
            let line = rx.recv_timeout(Duration::from_secs(20)).expect("log line");
            match serde_json::from_str::<serde_json::Value>(&line) {
                Ok(v) if v["message"] == "listening" => break v,
                _ => continue,
            }
        };
        // The line says which build is running, for whoever reads a Pod's logs.
        assert_eq!(
            listening["version"],
            env!("CARGO_PKG_VERSION"),
            "{listening}"
        );
        let address = |field: &str| listening[field].as_str().map(|a| a.parse().expect(a));
        bin.addr = address("http").expect("the HTTP listener's address");
        bin.https = address("https");
        bin
    }

    /// Sends the process a signal with `kill` (`-TERM`, ...).
    pub fn signal(&self, sig: &str) {
        let status = std::process::Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

/// A frame of HTTP/2 as it goes on the wire: length, type, flags, stream and payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut frame = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    frame.extend([kind, flags]);
    frame.extend(stream.to_be_bytes());
    frame.extend(payload);
    frame
}

/// How many requests to `route` `/metrics` counts with `status`, waiting up to 5 s for `want`:
/// a request is counted once its answer is made, a moment after its caller stopped sending.
pub fn requests_counted(server: &TestServer, route: &str, status: u16, want: u64) -> u64 {
    let series = format!("\nmetahooks_requests_total{{route=\"{route}\",status=\"{status}\"}} ");
    let count = || {
        let text = String::from_utf8_lossy(&get(server, "/metrics").body).into_owned();
        text.split_once(series.as_str())
            .and_then(|(_, rest)| rest.lines().next()?.parse().ok())
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let n = count();
        if n >= want || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `request` on an HTTP/2 connection with `data` as its body's first (or, if `end`, only)
/// bytes: the answer to come and the stream, to send more on or reset.
pub async fn h2_send(
    client: &h2::client::SendRequest<bytes::Bytes>,
    request: http::Request<()>,
    data: &[u8],
    end: bool,
) -> (h2::client::ResponseFuture, h2::SendStream<bytes::Bytes>) {
    let (response, mut stream) = client
        .clone()
        .ready()
        .await
        .unwrap()
        .send_request(request, false)
        .unwrap();
    stream
        .send_data(bytes::Bytes::copy_from_slice(data), end)
        .unwrap();
    (response, stream)
}

/// An HTTP/2 client's first bytes, written by hand: the preface, a SETTINGS frame and a
/// `GET /healthz` on stream 1. A test that then reads and never writes plays a peer that has
/// gone (it answers no PING).
pub fn h2_get_healthz() -> Vec<u8> {
    // The header block coded by the static table (HPACK, RFC 7541).
    let mut head = vec![0x82, 0x86, 0x44, 0x08];
    head.extend(b"/healthz");
    head.extend([0x41, 0x01, b'x']);
    let mut sent = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    sent.extend(h2_frame(0x4, 0, 0, &[]));
    // END_STREAM | END_HEADERS.
    sent.extend(h2_frame(0x1, 0x5, 1, &head));
    sent
}

/// The types of the HTTP/2 frames in `bytes`, which begin at a frame.
pub fn h2_frame_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 9 {
        let length = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        types.push(bytes[3]);
        bytes = &bytes[(9 + length).min(bytes.len())..];
    }
    types
}

/// A tracing writer collecting every log line into one buffer, for tests that read the logs.
#[derive(Clone, Default)]
pub struct LogCapture(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for LogCapture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogCapture {
    /// Makes this test binary log as `--log-format json` does, at `level`, into the capture: one
    /// capture for the binary, shared by its tests (the first `level` holds).
    pub fn install(level: &str) -> LogCapture {
        static INSTALLED: std::sync::OnceLock<LogCapture> = std::sync::OnceLock::new();
        INSTALLED
            .get_or_init(|| {
                let capture = LogCapture::default();
                let writer = capture.clone();
                metahooks::telemetry::init_logging_to(
                    metahooks::telemetry::LogFormat::Json,
                    tracing_subscriber::EnvFilter::new(level),
                    move || writer.clone(),
                );
                capture
            })
            .clone()
    }

    /// Everything logged so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}
