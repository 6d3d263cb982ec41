//! Rules of app-discovery.md, each test naming the rule it checks.

use super::sync::{sync, SyncRequest};
use super::version::{app_version, derived_traceparent};
use crate::contract::decode;
use crate::registry::HookContext;
use serde_json::{json, Value};
use time::macros::datetime;

const NOW: time::OffsetDateTime = datetime!(2026-06-01 12:00:00 UTC);

fn kacr(name: &str, app: Value, created: &str, single: bool) -> Value {
    let mut annotations = json!({"traceparent": "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01",
                                 "metacontroller.k8s.io/last-applied-configuration": "{}"});
    if single {
        annotations["keptn.sh/app-type"] = json!("single-service");
    }
    json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnAppCreationRequest",
           "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"), "creationTimestamp": created,
                        "labels": {"app.kubernetes.io/managed-by": "keptn"}, "annotations": annotations},
           "spec": {"appName": app}, "status": "done"})
}

fn workload(name: &str, app: &str, version: Option<&str>) -> Value {
    let mut spec = json!({"app": app});
    if let Some(v) = version {
        spec["version"] = json!(v);
    }
    json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnWorkload",
           "metadata": {"name": name, "namespace": "ns", "managedFields": [{"manager": "x"}]}, "spec": spec})
}

fn app(name: &str, label: Option<&str>, spec: Value) -> Value {
    let mut labels = json!({});
    if let Some(l) = label {
        labels["app.kubernetes.io/managed-by"] = json!(l);
    }
    json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnApp",
           "metadata": {"name": name, "namespace": "ns", "uid": "x", "resourceVersion": "7", "labels": labels,
                        "annotations": {"keep": "me", "metacontroller.k8s.io/last-applied-configuration": "{}"}},
           "spec": spec, "status": {"currentVersion": "x"}})
}

/// The generated app `shop` at version 1, with the one workload `a`.
fn generated_shop() -> Value {
    app(
        "shop",
        Some("keptn"),
        json!({"version": "1", "workloads": [{"name": "a", "version": "1"}]}),
    )
}

fn keyed(objs: Vec<Value>) -> Value {
    Value::Object(
        objs.into_iter()
            .map(|o| (o["metadata"]["name"].as_str().unwrap().to_owned(), o))
            .collect(),
    )
}

fn request(
    spec: Value,
    kacrs: Vec<Value>,
    child_apps: Vec<Value>,
    workloads: Vec<Value>,
    related_apps: Vec<Value>,
) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "controller": {},
        "parent": {"apiVersion": "metahooks.dev/v1alpha1", "kind": "AppDiscovery",
                   "metadata": {"name": "discovery", "namespace": "ns", "generation": 4}, "spec": spec},
        "children": {"KeptnAppCreationRequest.lifecycle.keptn.sh/v1": keyed(kacrs),
                     "KeptnApp.lifecycle.keptn.sh/v1": keyed(child_apps)},
        "related": {"KeptnWorkload.lifecycle.keptn.sh/v1": keyed(workloads),
                    "KeptnApp.lifecycle.keptn.sh/v1": keyed(related_apps)},
    }))
    .unwrap()
}

fn run(body: &[u8]) -> Value {
    let req: SyncRequest = decode(body).unwrap();
    serde_json::to_value(sync(&req, NOW)).unwrap()
}

fn child<'a>(resp: &'a Value, kind: &str, name: &str) -> Option<&'a Value> {
    resp["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == kind && c["metadata"]["name"] == name)
}

fn spec() -> Value {
    json!({"selector": {"matchLabels": {"app.kubernetes.io/managed-by": "keptn"}}, "timeoutSeconds": 30})
}

#[test]
fn rule_4_1_multi_service_request_waits_for_the_window() {
    let body = request(
        spec(),
        vec![kacr("shop-1", json!("shop"), "2026-06-01T11:59:45Z", false)],
        vec![],
        vec![workload("shop-a", "shop", Some("1"))],
        vec![],
    );
    let resp = run(&body);
    assert!(child(&resp, "KeptnAppCreationRequest", "shop-1").is_some());
    assert!(child(&resp, "KeptnApp", "shop").is_none());
    assert_eq!(
        resp["status"]["pendingRequests"],
        json!([{"name": "shop-1", "appName": "shop", "dueAt": "2026-06-01T12:00:15Z"}])
    );
    assert_eq!(resp["resyncAfterSeconds"], 15);
}

#[test]
fn rule_4_1_due_only_strictly_after_the_window() {
    let at_boundary = request(
        spec(),
        vec![kacr("k", json!("shop"), "2026-06-01T11:59:30Z", false)],
        vec![],
        vec![],
        vec![],
    );
    let resp = run(&at_boundary);
    assert!(child(&resp, "KeptnApp", "shop").is_none());
    assert_eq!(
        resp["resyncAfterSeconds"], 1,
        "never 0 while a request waits"
    );
    let past = request(
        spec(),
        vec![kacr("k", json!("shop"), "2026-06-01T11:59:29.5Z", false)],
        vec![],
        vec![],
        vec![],
    );
    let resp = run(&past);
    assert!(child(&resp, "KeptnApp", "shop").is_some());
    assert!(child(&resp, "KeptnAppCreationRequest", "k").is_none());
    assert!(resp.get("resyncAfterSeconds").is_none());
}

#[test]
fn rule_4_1_single_service_is_due_at_once() {
    let body = request(
        spec(),
        vec![kacr("k", json!("web"), "2026-06-01T12:00:00Z", true)],
        vec![],
        vec![workload("web", "web", Some("v1.2"))],
        vec![],
    );
    let resp = run(&body);
    let app = child(&resp, "KeptnApp", "web").unwrap();
    assert_eq!(
        app["spec"],
        json!({"version": "v1.2", "workloads": [{"name": "web", "version": "v1.2"}]})
    );
    assert_eq!(
        resp["status"]["apps"],
        json!({"web": {"version": "v1.2", "workloads": 1}})
    );
    assert_eq!(resp["status"]["pendingRequests"], json!([]));
}

#[test]
fn rule_4_3_created_app_shape() {
    let body = request(
        spec(),
        vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", false)],
        vec![],
        vec![
            workload("shop-b", "shop", Some("2.0")),
            workload("shop-a", "shop", Some("1.0")),
            workload("other", "else", Some("9")),
        ],
        vec![],
    );
    let resp = run(&body);
    let app = child(&resp, "KeptnApp", "shop").unwrap();
    assert_eq!(app["apiVersion"], "lifecycle.keptn.sh/v1");
    assert_eq!(app["metadata"]["namespace"], "ns");
    assert_eq!(
        app["metadata"]["labels"],
        json!({"app.kubernetes.io/managed-by": "keptn"})
    );
    // KACR annotations copied, metacontroller keys left out, traceparent kept from the request.
    assert_eq!(
        app["metadata"]["annotations"],
        json!({"traceparent": "00-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-bbbbbbbbbbbbbbbb-01"})
    );
    assert_eq!(
        app["spec"]["version"],
        app_version(&[("shop-a", "1.0"), ("shop-b", "2.0")])
    );
    assert_eq!(
        app["spec"]["workloads"],
        json!([{"name": "a", "version": "1.0"}, {"name": "b", "version": "2.0"}])
    );
    assert!(app["spec"].get("revision").is_none());
    assert!(app.get("status").is_none() && app["metadata"].get("ownerReferences").is_none());
}

#[test]
fn rule_4_3_traceparent_derived_when_the_request_has_none() {
    let mut k = kacr("k", json!("shop"), "2026-06-01T11:00:00Z", false);
    k["metadata"]["annotations"] = json!({"tracestate": "x=1"});
    let resp = run(&request(spec(), vec![k], vec![], vec![], vec![]));
    let app = child(&resp, "KeptnApp", "shop").unwrap();
    assert_eq!(app["spec"]["version"], "e3b0c44298");
    assert_eq!(app["spec"]["workloads"], json!([]));
    assert_eq!(
        app["metadata"]["annotations"]["traceparent"],
        derived_traceparent("ns", "shop", "e3b0c44298")
    );
    assert_eq!(app["metadata"]["annotations"]["tracestate"], "x=1");
    assert!(app["metadata"]["annotations"].get("baggage").is_none());
}

#[test]
fn rule_4_4_update_keeps_order_appends_and_drops() {
    let existing = app(
        "shop",
        Some("keptn"),
        json!({"version": "old", "revision": 3,
        "workloads": [{"name": "c", "version": "0"}, {"name": "gone", "version": "1"}, {"name": "a", "version": "0"}]}),
    );
    let body = request(
        spec(),
        vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", false)],
        vec![existing],
        vec![
            workload("shop-a", "shop", Some("1")),
            workload("shop-b", "shop", Some("2")),
            workload("c", "shop", Some("3")),
        ],
        vec![],
    );
    let resp = run(&body);
    let app = child(&resp, "KeptnApp", "shop").unwrap();
    assert_eq!(
        app["spec"]["workloads"],
        json!([{"name": "c", "version": "3"}, {"name": "a", "version": "1"}, {"name": "b", "version": "2"}])
    );
    assert_eq!(app["spec"]["revision"], 3);
    assert_eq!(
        app["spec"]["version"],
        app_version(&[("c", "3"), ("shop-a", "1"), ("shop-b", "2")])
    );
    assert_eq!(app["metadata"]["annotations"], json!({"keep": "me"}));
    assert!(child(&resp, "KeptnAppCreationRequest", "k").is_none());
}

#[test]
fn rule_4_4_update_sets_the_first_entry_of_a_name_listed_twice() {
    let existing = app(
        "shop",
        Some("keptn"),
        json!({"version": "old",
        "workloads": [{"name": "a", "version": "0"}, {"name": "b", "version": "0"}, {"name": "a", "version": "0"}]}),
    );
    let body = request(
        spec(),
        vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", false)],
        vec![existing],
        vec![
            workload("shop-a", "shop", Some("1")),
            workload("shop-b", "shop", Some("2")),
        ],
        vec![],
    );
    let resp = run(&body);
    let app = child(&resp, "KeptnApp", "shop").unwrap();
    assert_eq!(
        app["spec"]["workloads"],
        json!([{"name": "a", "version": "1"}, {"name": "b", "version": "2"}, {"name": "a", "version": "0"}])
    );
}

#[test]
fn rule_4_5_apps_reemitted_unchanged_without_a_due_request() {
    let existing = generated_shop();
    let body = request(
        spec(),
        vec![],
        vec![existing],
        vec![workload("shop-a", "shop", Some("2"))],
        vec![],
    );
    let resp = run(&body);
    let app = child(&resp, "KeptnApp", "shop").unwrap();
    assert_eq!(
        app["spec"],
        json!({"version": "1", "workloads": [{"name": "a", "version": "1"}]})
    );
    assert!(app.get("status").is_none() && app["metadata"].get("uid").is_none());
    assert_eq!(resp["status"]["conditions"][0]["reason"], "Synced");
}

#[test]
fn rule_4_1_user_defined_app_is_never_touched_and_its_request_goes() {
    for label in [None, Some("klt"), Some("helm")] {
        let user = app("shop", label, json!({"version": "mine", "workloads": []}));
        let body = request(
            spec(),
            vec![kacr("k", json!("shop"), "2026-06-01T11:59:59Z", false)],
            vec![],
            vec![workload("shop-a", "shop", Some("1"))],
            vec![user],
        );
        let resp = run(&body);
        assert_eq!(resp["children"], json!([]), "label {label:?}");
        assert_eq!(resp["status"]["pendingRequests"], json!([]));
        assert!(resp.get("resyncAfterSeconds").is_none());
    }
}

#[test]
fn rule_5_malformed_request_never_drops_a_managed_app() {
    let existing = app(
        "shop",
        Some("keptn"),
        json!({"version": "1", "workloads": []}),
    );
    for (bad, problem) in [
        (json!(null), "is missing"),
        (json!(""), "is empty"),
        (json!(7), "is not a string"),
        (json!("Not_DNS"), "is not a DNS-1123 subdomain"),
    ] {
        let mut k = kacr("bad", bad.clone(), "2026-06-01T11:00:00Z", false);
        if bad.is_null() {
            k["spec"] = json!({});
        }
        let body = request(spec(), vec![k], vec![existing.clone()], vec![], vec![]);
        let resp = run(&body);
        assert!(child(&resp, "KeptnApp", "shop").is_some(), "{bad}");
        assert!(
            child(&resp, "KeptnAppCreationRequest", "bad").is_some(),
            "{bad}"
        );
        assert_eq!(resp["status"]["pendingRequests"], json!([]));
        let ready = &resp["status"]["conditions"][0];
        assert_eq!(
            (ready["status"].as_str(), ready["reason"].as_str()),
            (Some("False"), Some("MalformedObjects"))
        );
        assert_eq!(
            ready["message"],
            format!("KeptnAppCreationRequest bad: spec.appName {problem}")
        );
    }
}

/// The second time is in the year 10000 once in UTC, which no timestamp here holds (it was a
/// panic): reported as a bad timestamp too.
#[test]
fn rule_5_bad_timestamp_is_kept_and_reported() {
    for created in ["yesterday", "9999-12-31T23:00:00-05:00"] {
        let body = request(
            spec(),
            vec![kacr("k", json!("shop"), created, false)],
            vec![],
            vec![],
            vec![],
        );
        let resp = run(&body);
        assert!(child(&resp, "KeptnAppCreationRequest", "k").is_some());
        assert!(
            resp["status"]["conditions"][0]["message"]
                .as_str()
                .unwrap()
                .contains("creationTimestamp"),
            "{created}"
        );
    }
}

/// A window that would end after the year 9999 (it was a panic) ends then: the request waits.
#[test]
fn rule_4_1_window_past_the_year_9999_waits() {
    let mut long_window = spec();
    long_window["timeoutSeconds"] = json!(1_000_000_000_000_000u64);
    let body = request(
        long_window,
        vec![kacr("k", json!("shop"), "2026-06-01T11:59:45Z", false)],
        vec![],
        vec![],
        vec![],
    );
    let resp = run(&body);
    assert!(child(&resp, "KeptnAppCreationRequest", "k").is_some());
    assert!(child(&resp, "KeptnApp", "shop").is_none());
    assert_eq!(
        resp["status"]["pendingRequests"][0]["dueAt"],
        "9999-12-31T23:59:59Z"
    );
}

#[test]
fn rule_4_2_workload_without_version_holds_its_app() {
    let existing = generated_shop();
    let body = request(
        spec(),
        vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", false)],
        vec![existing],
        vec![
            workload("shop-a", "shop", Some("2")),
            workload("shop-b", "shop", None),
        ],
        vec![],
    );
    let resp = run(&body);
    assert_eq!(
        child(&resp, "KeptnApp", "shop").unwrap()["spec"]["version"],
        "1"
    );
    assert!(child(&resp, "KeptnAppCreationRequest", "k").is_some());
    assert_eq!(
        resp["status"]["pendingRequests"],
        json!([{"name": "k", "appName": "shop", "dueAt": "2026-06-01T11:00:30Z"}])
    );
    assert!(resp.get("resyncAfterSeconds").is_none());
    assert_eq!(
        resp["status"]["conditions"][0]["message"],
        "KeptnWorkload shop-b: spec.version is missing"
    );
    // Not created when absent.
    let body = request(
        spec(),
        vec![kacr("k", json!("new"), "2026-06-01T11:00:00Z", false)],
        vec![],
        vec![workload("w", "new", None)],
        vec![],
    );
    assert!(child(&run(&body), "KeptnApp", "new").is_none());
    // A version that is not a string is named as such, and holds the app the same way.
    let mut numbered = workload("w", "new", None);
    numbered["spec"]["version"] = json!(7);
    let body = request(
        spec(),
        vec![kacr("k", json!("new"), "2026-06-01T11:00:00Z", false)],
        vec![],
        vec![numbered, workload("v", "new", None)],
        vec![],
    );
    let resp = run(&body);
    assert!(child(&resp, "KeptnApp", "new").is_none());
    assert_eq!(
        resp["status"]["conditions"][0]["message"],
        "KeptnWorkload v: spec.version is missing; KeptnWorkload w: spec.version is not a string"
    );
}

/// A generated app that is no child because another object controls it (a second AppDiscovery
/// of the namespace, which the spec does not expect, §2) cannot be written: Metacontroller's
/// create of it meets `AlreadyExists` and is swallowed. Its due requests are kept, pending and
/// reported, and the app is not emitted, where the literal §4.2 item 5 would have emitted an
/// update that never lands and left the requests out (docs/DECISIONS.md, app-discovery). An
/// app this parent controls, or one no object controls, is updated as before.
#[test]
fn an_app_another_object_controls_holds_its_requests() {
    let controlled_by = |uid: &str, controller: Value| {
        let mut a = generated_shop();
        a["metadata"]["ownerReferences"] = json!([
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "not-it", "uid": "c"},
            {"apiVersion": "metahooks.dev/v1alpha1", "kind": "AppDiscovery", "name": "other",
             "uid": uid, "controller": controller, "blockOwnerDeletion": true}]);
        a
    };
    // A due request for `related`, also a child when `child` is given; the parent's uid is `p`.
    let body_with = |related: Value, child: Option<Value>| {
        let body = request(
            spec(),
            vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", false)],
            child.into_iter().collect(),
            vec![workload("shop-a", "shop", Some("2"))],
            vec![related],
        );
        let mut body: Value = serde_json::from_slice(&body).unwrap();
        body["parent"]["metadata"]["uid"] = json!("p");
        serde_json::to_vec(&body).unwrap()
    };
    let run_with = |related: Value, child: Option<Value>| run(&body_with(related, child));

    let resp = run_with(controlled_by("q", json!(true)), None);
    assert!(child(&resp, "KeptnApp", "shop").is_none(), "{resp}");
    assert!(child(&resp, "KeptnAppCreationRequest", "k").is_some());
    assert_eq!(resp["status"]["apps"], json!({}));
    assert_eq!(
        resp["status"]["pendingRequests"],
        json!([{"name": "k", "appName": "shop", "dueAt": "2026-06-01T11:00:30Z"}])
    );
    assert!(resp.get("resyncAfterSeconds").is_none());
    assert_eq!(
        resp["status"]["conditions"][0]["reason"],
        "MalformedObjects"
    );
    assert_eq!(
        resp["status"]["conditions"][0]["message"],
        "KeptnApp shop: controlled by AppDiscovery other, so this AppDiscovery cannot update it"
    );

    // Controlled by this parent (a child the caches have not given yet), by no one (an owner
    // that is not the controller), or a child whatever its references say: updated.
    for (related, as_child) in [
        (controlled_by("p", json!(true)), false),
        (controlled_by("q", json!(false)), false),
        (controlled_by("q", Value::Null), false),
        (controlled_by("q", json!(true)), true),
    ] {
        let child_app = as_child.then(|| related.clone());
        let resp = run_with(related, child_app);
        assert_eq!(
            child(&resp, "KeptnApp", "shop").unwrap()["spec"]["version"],
            "2",
            "{resp}"
        );
        assert!(child(&resp, "KeptnAppCreationRequest", "k").is_none());
        assert_eq!(resp["status"]["conditions"][0]["reason"], "Synced");
    }

    // Through the server's memos: a request that differs from the kept one only in the app's
    // controlling owner (the other AppDiscovery gone with `--cascade=orphan`) is answered anew.
    let ctx = HookContext {
        now: NOW,
        rng: &ring::rand::SystemRandom::new(),
        memo: &Default::default(),
    };
    let body_of = |uid: &str| body_with(controlled_by(uid, json!(true)), None);
    let answer = |body: &[u8]| -> Value {
        serde_json::from_slice(&super::sync_hook(body, &ctx).unwrap().body).unwrap()
    };
    for _ in 0..2 {
        let held = answer(&body_of("q"));
        assert!(child(&held, "KeptnApp", "shop").is_none(), "{held}");
    }
    let adopted = answer(&body_of("p"));
    assert_eq!(
        child(&adopted, "KeptnApp", "shop").unwrap()["spec"]["version"],
        "2"
    );
}

/// §5: a workload without `spec.app` belongs to no app and is not reported. One whose `spec.app`
/// is there but not a string could be any app's: it holds every due app and is named, and says
/// nothing while no app is due (docs/DECISIONS.md).
#[test]
fn rule_5_workload_without_a_string_app() {
    let due = |name: &str, app: &str| kacr(name, json!(app), "2026-06-01T11:00:00Z", false);
    // Without a version: counted as shop's, it would hold shop.
    for app in [None, Some(json!(null))] {
        let mut appless = workload("shop-x", "shop", None);
        match &app {
            None => drop(appless["spec"].as_object_mut().unwrap().remove("app")),
            Some(v) => appless["spec"]["app"] = v.clone(),
        }
        let body = request(
            spec(),
            vec![due("k", "shop")],
            vec![],
            vec![workload("shop-a", "shop", Some("2")), appless],
            vec![],
        );
        let resp = run(&body);
        let created = child(&resp, "KeptnApp", "shop").expect("shop created");
        assert_eq!(created["spec"]["version"], "2", "{app:?}");
        assert!(child(&resp, "KeptnAppCreationRequest", "k").is_none());
        assert_eq!(resp["status"]["conditions"][0]["status"], "True", "{app:?}");
    }
    for bad in [
        json!(7),
        json!(true),
        json!(["shop"]),
        json!({"name": "shop"}),
    ] {
        let mut odd = workload("shop-x", "shop", Some("3"));
        odd["spec"]["app"] = bad.clone();
        let body = request(
            spec(),
            vec![due("k", "shop"), due("l", "web")],
            vec![],
            vec![workload("shop-a", "shop", Some("2")), odd.clone()],
            vec![],
        );
        let resp = run(&body);
        assert!(child(&resp, "KeptnApp", "shop").is_none(), "{bad}");
        assert!(child(&resp, "KeptnApp", "web").is_none(), "{bad}");
        assert_eq!(
            resp["status"]["pendingRequests"],
            json!([{"name": "k", "appName": "shop", "dueAt": "2026-06-01T11:00:30Z"},
                   {"name": "l", "appName": "web", "dueAt": "2026-06-01T11:00:30Z"}]),
            "{bad}"
        );
        let ready = &resp["status"]["conditions"][0];
        assert_eq!(
            (ready["status"].as_str(), ready["reason"].as_str()),
            (Some("False"), Some("MalformedObjects")),
            "{bad}"
        );
        assert_eq!(
            ready["message"],
            "KeptnWorkload shop-x: spec.app is not a string"
        );
        // Nothing due: nothing held, nothing to say.
        let waiting = kacr("k", json!("shop"), "2026-06-01T11:59:50Z", false);
        let body = request(spec(), vec![waiting], vec![], vec![odd], vec![]);
        let ready = &run(&body)["status"]["conditions"][0];
        assert_eq!(
            (ready["status"].as_str(), ready["message"].as_str()),
            (Some("True"), Some(""))
        );
    }
}

#[test]
fn rule_4_1_step_0_invalid_timeout_keeps_everything() {
    for bad in [json!(-1), json!(1.5), json!("30")] {
        let existing = generated_shop();
        let body = request(
            json!({"timeoutSeconds": bad}),
            vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", true)],
            vec![existing],
            vec![],
            vec![],
        );
        let resp = run(&body);
        assert_eq!(resp["children"].as_array().unwrap().len(), 2, "{bad}");
        assert_eq!(resp["status"]["pendingRequests"], json!([]));
        assert_eq!(
            resp["status"]["apps"],
            json!({"shop": {"version": "1", "workloads": 1}})
        );
        assert_eq!(resp["status"]["conditions"][0]["reason"], "InvalidSpec");
        assert!(resp.get("resyncAfterSeconds").is_none());
    }
}

const SELECTS_USERS_APPS: &str = "spec.selector selects objects without \
    app.kubernetes.io/managed-by: keptn, so Metacontroller adopts the KeptnApps users made \
    themselves and deleting this AppDiscovery deletes them; put app.kubernetes.io/managed-by: \
    keptn in spec.selector.matchLabels";

/// Step 0 also reads the selector: one that would not select the apps the hook makes (§4.3:
/// its `matchLabels` and `managed-by: keptn`), or that Metacontroller cannot read, would fail
/// every sync that creates an app, with no status written; one that selects objects without
/// `managed-by: keptn` makes Metacontroller adopt users' own apps, which §2 promises it never
/// does. Each is an invalid spec, kept as the invalid timeout is (docs/DECISIONS.md,
/// app-discovery); every problem is named.
#[test]
fn step_0_a_selector_that_would_not_select_made_apps_alone_keeps_everything() {
    let existing = generated_shop();
    let misses = |field: &str| {
        format!(
            "{field} does not select the KeptnApps this AppDiscovery makes, which carry the \
             labels of spec.selector.matchLabels and app.kubernetes.io/managed-by: keptn"
        )
    };
    for (spec, message) in [
        (
            json!({"selector": {"matchLabels": {"app.kubernetes.io/managed-by": "helm"}}}),
            format!(
                "{}; {SELECTS_USERS_APPS}",
                misses("spec.selector.matchLabels.app.kubernetes.io/managed-by")
            ),
        ),
        (
            json!({"selector": {"matchExpressions": [{"key": "team", "operator": "Exists"}]},
                   "timeoutSeconds": -1}),
            format!(
                "spec.timeoutSeconds must be a non-negative integer; {}; {SELECTS_USERS_APPS}",
                misses("spec.selector.matchExpressions[0]")
            ),
        ),
        (
            json!({"selector": {"matchLabels": {"app.kubernetes.io/managed-by": "keptn"},
                "matchExpressions": [{"key": "team", "operator": "Exists"}]}}),
            misses("spec.selector.matchExpressions[0]"),
        ),
        (json!({"selector": {}}), SELECTS_USERS_APPS.to_owned()),
        (
            json!({"selector": {"matchExpressions": [{"key": "app.kubernetes.io/managed-by",
                "operator": "In", "values": ["keptn", "klt"]}]}}),
            SELECTS_USERS_APPS.to_owned(),
        ),
        (
            json!({"selector": {"matchExpressions": [{"key": "team", "operator": "Has"}]}}),
            "spec.selector.matchExpressions[0].operator must be In, NotIn, Exists or DoesNotExist"
                .to_owned(),
        ),
    ] {
        let body = request(
            spec,
            vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", true)],
            vec![existing.clone()],
            vec![workload("shop-a", "shop", Some("2"))],
            vec![],
        );
        let resp = run(&body);
        assert_eq!(resp["children"].as_array().unwrap().len(), 2, "{resp}");
        assert_eq!(
            child(&resp, "KeptnApp", "shop").unwrap()["spec"]["version"],
            "1"
        );
        assert_eq!(resp["status"]["pendingRequests"], json!([]));
        assert_eq!(resp["status"]["conditions"][0]["reason"], "InvalidSpec");
        assert_eq!(resp["status"]["conditions"][0]["message"], message);
    }
    // One that selects them alone: expressions the made labels meet, one of them
    // `managed-by In [keptn]`.
    let body = request(
        json!({"selector": {"matchLabels": {"team": "a"}, "matchExpressions": [
            {"key": "team", "operator": "In", "values": ["a"]},
            {"key": "app.kubernetes.io/managed-by", "operator": "In", "values": ["keptn"]}]}}),
        vec![kacr("k", json!("new"), "2026-06-01T11:00:00Z", true)],
        vec![],
        vec![workload("new", "new", Some("2"))],
        vec![],
    );
    let resp = run(&body);
    assert_eq!(
        child(&resp, "KeptnApp", "new").unwrap()["metadata"]["labels"],
        json!({"app.kubernetes.io/managed-by": "keptn", "team": "a"})
    );
}

/// A generated app that no object controls but whose labels the selector does not match is not
/// one Metacontroller adopts, and an update of it would fail the whole sync: its requests are
/// held as for an app another object controls.
#[test]
fn an_app_the_selector_does_not_match_holds_its_requests() {
    let keptns = generated_shop();
    let body = request(
        json!({"selector": {"matchLabels": {"app.kubernetes.io/managed-by": "keptn", "team": "a"}}}),
        vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", true)],
        vec![],
        vec![workload("shop-a", "shop", Some("2"))],
        vec![keptns.clone()],
    );
    let resp = run(&body);
    assert!(child(&resp, "KeptnApp", "shop").is_none(), "{resp}");
    assert!(child(&resp, "KeptnAppCreationRequest", "k").is_some());
    assert_eq!(
        resp["status"]["conditions"][0]["message"],
        "KeptnApp shop: its labels do not match spec.selector.matchLabels.team, so this \
         AppDiscovery cannot update it"
    );
    // Labelled as the selector asks, it is updated (Metacontroller adopts it in that sync).
    let mut labelled = keptns;
    labelled["metadata"]["labels"]["team"] = json!("a");
    let body = request(
        json!({"selector": {"matchLabels": {"app.kubernetes.io/managed-by": "keptn", "team": "a"}}}),
        vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", true)],
        vec![],
        vec![workload("shop-a", "shop", Some("2"))],
        vec![labelled],
    );
    let resp = run(&body);
    assert_eq!(
        child(&resp, "KeptnApp", "shop").unwrap()["spec"]["version"],
        "2"
    );
}

#[test]
fn rule_4_1_default_timeout_is_30_seconds() {
    let body = request(
        json!({}),
        vec![kacr("k", json!("shop"), "2026-06-01T11:59:40Z", false)],
        vec![],
        vec![],
        vec![],
    );
    assert_eq!(run(&body)["resyncAfterSeconds"], 10);
}

#[test]
fn rule_4_6_children_order_and_smallest_resync() {
    let body = request(
        spec(),
        vec![
            kacr("b", json!("two"), "2026-06-01T11:59:50Z", false),
            kacr("a", json!("one"), "2026-06-01T11:59:40Z", false),
        ],
        vec![
            app(
                "zeta",
                Some("keptn"),
                json!({"version": "z", "workloads": []}),
            ),
            app(
                "alpha",
                Some("keptn"),
                json!({"version": "a", "workloads": []}),
            ),
        ],
        vec![],
        vec![],
    );
    let resp = run(&body);
    let order: Vec<(&str, &str)> = resp["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap(),
                c["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("KeptnAppCreationRequest", "a"),
            ("KeptnAppCreationRequest", "b"),
            ("KeptnApp", "alpha"),
            ("KeptnApp", "zeta")
        ]
    );
    assert_eq!(resp["resyncAfterSeconds"], 10);
}

#[test]
fn rule_4_2_workload_app_match_is_exact() {
    let body = request(
        spec(),
        vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", true)],
        vec![],
        vec![
            workload("shop-a", "Shop", Some("1")),
            workload("shopping", "shopping", Some("1")),
        ],
        vec![],
    );
    assert_eq!(
        child(&run(&body), "KeptnApp", "shop").unwrap()["spec"]["version"],
        "e3b0c44298"
    );
}

/// Of a workload only the name, namespace, app and version are read (DECISIONS.md): metadata it
/// does not read, even of the wrong type, neither fails the request nor drops the workload.
#[test]
fn rule_4_2_workload_metadata_not_read_is_not_checked() {
    let mut odd = workload("shop-b", "shop", Some("2.0"));
    odd["metadata"]["labels"] = json!(["not", "a", "map"]);
    odd["metadata"]["annotations"] = json!(7);
    odd["metadata"]["uid"] = json!({"not": "a string"});
    let body = request(
        spec(),
        vec![kacr("k", json!("shop"), "2026-06-01T11:00:00Z", false)],
        vec![],
        vec![workload("shop-a", "shop", Some("1.0")), odd],
        vec![],
    );
    let resp = run(&body);
    assert_eq!(
        child(&resp, "KeptnApp", "shop").unwrap()["spec"]["version"],
        app_version(&[("shop-a", "1.0"), ("shop-b", "2.0")])
    );
}

#[test]
fn rule_4_6_ready_keeps_its_transition_time() {
    let mut body: Value =
        serde_json::from_slice(&request(spec(), vec![], vec![], vec![], vec![])).unwrap();
    body["parent"]["status"] = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Synced", "lastTransitionTime": "2026-05-01T00:00:00Z"}]});
    let resp = run(&serde_json::to_vec(&body).unwrap());
    let ready = &resp["status"]["conditions"][0];
    assert_eq!(ready["lastTransitionTime"], "2026-05-01T00:00:00Z");
    assert_eq!(ready["observedGeneration"], 4);
}

#[test]
fn rule_6_mutate_labels_new_requests() {
    let review = |op: &str, kind: &str, labels: Option<Value>| {
        let mut object = json!({"metadata": {"name": "k"}});
        if let Some(l) = labels {
            object["metadata"]["labels"] = l;
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "lifecycle.keptn.sh", "version": "v1", "kind": kind},
                        "operation": op, "object": object}})
    };
    let answer = |request: Value| crate::registry::answer_of(super::mutate_hook, &request, NOW);
    let patch_of = |v: &Value| -> Value {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v["response"]["patch"].as_str().unwrap())
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    };
    let r = answer(review(
        "CREATE",
        "KeptnAppCreationRequest",
        Some(json!({"a": "b", "app.kubernetes.io/managed-by": "helm"})),
    ));
    assert_eq!(r["response"]["uid"], "u-1");
    assert_eq!(r["response"]["allowed"], true);
    assert_eq!(r["response"]["patchType"], "JSONPatch");
    assert_eq!(
        patch_of(&r),
        json!([{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1managed-by", "value": "keptn"}])
    );
    let r = answer(review("CREATE", "KeptnAppCreationRequest", None));
    assert_eq!(
        patch_of(&r),
        json!([{"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/managed-by": "keptn"}}])
    );
    // Labels that are null, or no metadata at all: the whole map, or the whole metadata.
    let r = answer(review(
        "CREATE",
        "KeptnAppCreationRequest",
        Some(Value::Null),
    ));
    assert_eq!(
        patch_of(&r),
        json!([{"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/managed-by": "keptn"}}])
    );
    let mut bare = review("CREATE", "KeptnAppCreationRequest", None);
    bare["request"]["object"] = json!({"kind": "KeptnAppCreationRequest"});
    assert_eq!(
        patch_of(&answer(bare)),
        json!([{"op": "add", "path": "/metadata", "value": {"labels": {"app.kubernetes.io/managed-by": "keptn"}}}])
    );
    for r in [
        answer(review(
            "CREATE",
            "KeptnAppCreationRequest",
            Some(json!({"app.kubernetes.io/managed-by": "keptn"})),
        )),
        answer(review("UPDATE", "KeptnAppCreationRequest", None)),
        answer(review("CREATE", "KeptnApp", None)),
    ] {
        assert_eq!(r["response"]["allowed"], true);
        assert!(r["response"].get("patch").is_none() && r["response"].get("patchType").is_none());
    }
}

#[test]
fn rule_3_customize_asks_for_the_namespace_only() {
    let out = crate::registry::answer_of(
        super::customize_hook,
        &json!({"controller": {}, "parent": {"metadata": {"name": "d", "namespace": "team-a"}}}),
        NOW,
    );
    assert_eq!(
        out,
        json!({"relatedResources": [
            {"apiVersion": "lifecycle.keptn.sh/v1", "resource": "keptnworkloads", "namespace": "team-a"},
            {"apiVersion": "lifecycle.keptn.sh/v1", "resource": "keptnapps", "namespace": "team-a"}
        ]})
    );
    let no_ns = serde_json::to_vec(&json!({"parent": {"metadata": {"name": "d"}}})).unwrap();
    let ctx = HookContext {
        now: NOW,
        rng: &ring::rand::SystemRandom::new(),
        memo: &Default::default(),
    };
    assert_eq!(
        super::customize_hook(&no_ns, &ctx).unwrap_err().path,
        "parent.metadata.namespace"
    );
}

/// A workload is read for its name alone, and one without a name is refused all the same: the
/// app's workload list could not name it.
#[test]
fn a_workload_without_a_name_is_a_request_error_naming_it() {
    let body = request(
        spec(),
        vec![],
        vec![],
        vec![workload("", "shop", Some("1"))],
        vec![],
    );
    let err = decode::<SyncRequest>(&body).unwrap_err();
    assert_eq!(
        err.path,
        "related.KeptnWorkload.lifecycle.keptn.sh/v1..metadata.name"
    );
}
