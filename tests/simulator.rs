//! The simulator's own tests: each pins one rule of the Metacontroller contract, driven against a
//! trivial test-only hook server (not shipped) whose answers the test controls.

mod common;
mod sim;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use sim::{load_yaml, Sim};
use std::net::SocketAddr;
use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};

/// What the test hook answers, and what it saw.
#[derive(Default)]
struct Hook {
    /// Answer with this status instead of 200 (and Retry-After for 429).
    fail_with: Option<u16>,
    /// Child-map keys seen by the last sync.
    seen_keys: Vec<String>,
    /// Desired labels are left off the children (they then miss the parent's selector).
    drop_labels: bool,
    /// Fields set in the sync answer over what it would say.
    answer_fields: serde_json::Map<String, Value>,
}

type Shared = Arc<Mutex<Hook>>;

/// Composite sync: one ConfigMap per `spec.children` entry, `status.observed` = children seen.
async fn sync(State(h): State<Shared>, Json(req): Json<Value>) -> Response {
    let mut hook = h.lock().unwrap();
    if let Some(code) = hook.fail_with {
        let mut headers = HeaderMap::new();
        if code == 429 {
            headers.insert("retry-after", HeaderValue::from_static("30"));
        }
        return (StatusCode::from_u16(code).unwrap(), headers, "test failure").into_response();
    }
    let observed = req["children"]["ConfigMap.v1"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    hook.seen_keys = observed.keys().cloned().collect();
    let labels = if hook.drop_labels {
        json!({})
    } else {
        req["parent"]["spec"]["selector"]["matchLabels"].clone()
    };
    let finalizing = req["finalizing"] == json!(true);
    let children: Vec<Value> = if finalizing {
        vec![]
    } else {
        req["parent"]["spec"]["children"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|c| {
                json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": c["name"], "labels": labels},
            "data": {"value": c["value"]}})
            })
            .collect()
    };
    let mut resp = json!({"status": {"observed": observed.len(), "related": req["related"]["ConfigMap.v1"].as_object().map_or(0, |m| m.len())},
                          "children": children});
    if let Some(r) = req["parent"]["spec"]["resyncAfterSeconds"].as_i64() {
        resp["resyncAfterSeconds"] = json!(r);
    }
    if finalizing {
        resp["finalized"] = json!(observed.is_empty());
    }
    for (name, value) in &hook.answer_fields {
        resp[name] = value.clone();
    }
    Json(resp).into_response()
}

/// Customize: ConfigMaps labelled `related-to: <parent name>`.
async fn customize(Json(req): Json<Value>) -> Json<Value> {
    Json(
        json!({"relatedResources": [{"apiVersion": "v1", "resource": "configmaps",
        "labelSelector": {"matchLabels": {"related-to": req["parent"]["metadata"]["name"]}}}]}),
    )
}

/// Decorator sync: a label, a status and one attachment per target.
async fn decorate(Json(req): Json<Value>) -> Json<Value> {
    let name = req["object"]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Json(json!({"labels": {"decorated": "yes", "remove-me": null},
                "status": {"attachments": req["attachments"]["ConfigMap.v1"].as_object().map_or(0, |m| m.len())},
                "attachments": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("{name}-extra")}, "data": {"k": "v"}}]}))
}

/// Mutating admission: answers with the JSONPatch the object carries in `spec.patch`.
async fn mutate(Json(review): Json<Value>) -> Json<Value> {
    use base64::Engine;
    let ops = serde_json::to_vec(&review["request"]["object"]["spec"]["patch"]).unwrap();
    let patch = base64::engine::general_purpose::STANDARD.encode(ops);
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], "allowed": true,
                             "patchType": "JSONPatch", "patch": patch}}),
    )
}

fn hook_server(state: Shared) -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new()
                .route("/test/sync", post(sync))
                .route("/test/customize", post(customize))
                .route("/test/decorate", post(decorate))
                .route("/test/mutate", post(mutate))
                .with_state(state);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// The Widget CRD, with this `openAPIV3Schema` (JSON) or none.
fn widget_crd(schema: Option<&str>) -> String {
    let schema = schema.map_or(String::new(), |s| {
        format!(", schema: {{openAPIV3Schema: {s}}}")
    });
    format!(
        r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.example.com}}
spec:
  group: example.com
  scope: Namespaced
  names: {{kind: Widget, plural: widgets}}
  versions: [{{name: v1, served: true, storage: true, subresources: {{status: {{}}}}{schema}}}]
"#
    )
}

fn controller(strategy: &str, version: &str, extra: &str) -> String {
    format!(
        r#"
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {{name: widgets}}
spec:
  parentResource: {{apiVersion: example.com/v1, resource: widgets}}
  childResources: [{{apiVersion: v1, resource: configmaps, updateStrategy: {{method: {strategy}}}}}]
  hooks:
    sync: {{version: {version}, webhook: {{url: http://hooks/test/sync}}}}
{extra}
"#
    )
}

fn setup(strategy: &str, version: &str, extra: &str) -> (Sim, Shared) {
    setup_with(&controller(strategy, version, extra))
}

/// A simulator with the Widget CRD and these controllers, against a fresh test hook server.
fn setup_with(controllers: &str) -> (Sim, Shared) {
    setup_with_crd(&widget_crd(None), controllers)
}

/// A simulator with this Widget CRD and these controllers, against a fresh test hook server.
fn setup_with_crd(crd: &str, controllers: &str) -> (Sim, Shared) {
    let state: Shared = Arc::default();
    let addr = hook_server(state.clone());
    let mut docs = load_yaml(crd);
    docs.extend(load_yaml(controllers));
    (
        Sim::new(addr, Arc::new(AtomicI64::new(1_780_315_200)), docs),
        state,
    )
}

fn widget(children: &[(&str, &str)]) -> String {
    let list: Vec<Value> = children
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    serde_json::to_string(&json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {"selector": {"matchLabels": {"widget": "w"}}, "children": list}}))
    .unwrap()
}

/// What `run_until_quiet` fails with on a fault Metacontroller would take silently; it must
/// fail.
fn silent_faults(sim: &mut Sim) -> String {
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.run_until_quiet()));
    *failed.unwrap_err().downcast::<String>().unwrap()
}

fn data(sim: &Sim, name: &str) -> Option<String> {
    sim.get("ConfigMap", "ns", name)
        .map(|c| c["data"]["value"].as_str().unwrap().to_owned())
}

#[test]
fn children_are_created_with_owner_and_status_gets_observed_generation() {
    let (mut sim, _) = setup("OnDelete", "v1", "");
    sim.apply(&widget(&[("a", "1"), ("b", "1")])).unwrap();
    sim.run_until_quiet();
    let a = sim.get("ConfigMap", "ns", "a").unwrap();
    assert_eq!(a["metadata"]["ownerReferences"][0]["kind"], "Widget");
    assert_eq!(a["metadata"]["ownerReferences"][0]["controller"], true);
    assert!(
        a["metadata"]["annotations"]["metacontroller.k8s.io/last-applied-configuration"]
            .is_string()
    );
    let w = sim.get("Widget", "ns", "w").unwrap();
    assert_eq!(
        w["status"],
        json!({"observed": 2, "related": 0, "observedGeneration": 1})
    );
}

/// The API server refuses, on any object, a label value over 63 characters or not of a label
/// value's characters, a label key not of a label key's form, and annotations over 256 KiB; and
/// a custom resource's name over its CRD's `metadata.name` `maxLength`. The simulator does too.
#[test]
fn labels_annotations_and_limited_names_are_checked_as_the_api_server_does() {
    let (mut sim, _) = setup("OnDelete", "v1", "");
    let config_map = |metadata: Value| {
        let mut metadata = metadata;
        metadata["name"] = json!("c");
        metadata["namespace"] = json!("ns");
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}).to_string()
    };
    for (metadata, error) in [
        (
            json!({"labels": {"k": "a".repeat(64)}}),
            "must be no more than 63 characters",
        ),
        (json!({"labels": {"k": "a b"}}), "a valid label value"),
        (json!({"labels": {"k": "-a"}}), "a valid label value"),
        (json!({"labels": {"a/b/c": "v"}}), "a valid label key"),
        (
            json!({"labels": {"Example.com/k": "v"}}),
            "a valid label key",
        ),
        (
            json!({"annotations": {"k": "a".repeat(256 << 10)}}),
            "metadata.annotations: Too long",
        ),
    ] {
        let refused = sim.apply(&config_map(metadata.clone())).unwrap_err();
        assert!(refused.contains(error), "{metadata}: {refused}");
        assert!(sim.get("ConfigMap", "ns", "c").is_none());
    }
    sim.apply(&config_map(json!({
        "labels": {"k": "a".repeat(63), "example.com/k_2": "", "app.kubernetes.io/name": "a.b-c_d"},
        "annotations": {"k": "a".repeat((256 << 10) - 1)}})))
        .unwrap();
    assert!(sim.get("ConfigMap", "ns", "c").is_some());
    // The Widget CRD limits nothing; the WorkloadSet CRD limits names to 63 characters.
    let mut sim = Sim::with_manifests(&["delete-graph"]);
    let set = |name: &str| {
        json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet",
               "metadata": {"name": name, "namespace": "ns"}, "spec": {}})
        .to_string()
    };
    let error = sim.apply(&set(&"a".repeat(64))).unwrap_err();
    assert!(error.contains("metadata.name: Too long"), "{error}");
    sim.apply(&set(&"a".repeat(63))).unwrap();
}

/// `kubectl get`: a CRD that names no printer columns gets the API server's `Age`; one that
/// names columns gets exactly those, each read from the object (a field, a condition found by
/// its type, nothing where the path finds nothing).
#[test]
fn a_row_holds_the_crds_printer_columns_as_the_api_server_fills_them() {
    let (mut sim, _) = setup("OnDelete", "v1", "");
    sim.apply(&widget(&[])).unwrap();
    assert_eq!(
        sim.get_row("Widget", "ns", "w"),
        sim::row(&[("Name", "w"), ("Age", &sim.created("Widget", "ns", "w"))])
    );

    let gadgets = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets}
  versions:
    - name: v1
      served: true
      storage: true
      additionalPrinterColumns:
        - {name: Size, type: integer, jsonPath: .spec.size}
        - {name: Ready, type: string, jsonPath: ".status.conditions[?(@.type=='Ready')].status"}
        - {name: Why, type: string, jsonPath: ".status.conditions[?(@.type=='Ready')].reason"}
"#;
    let mut sim = Sim::new(
        hook_server(Shared::default()),
        Arc::new(AtomicI64::new(0)),
        load_yaml(gadgets),
    );
    let gadget = |status: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Gadget",
               "metadata": {"name": "g", "namespace": "ns"}, "spec": {"size": 3}, "status": status})
        .to_string()
    };
    sim.apply(&gadget(json!({}))).unwrap();
    assert_eq!(
        sim.get_row("Gadget", "ns", "g"),
        sim::row(&[("Name", "g"), ("Size", "3"), ("Ready", ""), ("Why", "")])
    );
    sim.store_delete_direct("Gadget", "ns", "g");
    sim.apply(&gadget(json!({"conditions": [
        {"type": "Other", "status": "False", "reason": "No"},
        {"type": "Ready", "status": "True", "reason": "Fine"}]})))
        .unwrap();
    assert_eq!(
        sim.get_row("Gadget", "ns", "g"),
        sim::row(&[
            ("Name", "g"),
            ("Size", "3"),
            ("Ready", "True"),
            ("Why", "Fine")
        ])
    );
}

#[test]
fn an_omitted_child_is_deleted() {
    let (mut sim, _) = setup("OnDelete", "v1", "");
    sim.apply(&widget(&[("a", "1"), ("b", "1")])).unwrap();
    sim.run_until_quiet();
    sim.apply(&widget(&[("a", "1")])).unwrap();
    sim.run_until_quiet();
    assert!(sim.get("ConfigMap", "ns", "b").is_none());
    assert!(sim.get("ConfigMap", "ns", "a").is_some());
    assert_eq!(
        sim.get("Widget", "ns", "w").unwrap()["status"]["observedGeneration"],
        2
    );
}

#[test]
fn in_place_updates_on_delete_does_not_recreate_deletes() {
    for (strategy, after) in [
        ("InPlace", Some("2")),
        ("OnDelete", Some("1")),
        ("Recreate", Some("2")),
    ] {
        let (mut sim, _) = setup(strategy, "v1", "");
        sim.apply(&widget(&[("a", "1")])).unwrap();
        sim.run_until_quiet();
        let uid = sim.get("ConfigMap", "ns", "a").unwrap()["metadata"]["uid"].clone();
        sim.apply(&widget(&[("a", "2")])).unwrap();
        sim.run_until_quiet();
        assert_eq!(data(&sim, "a").as_deref(), after, "{strategy}");
        let new_uid = &sim.get("ConfigMap", "ns", "a").unwrap()["metadata"]["uid"];
        assert_eq!(
            new_uid != &uid,
            strategy == "Recreate",
            "{strategy}: recreated means a new uid"
        );
    }
}

#[test]
fn a_child_whose_labels_miss_the_selector_fails_the_sync_with_no_change() {
    let (mut sim, hook) = setup("InPlace", "v1", "");
    sim.apply(&widget(&[("a", "1")])).unwrap();
    sim.run_until_quiet();
    hook.lock().unwrap().drop_labels = true;
    sim.apply(&widget(&[("a", "2"), ("b", "2")])).unwrap();
    sim.run_until_quiet();
    assert_eq!(data(&sim, "a").as_deref(), Some("1"));
    assert!(sim.get("ConfigMap", "ns", "b").is_none());
    assert!(sim
        .sync_errors
        .last()
        .unwrap()
        .contains("don't match parent selector"));
    assert_eq!(
        sim.get("Widget", "ns", "w").unwrap()["status"]["observedGeneration"],
        1,
        "status untouched"
    );
}

#[test]
fn a_500_answer_changes_nothing() {
    let (mut sim, hook) = setup("InPlace", "v1", "");
    sim.apply(&widget(&[("a", "1")])).unwrap();
    sim.run_until_quiet();
    hook.lock().unwrap().fail_with = Some(500);
    sim.apply(&widget(&[])).unwrap();
    sim.run_until_quiet();
    assert_eq!(data(&sim, "a").as_deref(), Some("1"), "not deleted");
    assert!(sim
        .sync_errors
        .last()
        .unwrap()
        .contains("unsupported status code: 500"));
    // Retried with back-off; once the hook answers, the sync goes through.
    hook.lock().unwrap().fail_with = None;
    sim.advance(1);
    sim.run_until_quiet();
    assert!(sim.get("ConfigMap", "ns", "a").is_none());
}

/// An answer Metacontroller cannot read into its typed response fails the sync with no change
/// (contract §3.1): a field of another type, or a child without a `kind`, whatever the hook
/// version; an unknown field only in strict mode, the default of a `v2` hook, and not in `v1`'s
/// loose mode.
#[test]
fn an_answer_metacontroller_cannot_decode_changes_nothing() {
    for (version, field, value, fails) in [
        ("v1", "resyncAfterSeconds", json!("5"), true),
        ("v2", "status", json!([]), true),
        ("v1", "finalized", json!("true"), true),
        (
            "v1",
            "children",
            json!([{"apiVersion": "v1", "metadata": {"name": "a"}}]),
            true,
        ),
        ("v2", "attachments", json!([]), true),
        ("v1", "attachments", json!([]), false),
        ("v2", "resyncAfterSeconds", json!(null), false),
    ] {
        let (mut sim, hook) = setup("InPlace", version, "");
        sim.apply(&widget(&[("a", "1")])).unwrap();
        sim.run_until_quiet();
        hook.lock()
            .unwrap()
            .answer_fields
            .insert(field.into(), value.clone());
        sim.apply(&widget(&[("a", "2")])).unwrap();
        sim.run_until_quiet();
        let case = format!("{version} {field}: {value}");
        let expected = if fails { "1" } else { "2" };
        assert_eq!(data(&sim, "a").as_deref(), Some(expected), "{case}");
        let failed = sim
            .sync_errors
            .iter()
            .any(|e| e.contains("decoding the answer"));
        assert_eq!(failed, fails, "{case}: {:?}", sim.sync_errors);
    }
}

#[test]
fn a_429_is_retried_after_retry_after_on_the_virtual_clock() {
    let (mut sim, hook) = setup("InPlace", "v1", "");
    hook.lock().unwrap().fail_with = Some(429);
    sim.apply(&widget(&[("a", "1")])).unwrap();
    sim.run_until_quiet();
    assert!(sim.get("ConfigMap", "ns", "a").is_none());
    hook.lock().unwrap().fail_with = None;
    sim.advance(29);
    sim.run_until_quiet();
    assert!(
        sim.get("ConfigMap", "ns", "a").is_none(),
        "not before Retry-After"
    );
    sim.advance(1);
    sim.run_until_quiet();
    assert!(sim.get("ConfigMap", "ns", "a").is_some());
}

#[test]
fn resync_after_seconds_schedules_one_more_sync() {
    let (mut sim, _) = setup("InPlace", "v1", "");
    let mut w: Value = serde_json::from_str(&widget(&[("a", "1")])).unwrap();
    w["spec"]["resyncAfterSeconds"] = json!(60);
    sim.apply(&w.to_string()).unwrap();
    sim.run_until_quiet();
    let calls = sim.calls.len();
    sim.advance(59);
    sim.run_until_quiet();
    assert_eq!(sim.calls.len(), calls);
    sim.advance(1);
    sim.run_until_quiet();
    assert_eq!(sim.calls.len(), calls + 1);
}

#[test]
fn orphans_matching_the_selector_are_adopted_and_non_matching_children_released() {
    let (mut sim, hook) = setup("OnDelete", "v2", "");
    sim.apply(r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stray", "namespace": "ns", "labels": {"widget": "w"}}, "data": {"value": "x"}}"#).unwrap();
    sim.apply(&widget(&[("stray", "x")])).unwrap();
    sim.run_until_quiet();
    let stray = sim.get("ConfigMap", "ns", "stray").unwrap();
    assert_eq!(stray["metadata"]["ownerReferences"][0]["name"], "w");
    assert_eq!(
        hook.lock().unwrap().seen_keys,
        ["ns/stray"],
        "v2 keys are ns/name"
    );
    // Relabelled by someone: released, so the hook no longer sees it (and cannot delete it).
    let mut relabelled = stray.clone();
    relabelled["metadata"]["labels"] = json!({"widget": "other"});
    sim.apply(&relabelled.to_string()).unwrap();
    sim.run_until_quiet();
    let stray = sim.get("ConfigMap", "ns", "stray").unwrap();
    assert_eq!(stray["metadata"]["ownerReferences"], json!([]));
}

#[test]
fn v1_keys_are_names() {
    let (mut sim, hook) = setup("OnDelete", "v1", "");
    sim.apply(&widget(&[("a", "1")])).unwrap();
    sim.run_until_quiet();
    sim.apply(&widget(&[("a", "1"), ("b", "1")])).unwrap();
    sim.run_until_quiet();
    assert_eq!(hook.lock().unwrap().seen_keys, ["a", "b"]);
}

#[test]
fn generate_selector_labels_children_with_the_parent_uid() {
    let c = controller("OnDelete", "v1", "").replace(
        "spec:\n  parentResource",
        "spec:\n  generateSelector: true\n  parentResource",
    );
    let (mut sim, _) = setup_with(&c);
    let mut w: Value = serde_json::from_str(&widget(&[("a", "1")])).unwrap();
    w["spec"].as_object_mut().unwrap().remove("selector");
    sim.apply(&w.to_string()).unwrap();
    sim.run_until_quiet();
    let uid = sim.get("Widget", "ns", "w").unwrap()["metadata"]["uid"].clone();
    assert_eq!(
        sim.get("ConfigMap", "ns", "a").unwrap()["metadata"]["labels"]["controller-uid"],
        uid
    );
}

#[test]
fn customize_related_objects_are_sent_and_their_changes_resync_the_parent() {
    let extra = "    customize: {version: v1, webhook: {url: http://hooks/test/customize}}";
    let (mut sim, _) = setup("OnDelete", "v1", extra);
    sim.apply(&widget(&[])).unwrap();
    sim.run_until_quiet();
    assert_eq!(
        sim.get("Widget", "ns", "w").unwrap()["status"]["related"],
        0
    );
    sim.apply(r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "r", "namespace": "ns", "labels": {"related-to": "w"}}}"#).unwrap();
    sim.run_until_quiet();
    assert_eq!(
        sim.get("Widget", "ns", "w").unwrap()["status"]["related"],
        1
    );
}

#[test]
fn finalize_keeps_the_parent_until_finalized() {
    let extra = "    finalize: {version: v1, webhook: {url: http://hooks/test/sync}}";
    let (mut sim, hook) = setup("OnDelete", "v1", extra);
    sim.apply(&widget(&[("a", "1")])).unwrap();
    sim.run_until_quiet();
    let w = sim.get("Widget", "ns", "w").unwrap();
    assert_eq!(
        w["metadata"]["finalizers"],
        json!(["metacontroller.io/compositecontroller-widgets"])
    );
    hook.lock().unwrap().fail_with = Some(500);
    sim.delete("Widget", "ns", "w").unwrap();
    sim.run_until_quiet();
    assert!(
        sim.get("Widget", "ns", "w").unwrap()["metadata"]["deletionTimestamp"].is_string(),
        "held by the finalizer"
    );
    hook.lock().unwrap().fail_with = None;
    sim.advance(1);
    sim.run_until_quiet();
    assert!(
        sim.get("Widget", "ns", "w").is_none(),
        "finalized, then gone"
    );
    assert!(sim.get("ConfigMap", "ns", "a").is_none());
}

#[test]
fn decorator_attachments_labels_and_status() {
    let (mut sim, _) = setup_with(
        r#"
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: deco}
spec:
  resources: [{apiVersion: example.com/v1, resource: widgets}]
  attachments: [{apiVersion: v1, resource: configmaps}]
  hooks:
    sync: {version: v2, webhook: {url: http://hooks/test/decorate}}
"#,
    );
    let mut w: Value = serde_json::from_str(&widget(&[])).unwrap();
    w["metadata"]["labels"] = json!({"remove-me": "x", "keep": "y"});
    sim.apply(&w.to_string()).unwrap();
    sim.run_until_quiet();
    let w = sim.get("Widget", "ns", "w").unwrap();
    assert_eq!(
        w["metadata"]["labels"],
        json!({"decorated": "yes", "keep": "y"})
    );
    assert_eq!(w["status"], json!({"attachments": 1}));
    let att = sim.get("ConfigMap", "ns", "w-extra").unwrap();
    assert_eq!(
        att["metadata"]["annotations"]["metacontroller.k8s.io/decorator-controller"],
        "deco"
    );
    assert_eq!(
        att["metadata"]["ownerReferences"][0]["uid"],
        w["metadata"]["uid"]
    );
}

#[test]
fn deleting_a_parent_garbage_collects_its_children() {
    let (mut sim, _) = setup("OnDelete", "v1", "");
    sim.apply(&widget(&[("a", "1")])).unwrap();
    sim.run_until_quiet();
    sim.delete("Widget", "ns", "w").unwrap();
    sim.run_until_quiet();
    assert!(sim.get("ConfigMap", "ns", "a").is_none());
}

/// A mutating webhook's JSONPatch is applied as the API server applies it (RFC 6902): `add`
/// needs its parent, `replace` and `remove` their target, and a patch that does not apply fails
/// the write, so a hook's patch that only a lenient applier takes fails the end-to-end tests.
#[test]
fn mutating_patches_apply_as_the_api_server_applies_them() {
    let webhook = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: widgets}
webhooks:
- name: widgets.example.com
  clientConfig: {service: {name: hooks, namespace: test, path: /test/mutate}}
  rules: [{apiGroups: [example.com], apiVersions: [v1], operations: [CREATE], resources: [widgets]}]
"#;
    let (mut sim, _) = setup_with(&format!(
        "{}\n---\n{webhook}",
        controller("OnDelete", "v1", "")
    ));
    let widget = |name: &str, patch: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": name, "namespace": "ns"},
               "spec": {"selector": {"matchLabels": {"widget": name}}, "children": [], "patch": patch}})
        .to_string()
    };
    let applies = json!([
        {"op": "add", "path": "/metadata/labels", "value": {}},
        {"op": "add", "path": "/metadata/labels/a~1b", "value": "x"},
        {"op": "add", "path": "/spec/children/-", "value": {"name": "c", "value": "1"}},
        {"op": "replace", "path": "/spec/children/0/value", "value": "2"},
        {"op": "remove", "path": "/spec/selector"},
    ]);
    sim.apply(&widget("good", applies)).unwrap();
    let good = sim.get("Widget", "ns", "good").unwrap();
    assert_eq!(good["metadata"]["labels"]["a/b"], "x");
    assert_eq!(
        good["spec"]["children"],
        json!([{"name": "c", "value": "2"}])
    );
    assert!(good["spec"].get("selector").is_none());
    for op in [
        json!({"op": "add", "path": "/metadata/annotations/x", "value": "y"}),
        json!({"op": "replace", "path": "/spec/nothing", "value": 1}),
        json!({"op": "remove", "path": "/spec/nothing"}),
        json!({"op": "add", "path": "/spec/children/1", "value": {}}),
        json!({"op": "move", "from": "/spec/children", "path": "/spec/moved"}),
    ] {
        let err = sim.apply(&widget("bad", json!([op]))).unwrap_err();
        assert!(err.contains("does not apply"), "{op}: {err}");
        assert!(sim.get("Widget", "ns", "bad").is_none(), "{op}");
    }
}

/// An update merges as Metacontroller's dynamic apply does (contract §10), at every depth: what
/// the hook applied and stopped sending goes, what someone else set stays, a field the hook
/// sends is put back when edited, a list of objects merges by its conventional key (`port`
/// before `name`), any other list is replaced, and system metadata and status stay as observed.
#[test]
fn an_update_merges_at_every_depth_as_metacontroller_does() {
    let update = |observed: Value, last: Value, desired: Value| {
        let mut observed = observed;
        observed["metadata"]["annotations"][sim::apply::LAST_APPLIED] = json!(last.to_string());
        let mut merged = sim::apply::apply_update(&observed, &desired).unwrap();
        let applied = merged["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(sim::apply::LAST_APPLIED);
        assert_eq!(applied, Some(json!(desired.to_string())), "last-applied");
        merged
    };
    let meta = json!({"name": "a", "uid": "u1", "generation": 3, "annotations": {"theirs": "t"}});
    let merged = update(
        json!({"metadata": meta, "status": {"s": 1},
               "data": {"sent": "edited", "dropped": "2", "theirs": "3"}, "list": [1, 2]}),
        json!({"metadata": {"name": "a"}, "data": {"sent": "1", "dropped": "2"}, "list": [1, 2]}),
        json!({"metadata": {"name": "a", "uid": "mine", "generation": 9}, "status": {"s": 2},
               "data": {"sent": "1"}, "list": [3]}),
    );
    assert_eq!(
        merged,
        json!({"metadata": meta, "status": {"s": 1},
               "data": {"sent": "1", "theirs": "3"}, "list": [3]})
    );

    let merged = update(
        json!({"spec": {"containers": [
            {"name": "web", "image": "old", "theirs": true},
            {"name": "gone", "image": "x"},
            {"name": "side", "image": "y"}]}}),
        json!({"spec": {"containers": [{"name": "web", "image": "old"}, {"name": "gone", "image": "x"}]}}),
        json!({"spec": {"containers": [{"name": "new", "image": "z"}, {"name": "web", "image": "new"}]}}),
    );
    assert_eq!(
        merged["spec"]["containers"],
        json!([{"name": "web", "image": "new", "theirs": true}, {"name": "side", "image": "y"},
               {"name": "new", "image": "z"}]),
        "merged by name: observed order first, then the new items"
    );

    let merged = update(
        json!({"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}]}),
        json!({"ports": [{"port": 80, "name": "a"}, {"port": 81, "name": "a"}]}),
        json!({"ports": [{"port": 80, "name": "http"}, {"port": 81, "name": "a"}]}),
    );
    assert_eq!(
        merged["ports"],
        json!([{"port": 80, "name": "http"}, {"port": 81, "name": "a"}]),
        "port comes before name"
    );
}

/// Two items of one key collapse to the last as Metacontroller merges them: the desired first
/// item's change is lost, and an observed pair becomes two copies of the merged last item.
#[test]
fn items_sharing_a_merge_key_collapse_to_the_last() {
    let mut observed = json!({"metadata": {"name": "a"},
        "workloads": [{"name": "api", "version": "1"}, {"name": "api", "version": "2"}]});
    observed["metadata"]["annotations"][sim::apply::LAST_APPLIED] = json!(observed.to_string());
    let desired = json!({"metadata": {"name": "a"},
        "workloads": [{"name": "api", "version": "3"}, {"name": "api", "version": "2"}]});
    let merged = sim::apply::apply_update(&observed, &desired).unwrap();
    assert_eq!(
        merged["workloads"],
        json!([{"name": "api", "version": "2"}, {"name": "api", "version": "2"}])
    );
}

/// A desired value of a type the observed one cannot take is a merge error: the sync fails and
/// the child stays as it is.
#[test]
fn a_desired_value_of_another_type_fails_the_merge() {
    let observed = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    let err = sim::apply::apply_update(&observed, &json!({"data": "v"})).unwrap_err();
    assert!(err.contains("desired[data]"), "{err}");
}

/// A hand edit of a field the hook sends is put back at the next sync under `InPlace` (a write to
/// a child queues its parent), with what the edit added beside it kept; `Recreate` makes the
/// child again; `OnDelete` leaves the edit.
#[test]
fn an_edited_child_is_put_back_as_its_update_strategy_says() {
    for (strategy, value, other_kept, recreated) in [
        ("InPlace", "1", true, false),
        ("Recreate", "1", false, true),
        ("OnDelete", "edited", true, false),
    ] {
        let (mut sim, _) = setup(strategy, "v1", "");
        sim.apply(&widget(&[("a", "1")])).unwrap();
        sim.run_until_quiet();
        let mut child = sim.get("ConfigMap", "ns", "a").unwrap().clone();
        let uid = child["metadata"]["uid"].clone();
        child["data"] = json!({"value": "edited", "other": "kept"});
        sim.apply(&child.to_string()).unwrap();
        sim.run_until_quiet();
        assert_eq!(data(&sim, "a").as_deref(), Some(value), "{strategy}");
        let child = sim.get("ConfigMap", "ns", "a").unwrap();
        assert_eq!(
            child["data"].get("other").is_some(),
            other_kept,
            "{strategy}"
        );
        assert_eq!(child["metadata"]["uid"] != uid, recreated, "{strategy}");
        assert!(
            sim.sync_errors.is_empty(),
            "{strategy}: {:?}",
            sim.sync_errors
        );
    }
}

/// A structural schema for the Widget CRD: `spec` keeps its selector whole and names the
/// children's fields, each child needing a string `name`; `status` names what the test hook
/// writes, each an integer.
const WIDGET_SCHEMA: &str = r#"{"type": "object", "properties": {
  "spec": {"type": "object", "properties": {
    "selector": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    "children": {"type": "array", "maxItems": 8, "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object", "required": ["name"],
      "properties": {"name": {"type": "string", "pattern": "^[a-z]+$"}, "value": {"type": "string"}}}}}},
  "status": {"type": "object", "properties": {"observed": {"type": "integer"},
    "related": {"type": "integer"}, "observedGeneration": {"type": "integer"}}}}}"#;

/// The API server prunes a custom resource to its CRD's schema on every write: a user's field
/// the schema does not name is dropped silently, metadata stays whole, a status the schema
/// names is written, and a field of a hook's status that the schema does not name fails the
/// scenario, since the hook would never read it back.
#[test]
fn a_custom_resource_is_pruned_to_its_schema() {
    let (mut sim, hook) = setup_with_crd(
        &widget_crd(Some(WIDGET_SCHEMA)),
        &controller("OnDelete", "v1", ""),
    );
    let mut w: Value = serde_json::from_str(&widget(&[("a", "1")])).unwrap();
    w["spec"]["unknown"] = json!(true);
    w["spec"]["children"][0]["extra"] = json!("x");
    w["metadata"]["labels"] = json!({"l": "v"});
    sim.apply(&w.to_string()).unwrap();
    let stored = sim.get("Widget", "ns", "w").unwrap();
    assert_eq!(stored["spec"].get("unknown"), None);
    assert_eq!(
        stored["spec"]["children"],
        json!([{"name": "a", "value": "1"}])
    );
    assert_eq!(
        stored["spec"]["selector"], w["spec"]["selector"],
        "preserved"
    );
    assert_eq!(stored["metadata"]["labels"], json!({"l": "v"}));
    assert_eq!(stored["metadata"]["namespace"], "ns");

    sim.run_until_quiet();
    assert_eq!(
        sim.get("Widget", "ns", "w").unwrap()["status"]["observed"],
        1,
        "the child seen, a status the schema names"
    );

    hook.lock()
        .unwrap()
        .answer_fields
        .insert("status".into(), json!({"observed": 1, "unnamed": true}));
    sim.apply(&widget(&[("a", "2")])).unwrap();
    let message = silent_faults(&mut sim);
    assert!(message.contains("Widget w: .status.unnamed"), "{message}");
}

/// The API server validates a custom resource against its CRD's schema: a user's write of a
/// value of another type, without a required field, or of a string its `pattern` refuses, is
/// refused, and so is a status of
/// another type that a hook answers, which fails the sync (retried) and leaves the status as
/// it was.
#[test]
fn a_custom_resource_is_validated_against_its_schema() {
    let (mut sim, hook) = setup_with_crd(
        &widget_crd(Some(WIDGET_SCHEMA)),
        &controller("OnDelete", "v1", ""),
    );
    let mut w: Value = serde_json::from_str(&widget(&[("a", "1")])).unwrap();
    w["spec"]["children"][0]["name"] = json!(5);
    let err = sim.apply(&w.to_string()).unwrap_err();
    assert!(
        err.contains(".spec.children[0].name: Invalid value"),
        "{err}"
    );
    w["spec"]["children"][0] = json!({"value": "1"});
    let err = sim.apply(&w.to_string()).unwrap_err();
    assert!(
        err.contains(".spec.children[0].name: Required value"),
        "{err}"
    );
    w["spec"]["children"][0] = json!({"name": "A1"});
    let err = sim.apply(&w.to_string()).unwrap_err();
    assert!(
        err.contains(r#".spec.children[0].name: Invalid value: "A1": should match '^[a-z]+$'"#),
        "{err}"
    );
    let named = |names: &str| -> Value { names.chars().map(|n| json!({"name": n})).collect() };
    w["spec"]["children"] = named("abcdefghi");
    let err = sim.apply(&w.to_string()).unwrap_err();
    assert!(
        err.contains(".spec.children: Too many: 9: must have at most 8 items"),
        "{err}"
    );
    w["spec"]["children"] = named("abcb");
    let err = sim.apply(&w.to_string()).unwrap_err();
    assert!(
        err.contains(r#".spec.children[3]: Duplicate value: ["b"]"#),
        "{err}"
    );
    w["spec"]["children"] = named("abcdefgh");
    sim.apply(&w.to_string()).unwrap();

    sim.apply(&widget(&[("a", "1")])).unwrap();
    hook.lock()
        .unwrap()
        .answer_fields
        .insert("status".into(), json!({"observed": "one"}));
    sim.run_until_quiet();
    assert!(
        sim.sync_errors
            .last()
            .unwrap()
            .contains("updating the status: .status.observed: Invalid value"),
        "{:?}",
        sim.sync_errors
    );
    assert_eq!(sim.get("Widget", "ns", "w").unwrap().get("status"), None);
}

/// ConfigMap and Secret data are checked as the API server checks them, for a hook's children
/// and a user's writes alike: config keys, string values, base64 in a Secret, the two keys of a
/// `kubernetes.io/tls` Secret; and on an update a Secret's type and an `immutable` one's data.
#[test]
fn configmap_and_secret_data_are_checked_as_the_api_server_does() {
    let (mut sim, hook) = setup("InPlace", "v1", "");
    let child = |data: Value| {
        json!([{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "a", "labels": {"widget": "w"}}, "data": data}])
    };
    for (data, error) in [
        (json!({"a b": "1"}), "data[a b]: Invalid value"),
        (json!({"k": 1}), "data[k]: must be a string"),
    ] {
        hook.lock()
            .unwrap()
            .answer_fields
            .insert("children".into(), child(data));
        sim.apply(&widget(&[])).unwrap();
        sim.advance(1); // the last case's retry is due
        sim.run_until_quiet();
        assert!(sim.get("ConfigMap", "ns", "a").is_none(), "{error}");
        assert!(
            sim.sync_errors.last().unwrap().contains(error),
            "{error}: {:?}",
            sim.sync_errors
        );
    }
    let secret = |data: Value| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
               "metadata": {"name": "s", "namespace": "ns"}, "data": data})
        .to_string()
    };
    let err = sim
        .apply(&secret(json!({"tls.crt": "not base64!", "tls.key": ""})))
        .unwrap_err();
    assert!(err.contains("data[tls.crt]: illegal base64 data"), "{err}");
    let err = sim.apply(&secret(json!({"tls.crt": ""}))).unwrap_err();
    assert!(err.contains("data[tls.key]: Required value"), "{err}");
    sim.apply(&secret(json!({"tls.crt": "YQ==", "tls.key": ""})))
        .unwrap();

    // An update may not change a Secret's type, nor what `immutable` holds.
    let mut opaque: Value = serde_json::from_str(&secret(json!({"k": "YQ=="}))).unwrap();
    opaque["type"] = json!("Opaque");
    let err = sim.apply(&opaque.to_string()).unwrap_err();
    assert!(
        err.contains("type: Invalid value: \"Opaque\": field is immutable"),
        "{err}"
    );
    let mut frozen = json!({"apiVersion": "v1", "kind": "ConfigMap", "immutable": true,
                            "metadata": {"name": "f", "namespace": "ns"}, "data": {"k": "1"}});
    sim.apply(&frozen.to_string()).unwrap();
    frozen["data"]["k"] = json!("2");
    let err = sim.apply(&frozen.to_string()).unwrap_err();
    assert!(err.contains("data: Forbidden: field is immutable"), "{err}");
    frozen["data"]["k"] = json!("1");
    frozen["metadata"]["labels"] = json!({"seen": "yes"});
    sim.apply(&frozen.to_string()).unwrap();
}

/// Two hook faults Metacontroller takes silently fail the scenario here (contract §5.3): a
/// child of a type the controller does not declare, which it creates and then never observes,
/// updates or deletes; and one child answered twice, of which it keeps the last.
#[test]
fn a_child_of_an_undeclared_type_or_answered_twice_fails_the_scenario() {
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "c", "labels": {"widget": "w"}}});
    for (children, fault) in [
        (
            json!([{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "labels": {"widget": "w"}}}]),
            "Widget w answers Secret s of a type its controller does not declare",
        ),
        (
            json!([config_map, config_map]),
            "Widget w answers one child twice",
        ),
    ] {
        let (mut sim, hook) = setup("InPlace", "v1", "");
        hook.lock()
            .unwrap()
            .answer_fields
            .insert("children".into(), children);
        sim.apply(&widget(&[])).unwrap();
        let message = silent_faults(&mut sim);
        assert!(message.contains(fault), "{message}");
    }
}
