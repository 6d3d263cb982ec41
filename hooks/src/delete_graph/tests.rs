//! Rules of delete-graph.md §3-§8, each test naming the rule it checks.

use super::plan::PlanMemo;
use super::sync::{reconcile, SyncRequest};
use crate::contract::decode;
use serde_json::{json, Value};
use time::macros::datetime;

const NOW: time::OffsetDateTime = datetime!(2026-06-01 12:00:00 UTC);

fn template(image: &str) -> Value {
    json!({"spec": {"containers": [{"name": "c", "image": image}]}})
}

fn workload(deps: Value) -> Value {
    json!({"dependencies": deps, "template": template("img")})
}

/// A Pod as Metacontroller sends it. `phase` None = no status yet.
fn pod(name: &str, workload: &str, phase: Option<&str>, terminating: bool, deps: &str) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "labels": {"metahooks.dev/workload-set": "s", "metahooks.dev/workload": workload},
                     "annotations": {"metahooks.dev/dependencies": deps},
                     "managedFields": [{"manager": "kubelet"}]},
        "spec": {"containers": [{"name": "c", "image": "img"}], "restartPolicy": "Never", "nodeName": "n1"},
    });
    if let Some(phase) = phase {
        p["status"] = json!({"phase": phase});
    }
    if terminating {
        p["metadata"]["deletionTimestamp"] = json!("2026-06-01T11:59:00Z");
    }
    p
}

fn request(workloads: Value, pods: Vec<Value>, finalizing: bool) -> Vec<u8> {
    let children: serde_json::Map<String, Value> = pods
        .into_iter()
        .map(|p| (format!("ns/{}", p["metadata"]["name"].as_str().unwrap()), p))
        .collect();
    serde_json::to_vec(&json!({
        "controller": {"metadata": {"name": "delete-graph"}},
        "parent": {"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet",
                   "metadata": {"name": "s", "namespace": "ns", "uid": "p", "generation": 2},
                   "spec": {"workloads": workloads}},
        "children": {"Pod.v1": children},
        "related": {},
        "finalizing": finalizing,
    }))
    .unwrap()
}

fn run(body: &[u8], teardown: bool) -> Value {
    run_with(&PlanMemo::default(), body, teardown)
}

/// `run` with the spec planned through `memo`.
fn run_with(memo: &PlanMemo, body: &[u8], teardown: bool) -> Value {
    let req: SyncRequest = decode(body).unwrap();
    let parent = &req.parent;
    let plan = memo
        .plan(parent.spec.map(|raw| raw.0), &parent.metadata.name)
        .unwrap();
    serde_json::to_value(reconcile(&req, &plan, teardown, NOW).unwrap()).unwrap()
}

fn names(resp: &Value) -> Vec<String> {
    resp["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

fn state(resp: &Value, w: &str) -> (String, String) {
    let e = &resp["status"]["workloads"][w];
    (
        e["state"].as_str().unwrap().to_owned(),
        e["subState"].as_str().unwrap().to_owned(),
    )
}

/// The name the hook gives workload `w`'s Pod with the default template.
fn desired_name(workloads: &Value, w: &str) -> String {
    let spec = crate::json::Json::from(json!({"workloads": workloads}));
    let v = super::spec::validate(&spec, "s");
    let wl = v.workloads.iter().find(|x| x.name == w).unwrap();
    let mut r = workloads[w]["template"].clone();
    r["spec"]
        .as_object_mut()
        .unwrap()
        .insert("restartPolicy".into(), json!(wl.restart_policy.pod_value()));
    let canonical = crate::json::Json::from(r).canonical();
    let hash = crate::meta::sha256_hex(canonical.as_bytes());
    format!("s-{w}-{}", &hash[..10])
}

fn chain() -> Value {
    json!({
        "database": workload(json!({})),
        "backend": workload(json!({"database": "ADD_COND_RUNNING"})),
        "frontend": workload(json!({"backend": "ADD_COND_RUNNING"})),
    })
}

/// The running Pod of workload `name` of `w` under its desired name, annotated with `deps`.
fn running_pod(w: &Value, name: &str, deps: &str) -> Value {
    pod(&desired_name(w, name), name, Some("Running"), false, deps)
}

/// The running Pods of [`chain`], each annotated with the dependency it was created for.
fn running_chain() -> Vec<Value> {
    let w = chain();
    vec![
        running_pod(&w, "database", "{}"),
        running_pod(&w, "backend", r#"{"database":"ADD_COND_RUNNING"}"#),
        running_pod(&w, "frontend", r#"{"backend":"ADD_COND_RUNNING"}"#),
    ]
}

#[test]
fn rule_3_pod_name_hash_matches_python_canonical_json() {
    // python3: json.dumps(R, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    let w = json!({"database": {"template": {"metadata": {"labels": {"tier": "db"}},
        "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}});
    let resp = run(&request(w, vec![], false), false);
    assert_eq!(names(&resp), ["s-database-9d3c4a706c"]);
    let pod = &resp["children"][0];
    assert_eq!(pod["spec"]["restartPolicy"], "Never");
    assert_eq!(pod["metadata"]["labels"]["tier"], "db");
    assert_eq!(pod["metadata"]["labels"]["metahooks.dev/workload-set"], "s");
    assert_eq!(
        pod["metadata"]["labels"]["metahooks.dev/workload"],
        "database"
    );
    assert_eq!(
        pod["metadata"]["annotations"]["metahooks.dev/dependencies"],
        "{}"
    );
    assert_eq!(pod["metadata"]["namespace"], "ns");
    assert!(pod["metadata"].get("ownerReferences").is_none());
    assert_eq!(
        pod["spec"],
        json!({"containers": [{"name": "db", "image": "postgres:16"}], "restartPolicy": "Never"})
    );
}

/// §3: the Pod's spec is the template's, its own `restartPolicy` overwritten by the mapped one.
#[test]
fn rule_3_the_template_restart_policy_is_overwritten() {
    let w = json!({"job": {"restartPolicy": "ON_FAILURE", "template": {"spec": {
        "restartPolicy": "Always", "containers": [{"name": "j", "image": "busybox"}], "nodeName": "n1"}}}});
    let resp = run(&request(w, vec![], false), false);
    assert_eq!(
        resp["children"][0]["spec"],
        json!({"containers": [{"name": "j", "image": "busybox"}], "nodeName": "n1", "restartPolicy": "OnFailure"})
    );
}

#[test]
fn rule_3_dependencies_annotation_is_canonical_and_not_hashed() {
    let a = json!({"b": workload(json!({})), "a": workload(json!({"b": "ADD_COND_SUCCEEDED"}))});
    let b = json!({"b": workload(json!({})), "a": workload(json!({"b": "ADD_COND_RUNNING"}))});
    assert_eq!(desired_name(&a, "a"), desired_name(&b, "a"));
    let pods = vec![pod(
        &desired_name(&a, "b"),
        "b",
        Some("Succeeded"),
        false,
        "{}",
    )];
    let resp = run(&request(a.clone(), pods, false), false);
    let created = resp["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metadata"]["labels"]["metahooks.dev/workload"] == "a")
        .unwrap();
    assert_eq!(
        created["metadata"]["annotations"]["metahooks.dev/dependencies"],
        r#"{"b":"ADD_COND_SUCCEEDED"}"#
    );
}

#[test]
fn rule_5_chain_starts_in_order() {
    let w = chain();
    let resp = run(&request(w.clone(), vec![], false), false);
    assert_eq!(names(&resp), [desired_name(&w, "database")]);
    assert_eq!(
        state(&resp, "database"),
        ("Pending".into(), "Starting".into())
    );
    assert_eq!(
        state(&resp, "backend"),
        ("Pending".into(), "WaitingToStart".into())
    );
    assert_eq!(
        resp["status"]["workloads"]["backend"]["message"],
        "waiting for database (ADD_COND_RUNNING)"
    );

    // database pending: backend still waits.
    let db = desired_name(&w, "database");
    let resp = run(
        &request(
            w.clone(),
            vec![pod(&db, "database", Some("Pending"), false, "{}")],
            false,
        ),
        false,
    );
    assert_eq!(names(&resp), vec![db.clone()]);

    // database running: backend is created, frontend waits.
    let resp = run(
        &request(
            w.clone(),
            vec![pod(&db, "database", Some("Running"), false, "{}")],
            false,
        ),
        false,
    );
    let be = desired_name(&w, "backend");
    assert_eq!(names(&resp), [be.clone(), db.clone()]);
    assert_eq!(state(&resp, "database"), ("Running".into(), "Ok".into()));
    assert_eq!(
        state(&resp, "backend"),
        ("Pending".into(), "Starting".into())
    );
    assert_eq!(
        state(&resp, "frontend"),
        ("Pending".into(), "WaitingToStart".into())
    );
}

#[test]
fn rule_5_current_pod_always_returned_even_if_dependency_gone() {
    let w = chain();
    let be = desired_name(&w, "backend");
    // database has no Pod at all, backend's current Pod is running: it is kept.
    let resp = run(
        &request(
            w.clone(),
            vec![pod(
                &be,
                "backend",
                Some("Running"),
                false,
                r#"{"database":"ADD_COND_RUNNING"}"#,
            )],
            false,
        ),
        false,
    );
    assert!(names(&resp).contains(&be));
}

#[test]
fn rule_5_add_conditions_succeeded_and_failed() {
    let w = json!({
        "job": workload(json!({})),
        "svc": workload(json!({"job": "ADD_COND_SUCCEEDED"})),
        "alarm": workload(json!({"job": "ADD_COND_FAILED"})),
    });
    let job = desired_name(&w, "job");
    let svc = desired_name(&w, "svc");
    let alarm = desired_name(&w, "alarm");
    let resp = run(
        &request(
            w.clone(),
            vec![pod(&job, "job", Some("Running"), false, "{}")],
            false,
        ),
        false,
    );
    assert_eq!(names(&resp), vec![job.clone()]);
    let resp = run(
        &request(
            w.clone(),
            vec![pod(&job, "job", Some("Succeeded"), false, "{}")],
            false,
        ),
        false,
    );
    assert!(names(&resp).contains(&svc) && !names(&resp).contains(&alarm));
    let resp = run(
        &request(
            w.clone(),
            vec![pod(&job, "job", Some("Failed"), false, "{}")],
            false,
        ),
        false,
    );
    assert!(names(&resp).contains(&alarm) && !names(&resp).contains(&svc));
    // Failed(Unknown) does not count as a failure.
    let resp = run(
        &request(
            w.clone(),
            vec![pod(&job, "job", Some("Unknown"), false, "{}")],
            false,
        ),
        false,
    );
    assert_eq!(state(&resp, "job"), ("Failed".into(), "Unknown".into()));
    assert!(!names(&resp).contains(&alarm));
}

#[test]
fn rule_5_terminating_or_obsolete_dependency_does_not_satisfy() {
    let w = chain();
    let db = desired_name(&w, "database");
    let resp = run(
        &request(
            w.clone(),
            vec![pod(&db, "database", Some("Running"), true, "{}")],
            false,
        ),
        false,
    );
    assert!(
        names(&resp).is_empty(),
        "terminating Pods are never returned, backend waits"
    );
    assert_eq!(
        state(&resp, "database"),
        ("Stopping".into(), "RequestedAtRuntime".into())
    );
    let resp = run(
        &request(
            w.clone(),
            vec![pod(
                "s-database-old",
                "database",
                Some("Running"),
                false,
                "{}",
            )],
            false,
        ),
        false,
    );
    assert!(!names(&resp).contains(&desired_name(&w, "backend")));
}

#[test]
fn rule_6_4_missing_dependency_waits_and_is_named() {
    let w = json!({"a": workload(json!({"ghost": "ADD_COND_RUNNING"}))});
    let resp = run(&request(w, vec![], false), false);
    assert!(names(&resp).is_empty());
    assert_eq!(
        resp["status"]["workloads"]["a"]["message"],
        "waiting for ghost (not in this WorkloadSet)"
    );
    assert_eq!(
        resp["status"]["deleteGraph"],
        json!({"ghost": {"a": "DelCondNotPendingNorRunning"}})
    );
}

#[test]
fn rule_4_graph_has_only_running_edges_and_obsolete_annotations() {
    let w = json!({
        "a": workload(json!({"b": "ADD_COND_RUNNING", "c": "ADD_COND_SUCCEEDED", "d": "ADD_COND_FAILED"})),
        "b": workload(json!({})), "c": workload(json!({})), "d": workload(json!({})),
    });
    let pods = vec![
        // obsolete Pod of a workload no longer in the spec, with a RUNNING edge on c.
        pod(
            "s-old-1",
            "old",
            Some("Running"),
            false,
            r#"{"c":"ADD_COND_RUNNING","d":"BOGUS"}"#,
        ),
        // a current Pod's own annotation is ignored.
        pod(
            &desired_name(&w, "b"),
            "b",
            Some("Running"),
            false,
            r#"{"d":"ADD_COND_RUNNING"}"#,
        ),
        // unparsable annotation: no edges.
        pod("s-old-2", "old2", Some("Running"), true, "not json"),
    ];
    let resp = run(&request(w, pods, false), false);
    assert_eq!(
        resp["status"]["deleteGraph"],
        json!({"b": {"a": "DelCondNotPendingNorRunning"}, "c": {"old": "DelCondNotPendingNorRunning"}})
    );
}

#[test]
fn rule_5_removing_a_dependency_waits_for_its_running_dependent() {
    // database was removed from the spec; backend (still in the spec) runs and needs it.
    let w = json!({"backend": workload(json!({"database": "ADD_COND_RUNNING"}))});
    let be = desired_name(&w, "backend");
    let pods = vec![
        pod(
            "s-database-1234567890",
            "database",
            Some("Running"),
            false,
            "{}",
        ),
        pod(
            &be,
            "backend",
            Some("Running"),
            false,
            r#"{"database":"ADD_COND_RUNNING"}"#,
        ),
    ];
    let resp = run(&request(w.clone(), pods, false), false);
    assert_eq!(
        names(&resp),
        [be.clone(), "s-database-1234567890".to_owned()]
    );
    assert_eq!(
        state(&resp, "database"),
        ("Stopping".into(), "WaitingToStop".into())
    );
    assert_eq!(
        resp["status"]["workloads"]["database"]["message"],
        "waiting for dependents to stop: backend"
    );
    // The kept obsolete Pod is rebuilt: no status, no server-set metadata, spec as observed.
    let kept = &resp["children"][1];
    assert!(kept.get("status").is_none());
    assert!(
        kept["metadata"].get("uid").is_none() && kept["metadata"].get("managedFields").is_none()
    );
    assert_eq!(kept["spec"]["nodeName"], "n1");

    // Once backend is Succeeded (not pending nor running), database goes.
    let pods = vec![
        pod(
            "s-database-1234567890",
            "database",
            Some("Running"),
            false,
            "{}",
        ),
        pod(&be, "backend", Some("Succeeded"), false, "{}"),
    ];
    let resp = run(&request(w, pods, false), false);
    assert_eq!(names(&resp), [be]);
    assert_eq!(
        state(&resp, "database"),
        ("Stopping".into(), "RequestedAtRuntime".into())
    );
}

/// §7: a workload with a current Pod takes that Pod's state. An older Pod kept beside it (made
/// when Metacontroller's caches had not heard of the older one, DECISIONS) is said in the
/// message, as the state cannot say it.
#[test]
fn rule_7_an_older_pod_kept_beside_a_current_one_is_in_the_message() {
    let w = json!({
        "database": workload(json!({})),
        "backend": workload(json!({"database": "ADD_COND_RUNNING"})),
    });
    let (db, be) = (desired_name(&w, "database"), desired_name(&w, "backend"));
    let deps = r#"{"database":"ADD_COND_RUNNING"}"#;
    let pods = vec![
        pod(
            "s-database-1234567890",
            "database",
            Some("Running"),
            false,
            "{}",
        ),
        pod(&db, "database", Some("Running"), false, "{}"),
        pod(&be, "backend", Some("Running"), false, deps),
    ];
    let resp = run(&request(w, pods, false), false);
    assert_eq!(names(&resp).len(), 3, "all kept");
    assert_eq!(state(&resp, "database"), ("Running".into(), "Ok".into()));
    assert_eq!(
        resp["status"]["workloads"]["database"]["message"],
        "an older Pod waits for dependents to stop: backend"
    );
    assert_eq!(resp["status"]["workloads"]["backend"]["message"], "");
}

#[test]
fn rule_6_3_update_is_delete_then_create() {
    let mut old = chain();
    old.as_object_mut().unwrap().remove("frontend");
    let mut new = old.clone();
    new["database"]["template"] = template("postgres:17");
    let old_db = desired_name(&old, "database");
    let new_db = desired_name(&new, "database");
    assert_ne!(old_db, new_db);
    let be = desired_name(&new, "backend");
    let running_be = pod(
        &be,
        "backend",
        Some("Running"),
        false,
        r#"{"database":"ADD_COND_RUNNING"}"#,
    );

    // 1. backend runs: the old database Pod waits, the new one is not created.
    let resp = run(
        &request(
            new.clone(),
            vec![
                pod(&old_db, "database", Some("Running"), false, "{}"),
                running_be.clone(),
            ],
            false,
        ),
        false,
    );
    assert_eq!(names(&resp), [be.clone(), old_db.clone()]);
    assert_eq!(
        state(&resp, "database"),
        ("Stopping".into(), "WaitingToStop".into())
    );

    // 2. backend gone: old database Pod left out, new not created in the same sync.
    let resp = run(
        &request(
            new.clone(),
            vec![pod(&old_db, "database", Some("Running"), false, "{}")],
            false,
        ),
        false,
    );
    assert!(names(&resp).is_empty());
    assert_eq!(
        state(&resp, "database"),
        ("Stopping".into(), "RequestedAtRuntime".into())
    );

    // 3. while terminating nothing is created.
    let resp = run(
        &request(
            new.clone(),
            vec![pod(&old_db, "database", Some("Running"), true, "{}")],
            false,
        ),
        false,
    );
    assert!(names(&resp).is_empty());

    // 4. gone: the new one is created.
    let resp = run(&request(new.clone(), vec![], false), false);
    assert_eq!(names(&resp), [new_db]);
}

#[test]
fn rule_5_deadlock_breaker_for_reversed_dependencies() {
    // Old Pods recorded a needs b and b needs a (specs changed in between); both obsolete.
    let w = json!({});
    let pods = vec![
        pod(
            "s-a-old",
            "a",
            Some("Running"),
            false,
            r#"{"b":"ADD_COND_RUNNING"}"#,
        ),
        pod(
            "s-b-old",
            "b",
            Some("Running"),
            false,
            r#"{"a":"ADD_COND_RUNNING"}"#,
        ),
    ];
    let resp = run(&request(w, pods, false), false);
    assert!(
        names(&resp).is_empty(),
        "neither blocks the other inside one loop"
    );
}

#[test]
fn rule_8_teardown_in_reverse_order_and_finalized_only_when_empty() {
    let w = chain();
    let db = desired_name(&w, "database");
    let be = desired_name(&w, "backend");
    let fe = desired_name(&w, "frontend");
    let p = |n: &str, wl: &str, deps: &str, term: bool| pod(n, wl, Some("Running"), term, deps);
    let resp = run(&request(w.clone(), running_chain(), true), true);
    assert_eq!(names(&resp), [be.clone(), db.clone()]);
    assert_eq!(resp["finalized"], false);
    // frontend terminating: backend may go, database waits.
    let mut pods = running_chain();
    pods[2] = p(&fe, "frontend", r#"{"backend":"ADD_COND_RUNNING"}"#, true);
    let resp = run(&request(w.clone(), pods, true), true);
    assert_eq!(names(&resp), vec![db.clone()]);
    // nothing is ever created, finalized only once no Pod is observed.
    let resp = run(
        &request(w.clone(), vec![p(&db, "database", "{}", true)], true),
        true,
    );
    assert!(names(&resp).is_empty());
    assert_eq!(resp["finalized"], false);
    let resp = run(&request(w, vec![], true), true);
    assert_eq!(resp["finalized"], true);
    assert!(names(&resp).is_empty());
}

/// In a teardown the spec counts as empty, so its edges are not in the graph: only the Pods'
/// annotations are. backend's Pod lost its annotation, so nothing holds database back any more,
/// although the spec still says backend needs it running.
#[test]
fn rule_8_teardown_graph_comes_from_annotations_only() {
    let w = chain();
    let db = desired_name(&w, "database");
    let be = desired_name(&w, "backend");
    let fe = desired_name(&w, "frontend");
    let pods = vec![
        pod(&db, "database", Some("Running"), false, "{}"),
        pod(&be, "backend", Some("Running"), false, "{}"),
        pod(
            &fe,
            "frontend",
            Some("Running"),
            false,
            r#"{"backend":"ADD_COND_RUNNING"}"#,
        ),
    ];
    let memo = PlanMemo::default();
    let synced = run_with(&memo, &request(w.clone(), pods.clone(), false), false);
    assert_eq!(
        synced["status"]["deleteGraph"],
        json!({"backend": {"frontend": "DelCondNotPendingNorRunning"},
               "database": {"backend": "DelCondNotPendingNorRunning"}})
    );
    let resp = run_with(&memo, &request(w, pods, true), true);
    assert_eq!(
        resp["status"]["deleteGraph"],
        json!({"backend": {"frontend": "DelCondNotPendingNorRunning"}})
    );
    assert_eq!(names(&resp), [be]);
}

/// §8 through the memo of decoded requests, which keeps what a teardown works out of each Pod
/// (its labels and annotations written, its dependencies annotation read) with the Pod: the
/// answers from the kept request are the one worked out afresh, and a request in which one Pod
/// changed a label is answered with the new label.
#[test]
fn rule_8_a_teardown_from_the_kept_request_is_the_one_worked_out_afresh() {
    use crate::memo::Memo;
    use crate::registry::HookContext;
    let w = chain();
    let db = desired_name(&w, "database");
    let be = desired_name(&w, "backend");
    let body = |team: &str| {
        let mut pods = running_chain();
        pods[0]["metadata"]["labels"]["team"] = json!(team);
        request(w.clone(), pods, true)
    };
    let rng = ring::rand::SystemRandom::new();
    let memo = Memo::default();
    let ctx = HookContext {
        now: NOW,
        rng: &rng,
        memo: &memo,
    };
    let text = |body: Vec<u8>| String::from_utf8(body).unwrap();
    let kept = |body: &[u8]| text(super::finalize_hook(body, &ctx).unwrap().body);
    let fresh = |body: &[u8]| {
        let request: Value = serde_json::from_slice(body).unwrap();
        text(crate::registry::output_of(super::finalize_hook, &request, NOW).body)
    };
    let team = |answer: &str| {
        let resp: Value = serde_json::from_str(answer).unwrap();
        assert_eq!(names(&resp), [be.clone(), db.clone()]);
        resp["children"][1]["metadata"]["labels"]["team"].clone()
    };

    let first = body("caf\u{e9} \"db\"");
    let answers: Vec<String> = (0..3).map(|_| kept(&first)).collect();
    assert_eq!(answers[0], fresh(&first));
    assert!(answers.iter().all(|a| *a == answers[0]));
    assert_eq!(team(&answers[0]), "caf\u{e9} \"db\"");
    let changed = body("db");
    let answer = kept(&changed);
    assert_eq!(answer, fresh(&changed));
    assert_eq!(team(&answer), "db");
}

/// §8: a workload that several dependents hold back names each of them, in name order.
#[test]
fn rule_8_a_stopping_workload_names_every_dependent_it_waits_for() {
    let w = json!({
        "database": workload(json!({})),
        "backend": workload(json!({"database": "ADD_COND_RUNNING"})),
        "worker": workload(json!({"database": "ADD_COND_RUNNING"})),
    });
    let pods = vec![
        running_pod(&w, "database", "{}"),
        running_pod(&w, "worker", r#"{"database":"ADD_COND_RUNNING"}"#),
        running_pod(&w, "backend", r#"{"database":"ADD_COND_RUNNING"}"#),
    ];
    let resp = run(&request(w.clone(), pods, true), true);
    assert_eq!(names(&resp), [desired_name(&w, "database")]);
    assert_eq!(
        resp["status"]["workloads"]["database"]["message"],
        "waiting for dependents to stop: backend, worker"
    );
}

/// A Pod without a name could only be left out of the answer, and Metacontroller would delete
/// it: the request is refused, naming where the name is missing.
#[test]
fn a_pod_without_a_name_is_a_request_error_naming_it() {
    let mut nameless = pod("s-a-1", "a", Some("Running"), false, "{}");
    nameless["metadata"]["name"] = json!("");
    let body = request(json!({"a": workload(json!({}))}), vec![nameless], false);
    let err = decode::<SyncRequest>(&body).unwrap_err();
    assert_eq!(err.path, "children.Pod.v1.ns/.metadata.name");
    assert!(
        err.message.starts_with("missing field `metadata.name`"),
        "{}",
        err.message
    );
}

#[test]
fn rule_6_1_cycle_freezes_without_deleting() {
    let w = json!({
        "a": workload(json!({"b": "ADD_COND_RUNNING"})),
        "b": workload(json!({"a": "ADD_COND_RUNNING"})),
    });
    let pods = vec![
        pod("s-a-1", "a", Some("Running"), false, "{}"),
        pod("s-gone-1", "gone", Some("Running"), false, "{}"),
        pod("s-z-1", "z", Some("Running"), true, "{}"),
    ];
    let mut body: Value = serde_json::from_slice(&request(w, pods, false)).unwrap();
    body["parent"]["status"] = json!({"workloads": {"a": {"state": "Running", "subState": "Ok", "message": ""}},
                                      "deleteGraph": {"b": {"a": "DelCondNotPendingNorRunning"}}});
    let resp = run(&serde_json::to_vec(&body).unwrap(), false);
    assert_eq!(names(&resp), ["s-a-1", "s-gone-1"]);
    assert_eq!(
        resp["status"]["workloads"],
        body["parent"]["status"]["workloads"]
    );
    assert_eq!(
        resp["status"]["deleteGraph"],
        body["parent"]["status"]["deleteGraph"]
    );
    let valid = &resp["status"]["conditions"][0];
    assert_eq!(valid["type"], "Valid");
    assert_eq!(valid["status"], "False");
    assert_eq!(valid["reason"], "CycleInDependencies");
    assert_eq!(
        valid["message"],
        "workload dependency 'a' is part of a cycle."
    );
    assert_eq!(valid["observedGeneration"], 2);
}

#[test]
fn rule_6_1_invalid_spec_freezes_with_empty_status_when_none() {
    let w = json!({"a": {"template": {"spec": {"containers": []}}}});
    let resp = run(
        &request(w, vec![pod("s-a-1", "a", None, false, "{}")], false),
        false,
    );
    assert_eq!(names(&resp), ["s-a-1"]);
    assert_eq!(resp["status"]["workloads"], json!({}));
    assert_eq!(resp["status"]["deleteGraph"], json!({}));
    assert_eq!(resp["status"]["conditions"][0]["reason"], "InvalidSpec");
    assert!(resp.get("finalized").is_none());
}

#[test]
fn rule_8_bad_spec_does_not_freeze_teardown() {
    let w = json!({"a": workload(json!({"a": "ADD_COND_RUNNING"}))});
    let resp = run(
        &request(
            w,
            vec![pod("s-a-1", "a", Some("Running"), false, "{}")],
            true,
        ),
        true,
    );
    assert!(names(&resp).is_empty());
    assert_eq!(resp["status"]["conditions"][0]["status"], "False");
    assert_eq!(resp["finalized"], false);
}

#[test]
fn rule_7_valid_condition_keeps_transition_time() {
    let w = json!({"a": workload(json!({}))});
    let mut body: Value = serde_json::from_slice(&request(w, vec![], false)).unwrap();
    body["parent"]["status"] = json!({"conditions": [{"type": "Valid", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "Valid", "message": ""}]});
    let resp = run(&serde_json::to_vec(&body).unwrap(), false);
    assert_eq!(
        resp["status"]["conditions"][0]["lastTransitionTime"],
        "2026-01-01T00:00:00Z"
    );
    assert_eq!(resp["status"]["conditions"][0]["reason"], "Valid");
    assert!(resp.get("resyncAfterSeconds").is_none());
}

#[test]
fn rule_1_v1_and_v2_keys_give_the_same_answer() {
    let w = chain();
    let db = desired_name(&w, "database");
    let body = request(
        w,
        vec![pod(&db, "database", Some("Running"), false, "{}")],
        false,
    );
    let mut v1: Value = serde_json::from_slice(&body).unwrap();
    let pods = v1["children"]["Pod.v1"].as_object().unwrap().clone();
    v1["children"]["Pod.v1"] = Value::Object(
        pods.into_iter()
            .map(|(k, v)| (k.split('/').nth(1).unwrap().to_owned(), v))
            .collect(),
    );
    assert_eq!(
        run(&body, false),
        run(&serde_json::to_vec(&v1).unwrap(), false)
    );
}

#[test]
fn rule_1_output_is_deterministic() {
    let w = chain();
    let db = desired_name(&w, "database");
    let body = request(
        w,
        vec![pod(&db, "database", Some("Running"), false, "{}")],
        false,
    );
    let memo = PlanMemo::default();
    let a = serde_json::to_string(&run_with(&memo, &body, false)).unwrap();
    let b = serde_json::to_string(&run_with(&memo, &body, false)).unwrap();
    assert_eq!(a, b);
}

#[test]
fn a_remembered_plan_gives_the_answer_of_a_fresh_one() {
    let w = chain();
    let db = desired_name(&w, "database");
    let running_db = vec![pod(&db, "database", Some("Running"), false, "{}")];
    let mut changed = chain();
    changed["database"]["template"] = template("img:2");
    let mut cyclic = chain();
    cyclic["database"]["dependencies"] = json!({"frontend": "ADD_COND_RUNNING"});
    let in_namespace = |body: Vec<u8>, ns: &str| {
        let mut v: Value = serde_json::from_slice(&body).unwrap();
        v["parent"]["metadata"]["namespace"] = json!(ns);
        serde_json::to_vec(&v).unwrap()
    };
    let renamed = |body: Vec<u8>| {
        let mut v: Value = serde_json::from_slice(&body).unwrap();
        v["parent"]["metadata"]["name"] = json!("t");
        serde_json::to_vec(&v).unwrap()
    };
    let requests = [
        request(chain(), vec![], false),
        request(chain(), running_db.clone(), false),
        // Same spec and set, other namespace: the plan is reused, the namespace is the request's.
        in_namespace(request(chain(), running_db.clone(), false), "other"),
        // Same spec, other set: other Pod names and labels.
        renamed(request(chain(), vec![], false)),
        // One byte of the spec changed: a new plan.
        request(changed, running_db.clone(), false),
        request(cyclic, running_db.clone(), false),
        request(chain(), running_db, true),
    ];
    let memo = PlanMemo::default();
    for (i, body) in requests.iter().enumerate() {
        let teardown = i == requests.len() - 1;
        assert_eq!(
            run_with(&memo, body, teardown),
            run(body, teardown),
            "request {i}"
        );
    }
    // chain for s, chain for t, changed, cyclic.
    assert_eq!(memo.len(), 4);
    let other = run_with(&memo, &requests[2], false);
    assert_eq!(
        other["children"][0]["metadata"]["namespace"],
        json!("other")
    );
    let t = run_with(&memo, &requests[3], false);
    assert!(t["children"][0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .starts_with("t-database-"));
}

#[test]
fn a_spec_serde_cannot_read_is_a_request_error_under_parent_spec() {
    // A lone surrogate escape is well-formed JSON text but no string.
    let body = String::from_utf8(request(chain(), vec![], false))
        .unwrap()
        .replace("\"image\":\"img\"", "\"image\":\"\\ud800\"");
    let req: SyncRequest = decode(body.as_bytes()).unwrap();
    let err = PlanMemo::default()
        .plan(req.parent.spec.map(|raw| raw.0), &req.parent.metadata.name)
        .unwrap_err();
    assert!(
        err.path.starts_with("parent.spec.workloads."),
        "{}",
        err.path
    );
    assert!(err.message.contains("hex escape"), "{}", err.message);
}

#[test]
fn a_spec_beyond_the_memo_bound_is_planned_but_not_remembered() {
    let memo = PlanMemo::default();
    let mut big = chain();
    big["database"]["template"]["metadata"] =
        json!({"annotations": {"note": "x".repeat(PlanMemo::SPEC_BYTES)}});
    for (workloads, remembered) in [(big, 0), (chain(), 1)] {
        let body = request(workloads, vec![], false);
        let answer = run_with(&memo, &body, false);
        assert_eq!(answer, run(&body, false));
        assert_eq!(names(&answer).len(), 1, "the database Pod is created");
        assert_eq!(memo.len(), remembered);
    }
}

/// §9 on an update: an invalid spec that the update leaves as it was (a label; the finalizer
/// Metacontroller adds and removes) is admitted with a warning, or such a set could never be
/// deleted; an update that changes an invalid spec, even to another invalid one, or makes a
/// valid one invalid, is refused, and so is a CREATE whatever `oldObject` says.
#[test]
fn rule_9_an_update_that_leaves_an_invalid_spec_as_it_was_is_admitted() {
    let set = |workloads: &Value| {
        json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet",
               "metadata": {"name": "s", "namespace": "ns"}, "spec": {"workloads": workloads}})
    };
    let review = |operation: &str, old: Value, new: Value| {
        let request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-9", "operation": operation, "object": new, "oldObject": old,
                        "kind": {"group": "metahooks.dev", "version": "v1alpha1", "kind": "WorkloadSet"}}});
        crate::registry::answer_of(super::validate_hook, &request, NOW)["response"].clone()
    };
    let cycle = json!({"a": workload(json!({"b": "ADD_COND_RUNNING"})),
                       "b": workload(json!({"a": "ADD_COND_RUNNING"}))});
    let mut labelled = set(&cycle);
    labelled["metadata"]["labels"] = json!({"team": "shop"});
    labelled["metadata"]["finalizers"] =
        json!(["metacontroller.io/compositecontroller-delete-graph"]);
    assert_eq!(
        review("UPDATE", set(&cycle), labelled.clone()),
        json!({"uid": "u-9", "allowed": true, "warnings": [
            "the spec is invalid and this update leaves it so: workload dependency 'a' is part of a cycle."]})
    );
    let mut other = cycle.clone();
    other["c"] = workload(json!({}));
    let valid = json!({"a": workload(json!({}))});
    for (operation, old, new) in [
        ("UPDATE", set(&cycle), set(&other)),
        ("UPDATE", set(&valid), set(&cycle)),
        ("CREATE", set(&cycle), labelled),
    ] {
        let answer = review(operation, old, new);
        assert_eq!(answer["allowed"], false, "{operation}: {answer}");
        assert_eq!(answer["status"]["code"], 403);
    }
}

/// §9, what the webhook reads of an object under admission, from the request's text: the kind,
/// the name and the spec as a JSON tree of the object gives them (of a key given twice the last;
/// a metadata that is no object has no name), the rest skipped unread; a spec with a number out
/// of range is a 400 naming where, an old spec only when it is read (the new one invalid).
#[test]
fn rule_9_the_webhook_reads_kind_name_and_spec_as_a_tree_gives_them() {
    let review = |operation: &str, object: &str, old: &str| {
        let body = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u-9","operation":"{operation}","kind":{{"group":"metahooks.dev","version":"v1alpha1","kind":"WorkloadSet"}},"object":{object},"oldObject":{old}}}}}"#
        );
        crate::registry::output_of_text(super::validate_hook, body.as_bytes(), NOW)
            .map(|out| serde_json::from_slice::<Value>(&out.body).unwrap()["response"].clone())
    };
    let allowed = |object: &str| review("CREATE", object, "null").unwrap()["allowed"].clone();
    let spec = r#"{"workloads":{"a":{"template":{"spec":{"containers":[{"name":"c"}]}}}}}"#;
    // A Pod name of 253 characters at most: the set's name, the workload's and 12 more.
    let long = "s".repeat(241);
    let named = |metadata: &str| format!(r#"{{"kind":"WorkloadSet",{metadata},"spec":{spec}}}"#);
    assert_eq!(
        allowed(&named(&format!(r#""metadata":{{"name":"{long}"}}"#))),
        false
    );
    let twice = format!(r#""metadata":{{"name":"{long}"}},"metadata":{{"name":"s"}}"#);
    assert_eq!(allowed(&named(&twice)), true);
    let twice = format!(r#""metadata":{{"name":"s"}},"metadata":{{"name":"{long}"}}"#);
    assert_eq!(allowed(&named(&twice)), false);
    let twice = format!(r#""metadata":{{"name":"{long}","name":"s"}}"#);
    assert_eq!(allowed(&named(&twice)), true);
    assert_eq!(allowed(&named(r#""metadata":["x"]"#)), true);
    let unread = r#""metadata":{"name":"s","managedFields":[{"n":1e400}]},"status":{"n":1e400}"#;
    assert_eq!(allowed(&named(unread)), true);

    let invalid = r#"{"workloads":{"a":{}}}"#;
    let kinds = |first: &str, last: &str| {
        format!(
            r#"{{"kind":"{first}","metadata":{{"name":"s"}},"kind":"{last}","spec":{invalid}}}"#
        )
    };
    assert_eq!(allowed(&kinds("ConfigMap", "WorkloadSet")), false);
    assert_eq!(allowed(&kinds("WorkloadSet", "ConfigMap")), true);
    let specs = |first: &str, last: &str| {
        format!(r#"{{"spec":{first},"kind":"WorkloadSet","spec":{last}}}"#)
    };
    assert_eq!(allowed(&specs(spec, invalid)), false);
    assert_eq!(allowed(&specs(invalid, spec)), true);

    let out_of_range = r#"{"kind":"WorkloadSet","spec":{"workloads":{"a":{"x":1e400}}}}"#;
    let refused = review("CREATE", out_of_range, "null").unwrap_err();
    assert_eq!(refused.path, "request.object.spec.workloads.a.x");
    let object = format!(r#"{{"kind":"WorkloadSet","spec":{spec}}}"#);
    assert_eq!(
        review("UPDATE", &object, out_of_range).unwrap()["allowed"],
        true
    );
    let object = format!(r#"{{"kind":"WorkloadSet","spec":{invalid}}}"#);
    let refused = review("UPDATE", &object, out_of_range).unwrap_err();
    assert_eq!(refused.path, "request.oldObject.spec.workloads.a.x");
    let left_so = review("UPDATE", &object, &object).unwrap();
    assert_eq!(left_so["allowed"], true, "{left_so}");
}

/// §9: the validating webhook, on one object. Warnings for dependencies that are missing or
/// can never hold (every policy and condition that cannot), a denial for an invalid spec, and
/// anything but a CREATE or UPDATE of a WorkloadSet allowed.
#[test]
fn rule_9_validation_warns_denies_and_lets_the_rest_pass() {
    let review = |operation: &str, object: Value| {
        let request = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-9", "operation": operation, "object": object,
                        "kind": {"group": "metahooks.dev", "version": "v1alpha1", "kind": "WorkloadSet"}}});
        crate::registry::answer_of(super::validate_hook, &request, NOW)["response"].clone()
    };
    let set = |workloads: Value| {
        json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet",
               "metadata": {"name": "s", "namespace": "ns"}, "spec": {"workloads": workloads}})
    };
    let policy = |p: &str| json!({"restartPolicy": p, "template": template("img")});
    let workloads = json!({
        "always": policy("ALWAYS"), "on-failure": policy("ON_FAILURE"), "never": policy("NEVER"),
        "user": workload(json!({
            "always": "ADD_COND_SUCCEEDED", "cache": "ADD_COND_RUNNING",
            "never": "ADD_COND_FAILED", "on-failure": "ADD_COND_FAILED"})),
        "user2": workload(json!({"always": "ADD_COND_FAILED", "on-failure": "ADD_COND_SUCCEEDED"})),
    });
    let can_never = |w: &str, c: &str, d: &str, p: &str| {
        format!("workload '{w}': condition {c} on '{d}' can never hold with restartPolicy {p}")
    };
    for operation in ["CREATE", "UPDATE"] {
        let answer = review(operation, set(workloads.clone()));
        assert_eq!(
            answer,
            json!({"uid": "u-9", "allowed": true, "warnings": [
                can_never("user", "ADD_COND_SUCCEEDED", "always", "ALWAYS"),
                "workload 'user' depends on 'cache', which is not part of this WorkloadSet; it waits until such a workload exists",
                can_never("user", "ADD_COND_FAILED", "on-failure", "ON_FAILURE"),
                can_never("user2", "ADD_COND_FAILED", "always", "ALWAYS"),
            ]}),
            "{operation}"
        );
    }
    let invalid = review("CREATE", set(json!({"a": {"template": {}}})));
    assert_eq!(invalid["allowed"], false);
    assert_eq!(invalid["status"]["code"], 403);
    for answer in [
        review("DELETE", set(workloads.clone())),
        review("CONNECT", set(json!({"a": {"template": {}}}))),
    ] {
        assert_eq!(answer, json!({"uid": "u-9", "allowed": true}));
    }
    let mut other = set(workloads);
    other["kind"] = json!("ConfigMap");
    assert_eq!(
        review("CREATE", other)["warnings"],
        json!(["object is a 'ConfigMap', not a WorkloadSet; allowed without validation"])
    );
    assert_eq!(
        review("CREATE", Value::Null)["warnings"],
        json!(["no object to validate; allowed"])
    );
}

/// §8: the sync hook tears down when Metacontroller says the parent is finalizing, as the
/// finalize hook always does.
#[test]
fn rule_8_the_sync_hook_tears_down_when_finalizing() {
    let answer = |finalizing: bool, hook: crate::registry::HookFn| {
        let body: Value = serde_json::from_slice(&request(chain(), vec![], finalizing)).unwrap();
        crate::registry::answer_of(hook, &body, NOW)
    };
    assert_eq!(answer(true, super::sync_hook)["finalized"], true);
    assert_eq!(answer(false, super::finalize_hook)["finalized"], true);
    assert!(answer(false, super::sync_hook).get("finalized").is_none());
}

/// Children of a type the hook does not keep would be left out of its answer, and
/// Metacontroller would delete them: such a request is refused, naming the type key. An empty
/// map of such a type, and such objects among the related ones, are fine.
#[test]
fn children_of_a_type_the_hook_does_not_keep_are_refused() {
    let with = |at: &str, objects: Value| {
        let mut body: Value = serde_json::from_slice(&request(chain(), vec![], false)).unwrap();
        body[at]["ConfigMap.v1"] = objects;
        serde_json::to_vec(&body).unwrap()
    };
    let cm = json!({"ns/c": {"metadata": {"name": "c", "namespace": "ns"}}});
    let err = decode::<SyncRequest>(&with("children", cm.clone())).unwrap_err();
    assert_eq!(err.path, "children.ConfigMap.v1");
    assert!(
        err.message
            .starts_with("1 object(s) of a type this hook does not keep (it keeps Pod.v1)"),
        "{}",
        err.message
    );
    assert!(decode::<SyncRequest>(&with("children", json!({}))).is_ok());
    assert!(decode::<SyncRequest>(&with("related", cm)).is_ok());
}
