//! Hostile input over a real socket: each gets a clear 4xx with a JSON error, never a 5xx, a
//! panic or an empty 200; the server keeps serving afterwards.

mod common;

use common::{get, post, TestServer};

fn assert_clear_400(server: &TestServer, route: &str, body: &[u8], what: &str) {
    let reply = post(server, route, body);
    assert_eq!(
        reply.status,
        400,
        "{what}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    let json = reply.json();
    assert!(
        json["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{what}: no error text"
    );
    assert!(json["path"].is_string(), "{what}: no path");
}

#[test]
fn hostile_bodies_get_a_clear_400_on_every_route() {
    let server = TestServer::start(&[]);
    let fixture = std::fs::read(common::fixture(
        "app-discovery/sync-multi-service-due-creates-app.request.json",
    ))
    .unwrap();
    let deep = format!(
        "{{\"parent\": {}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let huge_number = format!(
        r#"{{"parent": {{"metadata": {{"name": "x", "generation": 1{}}}}}}}"#,
        "0".repeat(400)
    );
    let mut invalid_utf8 = br#"{"parent": {"metadata": {"name": ""#.to_vec();
    invalid_utf8.extend_from_slice(&[0xff, 0xfe, b'"', b'}', b'}', b'}']);
    let huge_string = format!(
        r#"{{"parent": {{"metadata": {{"name": "x", "generation": "{}"}}}}}}"#,
        "9".repeat(1 << 20)
    );
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated JSON", fixture[..fixture.len() / 2].to_vec()),
        ("invalid UTF-8", invalid_utf8),
        ("nesting 10,000 deep", deep.into_bytes()),
        ("a number too large", huge_number.into_bytes()),
        ("a 1 MiB string of the wrong type", huge_string.into_bytes()),
        (
            "a duplicated field",
            br#"{"parent": {}, "parent": {}}"#.to_vec(),
        ),
        ("an empty body", Vec::new()),
        ("a JSON array", b"[]".to_vec()),
        ("trailing garbage", b"{\"parent\": {}} trailing".to_vec()),
    ];
    for route in [
        "/app-discovery/sync",
        "/delete-graph/sync",
        "/cert-rotation/sync",
        "/mesh-root-certificate/sync",
        "/delete-graph/validate",
        "/mesh-root-certificate/mutate",
    ] {
        for (what, body) in &cases {
            assert_clear_400(&server, route, body, &format!("{route}: {what}"));
        }
    }
    assert_eq!(get(&server, "/healthz").status, 200, "still serving");
}
