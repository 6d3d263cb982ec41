//! What a request leaves in the logs (README, "Logs"): its span carries the route and the
//! object the hook was about (kind, namespace, name as `object`, and the uid of an admission
//! request); an answer is logged at `debug`, a rejection at `info` with its status, error and
//! path.

mod common;

use serde_json::Value;
use std::io::Write;
use std::sync::{Arc, Mutex};

/// A tracing writer collecting everything into one buffer.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Capture {
    /// Every line logged with `message`, as written and as JSON.
    fn lines_with(&self, message: &str) -> Vec<(String, Value)> {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .lines()
            .filter_map(|l| Some((l.to_owned(), serde_json::from_str::<Value>(l).ok()?)))
            .filter(|(_, v)| v["message"] == message)
            .collect()
    }
}

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(format!("{}/fixtures/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn each_request_is_logged_under_a_span_naming_its_route_and_object() {
    let capture = Capture::default();
    let writer = capture.clone();
    // As `--log-format json` sets it up (telemetry::init_logging), at debug level.
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
        .json()
        .flatten_event(true)
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(move || writer.clone())
        .init();
    let server = common::TestServer::start(&[]);

    let sync = fixture("app-discovery/sync-invalid-timeout.request.json");
    assert_eq!(
        common::post(&server, "/app-discovery/sync", &sync).status,
        200
    );
    let review = fixture("app-discovery/mutate-adds-label.request.json");
    assert_eq!(
        common::post(&server, "/app-discovery/mutate", &review).status,
        200
    );
    let reply = common::post(&server, "/delete-graph/sync", br#"{"parent": 7}"#);
    assert_eq!(reply.status, 400);

    let answered = capture.lines_with("answered");
    let span = |route: &str| {
        let (text, line) = answered
            .iter()
            .find(|(_, l)| l["span"]["route"] == route)
            .unwrap_or_else(|| panic!("no answer logged for {route}: {answered:?}"));
        assert_eq!(line["level"], "DEBUG");
        assert_eq!(line["status"], 200);
        assert_eq!(text.matches("\"name\":").count(), 1, "one name key: {text}");
        line["span"].clone()
    };
    let sync_span = span("app-discovery/sync");
    assert_eq!(sync_span["name"], "hook");
    assert_eq!(sync_span["kind"], "AppDiscovery");
    assert_eq!(sync_span["namespace"], "podtato");
    assert_eq!(sync_span["object"], "discovery");
    assert!(
        sync_span.get("uid").is_none(),
        "no uid for a Metacontroller hook: {sync_span}"
    );
    let review_span = span("app-discovery/mutate");
    assert_eq!(review_span["kind"], "KeptnAppCreationRequest");
    assert_eq!(review_span["namespace"], "podtato");
    assert_eq!(review_span["object"], "podtato-head");
    assert_eq!(review_span["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");

    let rejected = capture.lines_with("rejected");
    let [(_, line)] = rejected.as_slice() else {
        panic!("one rejection logged: {rejected:?}");
    };
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["status"], 400);
    assert_eq!(line["span"]["route"], "delete-graph/sync");
    assert_eq!(line["path"], "parent");
    assert_eq!(line["error"], reply.json()["error"]);
}
