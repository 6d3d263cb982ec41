//! app-discovery end to end: the real server, the project's manifests (CRDs with their defaults,
//! the mutating webhook that labels requests, the CompositeController, and the minimal Keptn CRDs
//! of manifests/keptn-crds in Keptn's place), the simulator's clock.

mod common;
mod sim;

use serde_json::{json, Value};
use sim::Sim;

const NS: &str = "podtato";

/// An AppDiscovery named `name` in the namespace, with `spec` (`{}`: the CRD's defaults, the
/// selector managed-by=keptn and a 30 s window).
fn discovery(name: &str, spec: Value) -> String {
    json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "AppDiscovery",
        "metadata": {"name": name, "namespace": NS}, "spec": spec})
    .to_string()
}

fn sim() -> Sim {
    let mut sim = Sim::with_manifests(&["keptn-crds", "app-discovery"]);
    // Defaults come from the CRD: selector managed-by=keptn, 30 s window.
    sim.apply(&discovery("discovery", json!({}))).unwrap();
    sim.run_until_quiet();
    sim
}

/// Keptn's webhook creating a request (unlabelled: our mutating webhook labels it).
fn request(sim: &mut Sim, name: &str, app: &str, single: bool) {
    let mut annotations = json!({});
    if single {
        annotations["keptn.sh/app-type"] = json!("single-service");
    }
    sim.apply(&json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnAppCreationRequest",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations}, "spec": {"appName": app}}).to_string())
        .unwrap();
}

/// A KeptnWorkload as Keptn's webhook makes it for a Deployment's Pods: its app and version, and
/// the ReplicaSet it stands for (Keptn's CRD requires all three).
fn workload(sim: &mut Sim, name: &str, app: &str, version: &str) {
    let replica_set =
        json!({"uid": format!("rs-{name}"), "kind": "ReplicaSet", "name": format!("{name}-6d5f8")});
    sim.apply(
        &json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnWorkload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"app": app, "version": version, "resourceReference": replica_set}})
        .to_string(),
    )
    .unwrap();
}

/// The app Keptn's own controller makes for podtato-head's entry and hat at 0.1.0: labelled,
/// owned by nothing, its version Keptn's hash of "podtato-head-entry-0.1.0podtato-head-hat-0.1.0".
fn keptns_podtato_head_app(sim: &mut Sim) {
    sim.apply(&json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnApp",
        "metadata": {"name": "podtato-head", "namespace": NS,
            "labels": {"app.kubernetes.io/managed-by": "keptn"}},
        "spec": {"version": "c945ddbb36", "workloads": [{"name": "entry", "version": "0.1.0"}, {"name": "hat", "version": "0.1.0"}]}})
        .to_string())
        .unwrap();
}

fn app(sim: &Sim, name: &str) -> Option<Value> {
    sim.get("KeptnApp", NS, name).cloned()
}

fn workload_names(app: &Value) -> Vec<String> {
    app["spec"]["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn multi_service_app_waits_for_the_window_and_gets_every_workload() {
    let mut sim = sim();
    request(&mut sim, "podtato-head", "podtato-head", false);
    workload(&mut sim, "podtato-head-entry", "podtato-head", "0.1.0");
    sim.run_until_quiet();
    let kacr = sim
        .get("KeptnAppCreationRequest", NS, "podtato-head")
        .unwrap();
    assert_eq!(
        kacr["metadata"]["labels"]["app.kubernetes.io/managed-by"], "keptn",
        "labelled at admission"
    );
    assert_eq!(
        kacr["metadata"]["ownerReferences"][0]["kind"], "AppDiscovery",
        "adopted"
    );
    for (t, w) in [(5, "podtato-head-hat"), (10, "podtato-head-left-arm")] {
        sim.advance(t);
        workload(&mut sim, w, "podtato-head", "0.1.0");
        sim.run_until_quiet();
        assert!(
            app(&sim, "podtato-head").is_none(),
            "nothing before the window ends"
        );
    }
    let status = &sim.get("AppDiscovery", NS, "discovery").unwrap()["status"];
    assert_eq!(status["pendingRequests"][0]["name"], "podtato-head");
    sim.advance(16); // 31 s after the request
    sim.run_until_quiet();
    let a = app(&sim, "podtato-head").expect("app created after the window");
    assert_eq!(workload_names(&a), ["entry", "hat", "left-arm"]);
    assert_eq!(a["spec"]["version"].as_str().unwrap().len(), 10);
    assert!(
        sim.get("KeptnAppCreationRequest", NS, "podtato-head")
            .is_none(),
        "request handled"
    );
    assert_eq!(a["metadata"]["ownerReferences"][0]["kind"], "AppDiscovery");
    assert!(a["metadata"]["annotations"]["traceparent"]
        .as_str()
        .unwrap()
        .starts_with("00-"));
    assert_eq!(a["spec"]["revision"], 1, "CRD default");
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

#[test]
fn single_service_app_is_created_on_the_first_sync() {
    let mut sim = sim();
    workload(&mut sim, "nginx", "nginx", "1.25.3");
    request(&mut sim, "nginx", "nginx", true);
    sim.run_until_quiet();
    let a = app(&sim, "nginx").unwrap();
    assert_eq!(a["spec"]["version"], "1.25.3");
    assert_eq!(workload_names(&a), ["nginx"]);
    assert!(sim.get("KeptnAppCreationRequest", NS, "nginx").is_none());
}

#[test]
fn a_new_rollout_updates_the_app_and_a_removed_workload_drops_out() {
    let mut sim = sim();
    workload(&mut sim, "shop-api", "shop", "1.0");
    workload(&mut sim, "shop-web", "shop", "1.0");
    request(&mut sim, "shop-1", "shop", false);
    sim.advance(31);
    sim.run_until_quiet();
    let first = app(&sim, "shop").unwrap();
    assert_eq!(workload_names(&first), ["api", "web"]);
    // New rollout: api 1.1, web removed, then a new request.
    workload(&mut sim, "shop-api", "shop", "1.1");
    sim.store_delete_direct("KeptnWorkload", NS, "shop-web");
    sim.run_until_quiet();
    assert_eq!(
        app(&sim, "shop").unwrap()["spec"],
        first["spec"],
        "workload changes alone never update an app"
    );
    request(&mut sim, "shop-2", "shop", false);
    sim.advance(31);
    sim.run_until_quiet();
    let second = app(&sim, "shop").unwrap();
    assert_eq!(
        second["spec"]["version"], "1.1",
        "one workload: its version"
    );
    assert_eq!(
        second["spec"]["workloads"],
        json!([{"name": "api", "version": "1.1"}])
    );
    assert_eq!(
        second["metadata"]["uid"], first["metadata"]["uid"],
        "updated in place"
    );
}

#[test]
fn a_user_defined_app_survives_and_its_request_disappears() {
    let mut sim = sim();
    sim.apply(&json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnApp",
        "metadata": {"name": "checkout", "namespace": NS}, "spec": {"version": "mine", "workloads": []}}).to_string())
        .unwrap();
    let created = app(&sim, "checkout").unwrap()["metadata"]["resourceVersion"].clone();
    workload(&mut sim, "checkout", "checkout", "2.0");
    request(&mut sim, "checkout", "checkout", false);
    sim.run_until_quiet();
    assert!(
        sim.get("KeptnAppCreationRequest", NS, "checkout").is_none(),
        "handled at once"
    );
    sim.advance(60);
    sim.run_until_quiet();
    let a = app(&sim, "checkout").unwrap();
    assert_eq!(a["spec"]["version"], "mine");
    assert!(
        a["metadata"].get("ownerReferences").is_none(),
        "never adopted"
    );
    assert_eq!(a["metadata"]["resourceVersion"], created, "never written");
}

/// manifests/examples/appdiscovery.yaml does what its comment says: it adopts the labelled
/// requests, makes their app when its 30 s window ends, and never writes a user-defined app.
#[test]
fn the_example_discovers_after_its_window_and_leaves_user_apps_alone() {
    let mut sim = Sim::with_manifests(&["keptn-crds", "app-discovery"]);
    sim.apply_example("appdiscovery", NS).unwrap();
    sim.apply(&json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnApp",
        "metadata": {"name": "checkout", "namespace": NS}, "spec": {"version": "mine", "workloads": []}}).to_string())
        .unwrap();
    let users = app(&sim, "checkout").unwrap()["metadata"]["resourceVersion"].clone();
    request(&mut sim, "podtato-head", "podtato-head", false);
    workload(&mut sim, "podtato-head-entry", "podtato-head", "0.1.0");
    workload(&mut sim, "podtato-head-hat", "podtato-head", "0.1.0");
    sim.run_until_quiet();
    let kacr = sim
        .get("KeptnAppCreationRequest", NS, "podtato-head")
        .unwrap();
    assert_eq!(kacr["metadata"]["ownerReferences"][0]["name"], "discovery");
    sim.advance(29);
    sim.run_until_quiet();
    assert!(app(&sim, "podtato-head").is_none(), "inside the window");
    sim.advance(2);
    sim.run_until_quiet();
    let made = app(&sim, "podtato-head").expect("made when the window ends");
    assert_eq!(workload_names(&made), ["entry", "hat"]);
    assert_eq!(made["metadata"]["ownerReferences"][0]["name"], "discovery");
    let theirs = app(&sim, "checkout").unwrap();
    assert_eq!(
        theirs["metadata"]["resourceVersion"], users,
        "never written"
    );
    assert_eq!(
        sim.get_row("AppDiscovery", NS, "discovery"),
        sim::row(&[
            ("Name", "discovery"),
            ("Ready", "True"),
            ("Window", "30"),
            ("Age", &sim.created("AppDiscovery", NS, "discovery")),
            ("Reason", "Synced")
        ])
    );
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

#[test]
fn two_apps_with_different_windows() {
    let mut sim = sim();
    workload(&mut sim, "alpha-api", "alpha", "1");
    workload(&mut sim, "beta", "beta", "3");
    request(&mut sim, "alpha", "alpha", false);
    request(&mut sim, "beta", "beta", true);
    sim.run_until_quiet();
    assert!(app(&sim, "beta").is_some(), "single-service at once");
    assert!(app(&sim, "alpha").is_none(), "multi-service waits");
    sim.advance(31);
    sim.run_until_quiet();
    assert!(app(&sim, "alpha").is_some());
    let status = &sim.get("AppDiscovery", NS, "discovery").unwrap()["status"];
    assert_eq!(
        status["apps"],
        json!({"alpha": {"version": "1", "workloads": 1}, "beta": {"version": "3", "workloads": 1}})
    );
    assert_eq!(status["pendingRequests"], json!([]));
    assert_eq!(status["conditions"][0]["reason"], "Synced");
}

/// Keptn's lifecycle operator runs its own KeptnAppCreationRequest controller beside the
/// AppDiscovery (README, "Beside Keptn's own discovery"). Where it acts first, at the end of its
/// window, it creates the app, unowned but labelled `managed-by: keptn`, and deletes the request:
/// the AppDiscovery then adopts that app and keeps it exactly as Keptn wrote it (both compute the
/// same version). With Keptn's window set longer than the AppDiscovery's, as the README says,
/// the next rollout's request is the AppDiscovery's to handle, and it updates that app in place.
/// (In `lifecycle.keptn.sh/v1` a KeptnApp's spec is its version, revision and workloads.)
#[test]
fn an_app_made_by_keptns_own_controller_is_adopted_as_it_is_and_updated_later() {
    let mut sim = sim();
    workload(&mut sim, "podtato-head-entry", "podtato-head", "0.1.0");
    workload(&mut sim, "podtato-head-hat", "podtato-head", "0.1.0");
    request(&mut sim, "podtato-head", "podtato-head", false);
    sim.run_until_quiet();

    // Keptn's controller, 30 s on, before the AppDiscovery's strict "after 30 s": its app, then
    // the request deleted.
    sim.advance(30);
    keptns_podtato_head_app(&mut sim);
    sim.delete("KeptnAppCreationRequest", NS, "podtato-head")
        .unwrap();
    let made = app(&sim, "podtato-head").unwrap();
    sim.run_until_quiet();
    let adopted = app(&sim, "podtato-head").unwrap();
    assert_eq!(
        adopted["metadata"]["ownerReferences"][0]["kind"], "AppDiscovery",
        "adopted"
    );
    assert_eq!(adopted["spec"], made["spec"], "kept as Keptn wrote it");
    assert_eq!(
        adopted["metadata"]["annotations"].get("traceparent"),
        None,
        "no traceparent added to an app the AppDiscovery did not create"
    );
    let status = &sim.get("AppDiscovery", NS, "discovery").unwrap()["status"];
    assert_eq!(
        status["apps"],
        json!({"podtato-head": {"version": "c945ddbb36", "workloads": 2}})
    );

    // The next rollout, with Keptn's window longer: the AppDiscovery's request to handle.
    workload(&mut sim, "podtato-head-hat", "podtato-head", "0.2.0");
    request(&mut sim, "podtato-head-2", "podtato-head", false);
    sim.advance(31);
    sim.run_until_quiet();
    let updated = app(&sim, "podtato-head").unwrap();
    assert_eq!(
        updated["spec"]["version"], "4c2e476bf6",
        "Keptn's hash of \"podtato-head-entry-0.1.0podtato-head-hat-0.2.0\""
    );
    assert_eq!(
        updated["spec"]["workloads"],
        json!([{"name": "entry", "version": "0.1.0"}, {"name": "hat", "version": "0.2.0"}])
    );
    assert_eq!(updated["spec"]["revision"], 1, "the CRD default, kept");
    assert_eq!(
        updated["metadata"]["uid"], made["metadata"]["uid"],
        "updated in place"
    );
    assert!(sim
        .get("KeptnAppCreationRequest", NS, "podtato-head-2")
        .is_none());
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// While the API server cannot reach metahooks, Keptn's pod webhook still creates its request:
/// the labelling webhook's `failurePolicy: Ignore` admits it unlabelled (with `Fail`, the create
/// would fail, and Keptn's webhook would refuse the Pod it was admitting). The AppDiscovery does
/// not select it, so nothing happens to it; labelled afterwards, as the README says, it is
/// adopted and handled like any other.
#[test]
fn a_request_made_while_metahooks_is_unreachable_is_handled_once_labelled() {
    let mut sim = sim();
    sim.set_webhooks_reachable(false);
    request(&mut sim, "podtato-head", "podtato-head", true);
    workload(&mut sim, "podtato-head-entry", "podtato-head", "0.1.0");
    sim.run_until_quiet();
    let kacr = sim
        .get("KeptnAppCreationRequest", NS, "podtato-head")
        .unwrap()
        .clone();
    assert_eq!(
        kacr["metadata"]["labels"],
        Value::Null,
        "admitted unlabelled"
    );
    assert_eq!(
        kacr["metadata"]["ownerReferences"],
        Value::Null,
        "not adopted"
    );
    assert!(app(&sim, "podtato-head").is_none());

    sim.set_webhooks_reachable(true);
    let mut labelled = kacr;
    labelled["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "keptn"});
    sim.apply(&labelled.to_string()).unwrap();
    sim.run_until_quiet();
    let created = app(&sim, "podtato-head").expect("the app, once the request is labelled");
    assert_eq!(created["spec"]["version"], "0.1.0");
    assert!(sim
        .get("KeptnAppCreationRequest", NS, "podtato-head")
        .is_none());
}

/// Removing metahooks as the README's "Removing metahooks" says keeps the apps it made: the
/// AppDiscovery deleted with `--cascade=orphan` leaves its KeptnApps as they were, owned by
/// nothing. A plain delete takes them.
#[test]
fn removing_metahooks_keeps_the_apps_it_made() {
    // A discovery that has made the single-service app `solo`.
    let with_app = || {
        let mut sim = sim();
        request(&mut sim, "solo", "solo", true);
        workload(&mut sim, "solo-web", "solo", "1.0.0");
        sim.run_until_quiet();
        sim
    };
    let mut sim = with_app();
    let was = app(&sim, "solo").expect("app made");

    sim.delete_orphaning("AppDiscovery", NS, "discovery")
        .unwrap();
    sim.run_until_quiet();
    sim.remove_controller("CompositeController", "app-discovery");
    sim.run_until_quiet();
    let kept = app(&sim, "solo").expect("app kept");
    assert_eq!(kept["metadata"]["ownerReferences"], json!([]));
    assert_eq!(kept["spec"], was["spec"]);
    assert_eq!(kept["metadata"]["labels"], was["metadata"]["labels"]);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);

    let mut sim = with_app();
    sim.delete("AppDiscovery", NS, "discovery").unwrap();
    sim.run_until_quiet();
    assert!(app(&sim, "solo").is_none(), "a plain delete takes it");
}

/// Workloads `api` and `cart-api` of the app `cart` both have the short name `api`. The hook
/// writes both entries, as Keptn does (§4.3), and on update sets the first (§4.4, as Keptn). But
/// Metacontroller merges `spec.workloads` by `name` (contract §10): from the sync after the
/// create, both stored entries are the second as the hook wrote it, and an update's new versions
/// never land, while `spec.version` follows (DECISIONS, app-discovery).
#[test]
fn workloads_of_one_short_name_collapse_in_metacontrollers_merge() {
    let mut sim = sim();
    workload(&mut sim, "api", "cart", "1.0");
    workload(&mut sim, "cart-api", "cart", "2.0");
    request(&mut sim, "cart-1", "cart", false);
    sim.advance(31);
    sim.run_until_quiet();
    let first = app(&sim, "cart").unwrap();
    let collapsed = json!([{"name": "api", "version": "2.0"}, {"name": "api", "version": "2.0"}]);
    assert_eq!(
        first["spec"]["workloads"], collapsed,
        "created as [api 1.0, api 2.0]"
    );

    workload(&mut sim, "api", "cart", "1.1");
    workload(&mut sim, "cart-api", "cart", "2.1");
    request(&mut sim, "cart-2", "cart", false);
    sim.advance(31);
    sim.run_until_quiet();
    let second = app(&sim, "cart").unwrap();
    assert_eq!(
        second["spec"]["workloads"], collapsed,
        "the hook wrote [api 2.1, api 2.0]"
    );
    assert_ne!(second["spec"]["version"], first["spec"]["version"]);
    assert_eq!(
        sim.get("AppDiscovery", NS, "discovery").unwrap()["status"]["apps"]["cart"]["workloads"],
        2
    );
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// An app Keptn's controller made, adopted in the same sync as a request that drops one of its
/// workloads (metahooks installed where Keptn already made apps): the hook writes the app
/// without the entry, but the app carries no last-applied annotation yet, and Metacontroller's
/// merge removes only what it applied (contract §10), so the entry stays until the next
/// request, by when every sync has re-emitted the app and the annotation names it (DECISIONS,
/// app-discovery).
#[test]
fn an_entry_dropped_in_the_adopting_sync_goes_at_the_next_request() {
    let mut sim = Sim::with_manifests(&["keptn-crds", "app-discovery"]);
    keptns_podtato_head_app(&mut sim);
    workload(&mut sim, "podtato-head-entry", "podtato-head", "0.2.0");
    request(&mut sim, "podtato-head-2", "podtato-head", true);
    sim.apply(&discovery("discovery", json!({}))).unwrap();
    sim.run_until_quiet();
    let adopted = app(&sim, "podtato-head").unwrap();
    assert_eq!(adopted["spec"]["version"], "0.2.0", "one workload left");
    assert_eq!(
        adopted["spec"]["workloads"],
        json!([{"name": "entry", "version": "0.2.0"}, {"name": "hat", "version": "0.1.0"}]),
        "the hook wrote [entry 0.2.0]"
    );

    request(&mut sim, "podtato-head-3", "podtato-head", true);
    sim.run_until_quiet();
    assert_eq!(
        app(&sim, "podtato-head").unwrap()["spec"]["workloads"],
        json!([{"name": "entry", "version": "0.2.0"}])
    );
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// Metacontroller's caches behind the API server. A request the caches still see after it was
/// handled is handled again, to the same app, and its second deletion finds it gone. But a
/// request due while the caches have not heard of the app yet is handled as if there were no
/// app: the create meets `AlreadyExists`, which Metacontroller swallows, and the request is gone,
/// so the app keeps its version until the next request (DECISIONS, app-discovery).
#[test]
fn a_cache_behind_handles_a_request_twice_or_against_no_app() {
    let mut sim = sim();
    workload(&mut sim, "nginx", "nginx", "1.25.3");
    request(&mut sim, "nginx", "nginx", false);
    sim.run_until_quiet();
    sim.hold_in_caches("KeptnAppCreationRequest", NS, "nginx");
    sim.advance(31);
    sim.run_until_quiet();
    let made = app(&sim, "nginx").unwrap();
    assert!(sim.get("KeptnAppCreationRequest", NS, "nginx").is_none());
    sim.catch_up_caches();
    sim.run_until_quiet();
    let seen_twice = app(&sim, "nginx").unwrap();
    assert_eq!(seen_twice["metadata"]["uid"], made["metadata"]["uid"]);
    assert_eq!(seen_twice["spec"], made["spec"]);

    sim.hide_from_caches("KeptnApp", NS, "nginx");
    workload(&mut sim, "nginx", "nginx", "1.26.0");
    request(&mut sim, "nginx-2", "nginx", true);
    sim.run_until_quiet();
    assert!(sim.get("KeptnAppCreationRequest", NS, "nginx-2").is_none());
    sim.catch_up_caches();
    sim.run_until_quiet();
    let missed = app(&sim, "nginx").unwrap();
    assert_eq!(
        missed["metadata"]["uid"], made["metadata"]["uid"],
        "not deleted"
    );
    assert_eq!(missed["spec"]["version"], "1.25.3", "the request is spent");

    request(&mut sim, "nginx-3", "nginx", true);
    sim.run_until_quiet();
    assert_eq!(app(&sim, "nginx").unwrap()["spec"]["version"], "1.26.0");
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// A request handled while its app's write fails is spent as well. Metacontroller deletes the
/// request before it updates the app (contract §9, step 9); here the update meets a Conflict,
/// the caches being behind on the app (as when Keptn has just written the app's status), which
/// Metacontroller returns and retries. The retry finds no request, so the app keeps its version
/// until the next request, where Keptn's own controller keeps a request until its app is
/// written (DECISIONS, app-discovery).
#[test]
fn a_request_handled_while_its_apps_write_fails_is_spent() {
    let mut sim = sim();
    workload(&mut sim, "nginx", "nginx", "1.25.3");
    request(&mut sim, "nginx", "nginx", true);
    sim.run_until_quiet();
    assert_eq!(app(&sim, "nginx").unwrap()["spec"]["version"], "1.25.3");

    sim.hold_in_caches("KeptnApp", NS, "nginx");
    workload(&mut sim, "nginx", "nginx", "1.26.0");
    request(&mut sim, "nginx-2", "nginx", true);
    sim.run_until_quiet();
    assert!(sim.get("KeptnAppCreationRequest", NS, "nginx-2").is_none());
    assert!(
        sim.sync_errors
            .iter()
            .any(|e| e.contains("KeptnApp") && e.contains("Conflict")),
        "{:?}",
        sim.sync_errors
    );
    sim.catch_up_caches();
    sim.advance(1);
    sim.run_until_quiet();
    assert_eq!(
        app(&sim, "nginx").unwrap()["spec"]["version"],
        "1.25.3",
        "the request is spent"
    );

    request(&mut sim, "nginx-3", "nginx", true);
    sim.run_until_quiet();
    assert_eq!(app(&sim, "nginx").unwrap()["spec"]["version"], "1.26.0");
}

/// Two AppDiscoveries in one namespace, where the spec asks for one (§2): each adopts the
/// requests and apps it syncs first. A request one adopted for an app the other controls cannot
/// update that app (Metacontroller's create of a child another object controls meets
/// `AlreadyExists`, which it swallows): before the fix the request was handled and the rollout's
/// version lost without a word. Now the request is kept and the conflict reported, until one of
/// the two goes with `--cascade=orphan` and the other adopts what it had.
#[test]
fn a_second_app_discovery_in_the_namespace_reports_an_app_it_cannot_update() {
    let mut sim = sim();
    workload(&mut sim, "nginx", "nginx", "1.25.3");
    request(&mut sim, "nginx", "nginx", true);
    sim.run_until_quiet();
    let first = app(&sim, "nginx").unwrap();
    assert_eq!(first["metadata"]["ownerReferences"][0]["name"], "discovery");

    // A second one whose name sorts first, so it syncs first and adopts the next request.
    sim.apply(&discovery("a-discovery", json!({}))).unwrap();
    sim.run_until_quiet();
    workload(&mut sim, "nginx", "nginx", "1.25.4");
    request(&mut sim, "nginx", "nginx", true);
    sim.run_until_quiet();
    let kacr = sim
        .get("KeptnAppCreationRequest", NS, "nginx")
        .expect("request kept");
    assert_eq!(
        kacr["metadata"]["ownerReferences"][0]["name"],
        "a-discovery"
    );
    assert_eq!(app(&sim, "nginx").unwrap()["spec"], first["spec"]);
    let status = &sim.get("AppDiscovery", NS, "a-discovery").unwrap()["status"];
    assert_eq!(status["apps"], json!({}));
    assert_eq!(status["pendingRequests"][0]["name"], "nginx");
    assert_eq!(status["conditions"][0]["status"], "False");
    assert_eq!(status["conditions"][0]["reason"], "MalformedObjects");
    assert_eq!(
        status["conditions"][0]["message"],
        "KeptnApp nginx: controlled by AppDiscovery discovery, so this AppDiscovery cannot update it"
    );

    sim.delete_orphaning("AppDiscovery", NS, "a-discovery")
        .unwrap();
    sim.run_until_quiet();
    let updated = app(&sim, "nginx").unwrap();
    assert_eq!(updated["spec"]["version"], "1.25.4", "adopted and handled");
    assert_eq!(updated["metadata"]["uid"], first["metadata"]["uid"]);
    assert!(sim.get("KeptnAppCreationRequest", NS, "nginx").is_none());
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// An AppDiscovery made again under its old name after a delete with `--cascade=orphan`
/// (metahooks removed and installed again) adopts the apps the first one made by its selector,
/// with no step, and the next rollout updates them (README, "Removing metahooks").
#[test]
fn an_app_discovery_made_again_adopts_the_apps_it_made() {
    let mut sim = sim();
    workload(&mut sim, "nginx", "nginx", "1.25.3");
    request(&mut sim, "nginx", "nginx", true);
    sim.run_until_quiet();
    let first = app(&sim, "nginx").unwrap();
    sim.delete_orphaning("AppDiscovery", NS, "discovery")
        .unwrap();
    sim.run_until_quiet();
    sim.apply(&discovery("discovery", json!({}))).unwrap();
    sim.run_until_quiet();
    let uid = sim.get("AppDiscovery", NS, "discovery").unwrap()["metadata"]["uid"].clone();
    let adopted = app(&sim, "nginx").unwrap();
    assert_eq!(adopted["metadata"]["ownerReferences"][0]["uid"], uid);
    assert_eq!(adopted["spec"], first["spec"]);

    workload(&mut sim, "nginx", "nginx", "1.25.4");
    request(&mut sim, "nginx", "nginx", true);
    sim.run_until_quiet();
    let updated = app(&sim, "nginx").unwrap();
    assert_eq!(updated["spec"]["version"], "1.25.4");
    assert_eq!(updated["metadata"]["uid"], first["metadata"]["uid"]);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// An AppDiscovery whose selector does not select the apps it makes: a KeptnApp is made with
/// the selector's `matchLabels` and `app.kubernetes.io/managed-by: keptn` (§4.3), and a
/// `matchExpressions` entry asking for another label leaves it out. Metacontroller fails every
/// sync that would create one (`labels on desired child ... don't match parent selector`) and
/// writes no status, so nothing said why. The spec is now `InvalidSpec`, naming the entry, and
/// nothing changes until it is mended; with the label in `matchLabels` the app is made.
#[test]
fn a_selector_that_would_not_select_the_apps_it_makes_is_an_invalid_spec() {
    let mut sim = Sim::with_manifests(&["keptn-crds", "app-discovery"]);
    let with_selector = |selector: Value| discovery("discovery", json!({ "selector": selector }));
    sim.apply(&with_selector(
        json!({"matchLabels": {"app.kubernetes.io/managed-by": "keptn"},
        "matchExpressions": [{"key": "team", "operator": "In", "values": ["shop"]}]}),
    ))
    .unwrap();
    sim.run_until_quiet();
    workload(&mut sim, "nginx", "nginx", "1.25.3");
    sim.apply(
        &json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnAppCreationRequest",
        "metadata": {"name": "nginx", "namespace": NS, "labels": {"team": "shop"},
            "annotations": {"keptn.sh/app-type": "single-service"}}, "spec": {"appName": "nginx"}})
        .to_string(),
    )
    .unwrap();
    sim.run_until_quiet();
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
    assert!(app(&sim, "nginx").is_none());
    assert!(sim.get("KeptnAppCreationRequest", NS, "nginx").is_some());
    let ready = &sim.get("AppDiscovery", NS, "discovery").unwrap()["status"]["conditions"][0];
    assert_eq!(ready["reason"], "InvalidSpec", "{ready}");
    assert_eq!(
        ready["message"],
        "spec.selector.matchExpressions[0] does not select the KeptnApps this AppDiscovery makes, \
         which carry the labels of spec.selector.matchLabels and app.kubernetes.io/managed-by: keptn"
    );

    sim.apply(&with_selector(
        json!({"matchLabels": {"app.kubernetes.io/managed-by": "keptn", "team": "shop"}}),
    ))
    .unwrap();
    sim.run_until_quiet();
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
    let made = app(&sim, "nginx").expect("made");
    assert_eq!(made["metadata"]["labels"]["team"], "shop");
}

/// An AppDiscovery whose selector selects objects without `app.kubernetes.io/managed-by:
/// keptn`, here its team's label alone. The CRD's rule refuses such a selector, but one stored
/// before that rule, or by an API server that does not evaluate it (the simulator does not),
/// reaches the hook. Metacontroller adopts what the selector selects before it calls the hook,
/// so the app a user made with that label became a child, and a plain delete of the AppDiscovery
/// took it with it: §2 promises user-defined apps are never children. The spec is now
/// `InvalidSpec`, saying so, and once `managed-by: keptn` is in the selector Metacontroller
/// releases the app and a delete leaves it.
#[test]
fn a_selector_that_selects_users_apps_is_an_invalid_spec_until_it_is_mended() {
    let mut sim = Sim::with_manifests(&["keptn-crds", "app-discovery"]);
    sim.apply(
        &json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnApp",
        "metadata": {"name": "cart", "namespace": NS, "labels": {"team": "shop"}},
        "spec": {"version": "2.0", "workloads": [{"name": "cart-api", "version": "2.0"}]}})
        .to_string(),
    )
    .unwrap();
    let with_selector = |selector: Value| discovery("discovery", json!({ "selector": selector }));
    sim.apply(&with_selector(json!({"matchLabels": {"team": "shop"}})))
        .unwrap();
    sim.run_until_quiet();
    let users = app(&sim, "cart").unwrap();
    assert_eq!(
        users["metadata"]["ownerReferences"][0]["name"], "discovery",
        "adopted before the hook is called"
    );
    let ready = &sim.get("AppDiscovery", NS, "discovery").unwrap()["status"]["conditions"][0];
    assert_eq!(ready["reason"], "InvalidSpec", "{ready}");
    assert_eq!(
        ready["message"],
        "spec.selector selects objects without app.kubernetes.io/managed-by: keptn, so \
         Metacontroller adopts the KeptnApps users made themselves and deleting this AppDiscovery \
         deletes them; put app.kubernetes.io/managed-by: keptn in spec.selector.matchLabels"
    );

    sim.apply(&with_selector(
        json!({"matchLabels": {"team": "shop", "app.kubernetes.io/managed-by": "keptn"}}),
    ))
    .unwrap();
    sim.run_until_quiet();
    let released = app(&sim, "cart").unwrap();
    assert_eq!(released["metadata"]["ownerReferences"], json!([]));
    let ready = &sim.get("AppDiscovery", NS, "discovery").unwrap()["status"]["conditions"][0];
    assert_eq!(ready["reason"], "Synced", "{ready}");
    sim.delete("AppDiscovery", NS, "discovery").unwrap();
    sim.run_until_quiet();
    let kept = app(&sim, "cart").expect("a user's app outlives the AppDiscovery");
    assert_eq!(kept["spec"], users["spec"]);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

// ---- random walks ----
//
// Keptn's webhook announcing rollouts of two apps and of a user's own app (requests, single- or
// multi-service), workloads made, moved to other versions and deleted, the user editing their
// app, the window changed, time passing. Every request Metacontroller deletes was due (§4.1) or
// named the user's app; no KeptnApp is ever deleted; the user's app stays exactly as the user
// last wrote it, and its requests go at once; and an app whose request was handled in a step
// carries the version rule over the workloads of that moment (§4.2) and one entry per workload.
// At the end, once the longest window has passed, no request is left.

use common::walk::{seeds, Rng};
use std::collections::BTreeMap;

const APPS: [&str; 3] = ["cart", "shop", "legacy"];
const USERS_APP: &str = "legacy";

/// §4.2 item 3: one workload's version as it is; otherwise the first ten hex digits of SHA-256
/// over `<name>-<version>` of each workload in name order.
fn version_rule(workloads: &BTreeMap<String, String>) -> String {
    if let [(_, version)] = workloads.iter().collect::<Vec<_>>()[..] {
        return version.clone();
    }
    let text: String = workloads.iter().map(|(n, v)| format!("{n}-{v}")).collect();
    common::sha256_hex10(&text)
}

/// The namespace's KeptnWorkloads of `app`: name to version.
fn workloads_of(sim: &Sim, app: &str) -> BTreeMap<String, String> {
    sim.list("KeptnWorkload", NS)
        .into_iter()
        .filter(|w| w["spec"]["app"] == app)
        .map(|w| {
            let name = w["metadata"]["name"].as_str().unwrap().to_owned();
            (name, w["spec"]["version"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// A request goes only when it is due at `now`, or names an app a user made (§4.1).
fn handled_when_due(store: &sim::Store, request: &Value, now: i64) -> Result<(), String> {
    if request["kind"] != "KeptnAppCreationRequest" {
        return Err(format!(
            "{} {} deleted",
            request["kind"], request["metadata"]["name"]
        ));
    }
    let discovery = &store.list("AppDiscovery", Some(NS))[0];
    let window = discovery["spec"]["timeoutSeconds"].as_i64().unwrap_or(30);
    let single = request["metadata"]["annotations"]["keptn.sh/app-type"] == "single-service";
    let created = time::OffsetDateTime::parse(
        request["metadata"]["creationTimestamp"].as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
    .unix_timestamp();
    let app = request["spec"]["appName"].as_str().unwrap();
    if single || now > created + window || app == USERS_APP {
        return Ok(());
    }
    Err(format!(
        "{app}'s request made at {created} handled at {now} under a {window} s window"
    ))
}

/// One walk of `steps` random steps from `seed`; each step is said on standard error, which
/// the test shows when it fails.
fn app_discovery_walk(seed: u64, steps: usize, caches_behind: bool) {
    eprintln!("seed {seed}");
    let mut rng = Rng::new(seed);
    let mut sim = sim();
    // The clock stands still while Metacontroller syncs; the checks read it from here.
    let now = std::rc::Rc::new(std::cell::Cell::new(sim.now()));
    let at = now.clone();
    sim.delete_checks.push(Box::new(move |before, deleted| {
        // Under the window the sync read: an edit of it not heard of yet is one made after.
        handled_when_due(&before.cached, deleted, at.get())
    }));
    sim.apply(
        &json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnApp",
        "metadata": {"name": USERS_APP, "namespace": NS},
        "spec": {"version": "1.0.0", "workloads": [{"name": "web", "version": "1.0.0"}]}})
        .to_string(),
    )
    .unwrap();
    sim.run_until_quiet();
    let mut users_app = app(&sim, USERS_APP).unwrap();
    for step in 0..steps {
        let app_name = *rng.pick(&APPS);
        let requests_before: Vec<String> = sim
            .list("KeptnAppCreationRequest", NS)
            .into_iter()
            .map(|r| r["metadata"]["name"].as_str().unwrap().to_owned())
            .collect();
        match rng.below(if caches_behind { 115 } else { 100 }) {
            0..=29 => {
                // Keptn's webhook names a request after its app, and makes none while one is
                // there.
                if !requests_before.iter().any(|r| r == app_name) {
                    let single = rng.chance(25);
                    eprintln!("{step}: request for {app_name}, single-service: {single}");
                    request(&mut sim, app_name, app_name, single);
                }
            }
            30..=54 => {
                let name = format!("{app_name}-w{}", 1 + rng.below(3));
                let version = format!("0.1.{}", rng.below(4));
                eprintln!("{step}: workload {name} at {version}");
                workload(&mut sim, &name, app_name, &version);
            }
            55..=59 => {
                let name = format!("{app_name}-w{}", 1 + rng.below(3));
                if sim.get("KeptnWorkload", NS, &name).is_some() {
                    eprintln!("{step}: workload {name} deleted");
                    sim.delete("KeptnWorkload", NS, &name).unwrap();
                }
            }
            60..=64 => {
                let mut edited = users_app.clone();
                edited["spec"]["version"] = json!(format!("1.0.{step}"));
                eprintln!("{step}: the user edits {USERS_APP}");
                sim.apply(&edited.to_string()).unwrap();
                users_app = app(&sim, USERS_APP).unwrap();
            }
            65..=69 => {
                let window = rng.below(61);
                eprintln!("{step}: window {window} s");
                sim.apply(&discovery("discovery", json!({"timeoutSeconds": window})))
                    .unwrap();
            }
            70..=99 => {
                let seconds = 1 + rng.below(20) as i64;
                eprintln!("{step}: {seconds} s on");
                sim.advance(seconds);
            }
            100..=107 => {
                let (kind, name) = *rng.pick(&[
                    ("KeptnAppCreationRequest", app_name),
                    ("KeptnApp", app_name),
                    ("AppDiscovery", "discovery"),
                ]);
                if name != USERS_APP && sim.get(kind, NS, name).is_some() {
                    eprintln!("{step}: the caches stop hearing of {kind} {name}");
                    sim.hold_in_caches(kind, NS, name);
                }
            }
            108..=110 => {
                let late = sim.turn_over_creates_heard_late();
                eprintln!("{step}: creates heard of late: {late}");
            }
            _ => {
                eprintln!("{step}: the caches catch up");
                sim.catch_up_caches();
            }
        }
        now.set(sim.now());
        sim.run_until_quiet();
        // With the caches behind, an app's update meets a Conflict, which Metacontroller retries.
        let conflict = |e: &String| caches_behind && e.contains(sim::CONFLICT_CACHES_BEHIND);
        assert!(
            sim.sync_errors.iter().all(conflict),
            "{:?}",
            sim.sync_errors
        );
        assert!(sim.violations.is_empty(), "{:?}", sim.violations);
        // The user's app stays as the user wrote it, its requests go at once (§4.1 step 2),
        // and the status does not count it among the apps made.
        assert_eq!(
            app(&sim, USERS_APP).as_ref(),
            Some(&users_app),
            "the user's app"
        );
        assert!(sim.get("KeptnAppCreationRequest", NS, USERS_APP).is_none());
        let status = &sim.get("AppDiscovery", NS, "discovery").unwrap()["status"];
        assert_eq!(status["conditions"][0]["reason"], "Synced", "{status}");
        assert!(status["apps"].get(USERS_APP).is_none(), "{status}");
        // A request is spent without its app only while the caches are behind on that app, a
        // window DECISIONS names (app-discovery); the next request mends it, as the end of the
        // walk checks.
        for handled in requests_before
            .iter()
            .filter(|r| sim.get("KeptnAppCreationRequest", NS, r).is_none())
            .filter(|r| *r != USERS_APP)
        {
            let made = app(&sim, handled).expect("an app for each handled request");
            let workloads = workloads_of(&sim, handled);
            let mut entries: Vec<(String, String)> = made["spec"]["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|w| {
                    let name = format!("{handled}-{}", w["name"].as_str().unwrap());
                    (name, w["version"].as_str().unwrap().to_owned())
                })
                .collect();
            entries.sort();
            let version = version_rule(&workloads);
            let workloads: Vec<(String, String)> = workloads.into_iter().collect();
            if made["spec"]["version"] == version.as_str() && entries == workloads {
                continue;
            }
            // Held, or made while creates were heard of late, since the caches last caught up.
            assert!(
                sim.holds("KeptnApp", NS, handled),
                "{handled}'s request spent with its app heard of: {} {entries:?}, not {version} \
                 {workloads:?}",
                made["spec"]["version"]
            );
            eprintln!("{step}: {handled}'s request spent on an app the caches are behind on");
        }
    }
    // Once the caches have caught up and the longest window has passed, every request has been
    // handled, and a request for each app brings it to the version rule.
    sim.caches_on_time();
    now.set(sim.now() + 61);
    sim.advance(61);
    sim.run_until_quiet();
    assert_eq!(
        sim.list("KeptnAppCreationRequest", NS),
        Vec::<&Value>::new()
    );
    for name in APPS.iter().filter(|a| **a != USERS_APP) {
        request(&mut sim, name, name, true);
        sim.run_until_quiet();
        let made = app(&sim, name).expect("an app for each request");
        let workloads = workloads_of(&sim, name);
        assert_eq!(made["spec"]["version"], version_rule(&workloads), "{name}");
    }
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
}

/// Random walks of an AppDiscovery's namespace (see above); `WALK_SEEDS=<count>` walks more,
/// `WALK_SEED=<n>` replays one.
#[test]
fn random_walks_handle_requests_when_due_and_never_touch_a_users_app() {
    for seed in seeds(8) {
        app_discovery_walk(seed, 60, false);
    }
}

/// The walks above with Metacontroller's caches behind now and then on the AppDiscovery's
/// children (a request's or an app's changes not heard of, apps made heard of late) and on the
/// AppDiscovery itself: a request still goes only when due under the window the sync read, no
/// app is deleted, the user's app is untouched, and once the caches catch up a request for each
/// app brings it to the version rule. A request spent meanwhile is one of the windows DECISIONS
/// names.
#[test]
fn random_walks_with_caches_behind_lose_no_app_and_mend_with_the_next_request() {
    for seed in seeds(16) {
        app_discovery_walk(seed, 60, true);
    }
}
