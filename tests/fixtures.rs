//! Every golden pair under fixtures/ through the real router (no socket) and through
//! `metahooks run`: adding
//! `fixtures/<controller>/<hook>-<case>.request.json` and its `.response.json` adds a test.
//! The clock is fixed at FIXTURE_NOW so that timestamps in the golden responses are exact; the
//! string `<generated>` in a golden response stands for freshly generated key material. Each
//! request is also held to what a cluster sends: objects the API server would store (checked
//! by the simulator's API server, `mod sim`), reviews as it sends them, and Metacontroller's
//! requests as its own code builds them from the project's manifests.

mod common;
// The benches' request generators, held to the fixtures' checks.
#[path = "../hooks/benches/requests.rs"]
mod requests;
mod sim;

use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use metahooks::config::ServeConfig;
use metahooks::{router, App, AppState, Limits};
use metahooks_hooks::{Hook, HookKind, HOOKS};
use std::path::{Path, PathBuf};
use tower::ServiceExt;

/// The `now` of every fixture.
const FIXTURE_NOW: &str = "2026-06-01T12:00:00Z";

fn fixture_now() -> time::OffsetDateTime {
    metahooks_hooks::meta::parse_rfc3339(FIXTURE_NOW).unwrap()
}

/// A router as `serve` builds it, its hooks' clock at [`fixture_now`].
fn fixture_router() -> App {
    let config = ServeConfig::from_args(&[]).unwrap();
    router(AppState::with_clock(
        Limits::from(&config),
        std::sync::Arc::new(fixture_now),
    ))
}

/// The status and JSON body of `body` posted to `route` of a fresh router.
async fn answer(route: &str, body: Vec<u8>) -> (u16, serde_json::Value) {
    answer_from(fixture_router(), route, body).await
}

/// As [`answer`], from `app` (a clone shares the hooks' memos).
async fn answer_from(app: App, route: &str, body: Vec<u8>) -> (u16, serde_json::Value) {
    let response = app
        .oneshot(
            Request::post(route)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    assert!(!bytes.is_empty(), "{route}: empty body");
    (
        status,
        serde_json::from_slice(&bytes).expect("JSON response"),
    )
}

/// Posts `body` to `route`, asserts that it is refused with a 400 (`case` says which request
/// in a failure), and returns the path the error names.
async fn refused_at(route: &str, body: &serde_json::Value, case: &str) -> String {
    let (status, answer) = answer(route, serde_json::to_vec(body).unwrap()).await;
    assert_eq!(status, 400, "{case}: {answer}");
    answer["path"].as_str().unwrap_or_default().to_owned()
}

/// Every request is answered three times by one router, as Metacontroller's resyncs are: the
/// third answer comes from the memos filled by the first two (and by every fixture before it;
/// a sync request is kept decoded once seen twice), and must match the golden response as the
/// first does.
#[tokio::test]
async fn every_fixture_pair_matches_its_golden_response() {
    let root = common::fixture_path("");
    let app = fixture_router();
    let mut checked = 0;
    let mut failures = Vec::new();
    let mut controllers: Vec<_> = std::fs::read_dir(&root).unwrap().flatten().collect();
    controllers.sort_by_key(|e| e.file_name());
    for controller in controllers.into_iter().filter(|e| e.path().is_dir()) {
        let mut files: Vec<_> = std::fs::read_dir(controller.path())
            .unwrap()
            .flatten()
            .collect();
        files.sort_by_key(|e| e.file_name());
        for file in files {
            let name = file.file_name().to_string_lossy().into_owned();
            let Some(case) = name.strip_suffix(".request.json") else {
                continue;
            };
            let hook = case.split('-').next().unwrap();
            let route = format!("/{}/{hook}", controller.file_name().to_string_lossy());
            let expected_path = controller.path().join(format!("{case}.response.json"));
            let expected = read_json(&expected_path);
            let expected_status = if expected.get("error").is_some() {
                400
            } else {
                200
            };
            for pass in ["first", "second", "third"] {
                let body = std::fs::read(file.path()).unwrap();
                let (status, actual) = answer_from(app.clone(), &route, body).await;
                if status != expected_status || !matches(&expected, &actual) {
                    failures.push(format!(
                        "{route} {case}, {pass} answer: status {status} (want {expected_status})\n got: {}\nwant: {}",
                        serde_json::to_string_pretty(&actual).unwrap(),
                        serde_json::to_string_pretty(&expected).unwrap()
                    ));
                }
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(checked > 0, "no fixtures found under {}", root.display());
    eprintln!("{checked} fixture pairs matched");
}

/// Every hook of the table has a fixture it answers (not only ones it refuses), so that the
/// tests here that run every hook's fixtures (the golden answers, `metahooks run`, each field
/// removed or retyped) run on each hook; a hook added without one fails here (README, "Adding a
/// hook").
#[test]
fn every_hook_has_a_fixture_it_answers() {
    let without: Vec<&str> = HOOKS
        .iter()
        .filter(|h| request_fixtures(h).iter().all(|f| is_bad_request(f)))
        .map(|h| h.id)
        .collect();
    assert!(
        without.is_empty(),
        "hooks without a fixture they answer: {without:?}"
    );
}

/// `metahooks run` runs the hook the server runs (API.md "The program"): every request fixture
/// given to the binary as a file, at the fixtures' clock, prints its golden response, and one
/// the server refuses with a 400 exits non-zero naming the same path and problem.
#[test]
fn metahooks_run_answers_every_fixture_as_the_server_does() {
    let mut checked = 0;
    for hook in HOOKS {
        for file in request_fixtures(hook) {
            let case = file.file_name().unwrap().to_string_lossy().into_owned();
            let expected = read_json(&file.with_file_name(case.replace(".request.", ".response.")));
            let output = std::process::Command::new(env!("CARGO_BIN_EXE_metahooks"))
                .args(["run", hook.id])
                .arg(&file)
                .args(["--now", FIXTURE_NOW])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            match expected.get("error") {
                Some(error) => {
                    assert!(!output.status.success(), "{case}: exit status 0");
                    let path = expected["path"].as_str().unwrap();
                    let message = format!("bad request at {path}: {}", error.as_str().unwrap());
                    assert!(stderr.contains(&message), "{case}: {stderr}");
                }
                None => {
                    assert!(output.status.success(), "{case}: {stderr}");
                    let actual = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
                    assert!(
                        matches(&expected, &actual),
                        "{case}\n got: {actual}\nwant: {expected}"
                    );
                }
            }
            checked += 1;
        }
    }
    assert!(checked > 0);
}

/// Golden comparison; the expected string `<generated>` stands for any string (fresh keys and
/// certificates differ on every run).
fn matches(expected: &serde_json::Value, actual: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (expected, actual) {
        (Value::String(e), Value::String(_)) if e == "<generated>" => true,
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(e, a)| matches(e, a))
        }
        (Value::Object(e), Value::Object(a)) => {
            e.len() == a.len()
                && e.iter()
                    .all(|(k, e)| a.get(k).is_some_and(|a| matches(e, a)))
        }
        _ => expected == actual,
    }
}

fn read_json(path: &Path) -> serde_json::Value {
    let text = std::fs::read(path).unwrap_or_else(|_| panic!("missing {}", path.display()));
    serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The top-level fields each hook kind may answer with (contract §5.2, §6.2, §7.2; AdmissionReview).
fn allowed_fields(kind: HookKind) -> &'static [&'static str] {
    match kind {
        HookKind::CompositeSync | HookKind::CompositeFinalize => common::COMPOSITE_ANSWER_FIELDS,
        HookKind::DecoratorSync => common::DECORATOR_ANSWER_FIELDS,
        HookKind::Customize => common::CUSTOMIZE_ANSWER_FIELDS,
        HookKind::ValidatingAdmission | HookKind::MutatingAdmission => {
            &["apiVersion", "kind", "response"]
        }
    }
}

fn assert_no_floats(v: &serde_json::Value, at: &str) {
    match v {
        serde_json::Value::Number(n) => assert!(!n.is_f64(), "{at}: float {n}"),
        serde_json::Value::Array(a) => a.iter().for_each(|x| assert_no_floats(x, at)),
        serde_json::Value::Object(o) => o.values().for_each(|x| assert_no_floats(x, at)),
        _ => {}
    }
}

#[test]
fn golden_responses_hold_only_contract_fields_and_no_floats() {
    let mut checked = 0;
    for hook in HOOKS {
        let (controller, name) = hook.id.split_once('/').unwrap();
        let dir = common::fixture_path(controller);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if !(file.starts_with(&format!("{name}-")) && file.ends_with(".response.json")) {
                continue;
            }
            let response = read_json(&entry.path());
            if response.get("error").is_some() {
                continue;
            }
            let allowed = allowed_fields(hook.kind);
            for key in response.as_object().unwrap().keys() {
                assert!(
                    allowed.contains(&key.as_str()),
                    "{file}: field {key} is not in the contract"
                );
            }
            if hook.kind.is_admission() {
                let inner = response["response"].as_object().unwrap();
                for key in inner.keys() {
                    assert!(
                        ["uid", "allowed", "status", "patch", "patchType", "warnings"]
                            .contains(&key.as_str()),
                        "{file}: response.{key}"
                    );
                }
            }
            assert_no_floats(&response, &file);
            checked += 1;
        }
    }
    assert!(checked > 0);
}

/// Fixtures are requests a cluster could send: every object one holds (parent or target,
/// observed children, attachments and related objects; an admission review's object and old
/// object) is one the API server would store under the project's CRDs and Keptn's
/// (`manifests/keptn-crds`, Keptn's v1 fields and required ones): no field its schema would
/// drop, no value it would refuse, the metadata it sets. `bad-request` fixtures are
/// exempt, and so is each case below, a request the spec answers though the API server would
/// never store its object. The CRDs' validation rules (CEL) are evaluated by `make
/// manifests-check` (check 13), which lists the fixtures whose objects were stored before them.
#[test]
fn every_object_of_every_fixture_is_one_the_api_server_would_store() {
    /// (fixture, object, why a cluster cannot hold it and the spec answers it anyway).
    const UNSTORABLE: &[(&str, &str, &str)] = &[
        (
            "sync-invalid-spec-freezes.request.json",
            "CertificateManager/mesh",
            "cert-rotation §3.1 item 1: a validity of a unit the CRD's pattern refuses",
        ),
        (
            "sync-invalid-timeout.request.json",
            "AppDiscovery/discovery",
            "app-discovery §4.1 step 0: a timeoutSeconds that is not an integer, which the CRD refuses",
        ),
        (
            "sync-malformed-request-keeps-apps.request.json",
            "KeptnAppCreationRequest/broken",
            "app-discovery §5: a request without spec.appName, which Keptn's CRD requires",
        ),
        (
            "sync-workload-without-version-holds-app.request.json",
            "KeptnWorkload/podtato-head-right-leg",
            "app-discovery §5: a workload without spec.version, which Keptn's CRD requires",
        ),
        (
            "sync-malformed-request-keeps-apps.request.json",
            "KeptnAppCreationRequest/weird-time",
            "app-discovery §5: a creationTimestamp that is no time, which the API server never writes",
        ),
    ];
    let sim = all_manifests();
    let mut refused = Vec::new();
    let (mut checked, mut exempt_refused) = (0, 0);
    for hook in HOOKS {
        for file in request_fixtures(hook).iter().filter(|f| !is_bad_request(f)) {
            let request = read_json(file);
            let fixture = file.file_name().unwrap().to_string_lossy();
            for (object, stored) in objects_held(&request) {
                checked += 1;
                let object_name = kind_and_name(object);
                let exempt = UNSTORABLE
                    .iter()
                    .find(|(f, o, _)| *f == fixture && *o == object_name);
                match (api_server_holds(&sim, object, stored), exempt) {
                    (Ok(()), None) => {}
                    (Err(_), Some(_)) => exempt_refused += 1,
                    (Ok(()), Some((_, _, why))) => refused.push(format!(
                        "{fixture}: {object_name}: stored, so no longer a case of {why}"
                    )),
                    (Err(why), None) => refused.push(format!("{fixture}: {object_name}: {why}")),
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} objects");
    assert!(refused.is_empty(), "{}", refused.join("\n"));
    assert_eq!(
        exempt_refused,
        UNSTORABLE.len(),
        "a case of UNSTORABLE names no object"
    );
}

/// Metacontroller fixtures are requests as Metacontroller sends them from the project's
/// manifests ([`not_as_metacontroller_sends`] finds nothing in any).
#[test]
fn every_metacontroller_fixture_is_a_request_as_metacontroller_sends_it() {
    let sim = all_manifests();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for hook in HOOKS.iter().filter(|h| !h.kind.is_admission()) {
        for file in request_fixtures(hook).iter().filter(|f| !is_bad_request(f)) {
            checked += 1;
            let fixture = file.file_name().unwrap().to_string_lossy().into_owned();
            let problems = not_as_metacontroller_sends(&sim, hook, &read_json(file));
            wrong.extend(problems.into_iter().map(|why| format!("{fixture}: {why}")));
        }
    }
    assert!(checked > 50, "only {checked} Metacontroller fixtures");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The simulator's Metacontroller and API server and the fixtures' rules agree: every request
/// the simulator sends, a hook's or an admission webhook's, while the three examples of
/// `manifests/examples/` run (delete-graph's set through its start and teardown, cert-rotation's
/// manager and MRC, app discovery through a window) passes the checks the fixtures pass, its
/// objects as the API server stores them.
#[test]
fn the_simulators_requests_pass_the_fixtures_checks() {
    let mut sim = all_manifests();
    sim.apply_example("workloadset", "shop").unwrap();
    sim.apply_example("cert-rotation", "osm-system").unwrap();
    sim.apply_example("appdiscovery", "podtato").unwrap();
    for (kind, name, spec) in [
        (
            "KeptnAppCreationRequest",
            "podtato-head",
            serde_json::json!({"appName": "podtato-head"}),
        ),
        (
            "KeptnWorkload",
            "podtato-head-entry",
            serde_json::json!({"app": "podtato-head", "version": "0.1.0",
            "resourceReference": {"uid": "rs-entry", "kind": "ReplicaSet", "name": "podtato-head-entry-6d5f8"}}),
        ),
    ] {
        let object = serde_json::json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "podtato"}, "spec": spec});
        sim.apply(&object.to_string()).unwrap();
    }
    sim.run_until_quiet();
    sim.set_workload_phase("shop", "database", "Running");
    sim.advance(31);
    sim.run_until_quiet();
    sim.delete("WorkloadSet", "shop", "shop").unwrap();
    sim.run_until_quiet();
    sim.finish_terminations();
    sim.run_until_quiet();

    let mut wrong = Vec::new();
    let mut routes = std::collections::BTreeSet::new();
    for (path, request) in &sim.requests {
        let hook = HOOKS.iter().find(|h| h.route() == *path).unwrap();
        routes.insert(hook.id);
        let problems = not_as_a_cluster_sends(&sim, hook, request);
        wrong.extend(problems.into_iter().map(|why| format!("{path}: {why}")));
    }
    assert!(sim.requests.len() > 20, "{} requests", sim.requests.len());
    assert_eq!(routes.len(), HOOKS.len(), "hooks called: {routes:?}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Where a request to `hook` is not what a cluster with the project's manifests sends, each with
/// why: a review as the API server sends it ([`not_as_the_api_server_sends`]) or a request as
/// Metacontroller does ([`not_as_metacontroller_sends`]), and each object in it one the API
/// server holds ([`api_server_holds`]).
fn not_as_a_cluster_sends(sim: &sim::Sim, hook: &Hook, request: &serde_json::Value) -> Vec<String> {
    let mut wrong = if hook.kind.is_admission() {
        not_as_the_api_server_sends(hook, request)
    } else {
        not_as_metacontroller_sends(sim, hook, request)
    };
    wrong.extend(
        objects_held(request)
            .into_iter()
            .filter_map(|(object, stored)| {
                let why = api_server_holds(sim, object, stored).err()?;
                Some(format!("{}: {why}", kind_and_name(object)))
            }),
    );
    wrong
}

/// Where a request to `hook` is not as Metacontroller sends it from the project's manifests
/// (contract §4-§7), each with why: the whole controller whose hook calls the route, as
/// `manifests/` declares it but for each hook's `version`; every field of the request's kind;
/// one entry in `children` or `attachments` for each declared type, each object claimed as
/// Metacontroller claims it ([`unclaimed`]); `related` with an entry for each type the
/// controller's customize hook names for the parent; and each object where Metacontroller puts
/// it ([`misplaced`]).
fn not_as_metacontroller_sends(
    sim: &sim::Sim,
    hook: &Hook,
    request: &serde_json::Value,
) -> Vec<String> {
    use serde_json::{json, Value};
    let route = hook.route();
    let Some(controller) = sim.controller_calling(&route) else {
        return vec![format!("no controller of manifests/ calls {route}")];
    };
    let (parent, map) = parent_and_children(hook.kind);
    let customize = hook.kind == HookKind::Customize;
    let fields: &[&str] = if customize {
        &["controller", "parent"]
    } else {
        &["controller", parent, map, "related", "finalizing"]
    };
    let mut wrong: Vec<String> = fields
        .iter()
        .filter(|f| request.get(**f).is_none())
        .map(|field| format!("no {field}"))
        .collect();
    let sent = &request["controller"];
    let mut expected = controller.clone();
    for (name, hook) in expected["spec"]["hooks"].as_object_mut().unwrap() {
        hook["version"] = sent["spec"]["hooks"][name]["version"].clone();
    }
    let same = ["/kind", "/metadata/name", "/spec"]
        .iter()
        .all(|at| sent.pointer(at) == expected.pointer(at));
    if !same {
        wrong.push(format!(
            "the controller is not {}'s of manifests/",
            expected["metadata"]["name"]
        ));
    }
    if customize {
        return wrong;
    }
    wrong.extend(unclaimed(request, parent, map, controller));
    let declared = &controller["spec"][if map == "children" {
        "childResources"
    } else {
        "attachments"
    }];
    let mut declared_types = sim.type_keys(declared);
    declared_types.sort();
    let types = sorted_keys(&request[map]);
    if types != declared_types {
        wrong.push(format!("{map} of {types:?}, declared {declared_types:?}"));
    }
    let related_types = sorted_keys(&request["related"]);
    // Each customize rule with the type key of the objects it selects.
    let rules: Vec<(String, Value)> = related_rules(&route, request)
        .into_iter()
        .filter_map(|rule| Some((sim.type_keys(&json!([rule])).pop()?, rule)))
        .collect();
    let mut ruled_types: Vec<String> = rules.iter().map(|(t, _)| t.clone()).collect();
    ruled_types.sort();
    ruled_types.dedup();
    if related_types != ruled_types {
        wrong.push(format!(
            "related of {related_types:?}, the customize rules' {ruled_types:?}"
        ));
    }
    let v1 = sent["spec"]["hooks"]["sync"]["version"] == "v1";
    wrong.extend(misplaced(request, parent, map, v1, &rules));
    wrong
}

/// The objects of a request's `map` (`children` or `attachments`) and `related` that are not
/// where Metacontroller puts them (contract §4), each with why: under the type key of their
/// kind, keyed as the hook version says (`v1`: by name, but `<namespace>/<name>` under a
/// cluster-scoped parent, and only objects of a namespaced parent's namespace; `v2`:
/// `<namespace>/<name>`), and in `related` only what a customize rule of `rules` (each with
/// the type key it selects) selects.
fn misplaced(
    request: &serde_json::Value,
    parent: &str,
    map: &'static str,
    v1: bool,
    rules: &[(String, serde_json::Value)],
) -> Vec<String> {
    use serde_json::Value;
    let parent_namespace = request[parent]["metadata"]["namespace"].as_str();
    let cluster_scoped_parent = parent_namespace.is_none();
    let typed = |m: &'static str| {
        let types = request[m].as_object().into_iter().flatten();
        types.map(move |(type_key, objects)| (m, type_key, objects))
    };
    let mut wrong = Vec::new();
    for (m, type_key, objects) in typed(map).chain(typed("related")) {
        for (key, object) in objects.as_object().into_iter().flatten() {
            let at = |p| {
                object
                    .pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            };
            let (namespace, name) = (at("/metadata/namespace"), at("/metadata/name"));
            let expected_key = if namespace.is_empty() || (v1 && !cluster_scoped_parent) {
                name.to_owned()
            } else {
                format!("{namespace}/{name}")
            };
            let of_type = format!("{}.{}", at("/kind"), at("/apiVersion"));
            let selected = |(rule_type, rule): &(String, Value)| {
                *rule_type == of_type
                    && rule["namespace"].as_str().is_none_or(|ns| ns == namespace)
                    && rule["names"]
                        .as_array()
                        .is_none_or(|names| names.iter().any(|n| n == name))
            };
            let problem = if *type_key != of_type {
                "under another type".to_owned()
            } else if *key != expected_key {
                format!("keyed {key:?}, not {expected_key:?}")
            } else if v1 && !cluster_scoped_parent && parent_namespace != Some(namespace) {
                "of another namespace than its parent's, which v1 leaves out".to_owned()
            } else if m == "related" && !rules.iter().any(selected) {
                "selected by no customize rule".to_owned()
            } else {
                continue;
            };
            wrong.push(format!(
                "{m} {type_key} {of_type} {namespace}/{name}: {problem}"
            ));
        }
    }
    wrong
}

/// The children (or attachments) of a request that Metacontroller would not have claimed for
/// its parent (contract §5.1, §7.1), each with why: every one has a controller owner reference
/// to the parent; a child carries labels its parent's selector matches (`controller-uid` under
/// `generateSelector`), an attachment the annotation that names its DecoratorController.
fn unclaimed(
    request: &serde_json::Value,
    parent: &str,
    map: &str,
    controller: &serde_json::Value,
) -> Vec<String> {
    use serde_json::json;
    let parent = &request[parent];
    let selector = if controller["spec"]["generateSelector"] == true {
        json!({"matchLabels": {"controller-uid": parent["metadata"]["uid"]}})
    } else {
        parent["spec"]["selector"].clone()
    };
    let attachments = map == "attachments";
    let objects = request[map].as_object().into_iter().flatten();
    let objects = objects.flat_map(|(_, by_key)| by_key.as_object().into_iter().flatten());
    let problems = objects.filter_map(|(key, object)| {
        let metadata = &object["metadata"];
        let owners = metadata["ownerReferences"].as_array().into_iter().flatten();
        let mut controllers = owners.filter(|owner| owner["controller"] == true);
        let owned = controllers.next().is_some_and(|owner| {
            ["apiVersion", "kind"]
                .iter()
                .all(|f| owner[*f] == parent[*f])
                && ["name", "uid"]
                    .iter()
                    .all(|f| owner[*f] == parent["metadata"][*f])
        }) && controllers.next().is_none();
        let why = if !owned {
            "no controller owner reference to its parent"
        } else if attachments {
            let by = &metadata["annotations"]["metacontroller.k8s.io/decorator-controller"];
            if *by == controller["metadata"]["name"] {
                return None;
            }
            "no annotation naming its DecoratorController"
        } else if !sim::selector_matches(&selector, &metadata["labels"]) {
            "labels its parent's selector does not match"
        } else {
            return None;
        };
        Some(format!("{map} {key}: {why}"))
    });
    problems.collect()
}

/// The keys of a JSON object, sorted (none for another value).
fn sorted_keys(v: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = v
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .collect();
    keys.sort();
    keys
}

/// The customize rules (`relatedResources`) the controller's customize hook answers for the
/// parent of a request to `route`, none for a controller without one (contract §6).
fn related_rules(route: &str, request: &serde_json::Value) -> Vec<serde_json::Value> {
    let controller = route.trim_start_matches('/').split('/').next().unwrap();
    let Some(customize) = metahooks_hooks::registry::find(&format!("{controller}/customize"))
    else {
        return Vec::new();
    };
    let parent = request.get("parent").or(request.get("object")).unwrap();
    let body = serde_json::json!({"controller": request["controller"], "parent": parent});
    let rng = ring::rand::SystemRandom::new();
    let memo = metahooks_hooks::memo::Memo::default();
    let context = metahooks_hooks::registry::HookContext {
        now: fixture_now(),
        rng: &rng,
        memo: &memo,
    };
    let answer = (customize.run)(&serde_json::to_vec(&body).unwrap(), &context).unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    answer["relatedResources"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A simulator with every CRD and controller of `manifests/` and the minimal Keptn CRDs.
fn all_manifests() -> sim::Sim {
    sim::Sim::with_manifests(&[
        "keptn-crds",
        "app-discovery",
        "cert-rotation",
        "delete-graph",
    ])
}

/// The fields of an AdmissionReview's `request` the API server always sets.
const REVIEW_REQUEST_FIELDS: [&str; 11] = [
    "uid",
    "kind",
    "resource",
    "requestKind",
    "requestResource",
    "name",
    "namespace",
    "operation",
    "userInfo",
    "dryRun",
    "options",
];

/// Admission fixtures are reviews as the API server sends them ([`not_as_the_api_server_sends`]).
#[test]
fn every_admission_fixture_is_a_review_as_the_api_server_sends_it() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for hook in HOOKS.iter().filter(|h| h.kind.is_admission()) {
        for file in request_fixtures(hook).iter().filter(|f| !is_bad_request(f)) {
            checked += 1;
            let fixture = file.file_name().unwrap().to_string_lossy().into_owned();
            let problems = not_as_the_api_server_sends(hook, &read_json(file));
            wrong.extend(problems.into_iter().map(|why| format!("{fixture}: {why}")));
        }
    }
    assert!(checked > 20, "only {checked} admission fixtures");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// What in an AdmissionReview for `hook` the API server would not have sent, each with why: it
/// always sets `uid`, `kind`, `resource`, `requestKind`, `requestResource`, `name`,
/// `namespace`, `operation`, `userInfo.username`, `dryRun`, and `options` of the operation's
/// kind; it sends an object but on DELETE, and an old object on UPDATE and DELETE only. On
/// CREATE it calls mutating webhooks before it sets an object's `uid` and `creationTimestamp`
/// and validating ones after (its create handler: mutation, `BeforeCreate`, validation), and
/// neither sees a `resourceVersion`, which only storage gives.
fn not_as_the_api_server_sends(hook: &Hook, review: &serde_json::Value) -> Vec<String> {
    use serde_json::Value;
    let mut wrong = Vec::new();
    let request = &review["request"];
    for field in REVIEW_REQUEST_FIELDS
        .iter()
        .filter(|f| request.get(**f).is_none())
    {
        wrong.push(format!("no request.{field}"));
    }
    let operation = request["operation"].as_str().unwrap_or_default();
    let options = match operation {
        "CREATE" => "CreateOptions",
        "UPDATE" => "UpdateOptions",
        "DELETE" => "DeleteOptions",
        _ => "ConnectOptions",
    };
    if request["options"]["kind"] != options {
        wrong.push(format!("{operation} with options {}", request["options"]));
    }
    if request["userInfo"]["username"].as_str().is_none() {
        wrong.push("no request.userInfo.username".into());
    }
    let has = |field: &str| request.get(field).is_some_and(Value::is_object);
    if has("object") == (operation == "DELETE") {
        wrong.push(format!("{operation} and object {}", request["object"]));
    }
    if has("oldObject") != matches!(operation, "UPDATE" | "DELETE") {
        wrong.push(format!(
            "{operation} and oldObject {}",
            request["oldObject"]
        ));
    }
    let metadata = &request["object"]["metadata"];
    let set = |field: &str| metadata.get(field).is_some();
    let system_fields = hook.kind == HookKind::ValidatingAdmission;
    let created_as_sent = set("uid") == system_fields
        && set("creationTimestamp") == system_fields
        && !set("resourceVersion");
    if operation == "CREATE" && !created_as_sent {
        wrong.push(format!(
            "a {:?} webhook's new object with metadata {metadata}",
            hook.kind
        ));
    }
    wrong
}

/// `Ok` when the API server could hold `object` as a request carries it, else why not: what it
/// sets on an object (contract §5.1: Metacontroller sends objects as its informers hold them),
/// a `uid`, a `resourceVersion` and a `creationTimestamp` on each object it has `stored`, and
/// `creationTimestamp` and `deletionTimestamp` in the one form it writes them
/// (`2026-06-01T12:00:00Z`, [`metahooks_hooks::meta::rfc3339`]); then whether it would store the
/// object ([`sim::Sim::check_storable`]).
fn api_server_holds(
    sim: &sim::Sim,
    object: &serde_json::Value,
    stored: bool,
) -> Result<(), String> {
    use metahooks_hooks::meta::{parse_rfc3339, rfc3339};
    let metadata = &object["metadata"];
    if stored {
        let set = ["uid", "resourceVersion", "creationTimestamp"];
        if let Some(unset) = set.iter().find(|f| metadata.get(**f).is_none()) {
            return Err(format!("stored, yet no metadata.{unset}"));
        }
    }
    for field in ["creationTimestamp", "deletionTimestamp"] {
        let Some(time) = metadata.get(field) else {
            continue;
        };
        let written = time.as_str().and_then(parse_rfc3339).map(rfc3339);
        if written.as_deref() != time.as_str() {
            return Err(format!(
                "metadata.{field} {time} is not as the API server writes it"
            ));
        }
    }
    sim.check_storable(object, stored)
}

/// Every object a hook request holds, and whether the API server has stored it: `parent` or
/// `object`, each object of `children`, `attachments` and `related` (by type, a map of names
/// in v1 and a list in v2), and an admission review's `request.oldObject` and `request.object`,
/// which is not stored yet on a CREATE.
fn objects_held(request: &serde_json::Value) -> Vec<(&serde_json::Value, bool)> {
    use serde_json::Value;
    let creating = request.pointer("/request/operation") == Some(&Value::from("CREATE"));
    let mut out: Vec<(&Value, bool)> = [
        ("/parent", true),
        ("/object", true),
        ("/request/object", !creating),
        ("/request/oldObject", true),
    ]
    .into_iter()
    .filter_map(|(pointer, stored)| Some((request.pointer(pointer)?, stored)))
    .filter(|(object, _)| object.is_object())
    .collect();
    for map in ["children", "attachments", "related"] {
        for objects in request[map]
            .as_object()
            .into_iter()
            .flat_map(|types| types.values())
        {
            match objects {
                Value::Object(by_name) => out.extend(by_name.values().map(|o| (o, true))),
                Value::Array(list) => out.extend(list.iter().map(|o| (o, true))),
                _ => {}
            }
        }
    }
    out
}

/// The request fixtures of `hook`, sorted: `fixtures/<controller>/<hook>-<case>.request.json`.
fn request_fixtures(hook: &Hook) -> Vec<PathBuf> {
    let (controller, name) = hook.id.split_once('/').unwrap();
    let Ok(entries) = std::fs::read_dir(common::fixture_path(controller)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let file = p.file_name().unwrap().to_string_lossy();
            file.starts_with(&format!("{name}-")) && file.ends_with(".request.json")
        })
        .collect();
    files.sort();
    files
}

/// A request fixture meant to be refused (`<hook>-bad-request-<case>`).
fn is_bad_request(file: &Path) -> bool {
    file.file_name()
        .unwrap()
        .to_string_lossy()
        .contains("bad-request")
}

/// The objects an answer keeps in `map` (`children` or `attachments`), as `kind/name`, in the
/// answer's order (fresh keys and certificates differ from run to run, names do not).
fn kept(answer: &serde_json::Value, map: &str) -> Vec<String> {
    answer[map].as_array().map_or(Vec::new(), |objects| {
        objects.iter().map(kind_and_name).collect()
    })
}

fn kind_and_name(object: &serde_json::Value) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    format!("{}/{name}", object["kind"].as_str().unwrap_or_default())
}

/// Where a hook's request holds the parent and the objects it answers for: `object` and
/// `attachments` for a decorator sync, `parent` and `children` for every other hook.
fn parent_and_children(kind: HookKind) -> (&'static str, &'static str) {
    if kind == HookKind::DecoratorSync {
        ("object", "attachments")
    } else {
        ("parent", "children")
    }
}

/// The request fixtures of every hook that answers with the objects it keeps (composite sync
/// and finalize, decorator sync), with the route and the name of that map (`children`,
/// `attachments`); requests meant to be refused left out.
fn answering_fixtures() -> Vec<(String, &'static str, PathBuf)> {
    let mut out = Vec::new();
    for hook in HOOKS.iter().filter(|h| {
        matches!(
            h.kind,
            HookKind::CompositeSync | HookKind::CompositeFinalize | HookKind::DecoratorSync
        )
    }) {
        let (_, map) = parent_and_children(hook.kind);
        let files = request_fixtures(hook)
            .into_iter()
            .filter(|f| !is_bad_request(f));
        out.extend(files.map(|f| (hook.route(), map, f)));
    }
    out
}

/// Metacontroller deletes every observed child a sync answer leaves out, so an observed object
/// the hook cannot read must fail the whole request, never be dropped from a 200. For every
/// sync and finalize fixture, each observed child (or attachment) in turn is sent with a broken
/// shape: the object or its metadata of another JSON type, or no name. Each answer is a 400
/// naming the object.
#[tokio::test]
async fn an_observed_child_of_a_broken_shape_fails_the_request_instead_of_being_dropped() {
    use serde_json::{json, Value};
    /// What is broken, and how.
    type Breakage = (&'static str, fn(&mut Value));
    let breakages: [Breakage; 10] = [
        ("the object is null", |o| *o = Value::Null),
        ("the object is a number", |o| *o = json!(7)),
        ("the object is a string", |o| *o = json!("x")),
        ("the object is an array of its values", |o| {
            *o = Value::Array(o.as_object().unwrap().values().cloned().collect())
        }),
        ("metadata is null", |o| o["metadata"] = Value::Null),
        ("metadata is a string", |o| o["metadata"] = json!("x")),
        ("metadata is an array", |o| o["metadata"] = json!(["x"])),
        ("the name is absent", |o| {
            o["metadata"].as_object_mut().unwrap().remove("name");
        }),
        ("the name is empty", |o| o["metadata"]["name"] = json!("")),
        ("the name is a number", |o| o["metadata"]["name"] = json!(1)),
    ];
    let mut checked = 0;
    for (route, map, file) in answering_fixtures() {
        let request = read_json(&file);
        let Some(types) = request[map].as_object() else {
            continue;
        };
        for (type_key, objects) in types {
            for key in objects.as_object().unwrap().keys() {
                for (what, breakage) in &breakages {
                    let mut body = request.clone();
                    breakage(&mut body[map][type_key][key]);
                    let at = format!("{}: {key}: {what}", file.display());
                    let path = refused_at(&route, &body, &at).await;
                    assert!(
                        path.starts_with(&format!("{map}.{type_key}.{key}")),
                        "{at}: {path}"
                    );
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} cases");
}

/// An object under admission that is not a JSON object, or whose metadata is not one, is a 400
/// naming it at the webhooks that read it field by field (the MRC's two and the
/// KeptnAppCreationRequest's, docs/DECISIONS.md "An array where an object belongs"); delete-graph's,
/// which reads its object whole, allows it with a warning.
#[tokio::test]
async fn an_admission_object_that_is_not_an_object_is_a_400_naming_it() {
    use serde_json::json;
    let fixtures = [
        "mesh-root-certificate/validate-create-allowed",
        "mesh-root-certificate/mutate-defaults-absent-fields",
        "app-discovery/mutate-adds-label",
    ];
    for fixture in fixtures {
        let (controller, case) = fixture.split_once('/').unwrap();
        let route = format!("/{controller}/{}", case.split('-').next().unwrap());
        let request =
            read_json(&common::fixture_path(controller).join(format!("{case}.request.json")));
        for (at, value) in [
            ("request.object", json!(["x"])),
            ("request.object", json!("x")),
            ("request.object.metadata", json!(["x"])),
            ("request.object.metadata", json!(1)),
        ] {
            let mut body = request.clone();
            let pointer = format!("/{}", at.replace('.', "/"));
            *body.pointer_mut(&pointer).unwrap() = value.clone();
            let case = format!("{fixture}: {at} = {value}");
            assert_eq!(refused_at(&route, &body, &case).await, at, "{case}");
        }
    }
    let request = read_json(
        &common::fixture_path("delete-graph").join("validate-chain-allowed.request.json"),
    );
    let mut body = request.clone();
    body["request"]["object"] = json!(["x"]);
    let (status, answer) =
        answer("/delete-graph/validate", serde_json::to_vec(&body).unwrap()).await;
    assert_eq!(
        (status, &answer["response"]["allowed"]),
        (200, &json!(true))
    );
    assert_eq!(
        answer["response"]["warnings"],
        json!(["no object to validate; allowed"])
    );
}

/// An object of a type the hook does not keep could only be left out of the answer, and
/// Metacontroller would delete it: a controller that declares such a type (or a kept kind in
/// another version, which is another type key) gets a 400 naming the type key as soon as one
/// such object is observed. The same type key without objects changes nothing.
#[tokio::test]
async fn an_observed_child_of_a_type_the_hook_does_not_keep_fails_the_request() {
    use serde_json::json;
    let mut checked = 0;
    for (route, map, file) in answering_fixtures() {
        let request = read_json(&file);
        if !request[map].is_object() {
            continue;
        }
        let (plain_status, plain) = answer(&route, serde_json::to_vec(&request).unwrap()).await;
        for type_key in ["Widget.example.com/v1", "Pod.v2", "Secret.v2"] {
            let mut empty = request.clone();
            empty[map][type_key] = json!({});
            let (status, answer_empty) = answer(&route, serde_json::to_vec(&empty).unwrap()).await;
            let at = format!("{}: {type_key}", file.display());
            assert_eq!(
                (status, kept(&answer_empty, map)),
                (plain_status, kept(&plain, map)),
                "{at}"
            );

            let mut body = request.clone();
            body[map][type_key] = json!({"ns/w": {"apiVersion": "v", "kind": "K",
                "metadata": {"name": "w", "namespace": "ns"}}});
            let path = refused_at(&route, &body, &at).await;
            assert_eq!(path, format!("{map}.{type_key}"), "{at}");
            checked += 1;
        }
    }
    assert!(checked > 100, "only {checked} cases");
}

/// Every parent kind is namespaced, and a hook looks for the parent's objects in its
/// namespace: a decorator without one generated a new CA into the Secret of a CA still in use,
/// since no CertificateManager was found to use it. Every sync, finalize and customize fixture
/// without its parent's namespace, or with an empty one, is a 400 naming it.
#[tokio::test]
async fn a_parent_without_a_namespace_is_a_400_naming_it() {
    let mut checked = 0;
    for hook in HOOKS.iter().filter(|h| !h.kind.is_admission()) {
        let (at, _) = parent_and_children(hook.kind);
        let route = hook.route();
        for file in request_fixtures(hook).iter().filter(|f| !is_bad_request(f)) {
            let request = read_json(file);
            for empty in [false, true] {
                let mut body = request.clone();
                let metadata = body[at]["metadata"].as_object_mut().unwrap();
                metadata.remove("namespace");
                if empty {
                    metadata.insert("namespace".into(), "".into());
                }
                let case = format!("{}: namespace empty: {empty}", file.display());
                let path = refused_at(&route, &body, &case).await;
                assert_eq!(path, format!("{at}.metadata.namespace"), "{case}");
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "only {checked} cases");
}

/// Every request fixture, each of its fields in turn removed or given a value of another JSON
/// type (inside managedFields only the list itself, which no hook reads): the answer is a 400
/// with an error and the path of what is wrong, or a 200 in the hook's shape (an
/// AdmissionReview for the request's uid). Never another status, an empty body or a field
/// outside the contract. And a value of the wrong type never costs an observed child that the
/// fixture's own answer keeps (Metacontroller would delete it), but where the new value is one
/// the field may rightly hold: inside a WorkloadSet's Pod template, which is hashed as given
/// (a change is an update, delete-graph §6.3), and `timeoutSeconds`, whose fixture holds a
/// string to be invalid and gets `0`, a valid window.
#[tokio::test]
async fn every_field_of_every_request_fixture_removed_or_retyped_gets_a_clear_answer() {
    use serde_json::{json, Value};
    /// The JSON pointer of every value inside `v` (which is at `at`), with the key it has there.
    fn pointers(v: &Value, at: &str, out: &mut Vec<(String, String)>) {
        let inner: Vec<(String, &Value)> = match v {
            Value::Object(o) => o.iter().map(|(k, x)| (k.clone(), x)).collect(),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .map(|(i, x)| (i.to_string(), x))
                .collect(),
            _ => return,
        };
        for (key, child) in inner {
            let pointer = format!("{at}/{}", key.replace('~', "~0").replace('/', "~1"));
            if key != "managedFields" {
                pointers(child, &pointer, out);
            }
            out.push((pointer, key));
        }
    }

    // One router for all: cert-rotation checks each CA and leaf once, as a running server does.
    let app = fixture_router();
    let answering = answering_fixtures();
    let mut checked = 0;
    for hook in HOOKS {
        let route = hook.route();
        let (_, map) = parent_and_children(hook.kind);
        for file in request_fixtures(hook) {
            let request = read_json(&file);
            let mut all = Vec::new();
            pointers(&request, "", &mut all);
            // The observed objects the fixture's own answer keeps.
            let mut keeps = Vec::new();
            if answering.iter().any(|(_, _, f)| *f == file) {
                let body = serde_json::to_vec(&request).unwrap();
                let (_, plain) = answer_from(app.clone(), &route, body).await;
                let observed: Vec<String> = request[map]
                    .as_object()
                    .into_iter()
                    .flat_map(|types| types.values())
                    .filter_map(Value::as_object)
                    .flat_map(|objects| objects.values().map(kind_and_name))
                    .collect();
                keeps = kept(&plain, map);
                keeps.retain(|k| observed.contains(k));
            }
            for (pointer, key) in all {
                let holder = &pointer[..pointer.rfind('/').unwrap()];
                let mut removed = request.clone();
                match removed.pointer_mut(holder).unwrap() {
                    Value::Object(o) => drop(o.remove(&key)),
                    Value::Array(a) => drop(a.remove(key.parse().unwrap())),
                    _ => unreachable!(),
                }
                let mut retyped = request.clone();
                let value = retyped.pointer_mut(&pointer).unwrap();
                *value = if value.is_string() {
                    json!(0)
                } else {
                    json!("x")
                };

                for (how, body) in [("removed", removed), ("retyped", retyped)] {
                    let body_bytes = serde_json::to_vec(&body).unwrap();
                    let (status, answer) = answer_from(app.clone(), &route, body_bytes).await;
                    let at = format!("{}: {pointer} {how}", file.display());
                    match status {
                        400 => {
                            assert!(
                                answer["error"].as_str().is_some_and(|e| !e.is_empty()),
                                "{at}"
                            );
                            assert!(
                                answer["path"].as_str().is_some_and(|p| !p.is_empty()),
                                "{at}"
                            );
                        }
                        200 => {
                            let fields = answer.as_object().unwrap();
                            let allowed = allowed_fields(hook.kind);
                            assert!(fields.keys().all(|k| allowed.contains(&k.as_str())), "{at}");
                            if hook.kind.is_admission() {
                                assert_eq!(answer["kind"], "AdmissionReview", "{at}");
                                assert_eq!(
                                    answer["response"]["uid"], body["request"]["uid"],
                                    "{at}"
                                );
                            } else {
                                assert!(!fields.is_empty(), "{at}: {answer}");
                            }
                            let may_drop = pointer == "/parent/spec/timeoutSeconds"
                                || (pointer.starts_with("/parent/spec/workloads/")
                                    && pointer.contains("/template"));
                            if how == "retyped" && !may_drop {
                                let now = kept(&answer, map);
                                let lost: Vec<_> =
                                    keeps.iter().filter(|k| !now.contains(k)).collect();
                                assert!(lost.is_empty(), "{at}: leaves out {lost:?}");
                            }
                        }
                        _ => panic!("{at}: status {status}: {answer}"),
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000, "only {checked} cases");
    eprintln!("{checked} broken requests answered clearly");
}

/// The requests the benches measure (`hooks/benches/requests.rs`, which `make bench` and `make
/// bench-load` share) pass the checks the fixtures pass, so the figures of docs/BENCHMARKS.md
/// are of requests a cluster sends, but for their size. Each generator at a small size.
#[test]
fn the_bench_requests_pass_the_fixtures_checks() {
    let sim = all_manifests();
    let generated: [(&str, Vec<u8>); 13] = [
        ("app-discovery/sync", requests::app_discovery_sync(12)),
        (
            "app-discovery/customize",
            requests::app_discovery_customize(),
        ),
        ("app-discovery/mutate", requests::app_discovery_mutate()),
        ("delete-graph/sync", requests::delete_graph_sync(4)),
        ("delete-graph/finalize", requests::delete_graph_finalize(4)),
        ("delete-graph/validate", requests::delete_graph_validate(4)),
        ("cert-rotation/sync", requests::cert_rotation_sync(3, false)),
        ("cert-rotation/sync", requests::cert_rotation_sync(3, true)),
        (
            "cert-rotation/customize",
            requests::cert_rotation_customize(3),
        ),
        (
            "mesh-root-certificate/sync",
            requests::mesh_root_certificate_sync(3),
        ),
        (
            "mesh-root-certificate/customize",
            requests::mesh_root_certificate_customize(),
        ),
        (
            "mesh-root-certificate/validate",
            requests::mesh_root_certificate_validate(),
        ),
        (
            "mesh-root-certificate/mutate",
            requests::mesh_root_certificate_mutate(),
        ),
    ];
    let mut wrong = Vec::new();
    for (id, body) in &generated {
        let hook = metahooks_hooks::registry::find(id).unwrap();
        let request: serde_json::Value = serde_json::from_slice(body).unwrap();
        let problems = not_as_a_cluster_sends(&sim, hook, &request);
        wrong.extend(problems.into_iter().map(|why| format!("{id}: {why}")));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
