//! Property tests over generated observed states: determinism (same request, same bytes),
//! idempotence (the desired state fed back as the observed state changes nothing it should not),
//! safety (no managed child omitted unless the spec says it must go), and for delete-graph that
//! no dependency is released while a RUNNING-dependent is pending or running.

use metahooks_hooks::registry::{find, HookContext, HookOutput};
use metahooks_hooks::{Reading, RequestError, HOOKS};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

fn now() -> time::OffsetDateTime {
    time::macros::datetime!(2026-06-01 12:00:00 UTC)
}

/// The hook `id` run on `body` at [`now`], with `memo` and the system's random source.
fn run(
    id: &str,
    body: &[u8],
    memo: &metahooks_hooks::memo::Memo,
) -> Result<HookOutput, RequestError> {
    let rng = ring::rand::SystemRandom::new();
    let ctx = HookContext {
        now: now(),
        rng: &rng,
        memo,
    };
    (find(id).unwrap().run)(body, &ctx)
}

fn call(id: &str, body: &Value) -> (Vec<u8>, Value) {
    let out = run(id, &serde_json::to_vec(body).unwrap(), &Default::default()).unwrap();
    let v = serde_json::from_slice(&out.body).unwrap();
    (out.body, v)
}

fn names(children: &Value) -> BTreeSet<String> {
    children
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

// ---- delete-graph ----

const CONDS: [&str; 3] = ["ADD_COND_RUNNING", "ADD_COND_SUCCEEDED", "ADD_COND_FAILED"];
const PHASES: [Option<&str>; 6] = [
    None,
    Some("Pending"),
    Some("Running"),
    Some("Succeeded"),
    Some("Failed"),
    Some("Unknown"),
];

#[derive(Debug, Clone)]
struct Pod {
    workload: usize,
    current: bool,
    phase: usize,
    terminating: bool,
}

/// Workloads `w0..wn` depending only on lower indexes (acyclic), some of them removed from the
/// spec, and Pods of any of them in any state.
/// Per workload its (dependency, condition) pairs; which workloads are in the spec; the Pods.
type DeleteGraphCase = (Vec<Vec<(usize, usize)>>, Vec<bool>, Vec<Pod>);

fn delete_graph_case() -> impl Strategy<Value = DeleteGraphCase> {
    (1usize..7).prop_flat_map(|n| {
        let deps = (0..n)
            .map(|i| proptest::collection::vec((0..i.max(1), 0..3usize), 0..=i.min(3)))
            .collect::<Vec<_>>();
        let in_spec = proptest::collection::vec(any::<bool>(), n);
        let pods = proptest::collection::vec(
            (0..n, any::<bool>(), 0..6usize, any::<bool>()).prop_map(
                |(workload, current, phase, terminating)| Pod {
                    workload,
                    current,
                    phase,
                    terminating,
                },
            ),
            0..8,
        );
        (deps, in_spec, pods)
    })
}

fn workload_spec(i: usize, deps: &[(usize, usize)]) -> Value {
    let d: serde_json::Map<String, Value> = deps
        .iter()
        .filter(|(d, _)| *d < i)
        .map(|(d, c)| (format!("w{d}"), json!(CONDS[*c])))
        .collect();
    json!({"dependencies": d, "restartPolicy": "NEVER", "template": {"spec": {"containers": [{"name": "c", "image": format!("img-{i}")}]}}})
}

fn delete_graph_request(deps: &[Vec<(usize, usize)>], in_spec: &[bool], pods: &[Pod]) -> Value {
    let workloads: serde_json::Map<String, Value> = (0..deps.len())
        .filter(|i| in_spec[*i])
        .map(|i| (format!("w{i}"), workload_spec(i, &deps[i])))
        .collect();
    let mut body = json!({"parent": {"metadata": {"name": "s", "namespace": "ns", "uid": "u", "generation": 1}, "spec": {"workloads": workloads}},
                          "children": {"Pod.v1": {}}});
    // Desired names, from the hook itself with every workload independent.
    let mut independent = body.clone();
    let all: serde_json::Map<String, Value> = (0..deps.len())
        .map(|i| (format!("w{i}"), workload_spec(i, &[])))
        .collect();
    independent["parent"]["spec"]["workloads"] = Value::Object(all);
    let (_, d) = call("delete-graph/sync", &independent);
    let desired: BTreeMap<String, String> = d["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["metadata"]["labels"]["metahooks.dev/workload"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                c["metadata"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let mut seen = BTreeSet::new();
    for (k, p) in pods.iter().enumerate() {
        let w = format!("w{}", p.workload);
        let name = if p.current {
            desired[&w].clone()
        } else {
            format!("s-{w}-old{k}")
        };
        if !seen.insert(name.clone()) {
            continue;
        }
        let annotation = workload_spec(p.workload, &deps[p.workload])["dependencies"].to_string();
        let mut pod = json!({"metadata": {"name": name, "namespace": "ns", "labels": {"metahooks.dev/workload": w},
                                          "annotations": {"metahooks.dev/dependencies": annotation}},
                             "spec": {"containers": []}});
        if let Some(phase) = PHASES[p.phase] {
            pod["status"] = json!({"phase": phase});
        }
        if p.terminating {
            pod["metadata"]["deletionTimestamp"] = json!("2026-06-01T11:00:00Z");
        }
        body["children"]["Pod.v1"][name.clone()] = pod;
    }
    body
}

fn live(pod: &Value) -> bool {
    pod["metadata"].get("deletionTimestamp").is_none()
        && matches!(
            pod["status"]["phase"].as_str(),
            None | Some("Pending") | Some("Running")
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn delete_graph_properties((deps, in_spec, pods) in delete_graph_case()) {
        let body = delete_graph_request(&deps, &in_spec, &pods);
        let (bytes, resp) = call("delete-graph/sync", &body);
        // Determinism.
        prop_assert_eq!(&bytes, &call("delete-graph/sync", &body).0);
        let kept = names(&resp["children"]);
        let observed = body["children"]["Pod.v1"].as_object().unwrap();
        for (name, pod) in observed {
            let terminating = pod["metadata"].get("deletionTimestamp").is_some();
            if terminating {
                prop_assert!(!kept.contains(name), "terminating Pods are never returned");
                continue;
            }
            if kept.contains(name) {
                continue;
            }
            // Omitted: it must be obsolete, and no live Pod may need its workload running.
            let w = pod["metadata"]["labels"]["metahooks.dev/workload"].as_str().unwrap();
            let i: usize = w[1..].parse().unwrap();
            prop_assert!(!in_spec[i] || name.contains("-old"), "a current Pod was omitted: {}", name);
            for other in observed.values() {
                let needs: Value = serde_json::from_str(other["metadata"]["annotations"]["metahooks.dev/dependencies"].as_str().unwrap()).unwrap();
                prop_assert!(!(needs[w] == "ADD_COND_RUNNING" && live(other)),
                    "{} released while {} needs it running", name, other["metadata"]["name"]);
            }
        }
        // Idempotence: the response fed back (created Pods observed Pending, kept ones as they
        // were) deletes none of the Pods it just created or kept for a spec workload.
        let mut again = body.clone();
        let mut next = serde_json::Map::new();
        for c in resp["children"].as_array().unwrap() {
            let name = c["metadata"]["name"].as_str().unwrap().to_owned();
            let mut pod = observed.get(&name).cloned().unwrap_or_else(|| { let mut p = c.clone(); p["status"] = json!({"phase": "Pending"}); p });
            pod["metadata"]["annotations"] = c["metadata"]["annotations"].clone();
            next.insert(name, pod);
        }
        again["children"]["Pod.v1"] = Value::Object(next.clone());
        let (_, resp2) = call("delete-graph/sync", &again);
        let kept2 = names(&resp2["children"]);
        for (name, pod) in &next {
            let w = pod["metadata"]["labels"]["metahooks.dev/workload"].as_str().unwrap();
            let current = in_spec[w[1..].parse::<usize>().unwrap()] && !name.contains("-old");
            if current {
                prop_assert!(kept2.contains(name), "{} created or kept, then dropped", name);
            }
        }
    }
}

// ---- app-discovery ----

#[derive(Debug, Clone)]
struct Kacr {
    app: usize,
    malformed: bool,
    single: bool,
    age: i64,
}

/// Requests; workloads as (app, version, has a version); apps managed; apps user-defined.
type AppDiscoveryCase = (Vec<Kacr>, Vec<(usize, usize, bool)>, Vec<bool>, Vec<bool>);

fn app_discovery_case() -> impl Strategy<Value = AppDiscoveryCase> {
    let kacrs = proptest::collection::vec(
        (
            0..3usize,
            proptest::bool::weighted(0.2),
            any::<bool>(),
            0i64..60,
        )
            .prop_map(|(app, malformed, single, age)| Kacr {
                app,
                malformed,
                single,
                age,
            }),
        0..5,
    );
    // workloads: (app, version index, has version)
    let workloads =
        proptest::collection::vec((0..3usize, 0..3usize, proptest::bool::weighted(0.9)), 0..6);
    let managed = proptest::collection::vec(any::<bool>(), 3);
    let user_defined = proptest::collection::vec(proptest::bool::weighted(0.2), 3);
    (kacrs, workloads, managed, user_defined)
}

fn app_discovery_request(
    kacrs: &[Kacr],
    workloads: &[(usize, usize, bool)],
    managed: &[bool],
    user: &[bool],
) -> Value {
    let mut children_kacr = serde_json::Map::new();
    for (i, k) in kacrs.iter().enumerate() {
        let created = now() - time::Duration::seconds(k.age);
        let mut o = json!({"metadata": {"name": format!("k{i}"), "namespace": "ns", "creationTimestamp": metahooks_hooks::meta::rfc3339(created),
                                        "labels": {"app.kubernetes.io/managed-by": "keptn"}, "annotations": {}},
                           "spec": {"appName": format!("app{}", k.app)}});
        if k.single {
            o["metadata"]["annotations"]["keptn.sh/app-type"] = json!("single-service");
        }
        if k.malformed {
            o["spec"] = json!({});
        }
        children_kacr.insert(format!("k{i}"), o);
    }
    let mut child_apps = serde_json::Map::new();
    let mut related_apps = serde_json::Map::new();
    for a in 0..3 {
        if user[a] {
            related_apps.insert(format!("app{a}"), json!({"metadata": {"name": format!("app{a}"), "namespace": "ns"}, "spec": {"version": "user"}}));
        } else if managed[a] {
            let app = json!({"metadata": {"name": format!("app{a}"), "namespace": "ns", "labels": {"app.kubernetes.io/managed-by": "keptn"}},
                             "spec": {"version": "old", "revision": 2, "workloads": [{"name": "gone", "version": "0"}]}});
            child_apps.insert(format!("app{a}"), app.clone());
            related_apps.insert(format!("app{a}"), app);
        }
    }
    let mut wl = serde_json::Map::new();
    for (i, (app, v, has)) in workloads.iter().enumerate() {
        let mut spec = json!({"app": format!("app{app}")});
        if *has {
            spec["version"] = json!(format!("1.{v}"));
        }
        wl.insert(format!("w{i}"), json!({"metadata": {"name": format!("app{app}-w{i}"), "namespace": "ns"}, "spec": spec}));
    }
    json!({"parent": {"metadata": {"name": "d", "namespace": "ns", "generation": 1}, "spec": {"timeoutSeconds": 30}},
           "children": {"KeptnAppCreationRequest.lifecycle.keptn.sh/v1": children_kacr, "KeptnApp.lifecycle.keptn.sh/v1": child_apps},
           "related": {"KeptnWorkload.lifecycle.keptn.sh/v1": wl, "KeptnApp.lifecycle.keptn.sh/v1": related_apps}})
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn app_discovery_properties((kacrs, workloads, managed, user) in app_discovery_case()) {
        let body = app_discovery_request(&kacrs, &workloads, &managed, &user);
        let (bytes, resp) = call("app-discovery/sync", &body);
        prop_assert_eq!(&bytes, &call("app-discovery/sync", &body).0);
        let out = names(&resp["children"]);
        // Safety: every managed app survives; user-defined ones are never emitted.
        for a in 0..3 {
            let app = format!("app{a}");
            if managed[a] && !user[a] { prop_assert!(out.contains(&app), "managed {} omitted", app); }
            if user[a] { prop_assert!(!out.contains(&app), "user-defined {} emitted", app); }
        }
        // Malformed requests are always kept.
        for (i, k) in kacrs.iter().enumerate() {
            let name = format!("k{i}");
            if k.malformed { prop_assert!(out.contains(&name), "malformed {} dropped", name); }
        }
        // Idempotence: the response fed back (apps and kept requests as observed) changes nothing
        // but the requests handled, which are gone.
        let mut again = body.clone();
        let kacr_key = "KeptnAppCreationRequest.lifecycle.keptn.sh/v1";
        let app_key = "KeptnApp.lifecycle.keptn.sh/v1";
        let mut kept_kacrs = serde_json::Map::new();
        let mut apps = serde_json::Map::new();
        for c in resp["children"].as_array().unwrap() {
            let name = c["metadata"]["name"].as_str().unwrap().to_owned();
            if c["kind"] == "KeptnApp" { apps.insert(name, c.clone()); } else { kept_kacrs.insert(name.clone(), body["children"][kacr_key][&name].clone()); }
        }
        again["children"][kacr_key] = Value::Object(kept_kacrs);
        again["children"][app_key] = Value::Object(apps.clone());
        for (n, a) in &apps { again["related"][app_key][n] = a.clone(); }
        let (_, resp2) = call("app-discovery/sync", &again);
        prop_assert_eq!(&resp2["children"], &resp["children"]);
    }
}

// ---- cert-rotation ----

/// One CA pair per MRC name, made once (key generation is the slow part).
fn ca_secret(name: &str) -> Value {
    use std::sync::OnceLock;
    static CAS: OnceLock<Vec<Value>> = OnceLock::new();
    let cas = CAS.get_or_init(|| {
        ["a", "b", "c"]
            .iter()
            .map(|n| {
                let pair = metahooks_hooks::pki::generate_ca(n, "cluster.local", now(), &ring::rand::SystemRandom::new()).unwrap();
                use base64::Engine;
                let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
                json!({"metadata": {"name": format!("{n}-ca"), "namespace": "mesh"}, "type": "Opaque",
                       "data": {"ca.crt": b(&pair.cert_pem), "private.key": b(&pair.key_pem)}})
            })
            .collect()
    });
    cas[["a", "b", "c"].iter().position(|n| *n == name).unwrap()].clone()
}

const ROLES: [Option<&str>; 5] = [
    None,
    Some("active"),
    Some("passive"),
    Some("inactive"),
    Some("bogus"),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Any roles, CAs present or not, any previous issuers: a frozen sync returns exactly the
    /// observed children; a working one, fed back its own output, returns the same bytes.
    #[test]
    fn cert_rotation_properties(roles in proptest::collection::vec(0..5usize, 3), present in proptest::collection::vec(proptest::bool::weighted(0.85), 3), prev in 0..4usize) {
        let names = ["a", "b", "c"];
        let mrcs: serde_json::Map<String, Value> = names.iter().zip(&roles).map(|(n, r)| {
            let mut spec = json!({"trustDomain": "cluster.local", "provider": {"tresor": {"ca": {"secretRef": {"name": format!("{n}-ca"), "namespace": "mesh"}}}}});
            if let Some(role) = ROLES[*r] { spec["role"] = json!(role); }
            (n.to_string(), json!({"metadata": {"name": n, "namespace": "mesh"}, "spec": spec}))
        }).collect();
        let secrets: serde_json::Map<String, Value> = names.iter().zip(&present).filter(|(_, p)| **p).map(|(n, _)| (format!("{n}-ca"), ca_secret(n))).collect();
        let status = match prev { 0 => json!({}), 1 => json!({"signingIssuer": "a", "validatingIssuer": "a"}), 2 => json!({"signingIssuer": "b", "validatingIssuer": "a"}), _ => json!({"signingIssuer": "c", "validatingIssuer": "b"}) };
        let body = json!({"parent": {"metadata": {"name": "m", "namespace": "mesh", "generation": 1},
                                     "spec": {"trustBundle": {"configMapName": "bundle"}, "certificates": [{"secretName": "leaf", "commonName": "web"}]},
                                     "status": status},
                          "children": {"ConfigMap.v1": {}, "Secret.v1": {}},
                          "related": {"MeshRootCertificate.config.openservicemesh.io/v1alpha2": mrcs, "Secret.v1": secrets}});
        let (_, first) = call("cert-rotation/sync", &body);
        let ready = first["status"]["conditions"][0]["status"].as_str().unwrap().to_owned();
        if ready == "False" {
            prop_assert_eq!(&first["children"], &json!([]), "frozen with nothing observed returns nothing");
            prop_assert_eq!(&first["status"]["signingIssuer"], &body["parent"]["status"]["signingIssuer"]);
            return Ok(());
        }
        // Feed the output back as the observed children (and as related Secrets).
        let mut again = body.clone();
        again["parent"]["status"] = first["status"].clone();
        for c in first["children"].as_array().unwrap() {
            let key = if c["kind"] == "ConfigMap" { "ConfigMap.v1" } else { "Secret.v1" };
            let name = c["metadata"]["name"].as_str().unwrap().to_owned();
            again["children"][key][&name] = c.clone();
            if key == "Secret.v1" { again["related"]["Secret.v1"][&name] = c.clone(); }
        }
        let (second_bytes, second) = call("cert-rotation/sync", &again);
        prop_assert_eq!(&second["children"], &first["children"], "unchanged state, same children");
        prop_assert_eq!(second_bytes, call("cert-rotation/sync", &again).0, "byte-identical");
        // And a frozen sync over those children hands every one of them back.
        let mut broken = again.clone();
        broken["parent"]["spec"]["trustBundle"] = json!({});
        let (_, frozen) = call("cert-rotation/sync", &broken);
        prop_assert_eq!(frozen["children"].as_array().unwrap().len(), first["children"].as_array().unwrap().len());
    }
}

// ---- the memo of decoded requests ----

/// What a hook answers `body` with, given `memo`: the answer, or the error's path and message.
/// A certificate and a key made now (a leaf's, a CA's) are left out, with a leaf's seal: they are
/// drawn from the system's random source, so two makings never give the same bytes.
fn answer(
    id: &str,
    body: &[u8],
    memo: &metahooks_hooks::memo::Memo,
) -> Result<Value, (String, String)> {
    let out = run(id, body, memo).map_err(|e| (e.path, e.message))?;
    let mut answer: Value = serde_json::from_slice(&out.body).unwrap();
    let sent = String::from_utf8_lossy(body);
    let objects = ["children", "attachments"].map(|key| {
        answer
            .get_mut(key)
            .and_then(Value::as_array_mut)
            .map(std::mem::take)
    });
    for (key, objects) in ["children", "attachments"].iter().zip(objects) {
        let Some(mut objects) = objects else { continue };
        for object in &mut objects {
            let Some(data) = object.get_mut("data").and_then(Value::as_object_mut) else {
                continue;
            };
            let mut made_now = false;
            for (name, value) in data.iter_mut() {
                let made = name.ends_with(".crt") || name.ends_with(".key");
                if made && !sent.contains(value.as_str().unwrap_or_default()) {
                    *value = json!("made now");
                    made_now = true;
                }
            }
            // A leaf's seal covers its certificate.
            let seal = "/metadata/annotations/metahooks.dev~1leaf-seal";
            if let Some(seal) = object.pointer_mut(seal).filter(|_| made_now) {
                *seal = json!("made now");
            }
        }
        answer[*key] = Value::Array(objects);
    }
    Ok(answer)
}

/// Every sync and finalize request among the fixtures, with the hook it is for.
fn sync_fixtures() -> &'static [(String, Vec<u8>)] {
    use std::sync::OnceLock;
    static FIXTURES: OnceLock<Vec<(String, Vec<u8>)>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let mut found = Vec::new();
        for controller in [
            "app-discovery",
            "cert-rotation",
            "delete-graph",
            "mesh-root-certificate",
        ] {
            for entry in std::fs::read_dir(root.join(controller)).unwrap() {
                let name = entry.unwrap().file_name().into_string().unwrap();
                let Some(case) = name.strip_suffix(".request.json") else {
                    continue;
                };
                let hook = case.split('-').next().unwrap();
                if hook == "sync" || hook == "finalize" {
                    let body = std::fs::read(root.join(controller).join(&name)).unwrap();
                    found.push((format!("{controller}/{hook}"), body));
                }
            }
        }
        found.sort();
        assert!(found.len() > 40, "sync fixtures missing");
        found
    })
}

/// Every sync and finalize answer tells `/metrics` the condition it gave its object, the one of
/// its kind (`Valid` for a WorkloadSet, `Accepted` for an MRC, `Ready` otherwise), with the
/// status and reason the answer writes; a decorator answer that leaves the status alone, none.
#[test]
fn a_sync_answer_names_the_condition_it_writes() {
    let mut seen = BTreeSet::new();
    for (id, body) in sync_fixtures() {
        let Ok(out) = run(id, body, &Default::default()) else {
            continue;
        };
        let answer: Value = serde_json::from_slice(&out.body).unwrap();
        let type_ = match id.split('/').next() {
            Some("delete-graph") => "Valid",
            Some("mesh-root-certificate") => "Accepted",
            _ => "Ready",
        };
        let written = answer["status"]["conditions"]
            .as_array()
            .and_then(|all| all.iter().find(|c| c["type"] == type_));
        let counted = out
            .condition
            .map(|c| (c.type_, c.status, c.reason.to_owned()));
        let want = written.map(|c| {
            let reason = c["reason"].as_str().unwrap().to_owned();
            (type_, c["status"] == "True", reason)
        });
        assert_eq!(counted, want, "{id}");
        seen.insert((id.as_str(), want.map(|(_, status, _)| status)));
    }
    for id in [
        "app-discovery/sync",
        "cert-rotation/sync",
        "delete-graph/sync",
        "mesh-root-certificate/sync",
    ] {
        for status in [true, false] {
            assert!(
                seen.contains(&(id, Some(status))),
                "{id}: no fixture answers {status}"
            );
        }
    }
    assert!(seen.contains(&("delete-graph/finalize", Some(true))));
}

/// Every sync and finalize answer tells `/metrics` how its request was read: decoded whole the
/// first time, kept the second. The hooks that keep requests are exactly the sync and finalize
/// hooks.
#[test]
fn a_sync_answer_says_how_its_request_was_read() {
    for (id, body) in sync_fixtures() {
        let memo = metahooks_hooks::memo::Memo::default();
        let Ok(first) = run(id, body, &memo) else {
            continue;
        };
        assert_eq!(first.reading, Some(Reading::Whole), "{id}");
        let second = run(id, body, &memo).unwrap();
        assert_eq!(second.reading, Some(Reading::Kept), "{id}");
    }
    for hook in HOOKS {
        let synced = sync_fixtures().iter().any(|(id, _)| id == hook.id);
        assert_eq!(hook.kind.keeps_requests(), synced, "{}", hook.id);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A request that differs from one kept in a byte (changed, added or taken out anywhere)
    /// gets exactly the answer, or the error, it gets when nothing is kept: whether the kept
    /// request answers it or it is decoded afresh never shows.
    #[test]
    fn a_request_near_a_kept_one_is_answered_as_if_nothing_were_kept(
        fixture in any::<proptest::sample::Index>(),
        at in any::<proptest::sample::Index>(),
        edit in 0..3usize,
        byte in proptest::sample::select(b"0a\" {}[],:\\x".to_vec()),
    ) {
        let (id, body) = fixture.get(sync_fixtures());
        let mut changed = body.clone();
        let at = at.index(body.len());
        match edit {
            0 => changed[at] = byte,
            1 => changed.insert(at, byte),
            _ => { changed.remove(at); }
        }
        let kept = metahooks_hooks::memo::Memo::default();
        let _ = answer(id, body, &kept);
        let fresh = answer(id, &changed, &metahooks_hooks::memo::Memo::default());
        prop_assert_eq!(answer(id, &changed, &kept), fresh);
    }
}

/// Any JSON value, its strings with quotes, backslashes and slashes among their characters.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z\"\\\\/ ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

/// `body` with the value of its top-level field `name` written as `text`; `None` when it has
/// no such field.
fn with_field(body: &[u8], name: &str, text: &str) -> Option<Vec<u8>> {
    let fields: BTreeMap<String, &serde_json::value::RawValue> =
        serde_json::from_slice(body).unwrap();
    let value = fields.get(name)?.get();
    let start = value.as_ptr() as usize - body.as_ptr() as usize;
    let end = start + value.len();
    Some([&body[..start], text.as_bytes(), &body[end..]].concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A request that differs from one kept only in its `controller` (any JSON value, written
    /// compact or pretty), in `finalizing` or in both gets exactly the answer, or the error, it
    /// gets when nothing is kept.
    #[test]
    fn a_request_whose_controller_or_finalizing_changed_is_answered_as_if_nothing_were_kept(
        fixture in any::<proptest::sample::Index>(),
        controller in proptest::option::of(json_value()),
        pretty in any::<bool>(),
        finalizing in proptest::option::of(any::<bool>()),
    ) {
        let (id, body) = fixture.get(sync_fixtures());
        let mut changed = body.clone();
        if let Some(controller) = controller {
            let text = if pretty {
                serde_json::to_string_pretty(&controller)
            } else {
                serde_json::to_string(&controller)
            };
            changed = with_field(&changed, "controller", &text.unwrap()).unwrap();
        }
        if let Some(finalizing) = finalizing {
            let text = finalizing.to_string();
            changed = with_field(&changed, "finalizing", &text).unwrap_or(changed);
        }
        let kept = metahooks_hooks::memo::Memo::default();
        let _ = answer(id, body, &kept);
        let fresh = answer(id, &changed, &metahooks_hooks::memo::Memo::default());
        prop_assert_eq!(answer(id, &changed, &kept), fresh);
    }
}

/// `request` with an object of one of its maps of a type key (in `children`, `attachments` or
/// `related`) taken out (`copy_to` `None`) or copied there under another key and name; `false`
/// when it has no object to take out or copy.
fn reshape(request: &mut Value, map: usize, object: usize, copy_to: Option<usize>) -> bool {
    let sections = ["children", "attachments", "related"];
    let Some(fields) = request.as_object_mut() else {
        return false;
    };
    let mut maps: Vec<&mut serde_json::Map<String, Value>> = fields
        .iter_mut()
        .filter(|(field, _)| sections.contains(&field.as_str()))
        .filter_map(|(_, types)| types.as_object_mut())
        .flat_map(|types| types.values_mut().filter_map(Value::as_object_mut))
        .filter(|objects| !objects.is_empty())
        .collect();
    let count = maps.len();
    let Some(objects) = maps.get_mut(map % count.max(1)) else {
        return false;
    };
    let key = objects.keys().nth(object % objects.len()).unwrap().clone();
    let Some(to) = copy_to else {
        objects.remove(&key);
        return true;
    };
    let mut copy = objects[&key].clone();
    // Keys are written in order: the copy's goes before, among or after the others.
    let name = format!("{}-copy-{to}", ["0", "m", "~"][to % 3]);
    if let Some(object_name) = copy.pointer_mut("/metadata/name") {
        *object_name = json!(name);
    }
    objects.insert(name, copy);
    true
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A request that is the one before with objects taken out of a map of a type key or put
    /// in, again and again (as after each sync that creates or deletes children), in the next
    /// map too or not (as a Secret cert-rotation creates comes back in children and related),
    /// with the parent changed too or not, gets exactly the answer, or the error, it gets when
    /// nothing is kept.
    #[test]
    fn a_request_with_objects_taken_out_or_put_in_is_answered_as_if_nothing_were_kept(
        fixture in any::<proptest::sample::Index>(),
        edits in proptest::collection::vec(
            (
                0..usize::MAX,
                0..usize::MAX,
                proptest::option::of(0..usize::MAX),
                any::<bool>(),
                any::<bool>(),
            ),
            1..5,
        ),
    ) {
        let (id, body) = fixture.get(sync_fixtures());
        // Written compactly, keys in order, so that an edit changes only its object's text.
        let mut request: Value = serde_json::from_slice(body).unwrap();
        let kept = metahooks_hooks::memo::Memo::default();
        let _ = answer(id, &serde_json::to_vec(&request).unwrap(), &kept);
        for (step, (map, object, copy_to, parent, next)) in edits.into_iter().enumerate() {
            if !reshape(&mut request, map, object, copy_to) {
                continue;
            }
            if next {
                reshape(&mut request, map + 1, object, copy_to);
            }
            // Written before `related` (the keys are in order), as Metacontroller writes the
            // parent before the objects.
            let metadata = request.pointer_mut("/parent/metadata").and_then(Value::as_object_mut);
            if let Some(metadata) = metadata.filter(|_| parent) {
                let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
                if let Some(annotations) = annotations.as_object_mut() {
                    annotations.insert("metahooks.dev/step".into(), json!(step.to_string()));
                }
            }
            let changed = serde_json::to_vec(&request).unwrap();
            let fresh = answer(id, &changed, &metahooks_hooks::memo::Memo::default());
            prop_assert_eq!(answer(id, &changed, &kept), fresh);
        }
    }
}
