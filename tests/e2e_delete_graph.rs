//! delete-graph end to end: the real server, the project's manifests, the simulator and its fake
//! kubelet. Before every create and every deletion the simulator holds Metacontroller's write to
//! the gating rules (§5), read again here from the store: no Pod goes while a dependent that
//! needs it running is pending or running, and none starts before its dependencies meet their
//! conditions or while an older Pod of its workload is left.

mod common;
mod sim;

use serde_json::{json, Value};
use sim::{Before, Sim, Store};
use std::cell::RefCell;
use std::rc::Rc;

const NS: &str = "shop";

/// Pending (or no phase yet) or Running, and not terminating: a Pod that holds its dependencies.
fn is_live(p: &Value) -> bool {
    p["metadata"].get("deletionTimestamp").is_none()
        && matches!(
            p["status"]["phase"].as_str(),
            None | Some("Pending") | Some("Running")
        )
}

fn workload_of(pod: &Value) -> &str {
    pod["metadata"]["labels"]["metahooks.dev/workload"]
        .as_str()
        .unwrap_or_default()
}

fn terminating(pod: &Value) -> bool {
    pod["metadata"].get("deletionTimestamp").is_some()
}

/// The name §3 gives the Pod of workload `w` of set `set`: `<set>-<w>-<hash>`, the hash the first
/// 10 hex digits of SHA-256 over the canonical JSON of the template with its restart policy
/// mapped (serde_json's maps are sorted here, so its text is canonical). None without a template.
fn desired_name(set: &Value, w: &str, workload: &Value) -> Option<String> {
    let mut rendered = workload.get("template").filter(|t| t.is_object())?.clone();
    let policy = match workload["restartPolicy"].as_str() {
        Some("ALWAYS") => "Always",
        Some("ON_FAILURE") => "OnFailure",
        _ => "Never",
    };
    rendered["spec"]["restartPolicy"] = json!(policy);
    let hash = common::sha256_hex10(&serde_json::to_string(&rendered).unwrap());
    Some(format!("{}-{w}-{hash}", set.as_str()?))
}

/// What the store says of a Pod's set when Metacontroller creates or deletes the Pod: the spec's
/// workloads (none in a teardown) and the set's Pods, each with whether it is current.
struct Seen<'s> {
    workloads: Value,
    pods: Vec<(&'s Value, bool)>,
}

impl<'s> Seen<'s> {
    fn of(store: &'s Store, pod: &Value) -> Seen<'s> {
        let set_of = |o: &Value| o["metadata"]["labels"]["metahooks.dev/workload-set"].clone();
        let set = store
            .list("WorkloadSet", Some(NS))
            .into_iter()
            .find(|s| s["metadata"]["name"] == set_of(pod));
        let workloads = match set {
            Some(s) if !terminating(s) => s["spec"]["workloads"].clone(),
            _ => json!({}),
        };
        let pods = store
            .list("Pod", Some(NS))
            .into_iter()
            .filter(|p| set_of(p) == set_of(pod))
            .map(|p| {
                let w = workload_of(p);
                let current = desired_name(&set_of(pod), w, &workloads[w]).as_deref()
                    == p["metadata"]["name"].as_str();
                (p, current)
            })
            .collect();
        Seen { workloads, pods }
    }

    /// The dependencies a Pod answers to: its workload's in the spec when it is current, those
    /// its annotation recorded otherwise (§4).
    fn dependencies(&self, pod: &Value, current: bool) -> Value {
        if current {
            return self.workloads[workload_of(pod)]["dependencies"].clone();
        }
        pod["metadata"]["annotations"]["metahooks.dev/dependencies"]
            .as_str()
            .and_then(|a| serde_json::from_str(a).ok())
            .unwrap_or(json!({}))
    }

    /// The delete graph's edges (§4): from each dependency to each dependent that needs it
    /// running, by the spec and by the obsolete Pods' annotations.
    fn edges(&self) -> BTreeSet<(String, String)> {
        let mut edges = BTreeSet::new();
        let running = |deps: &Value, x: &str, edges: &mut BTreeSet<(String, String)>| {
            for (d, c) in deps.as_object().into_iter().flatten() {
                if c == "ADD_COND_RUNNING" {
                    edges.insert((d.clone(), x.to_owned()));
                }
            }
        };
        for (x, w) in self.workloads.as_object().into_iter().flatten() {
            running(&w["dependencies"], x, &mut edges);
        }
        for (p, current) in &self.pods {
            if !current {
                running(&self.dependencies(p, false), workload_of(p), &mut edges);
            }
        }
        edges
    }

    /// Whether `d` and `x` lie in one strongly connected component of the graph restricted to
    /// the workloads with an obsolete, non-terminating Pod (§5's deadlock breaker).
    fn one_obsolete_component(&self, d: &str, x: &str) -> bool {
        let obsolete: BTreeSet<&str> = self
            .pods
            .iter()
            .filter(|(p, current)| !current && !terminating(p))
            .map(|(p, _)| workload_of(p))
            .collect();
        let edges: Vec<(String, String)> = self
            .edges()
            .into_iter()
            .filter(|(a, b)| obsolete.contains(a.as_str()) && obsolete.contains(b.as_str()))
            .collect();
        let reaches = |from: &str, to: &str| {
            let mut seen = BTreeSet::new();
            let mut next = vec![from.to_owned()];
            while let Some(n) = next.pop() {
                for (a, b) in &edges {
                    if *a == n && seen.insert(b.clone()) {
                        next.push(b.clone());
                    }
                }
            }
            seen.contains(to)
        };
        obsolete.contains(d) && obsolete.contains(x) && reaches(d, x) && reaches(x, d)
    }
}

/// A gating rule broken: what Metacontroller did, the rule in words, and whose state made it
/// wrong.
struct Breach {
    message: String,
    rule: &'static str,
    because: Because,
}

/// The Pod that still needed a dependency or was still there, or the dependency's workload
/// whose condition did not hold.
enum Because {
    Pod(String),
    Workload(String),
}

/// A Pod of workload D goes only when no live Pod needs D running, except across a loop of
/// obsolete Pods, where only a current Pod holds (§5, delete gating).
fn gated_delete(store: &Store, deleted: &Value) -> Result<(), Breach> {
    let name = &deleted["metadata"]["name"];
    let seen = Seen::of(store, deleted);
    let d = workload_of(deleted);
    for (p, current) in &seen.pods {
        let x = workload_of(p);
        if seen.dependencies(p, *current)[d] != "ADD_COND_RUNNING" || !is_live(p) {
            continue;
        }
        // Inside a loop of obsolete Pods only a current Pod holds (the deadlock breaker).
        if *current || !seen.one_obsolete_component(d, x) {
            return Err(Breach {
                message: format!(
                    "{name} deleted while {} (needs {d} running) is {}",
                    p["metadata"]["name"], p["status"]["phase"]
                ),
                rule: "a dependency deleted while its dependent was",
                because: Because::Pod(name_of(p)),
            });
        }
    }
    Ok(())
}

/// A Pod of workload W is made only when the set is not being deleted, no Pod of W is left at
/// all, and each of W's dependencies has a current, non-terminating Pod in the phase its
/// condition asks for (§5, create gating).
fn gated_create(store: &Store, created: &Value) -> Result<(), Breach> {
    let name = &created["metadata"]["name"];
    let seen = Seen::of(store, created);
    let w = workload_of(created);
    if seen.workloads.get(w).is_none() {
        return Err(Breach {
            message: format!("{name} created in a teardown or for no workload"),
            rule: "a Pod created in a teardown or for no workload, with",
            because: Because::Workload(w.to_owned()),
        });
    }
    if let Some((p, _)) = seen.pods.iter().find(|(p, _)| workload_of(p) == w) {
        return Err(Breach {
            message: format!("{name} created while {} is there", p["metadata"]["name"]),
            rule: "a Pod created while the one before it was",
            because: Because::Pod(name_of(p)),
        });
    }
    for (d, condition) in seen.workloads[w]["dependencies"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let phase = match condition.as_str() {
            Some("ADD_COND_RUNNING") => "Running",
            Some("ADD_COND_SUCCEEDED") => "Succeeded",
            _ => "Failed",
        };
        let met = seen.pods.iter().any(|(p, current)| {
            *current && workload_of(p) == d && !terminating(p) && p["status"]["phase"] == phase
        });
        if !met {
            return Err(Breach {
                message: format!("{name} created before {d} met {condition}"),
                rule: "a Pod created while its dependency was",
                because: Because::Workload(d.clone()),
            });
        }
    }
    Ok(())
}

fn name_of(pod: &Value) -> String {
    pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A simulator on the delete-graph manifests, with the gating rules checked and the workloads of
/// deleted Pods recorded in deletion order.
fn sim() -> (Sim, Rc<RefCell<Vec<String>>>) {
    with_checks(Sim::with_manifests(&["delete-graph"]))
}

/// `sim` with the gating rules checked and deleted Pods' workloads recorded in order.
fn with_checks(mut sim: Sim) -> (Sim, Rc<RefCell<Vec<String>>>) {
    sim.delete_checks.push(Box::new(|b, pod| {
        gated_delete(&b.store, pod).map_err(|e| e.message)
    }));
    sim.create_checks.push(Box::new(|b, pod| {
        gated_create(&b.store, pod).map_err(|e| e.message)
    }));
    let order = Rc::new(RefCell::new(Vec::new()));
    let record = order.clone();
    sim.delete_checks.push(Box::new(move |_, pod| {
        record.borrow_mut().push(workload_of(pod).to_owned());
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

/// §5's deadlock breaker, end to end. The dependency between a and b is reversed while both
/// run, a's Pod is replaced under the new spec, and then both templates change: a's old Pod
/// records that it needs b running, b's that it needs a. Each would hold the other forever, so
/// only current Pods count inside that loop: both old Pods go in one sync, and the new ones
/// start in the new order.
#[test]
fn a_dependency_reversed_under_running_pods_lets_both_old_pods_go() {
    let (mut sim, order) = sim();
    let pair = |a_tag: u32, b_tag: u32, a_deps: Value, b_deps: Value| {
        set(json!({
            "a": workload(&format!("a:{a_tag}"), a_deps, "ALWAYS"),
            "b": workload(&format!("b:{b_tag}"), b_deps, "ALWAYS"),
        }))
    };
    let needs = |w: &str| json!({ w: "ADD_COND_RUNNING" });
    sim.apply(&pair(1, 1, json!({}), needs("a"))).unwrap();
    sim.run_until_quiet();
    sim.set_workload_phase(NS, "a", "Running");
    sim.run_until_quiet();
    sim.set_workload_phase(NS, "b", "Running");
    // Reversed: a now needs b. Both Pods stay current; then a's is replaced.
    sim.apply(&pair(1, 1, needs("b"), json!({}))).unwrap();
    sim.run_until_quiet();
    sim.apply(&pair(2, 1, needs("b"), json!({}))).unwrap();
    sim.run_until_quiet();
    sim.finish_terminations();
    sim.run_until_quiet();
    sim.set_workload_phase(NS, "a", "Running");
    assert_eq!(*order.borrow(), ["a"]);
    let annotation = |sim: &Sim, w: &str| {
        let pod = sim.workload_pod(NS, w).unwrap();
        sim.get("Pod", NS, &pod).unwrap()["metadata"]["annotations"]["metahooks.dev/dependencies"]
            .clone()
    };
    assert_eq!(annotation(&sim, "a"), r#"{"b":"ADD_COND_RUNNING"}"#);
    assert_eq!(annotation(&sim, "b"), r#"{"a":"ADD_COND_RUNNING"}"#);

    sim.apply(&pair(3, 2, needs("b"), json!({}))).unwrap();
    sim.run_until_quiet();
    assert_eq!(*order.borrow(), ["a", "a", "b"]);
    sim.finish_terminations();
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["b"]);
    sim.set_workload_phase(NS, "b", "Running");
    sim.run_until_quiet();
    assert_eq!(running(&sim), ["a", "b"]);
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
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

/// The second window a cache behind opens (DECISIONS, delete-graph): the database's Pod is
/// evicted and made again, and a release of the database comes before the caches hear of the
/// new Pod. The sync sees no database Pod, so it creates the release's beside it: two database
/// Pods at once, which §5's "no Pod of W observed at all" is there to prevent. Once the caches
/// catch up, the older one is obsolete and, with the backend running, waits for it to stop as
/// any old Pod would; both run meanwhile.
#[test]
fn a_pod_the_caches_have_not_heard_of_gets_a_second_one_beside_it() {
    let (mut sim, order) = sim();
    start_chain(&mut sim);
    let evicted = sim.workload_pod(NS, "database").unwrap();
    sim.store_delete_direct("Pod", NS, &evicted);
    sim.finish_terminations();
    sim.caches_hear_creates_late = true;
    sim.run_until_quiet();
    let old_db = sim.workload_pod(NS, "database").unwrap();
    assert_eq!(old_db, evicted, "made again under the same name");
    let mut w = chain();
    w["database"]["template"]["spec"]["containers"][0]["image"] = json!("postgres:17");
    sim.apply(&set(w)).unwrap();
    sim.run_until_quiet();
    assert_eq!(sim.violations.len(), 1, "{:?}", sim.violations);
    assert!(
        sim.violations[0].contains(&format!("created while \"{old_db}\" is there")),
        "{:?}",
        sim.violations
    );

    sim.caches_hear_creates_late = false;
    sim.catch_up_caches();
    let databases = |sim: &Sim| -> Vec<String> {
        sim.list("Pod", NS)
            .into_iter()
            .filter(|p| workload_of(p) == "database" && !terminating(p))
            .map(name_of)
            .collect()
    };
    for db in databases(&sim) {
        sim.set_pod_phase(NS, &db, "Running");
    }
    sim.run_until_quiet();
    assert_eq!(
        databases(&sim).len(),
        2,
        "the old one waits for the backend"
    );
    assert_eq!(status(&sim, "database"), ("Running".into(), "Ok".into()));
    let set = sim.get("WorkloadSet", NS, "shop").unwrap();
    assert_eq!(
        set["status"]["workloads"]["database"]["message"],
        "an older Pod waits for dependents to stop: backend"
    );
    assert!(order.borrow().is_empty());

    // The backend stops: the old database Pod goes, and one is left.
    sim.set_workload_phase(NS, "frontend", "Succeeded");
    sim.set_workload_phase(NS, "backend", "Succeeded");
    sim.run_until_quiet();
    sim.finish_terminations();
    sim.run_until_quiet();
    assert_eq!(*order.borrow(), ["database"]);
    assert_eq!(databases(&sim).len(), 1);
    assert_ne!(databases(&sim)[0], old_db);
    assert_eq!(sim.violations.len(), 1, "{:?}", sim.violations);
}

// ---- random walks ----
//
// A set of up to four workloads is edited at random (an image or a restart policy, every image
// at once, dependencies drawn anew or turned around, workloads added and removed, a cycle the
// webhook refuses, one stored past it), while a fake kubelet moves Pods through the phases
// their restart policy allows, stops them and evicts them. Every create and delete is held to
// the gating rules (`with_checks`), a frozen set to creating and deleting nothing, the set's
// status to its spec, and the walk ends with a teardown that must finish. The caches never lag
// here: the one window that opens is pinned above.

use common::walk::{seeds, Rng};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

const POOL: [&str; 4] = ["a", "b", "c", "d"];
const POLICIES: [&str; 3] = ["NEVER", "ON_FAILURE", "ALWAYS"];

/// One planned workload: its image's tag, restart policy and dependencies.
#[derive(Clone, Debug, PartialEq)]
struct Planned {
    tag: u32,
    policy: &'static str,
    dependencies: BTreeMap<String, &'static str>,
}

type Plan = BTreeMap<&'static str, Planned>;

fn plan_workloads(plan: &Plan) -> Value {
    plan.iter()
        .map(|(w, p)| {
            let image = format!("{w}:{}", p.tag);
            (
                w.to_string(),
                workload(&image, json!(p.dependencies), p.policy),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Dependencies drawn anew: each workload on some of those before it in a random order, and now
/// and then on `ghost`, which never exists. `running_only` keeps to `ADD_COND_RUNNING`.
fn wire(rng: &mut Rng, plan: &mut Plan, running_only: bool) {
    let mut order: Vec<&'static str> = plan.keys().copied().collect();
    rng.shuffle(&mut order);
    for (i, w) in order.iter().enumerate() {
        let mut dependencies = BTreeMap::new();
        for d in &order[..i] {
            if rng.chance(35) {
                let condition = match rng.below(10) {
                    _ if running_only => "ADD_COND_RUNNING",
                    0..=5 => "ADD_COND_RUNNING",
                    6..=7 => "ADD_COND_SUCCEEDED",
                    _ => "ADD_COND_FAILED",
                };
                dependencies.insert(d.to_string(), condition);
            }
        }
        if !running_only && rng.chance(5) {
            dependencies.insert("ghost".to_owned(), "ADD_COND_RUNNING");
        }
        plan.get_mut(w).unwrap().dependencies = dependencies;
    }
}

/// Every dependency between planned workloads turned around: "we had it backwards".
fn reverse(plan: &mut Plan) {
    let edges: Vec<(String, &'static str, &'static str)> = plan
        .iter_mut()
        .flat_map(|(w, p)| {
            let moved: Vec<String> = p
                .dependencies
                .keys()
                .filter(|d| POOL.contains(&d.as_str()))
                .cloned()
                .collect();
            moved
                .into_iter()
                .map(|d| {
                    let condition = p.dependencies.remove(&d).unwrap();
                    (d, *w, condition)
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for (d, w, condition) in edges {
        if let Some(p) = plan.get_mut(d.as_str()) {
            p.dependencies.insert(w.to_owned(), condition);
        }
    }
}

/// Whether the plan's dependencies (missing workloads left out) hold a cycle.
fn cyclic(plan: &Plan) -> bool {
    fn reaches(plan: &Plan, from: &str, to: &str, seen: &mut BTreeSet<String>) -> bool {
        plan.get(from).is_some_and(|p| {
            p.dependencies
                .keys()
                .any(|d| d == to || (seen.insert(d.clone()) && reaches(plan, d, to, seen)))
        })
    }
    plan.keys()
        .any(|w| reaches(plan, w, w, &mut BTreeSet::new()))
}

/// The phases the kubelet may move a Pod to next under its restart policy: `Always` never ends,
/// `OnFailure` restarts the container instead of failing.
fn next_phases(pod: &Value) -> Vec<&'static str> {
    let policy = pod["spec"]["restartPolicy"].as_str().unwrap_or("Always");
    let mut next = match pod["status"]["phase"].as_str() {
        None | Some("Pending") => vec!["Running", "Unknown"],
        Some("Running") => vec!["Unknown"],
        Some("Unknown") => vec!["Running"],
        _ => vec![],
    };
    if !matches!(
        pod["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    ) {
        if policy != "Always" {
            next.push("Succeeded");
        }
        if policy == "Never" {
            next.push("Failed");
        }
    }
    next
}

/// A cooperating kubelet: each Pending Pod ends in the phase the plan's dependents ask of its
/// workload, where its policy allows, else runs; and every stopping Pod goes. Repeated until
/// nothing changes or `rounds` run out.
fn settle(sim: &mut Sim, plan: &Plan, rounds: usize) {
    for _ in 0..rounds {
        sim.finish_terminations();
        let pending: Vec<(String, String, String)> = sim
            .list("Pod", NS)
            .into_iter()
            .filter(|p| {
                !terminating(p) && matches!(p["status"]["phase"].as_str(), None | Some("Pending"))
            })
            .map(|p| {
                let policy = p["spec"]["restartPolicy"].as_str().unwrap_or("Always");
                (name_of(p), workload_of(p).to_owned(), policy.to_owned())
            })
            .collect();
        if pending.is_empty() && sim.run_until_quiet() == 0 {
            return;
        }
        for (name, w, policy) in pending {
            let asked: BTreeSet<&str> = plan
                .values()
                .filter_map(|p| p.dependencies.get(&w).copied())
                .collect();
            let phase = if asked.contains("ADD_COND_SUCCEEDED") && policy != "Always" {
                "Succeeded"
            } else if asked.contains("ADD_COND_FAILED") && policy == "Never" {
                "Failed"
            } else {
                "Running"
            };
            sim.set_pod_phase(NS, &name, phase);
        }
        sim.run_until_quiet();
    }
}

/// How Metacontroller's caches saw a Pod, when it differs from the API server's: the
/// description a window of [`lag_aware`] is named by.
fn lag_of(before: &Before, pod: &str) -> Option<String> {
    let find = |store: &Store| {
        store
            .list("Pod", Some(NS))
            .into_iter()
            .find(|p| p["metadata"]["name"] == pod)
            .cloned()
    };
    let state = |p: &Value| match terminating(p) {
        true => "terminating".to_owned(),
        false => p["status"]["phase"]
            .as_str()
            .unwrap_or("Pending")
            .to_owned(),
    };
    match (find(&before.cached), find(&before.store)) {
        (None, Some(_)) => Some("not heard of yet".to_owned()),
        (Some(seen), None) => Some(format!("seen {} after it went", state(&seen))),
        (Some(seen), Some(now)) if state(&seen) != state(&now) => {
            Some(format!("seen {} while {}", state(&seen), state(&now)))
        }
        _ => None,
    }
}

/// The windows caches behind may open (DECISIONS, delete-graph): a dependent or an older Pod
/// not heard of yet, a dependent seen in `Unknown` (which holds nothing, §2) once running again,
/// and a dependency seen in a phase it has left or after it went.
fn a_named_window(window: &str) -> bool {
    [
        "a dependency deleted while its dependent was not heard of yet",
        "a Pod created while the one before it was not heard of yet",
    ]
    .contains(&window)
        || window.starts_with("a dependency deleted while its dependent was seen Unknown while ")
        || window.starts_with("a Pod created while its dependency was seen ")
}

/// A gating check for caches that are behind: the rule must hold on the world as the request
/// saw it, and a breach on the API server's world must be a window [`a_named_window`] names,
/// by how the caches saw the Pods that made it wrong. Windows are counted by kind.
fn lag_aware(
    gate: fn(&Store, &Value) -> Result<(), Breach>,
    windows: &Rc<RefCell<BTreeMap<String, usize>>>,
) -> sim::ChildCheck {
    let windows = windows.clone();
    Box::new(move |before, pod| {
        gate(&before.cached, pod).map_err(|e| format!("on the caches' own view: {}", e.message))?;
        // The API server's Pods under the set the sync read: an edit of it not heard of yet is
        // one made after the sync.
        let Err(breach) = gate(&before.store_with_seen("WorkloadSet"), pod) else {
            return Ok(());
        };
        let lags: BTreeSet<String> = match &breach.because {
            Because::Pod(p) => lag_of(before, p).into_iter().collect(),
            // The dependency's Pods the request saw (one of them met the condition there).
            Because::Workload(w) => before
                .cached
                .list("Pod", Some(NS))
                .into_iter()
                .filter(|p| workload_of(p) == w)
                .filter_map(|p| lag_of(before, &name_of(p)))
                .collect(),
        };
        let lags = lags.into_iter().collect::<Vec<_>>().join(", ");
        let window = format!("{} {lags}", breach.rule);
        if !a_named_window(&window) {
            return Err(format!("{} ({window})", breach.message));
        }
        eprintln!("window: {} ({lags})", breach.message);
        *windows.borrow_mut().entry(window).or_default() += 1;
        Ok(())
    })
}

/// One walk of `steps` random steps from `seed`; each step is said on standard error, which
/// the test shows when it fails. With `windows`, Metacontroller's caches fall behind now and
/// then (a Pod's changes not heard of, creates heard of late, the set's edits not heard of) and
/// catch up; the gating rules are then held to what each request saw, and each breach on the
/// API server's Pods, under the set the sync read, is counted in `windows` by what the caches
/// saw.
fn delete_graph_walk(
    seed: u64,
    steps: usize,
    windows: Option<&Rc<RefCell<BTreeMap<String, usize>>>>,
) {
    let mut rng = Rng::new(seed);
    let mut sim = Sim::with_manifests(&["delete-graph"]);
    match windows {
        Some(windows) => {
            sim.delete_checks.push(lag_aware(gated_delete, windows));
            sim.create_checks.push(lag_aware(gated_create, windows));
        }
        None => sim = with_checks(sim).0,
    }
    // A frozen set creates and deletes nothing (§6.1), once the sync has read it so.
    let frozen = Rc::new(Cell::new(false));
    let nothing_while_frozen = |what: &'static str| -> sim::ChildCheck {
        let frozen = frozen.clone();
        let read_as_stored = |b: &Before| {
            b.cached.list("WorkloadSet", Some(NS)) == b.store.list("WorkloadSet", Some(NS))
        };
        Box::new(
            move |before, pod| match frozen.get() && read_as_stored(before) {
                true => Err(format!(
                    "{} {what} in a frozen set",
                    pod["metadata"]["name"]
                )),
                false => Ok(()),
            },
        )
    };
    sim.delete_checks.push(nothing_while_frozen("deleted"));
    sim.create_checks.push(nothing_while_frozen("created"));
    eprintln!("seed {seed}");
    let check = |sim: &Sim, plan: &Plan, frozen: bool| {
        assert!(sim.violations.is_empty(), "{:?}", sim.violations);
        assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
        let status = &sim.get("WorkloadSet", NS, "shop").unwrap()["status"];
        let valid = &status["conditions"][0];
        assert_eq!(valid["type"], "Valid");
        assert_eq!(
            valid["status"] == "False",
            frozen,
            "{}",
            status["conditions"]
        );
        if !frozen {
            for w in plan.keys() {
                assert!(status["workloads"].get(*w).is_some(), "{w}: {status}");
            }
        }
    };

    // From nothing, under dependencies on running workloads alone, everything starts.
    let mut plan: Plan = POOL[..2 + rng.below(POOL.len() - 1)]
        .iter()
        .map(|w| {
            (
                *w,
                Planned {
                    tag: 1,
                    policy: POLICIES[rng.below(POLICIES.len())],
                    dependencies: BTreeMap::new(),
                },
            )
        })
        .collect();
    wire(&mut rng, &mut plan, true);
    eprintln!("start {plan:?}");
    sim.apply(&set(plan_workloads(&plan))).unwrap();
    sim.run_until_quiet();
    settle(&mut sim, &plan, 2 * POOL.len());
    check(&sim, &plan, false);
    let status = sim.get("WorkloadSet", NS, "shop").unwrap()["status"]["workloads"].clone();
    for w in plan.keys() {
        assert_eq!(status[*w]["state"], "Running", "{w}: {status}");
    }

    for step in 0..steps {
        let pods: Vec<Value> = sim
            .list("Pod", NS)
            .into_iter()
            .filter(|p| !terminating(p))
            .cloned()
            .collect();
        let mut edited = plan.clone();
        match rng.below(if windows.is_some() { 120 } else { 100 }) {
            0..=19 if !pods.is_empty() => {
                let pod = rng.pick(&pods);
                let next = next_phases(pod);
                if !next.is_empty() {
                    let phase = *rng.pick(&next);
                    let name = pod["metadata"]["name"].as_str().unwrap();
                    eprintln!("{step}: {name} {phase}");
                    sim.set_pod_phase(NS, name, phase);
                }
            }
            20..=29 => {
                eprintln!("{step}: terminations finish");
                sim.finish_terminations();
            }
            30..=34 if !pods.is_empty() => {
                let name = rng.pick(&pods)["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                eprintln!("{step}: {name} evicted");
                sim.store_delete_direct("Pod", NS, &name);
            }
            35..=49 if !plan.is_empty() => {
                let w = *rng.pick(&plan.keys().copied().collect::<Vec<_>>());
                let p = edited.get_mut(w).unwrap();
                if rng.chance(60) {
                    p.tag += 1;
                } else {
                    p.policy = *rng.pick(&POLICIES);
                }
            }
            50..=57 => wire(&mut rng, &mut edited, false),
            58..=64 => reverse(&mut edited),
            65..=74 => {
                let w = *rng.pick(&POOL);
                if edited.remove(w).is_none() {
                    let tag = 1 + rng.below(2) as u32;
                    let policy = *rng.pick(&POLICIES);
                    let mut dependencies = BTreeMap::new();
                    for d in plan.keys().filter(|_| rng.chance(40)) {
                        dependencies.insert(d.to_string(), "ADD_COND_RUNNING");
                    }
                    edited.insert(
                        w,
                        Planned {
                            tag,
                            policy,
                            dependencies,
                        },
                    );
                }
            }
            75..=81 => {
                // A release: every image at once.
                for p in edited.values_mut() {
                    p.tag += 1;
                }
            }
            82..=89 if plan.len() >= 2 && !frozen.get() => {
                // A cycle: the webhook refuses it, and half the time it is stored past the
                // webhook (written before it was installed), and the set freezes until the next
                // edit the webhook admits. (Applied again to a set frozen by it, the webhook
                // would admit it as an update that leaves an invalid spec as it was.)
                let mut cycle = plan.clone();
                let names: Vec<&str> = cycle.keys().copied().collect();
                for (i, w) in names.iter().enumerate() {
                    let d = names[(i + 1) % names.len()];
                    cycle
                        .get_mut(w)
                        .unwrap()
                        .dependencies
                        .insert(d.to_owned(), "ADD_COND_SUCCEEDED");
                }
                let refused = sim.apply(&set(plan_workloads(&cycle))).unwrap_err();
                assert!(refused.contains("is part of a cycle"), "{refused}");
                if rng.chance(50) {
                    eprintln!("{step}: stored past the webhook {cycle:?}");
                    sim.apply_before_webhooks(&set(plan_workloads(&cycle)))
                        .unwrap();
                    frozen.set(true);
                }
            }
            100..=101 => {
                eprintln!("{step}: the caches stop hearing of the set");
                sim.hold_in_caches("WorkloadSet", NS, "shop");
            }
            102..=107 if !pods.is_empty() => {
                let name = rng.pick(&pods)["metadata"]["name"].as_str().unwrap();
                eprintln!("{step}: the caches stop hearing of {name}");
                sim.hold_in_caches("Pod", NS, name);
            }
            108..=113 => {
                let late = sim.turn_over_creates_heard_late();
                eprintln!("{step}: creates heard of late: {late}");
            }
            114.. => {
                eprintln!("{step}: the caches catch up");
                sim.catch_up_caches();
            }
            _ => {
                eprintln!("{step}: settle");
                settle(&mut sim, &plan, 3);
            }
        }
        if edited != plan {
            eprintln!("{step}: apply {edited:?}");
            let applied = sim.apply(&set(plan_workloads(&edited)));
            match (&applied, cyclic(&edited)) {
                (Ok(()), false) => {
                    plan = edited;
                    frozen.set(false);
                }
                (Err(e), true) if e.contains("is part of a cycle") => eprintln!("refused: {e}"),
                _ => panic!("{applied:?}, cyclic: {}", cyclic(&edited)),
            }
        }
        sim.run_until_quiet();
        // A set held in the caches has the status of the spec the syncs read.
        if !sim.holds("WorkloadSet", NS, "shop") {
            check(&sim, &plan, frozen.get());
        }
    }

    // The caches catch up, and everything settles as it would have without them.
    sim.caches_on_time();
    sim.run_until_quiet();
    // A teardown always ends, however the walk left the set: one link of each chain per sync.
    eprintln!("delete the set");
    frozen.set(false);
    sim.delete("WorkloadSet", NS, "shop").unwrap();
    for _ in 0..2 * POOL.len() + 2 {
        sim.run_until_quiet();
        sim.finish_terminations();
    }
    sim.run_until_quiet();
    assert!(sim.violations.is_empty(), "{:?}", sim.violations);
    assert!(sim.get("WorkloadSet", NS, "shop").is_none());
    assert!(sim.list("Pod", NS).is_empty());
}

/// Random walks of a set (see above); `WALK_SEEDS=<count>` walks more, `WALK_SEED=<n>` replays.
#[test]
fn random_walks_keep_the_gating_rules_and_end_in_a_teardown() {
    for seed in seeds(16) {
        delete_graph_walk(seed, 60, None);
    }
}

/// Random walks with Metacontroller's caches behind now and then: the hook keeps the gating
/// rules on every request's own view, and the breaches on the API server's world are the
/// windows DECISIONS names (delete-graph, caches behind), each explained by what the caches
/// had not heard of.
#[test]
fn random_walks_with_caches_behind_open_only_the_named_windows() {
    let windows = Rc::new(RefCell::new(BTreeMap::new()));
    for seed in seeds(16) {
        delete_graph_walk(seed, 60, Some(&windows));
    }
    eprintln!("windows: {:#?}", windows.borrow());
}
