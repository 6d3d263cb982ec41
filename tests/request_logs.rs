//! What a request leaves in the logs (the README's paragraph on logs): its span carries the
//! route and the object the hook was about (kind, namespace, name as `object`, and an admission
//! request's uid, operation and whether it was allowed); an answer is logged at `debug`, an
//! admission request's denial at `info`, a rejection at `info` with its status, error and path. A connection that ends in an error, or brings no request, is logged at
//! `debug`. The logs are written as `--log-format json` writes them.

mod common;

use common::LogCapture;
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// Every line logged with `message`, as written and as JSON.
fn lines_with(capture: &LogCapture, message: &str) -> Vec<(String, Value)> {
    capture
        .text()
        .lines()
        .filter_map(|l| Some((l.to_owned(), serde_json::from_str::<Value>(l).ok()?)))
        .filter(|(_, v)| v["message"] == message)
        .collect()
}

/// The fields of an admission request's span, as one object (a field the span lacks is null).
fn admission_fields(span: &Value) -> Value {
    [
        "route",
        "kind",
        "namespace",
        "object",
        "uid",
        "operation",
        "allowed",
    ]
    .iter()
    .map(|&key| (key.to_owned(), span[key].clone()))
    .collect::<serde_json::Map<_, _>>()
    .into()
}

#[test]
fn each_request_is_logged_under_a_span_naming_its_route_and_object() {
    let capture = LogCapture::install("debug");
    let server = common::TestServer::start(&[]);

    let sync = common::fixture("app-discovery/sync-invalid-timeout.request.json");
    assert_eq!(
        common::post(&server, "/app-discovery/sync", &sync).status,
        200
    );
    let review = common::fixture("app-discovery/mutate-adds-label.request.json");
    assert_eq!(
        common::post(&server, "/app-discovery/mutate", &review).status,
        200
    );
    let cycle = common::fixture("delete-graph/validate-cycle-denied.request.json");
    assert_eq!(
        common::post(&server, "/delete-graph/validate", &cycle).status,
        200
    );
    let reply = common::post(&server, "/delete-graph/sync", br#"{"parent": 7}"#);
    assert_eq!(reply.status, 400);

    let answered = lines_with(&capture, "answered");
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
    for admission_only in ["uid", "operation", "allowed"] {
        assert!(
            sync_span.get(admission_only).is_none(),
            "no {admission_only} for a Metacontroller hook: {sync_span}"
        );
    }
    assert_eq!(
        admission_fields(&span("app-discovery/mutate")),
        json!({"route": "app-discovery/mutate", "kind": "KeptnAppCreationRequest",
            "namespace": "podtato", "object": "podtato-head",
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "operation": "CREATE", "allowed": true})
    );

    let denied = lines_with(&capture, "denied");
    let [(_, line)] = denied.as_slice() else {
        panic!("one denial logged: {denied:?}");
    };
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["status"], 200);
    assert_eq!(
        admission_fields(&line["span"]),
        json!({"route": "delete-graph/validate", "kind": "WorkloadSet", "namespace": "shop",
            "object": "shop", "uid": "3b1c2f4e-5a6d-4e7f-8a9b-0c1d2e3f4a5b", "operation": "CREATE",
            "allowed": false})
    );
    assert!(
        answered
            .iter()
            .all(|(_, l)| l["span"]["route"] != "delete-graph/validate"),
        "a denial is logged once, as denied: {answered:?}"
    );

    let rejected = lines_with(&capture, "rejected");
    let [(_, line)] = rejected.as_slice() else {
        panic!("one rejection logged: {rejected:?}");
    };
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["status"], 400);
    assert_eq!(line["span"]["route"], "delete-graph/sync");
    assert_eq!(line["path"], "parent");
    assert_eq!(line["error"], reply.json()["error"]);
}

/// The lines logged with `message` once there are some, or none after 10 s.
fn await_lines_with(capture: &LogCapture, message: &str) -> Vec<(String, Value)> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lines = lines_with(capture, message);
        if !lines.is_empty() || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_connection_that_fails_or_brings_no_request_is_logged_at_debug() {
    let capture = LogCapture::install("debug");
    let server = common::TestServer::start(&["--header-read-timeout", "300ms"]);

    // Not HTTP: hyper answers 400 and the connection ends with its parse error.
    let mut garbage = server.connect();
    garbage.write_all(b"\x01\x02 nonsense\r\n\r\n").unwrap();
    let _ = garbage.read_to_end(&mut Vec::new());
    let failed = await_lines_with(&capture, "connection ended with an error");
    let Some((_, line)) = failed.first() else {
        panic!("no failed connection logged: {}", capture.text());
    };
    assert_eq!(line["level"], "DEBUG");
    assert!(
        line["error"].as_str().is_some_and(|e| !e.is_empty()),
        "the error named: {line}"
    );

    let mut silent = server.connect();
    let _ = silent.read_to_end(&mut Vec::new());
    let closed = await_lines_with(
        &capture,
        "no request within the header read timeout: connection closed",
    );
    assert!(!closed.is_empty(), "not logged: {}", capture.text());
}
