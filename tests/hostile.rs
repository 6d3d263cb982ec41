//! Hostile input over a real socket: each gets a clear 4xx with a JSON error, never a 5xx, a
//! panic or an empty 200; the server keeps serving afterwards.

mod common;

use common::{get, post, TestServer};
use serde_json::Value;

fn fixture_json(file: &str) -> Value {
    serde_json::from_slice(&common::fixture(file)).unwrap()
}

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
    let fixture = common::fixture("app-discovery/sync-multi-service-due-creates-app.request.json");
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

/// serde's derived structs also read a JSON array, as their fields in the order declared. An
/// object of the request sent as an array (here: the same object's values, in that order) used
/// to decode as that object, or as an empty one, and a sync hook answering for an empty parent
/// would have Metacontroller delete its children. Every such array is a 400 naming where it is.
#[test]
fn an_array_where_an_object_belongs_is_a_400_naming_it() {
    /// The object's values in key order: for a Kubernetes object, the order its struct
    /// declares them (apiVersion, kind, metadata, spec, status).
    fn as_array(object: &Value) -> Value {
        Value::Array(object.as_object().unwrap().values().cloned().collect())
    }
    let server = TestServer::start(&[]);
    let cases: [(&str, &str, &[&[&str]]); 7] = [
        (
            "/app-discovery/sync",
            "app-discovery/sync-multi-service-due-creates-app.request.json",
            &[
                &["parent"],
                &["parent", "metadata"],
                &["parent", "spec"],
                &["parent", "status"],
                &[
                    "children",
                    "KeptnAppCreationRequest.lifecycle.keptn.sh/v1",
                    "podtato/podtato-head",
                ],
                &[
                    "related",
                    "KeptnWorkload.lifecycle.keptn.sh/v1",
                    "podtato/podtato-head-entry",
                ],
            ],
        ),
        (
            "/delete-graph/sync",
            "delete-graph/sync-chain-all-running.request.json",
            &[
                &["parent"],
                &["parent", "status"],
                &["children", "Pod.v1", "shop/shop-database-5c4d3f6ccf"],
                &[
                    "children",
                    "Pod.v1",
                    "shop/shop-database-5c4d3f6ccf",
                    "metadata",
                ],
                &[
                    "children",
                    "Pod.v1",
                    "shop/shop-database-5c4d3f6ccf",
                    "status",
                ],
            ],
        ),
        (
            "/delete-graph/finalize",
            "delete-graph/finalize-teardown-starts-with-leaf.request.json",
            &[&["parent"], &["parent", "metadata"]],
        ),
        (
            "/cert-rotation/sync",
            "cert-rotation/sync-step1-reuses-leaves-byte-identical.request.json",
            &[
                &["parent"],
                &["parent", "status"],
                &["children", "Secret.v1", "osm-system/bookstore-tls"],
                &[
                    "related",
                    "MeshRootCertificate.config.openservicemesh.io/v1alpha2",
                    "osm-system/mrc-a",
                ],
            ],
        ),
        (
            "/mesh-root-certificate/sync",
            "mesh-root-certificate/sync-active-signing.request.json",
            &[&["object"], &["object", "spec"], &["object", "status"]],
        ),
        (
            "/app-discovery/customize",
            "app-discovery/customize-namespace.request.json",
            &[&["parent"], &["parent", "metadata"]],
        ),
        (
            "/delete-graph/validate",
            "delete-graph/validate-chain-allowed.request.json",
            &[&["request"], &["request", "kind"], &["request", "userInfo"]],
        ),
    ];
    for (route, file, paths) in cases {
        let request = fixture_json(file);
        assert_eq!(
            post(&server, route, &serde_json::to_vec(&request).unwrap()).status,
            200
        );
        for path in paths {
            let mut body = request.clone();
            let target = path.iter().fold(&mut body, |v, k| {
                v.get_mut(*k)
                    .unwrap_or_else(|| panic!("{file}: no {path:?}"))
            });
            *target = as_array(target);
            let reply = post(&server, route, &serde_json::to_vec(&body).unwrap());
            assert_eq!(reply.status, 400, "{route} {path:?}");
            assert_eq!(reply.json()["path"], path.join("."), "{route}");
        }
        // The whole request as an array of its parts, in the order the request type declares.
        let order: &[&str] = match route {
            "/mesh-root-certificate/sync" => &["controller", "object", "attachments", "related"],
            "/delete-graph/validate" => &["request"],
            "/app-discovery/customize" => &["controller", "parent"],
            _ => &["controller", "parent", "children", "related"],
        };
        let parts: Vec<Value> = order.iter().map(|k| request[*k].clone()).collect();
        let reply = post(&server, route, &serde_json::to_vec(&parts).unwrap());
        assert_eq!(reply.status, 400, "{route}: the request as an array");
        assert_eq!(reply.json()["path"], ".", "{route}");
    }
}

/// JSON allows a key twice. A type key of `children` given twice, each time with some of the
/// Pods, is answered as if it were given once with all of them. Were only the last given
/// counted, the running database and backend would be unseen: the backend, whose dependency
/// would not be running, would be left out of the answer, and Metacontroller would delete it.
#[test]
fn a_type_key_given_twice_is_read_with_the_objects_of_both() {
    let server = TestServer::start(&[]);
    let request = fixture_json("delete-graph/sync-chain-all-running.request.json");
    let whole = post(
        &server,
        "/delete-graph/sync",
        &serde_json::to_vec(&request).unwrap(),
    );
    assert_eq!(whole.status, 200);

    let pods = request["children"]["Pod.v1"].as_object().unwrap();
    assert_eq!(pods.len(), 3);
    let part = |range: std::ops::Range<usize>| {
        let map: serde_json::Map<String, Value> = pods
            .iter()
            .skip(range.start)
            .take(range.len())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Value::Object(map).to_string()
    };
    let mut rest = request.clone();
    rest.as_object_mut().unwrap().remove("children");
    let rest = rest.to_string();
    let body = format!(
        r#"{}, "children": {{"Pod.v1": {}, "Pod.v1": {}}}}}"#,
        &rest[..rest.len() - 1],
        part(0..2),
        part(2..3)
    );
    let split = post(&server, "/delete-graph/sync", body.as_bytes());
    assert_eq!(split.status, 200);
    assert_eq!(split.json()["children"], whole.json()["children"]);
}
