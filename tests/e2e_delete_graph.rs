//! delete-graph end to end: the real server, the project's manifests, the simulator and its fake
//! kubelet. After every deletion the simulator checks that no Pod went while a dependent that
//! needs it running was pending or running.

mod common;
mod sim;

use serde_json::{json, Value};
use sim::{Sim, Store};
use std::cell::RefCell;
use std::rc::Rc;

const NS: &str = "shop";

fn is_live(p: &Value) -> bool {
    p["metadata"].get("deletionTimestamp").is_none()
        && matches!(
            p["status"]["phase"].as_str(),
            None | Some("Pending") | Some("Running")
        )
}

/// The invariant: a Pod of workload D is deleted only when no live Pod needs D running.
fn no_early_delete(store: &Store, deleted: &Value) -> Result<(), String> {
    let ns = deleted["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let Some(d) = deleted["metadata"]["labels"]["metahooks.dev/workload"].as_str() else {
        return Ok(());
    };
    for p in store.list("Pod", Some(ns)) {
        let deps: Value = serde_json::from_str(
            p["metadata"]["annotations"]["metahooks.dev/dependencies"]
                .as_str()
                .unwrap_or("{}"),
        )
        .unwrap_or(json!({}));
        if deps[d] == "ADD_COND_RUNNING" && is_live(p) {
            return Err(format!(
                "{} deleted while {} (needs it running) is {}",
                deleted["metadata"]["name"], p["metadata"]["name"], p["status"]["phase"]
            ));
        }
    }
    Ok(())
}

/// A simulator on the delete-graph manifests, with the invariant checked and the workloads of
/// deleted Pods recorded in deletion order.
fn sim() -> (Sim, Rc<RefCell<Vec<String>>>) {
    with_checks(Sim::with_manifests(&["delete-graph"]))
}

/// `sim` with the deletion invariant checked and deleted Pods' workloads recorded in order.
fn with_checks(mut sim: Sim) -> (Sim, Rc<RefCell<Vec<String>>>) {
    sim.delete_checks.push(Box::new(no_early_delete));
    let order = Rc::new(RefCell::new(Vec::new()));
    let record = order.clone();
    sim.delete_checks.push(Box::new(move |_, pod| {
        let w = pod["metadata"]["labels"]["metahooks.dev/workload"]
            .as_str()
            .unwrap_or_default();
        record.borrow_mut().push(w.to_owned());
        Ok(())
    }));
    (sim, order)
}

fn set(workloads: Value) -> String {
    json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet",
           "metadata": {"name": "shop", "namespace": NS}, "spec": {"workloads": workloads}})
    .to_string()
}

fn workload(image: &str, deps: Value, policy: &str) -> Value {
    json!({"dependencies": deps, "restartPolicy": policy,
           "template": {"spec": {"containers": [{"name": "main", "image": image}]}}})
}

fn chain() -> Value {
    json!({
        "database": workload("postgres:16", json!({}), "ALWAYS"),
        "backend": workload("api:1", json!({"database": "ADD_COND_RUNNING"}), "ALWAYS"),
        "frontend": workload("web:1", json!({"backend": "ADD_COND_RUNNING"}), "ALWAYS"),
    })
}

/// Workloads that have a non-terminating Pod.
fn running(sim: &Sim) -> Vec<String> {
    let mut w: Vec<String> = sim
        .list("Pod", NS)
        .into_iter()
        .filter(|p| p["metadata"].get("deletionTimestamp").is_none())
        .map(|p| {
            p["metadata"]["labels"]["metahooks.dev/workload"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    w.sort();
    w
}

fn status(sim: &Sim, w: &str) -> (String, String) {
    let s = &sim.get("WorkloadSet", NS, "shop").unwrap()["status"]["workloads"][w];
    (
        s["state"].as_str().unwrap_or("").to_owned(),
        s["subState"].as_str().unwrap_or("").to_owned(),
    )
}

fn start_chain(sim: &mut Sim) {
    sim.apply(&set(chain())).unwrap();
    sim.run_until_quiet();
    assert_eq!(running(sim), ["database"]);
    sim.set_workload_phase(NS, "database", "Running");
    sim.run_until_quiet();
    assert_eq!(running(sim), ["backend", "database"]);
    sim.set_workload_phase(NS, "backend", "Running");
    sim.run_until_quiet();
    assert_eq!(running(sim), ["backend", "database", "frontend"]);
    sim.set_workload_phase(NS, "frontend", "Running");
    sim.run_until_quiet();
}

#[test]
fn chain_starts_in_order() {
    let (mut sim, _) = sim();
    sim.apply(&set(chain())).unwrap();
    sim.run_until_quiet();
    assert_eq!(
        status(&sim, "backend"),
        ("Pending".into(), "WaitingToStart".into())
    );
    // Pending is not enough for ADD_COND_RUNNING.
    sim.set_workload_phase(NS, "database", "Pending");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["database"]);
    start_chain(&mut sim);
    assert_eq!(status(&sim, "frontend"), ("Running".into(), "Ok".into()));
    let ws = sim.get("WorkloadSet", NS, "shop").unwrap();
    assert_eq!(
        ws["status"]["deleteGraph"],
        json!({
        "backend": {"frontend": "DelCondNotPendingNorRunning"},
        "database": {"backend": "DelCondNotPendingNorRunning"}})
    );
    assert_eq!(ws["status"]["conditions"][0]["type"], "Valid");
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// A WorkloadSet's name is the value of its Pods' `metahooks.dev/workload-set` label, which holds
/// at most 63 characters: the CRD refuses a longer name, and a set of the longest name runs.
#[test]
fn a_set_name_is_at_most_what_a_label_value_holds() {
    let (mut sim, _) = sim();
    let named = |name: &str| {
        json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet",
               "metadata": {"name": name, "namespace": NS},
               "spec": {"workloads": {"database": workload("postgres:16", json!({}), "ALWAYS")}}})
        .to_string()
    };
    let error = sim.apply(&named(&"s".repeat(64))).unwrap_err();
    assert!(error.contains("metadata.name"), "{error}");
    let longest = "s".repeat(63);
    sim.apply(&named(&longest)).unwrap();
    sim.run_until_quiet();
    let pods = sim.list("Pod", NS);
    assert_eq!(pods.len(), 1);
    assert_eq!(
        pods[0]["metadata"]["labels"]["metahooks.dev/workload-set"],
        longest.as_str()
    );
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

#[test]
fn removing_the_database_waits_for_the_backend() {
    let (sim, order) = sim();
    remove_database_then_backend(sim, order);
}

/// With ETags on both sides (`--etag`, `webhook.etag.enabled`) unchanged answers come back as
/// 304s, Metacontroller uses the answer it kept, and the story ends exactly as without them.
#[test]
fn with_etags_unchanged_answers_are_304_and_the_outcome_is_the_same() {
    let (plain, order) = sim();
    let plain = remove_database_then_backend(plain, order);
    let (tagged, order) = with_checks(Sim::with_manifests_and_etags(&["delete-graph"]));
    let tagged = remove_database_then_backend(tagged, order);

    let statuses = |sim: &Sim, status: u16| sim.calls.iter().filter(|c| c.status == status).count();
    assert_eq!(statuses(&plain, 304), 0);
    assert!(statuses(&tagged, 304) > 0, "{:?}", tagged.calls);
    assert!(statuses(&tagged, 200) < statuses(&plain, 200));
    assert_eq!(
        tagged.calls.len(),
        plain.calls.len(),
        "the same syncs, in the same order"
    );
    assert_eq!(tagged.list("Pod", NS), plain.list("Pod", NS));
    assert_eq!(
        tagged.get("WorkloadSet", NS, "shop"),
        plain.get("WorkloadSet", NS, "shop")
    );
    assert!(tagged.sync_errors.is_empty(), "{:?}", tagged.sync_errors);
}

/// The story of `removing_the_database_waits_for_the_backend`, returning the simulator.
fn remove_database_then_backend(mut sim: Sim, order: Rc<RefCell<Vec<String>>>) -> Sim {
    start_chain(&mut sim);
    let mut w = chain();
    w.as_object_mut().unwrap().remove("database");
    sim.apply(&set(w.clone())).unwrap();
    sim.run_until_quiet();
    assert_eq!(
        status(&sim, "database"),
        ("Stopping".into(), "WaitingToStop".into())
    );
    assert!(running(&sim).contains(&"database".to_owned()));
    // Backend removed too: it waits for the frontend (still in the spec, running), the database
    // waits for the backend.
    w.as_object_mut().unwrap().remove("backend");
    sim.apply(&set(w)).unwrap();
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["backend", "database", "frontend"]);
    // Frontend finishes: backend is released, and once it is terminating, the database.
    sim.set_workload_phase(NS, "frontend", "Succeeded");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["frontend"]);
    assert_eq!(*order.borrow(), ["backend", "database"]);
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
    sim
}

#[test]
fn a_job_gates_a_service() {
    let (mut sim, _) = sim();
    sim.apply(&set(json!({
        "migrate": workload("migrate:1", json!({}), "NEVER"),
        "api": workload("api:1", json!({"migrate": "ADD_COND_SUCCEEDED"}), "ALWAYS"),
    })))
    .unwrap();
    sim.run_until_quiet();
    sim.set_workload_phase(NS, "migrate", "Running");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["migrate"]);
    sim.set_workload_phase(NS, "migrate", "Succeeded");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["api", "migrate"]);
    assert!(sim.violations.is_empty());
}

#[test]
fn a_workload_gated_on_a_failure() {
    let (mut sim, _) = sim();
    sim.apply(&set(json!({
        "task": workload("task:1", json!({}), "NEVER"),
        "alert": workload("alert:1", json!({"task": "ADD_COND_FAILED"}), "NEVER"),
    })))
    .unwrap();
    sim.run_until_quiet();
    sim.set_workload_phase(NS, "task", "Succeeded");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["task"], "success does not start the alert");
    // A new task run that fails (the old Pod deleted by someone, the new one fails).
    let old = sim.workload_pod(NS, "task").unwrap();
    sim.delete("Pod", NS, &old).unwrap();
    sim.finish_terminations();
    sim.run_until_quiet();
    sim.set_workload_phase(NS, "task", "Failed");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["alert", "task"]);
}

#[test]
fn template_update_of_a_dependency_under_a_running_dependent() {
    let (mut sim, _) = sim();
    start_chain(&mut sim);
    let old_db = sim.workload_pod(NS, "database").unwrap();
    let mut w = chain();
    w["database"]["template"]["spec"]["containers"][0]["image"] = json!("postgres:17");
    sim.apply(&set(w)).unwrap();
    sim.run_until_quiet();
    // The old Pod waits while backend runs; no new database Pod yet.
    assert_eq!(
        sim.workload_pod(NS, "database").as_deref(),
        Some(old_db.as_str())
    );
    assert_eq!(
        status(&sim, "database"),
        ("Stopping".into(), "WaitingToStop".into())
    );
    // Backend (and so frontend) stop: the old database goes, then the new one starts.
    sim.set_workload_phase(NS, "frontend", "Succeeded");
    sim.set_workload_phase(NS, "backend", "Succeeded");
    sim.run_until_quiet();
    assert!(sim.get("Pod", NS, &old_db).unwrap()["metadata"]["deletionTimestamp"].is_string());
    sim.finish_terminations();
    sim.run_until_quiet();
    let new_db = sim.workload_pod(NS, "database").unwrap();
    assert_ne!(new_db, old_db);
    assert_eq!(
        sim.get("Pod", NS, &new_db).unwrap()["spec"]["containers"][0]["image"],
        "postgres:17"
    );
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
}

#[test]
fn deleting_the_set_tears_down_in_reverse_order() {
    let (mut sim, order) = sim();
    start_chain(&mut sim);
    let ws = sim.get("WorkloadSet", NS, "shop").unwrap();
    assert_eq!(
        ws["metadata"]["finalizers"],
        json!(["metacontroller.io/compositecontroller-delete-graph"])
    );
    sim.delete("WorkloadSet", NS, "shop").unwrap();
    sim.run_until_quiet();
    // One link per sync: a dependency goes once its dependent is terminating.
    assert_eq!(*order.borrow(), ["frontend", "backend", "database"]);
    assert_eq!(running(&sim), Vec::<String>::new());
    assert!(
        sim.get("WorkloadSet", NS, "shop").is_some(),
        "held until no Pod is left"
    );
    sim.finish_terminations();
    sim.run_until_quiet();
    assert!(
        sim.get("WorkloadSet", NS, "shop").is_none(),
        "finalized and gone"
    );
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
}

/// manifests/examples/workloadset.yaml does what its comment says: each workload starts once
/// its dependencies meet their conditions (migrate after the database runs, the backend after
/// migrate succeeded), and deleting the set takes the Pods in reverse order.
#[test]
fn the_example_set_starts_in_dependency_order_and_goes_in_reverse() {
    let (mut sim, order) = sim();
    sim.apply_example("workloadset", NS).unwrap();
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["database"]);
    sim.set_workload_phase(NS, "database", "Running");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["database", "migrate"]);
    sim.set_workload_phase(NS, "migrate", "Running");
    sim.run_until_quiet();
    assert_eq!(
        running(&sim),
        ["database", "migrate"],
        "migrate has not succeeded yet"
    );
    sim.set_workload_phase(NS, "migrate", "Succeeded");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["backend", "database", "migrate"]);
    sim.set_workload_phase(NS, "backend", "Running");
    sim.run_until_quiet();
    assert_eq!(
        running(&sim),
        ["backend", "database", "frontend", "migrate"]
    );
    sim.set_workload_phase(NS, "frontend", "Running");
    sim.run_until_quiet();
    assert_eq!(
        sim.get_row("WorkloadSet", NS, "shop"),
        sim::row(&[
            ("Name", "shop"),
            ("Valid", "True"),
            ("Age", &sim.created("WorkloadSet", NS, "shop")),
            ("Reason", "Valid")
        ])
    );

    sim.delete("WorkloadSet", NS, "shop").unwrap();
    sim.run_until_quiet();
    sim.finish_terminations();
    sim.run_until_quiet();
    assert_eq!(
        *order.borrow(),
        ["frontend", "migrate", "backend", "database"]
    );
    assert!(sim.get("WorkloadSet", NS, "shop").is_none());
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

#[test]
fn a_cycle_is_rejected_at_admission() {
    let (mut sim, _) = sim();
    let err = sim
        .apply(&set(json!({
            "a": workload("a", json!({"b": "ADD_COND_RUNNING"}), "NEVER"),
            "b": workload("b", json!({"a": "ADD_COND_RUNNING"}), "NEVER"),
        })))
        .unwrap_err();
    assert_eq!(err, "workload dependency 'a' is part of a cycle.");
    assert!(sim.get("WorkloadSet", NS, "shop").is_none());
}

/// A WorkloadSet whose spec is invalid can exist: written before the webhook was installed, or
/// admitted by an older metahooks under fewer rules. Sync freezes it (§6.1), and it must still
/// take Metacontroller's finalizer and be deletable: an update that leaves the spec as it was
/// (a label, a finalizer) is admitted, with a warning; one that changes the spec and keeps it
/// invalid is refused as before.
#[test]
fn an_invalid_workload_set_that_exists_can_still_be_labelled_and_deleted() {
    let (mut sim, _) = sim();
    let cycle = json!({
        "a": workload("a", json!({"b": "ADD_COND_RUNNING"}), "NEVER"),
        "b": workload("b", json!({"a": "ADD_COND_RUNNING"}), "NEVER"),
    });
    sim.apply_before_webhooks(&set(cycle.clone())).unwrap();
    sim.run_until_quiet();
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
    let ws = sim.get("WorkloadSet", NS, "shop").unwrap().clone();
    assert_eq!(
        ws["metadata"]["finalizers"],
        json!(["metacontroller.io/compositecontroller-delete-graph"])
    );
    assert_eq!(
        sim.get_row("WorkloadSet", NS, "shop"),
        sim::row(&[
            ("Name", "shop"),
            ("Valid", "False"),
            ("Age", &sim.created("WorkloadSet", NS, "shop")),
            ("Reason", "CycleInDependencies")
        ])
    );
    assert!(running(&sim).is_empty(), "frozen: nothing started");

    let mut edited = cycle;
    edited["c"] = workload("c", json!({}), "NEVER");
    let err = sim.apply(&set(edited)).unwrap_err();
    assert_eq!(err, "workload dependency 'a' is part of a cycle.");
    let mut labelled = ws;
    labelled["metadata"]["labels"] = json!({"team": "shop"});
    sim.apply(&labelled.to_string()).unwrap();

    sim.delete("WorkloadSet", NS, "shop").unwrap();
    sim.run_until_quiet();
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
    assert!(
        sim.get("WorkloadSet", NS, "shop").is_none(),
        "finalized and gone"
    );
}

/// Removing metahooks as the README's "Removing metahooks" says: a WorkloadSet deleted with
/// `--cascade=orphan` goes once Metacontroller's finalize hook sees no Pod of its own, and its
/// Pods stay, running and owned by nothing. Deleted after the controller instead, a set keeps
/// Metacontroller's finalizer and hangs in deletion (contract §9.2), which is why the README
/// deletes the sets first.
#[test]
fn removing_metahooks_orphaning_a_set_keeps_its_pods() {
    let (mut sim, order) = sim();
    start_chain(&mut sim);
    sim.delete_orphaning("WorkloadSet", NS, "shop").unwrap();
    sim.run_until_quiet();
    assert!(
        sim.get("WorkloadSet", NS, "shop").is_none(),
        "finalized and gone"
    );
    assert!(
        order.borrow().is_empty(),
        "no Pod deleted: {:?}",
        order.borrow()
    );
    assert_eq!(running(&sim), ["backend", "database", "frontend"]);
    for pod in sim.list("Pod", NS) {
        assert_eq!(pod["metadata"]["ownerReferences"], json!([]));
    }
    sim.remove_controller("CompositeController", "delete-graph");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["backend", "database", "frontend"]);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);

    let (mut sim, order) = self::sim();
    start_chain(&mut sim);
    sim.remove_controller("CompositeController", "delete-graph");
    sim.delete("WorkloadSet", NS, "shop").unwrap();
    sim.run_until_quiet();
    let set = sim.get("WorkloadSet", NS, "shop").expect("held");
    assert!(set["metadata"].get("deletionTimestamp").is_some());
    assert_eq!(
        set["metadata"]["finalizers"],
        json!(["metacontroller.io/compositecontroller-delete-graph"])
    );
    assert!(order.borrow().is_empty());
}

/// A set made again under its old name after a delete with `--cascade=orphan` (metahooks removed
/// and installed again): Metacontroller does not adopt the Pods the first one made, whose
/// `controller-uid` label names the first one's uid, so the new set sees none of them and waits
/// for its first workload, whose Pod it cannot create (the create meets `AlreadyExists`).
/// Labelled with the new uid, as the README says, the Pods are adopted as they run.
#[test]
fn a_set_made_again_takes_back_its_pods_once_relabelled() {
    let (mut sim, order) = sim();
    start_chain(&mut sim);
    let pods = |sim: &Sim| {
        let mut pods: Vec<Value> = sim.list("Pod", NS).into_iter().cloned().collect();
        pods.sort_by_key(|p| p["metadata"]["name"].as_str().unwrap().to_owned());
        pods
    };
    let before = pods(&sim);
    sim.delete_orphaning("WorkloadSet", NS, "shop").unwrap();
    sim.run_until_quiet();
    sim.apply(&set(chain())).unwrap();
    sim.run_until_quiet();
    assert_eq!(status(&sim, "database").0, "Pending");
    assert_eq!(status(&sim, "frontend").0, "Pending");
    for pod in pods(&sim) {
        assert_eq!(pod["metadata"]["ownerReferences"], json!([]), "not adopted");
    }

    let uid = sim.get("WorkloadSet", NS, "shop").unwrap()["metadata"]["uid"].clone();
    for mut pod in pods(&sim) {
        pod["metadata"]["labels"]["controller-uid"] = uid.clone();
        sim.apply(&pod.to_string()).unwrap();
    }
    sim.run_until_quiet();
    for w in ["database", "backend", "frontend"] {
        assert_eq!(status(&sim, w).0, "Running", "{w}");
    }
    for (pod, was) in pods(&sim).iter().zip(&before) {
        assert_eq!(
            pod["metadata"]["uid"], was["metadata"]["uid"],
            "the same Pod"
        );
        assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], uid);
    }
    assert!(order.borrow().is_empty(), "no Pod deleted");
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// Metacontroller builds each request from its informer caches, which can be behind the API
/// server (DECISIONS, delete-graph). A dependent seen late holds its dependency back: here the
/// backend has stopped and gone while the caches still see it running, so the database stays
/// until they catch up.
#[test]
fn a_dependent_the_caches_see_late_holds_its_dependency_back() {
    let (mut sim, order) = sim();
    start_chain(&mut sim);
    let backend = sim.workload_pod(NS, "backend").unwrap();
    sim.hold_in_caches("Pod", NS, &backend);
    sim.set_workload_phase(NS, "backend", "Succeeded");
    sim.store_delete_direct("Pod", NS, &backend);
    sim.finish_terminations();
    sim.delete("WorkloadSet", NS, "shop").unwrap();
    sim.run_until_quiet();
    sim.finish_terminations();
    sim.run_until_quiet();
    assert_eq!(*order.borrow(), ["frontend"]);
    assert_eq!(
        running(&sim),
        ["database"],
        "held back by a backend seen running"
    );

    sim.catch_up_caches();
    sim.run_until_quiet();
    assert_eq!(*order.borrow(), ["frontend", "database"]);
    sim.finish_terminations();
    sim.run_until_quiet();
    assert!(sim.get("WorkloadSet", NS, "shop").is_none());
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
}

/// The one window a cache behind opens (DECISIONS, delete-graph): the backend's Pod is created,
/// and the set is deleted before the caches hear of the Pod. The teardown sees no dependent of
/// the database and deletes it while the backend starts; the backend follows once the caches
/// catch up. No request carries the Pod, so the hook cannot tell.
#[test]
fn a_dependent_the_caches_have_not_heard_of_lets_its_dependency_go() {
    let (mut sim, order) = sim();
    sim.apply(&set(chain())).unwrap();
    sim.run_until_quiet();
    sim.set_workload_phase(NS, "database", "Running");
    sim.run_until_quiet();
    let backend = sim.workload_pod(NS, "backend").unwrap();
    sim.hide_from_caches("Pod", NS, &backend);
    sim.delete("WorkloadSet", NS, "shop").unwrap();
    sim.run_until_quiet();
    assert_eq!(*order.borrow(), ["database"]);
    assert_eq!(sim.violations.len(), 1, "{:?}", sim.violations);
    assert!(
        sim.violations[0].contains("-database-") && sim.violations[0].contains("-backend-"),
        "{:?}",
        sim.violations
    );

    sim.catch_up_caches();
    sim.run_until_quiet();
    assert_eq!(*order.borrow(), ["database", "backend"]);
    sim.finish_terminations();
    sim.run_until_quiet();
    assert!(sim.get("WorkloadSet", NS, "shop").is_none());
    assert_eq!(sim.violations.len(), 1);
}
