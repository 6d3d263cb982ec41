//! Generated requests of realistic shape, as Metacontroller and the API server send them: the
//! controller of `manifests/`, each object with the metadata the API server sets, managedFields
//! of the fields its writers set (1.6-2.0 KB an object, a leaf Secret with its certificate and
//! key about 4.4 KB), children and attachments claimed as Metacontroller claims them.
//! `tests/fixtures.rs` holds every generator to the checks the fixtures pass.

use metahooks_hooks::registry::{find, HookContext};
use serde_json::{json, Value};

/// The time requests are made for, and the benches run at: when this process first asked
/// (whole seconds). The load run's server uses the real clock, so leaves issued "now" are
/// fresh there and the reuse path is what it measures.
pub fn now() -> time::OffsetDateTime {
    static NOW: std::sync::OnceLock<time::OffsetDateTime> = std::sync::OnceLock::new();
    *NOW.get_or_init(|| {
        let t = time::OffsetDateTime::now_utc();
        t.replace_nanosecond(0).unwrap_or(t)
    })
}

/// When the benches' objects were created, and when their writers last wrote them.
const CREATED: &str = "2026-06-01T11:00:00Z";
const WRITTEN: &str = "2026-06-01T11:00:05Z";

/// A `uid` of the API server's form, the same for the same `kind`, namespace and name.
fn uid(kind: &str, namespace: &str, name: &str) -> String {
    // FNV-1a, 64 bits: stable across runs and builds, unlike std's hasher.
    let hash = [kind, namespace, name]
        .iter()
        .flat_map(|part| part.bytes().chain([0]))
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        hash >> 32,
        (hash >> 16) & 0xffff,
        hash & 0xfff,
        (hash >> 52) & 0xfff,
        hash & 0xffff_ffff_ffff
    )
}

/// The FieldsV1 of a managedFields entry for `value`: each field of an object as `f:<name>`, a
/// nested object or a list marked itself with `.`, each list entry with a `uid` (an owner
/// reference) or a `name` as `k:{"uid":...}` or `k:{"name":...}`, other entries not apart.
fn fields_v1(value: &Value) -> Value {
    let Value::Object(fields) = value else {
        return json!({});
    };
    let fields = fields.iter().map(|(name, v)| {
        let set = match v {
            Value::Object(_) => {
                let mut set = fields_v1(v);
                set[".".to_owned()] = json!({});
                set
            }
            Value::Array(entries) => {
                let keyed: serde_json::Map<String, Value> = entries
                    .iter()
                    .filter_map(|e| {
                        let key = ["uid", "name"]
                            .into_iter()
                            .find_map(|k| Some((k, e.get(k)?)))?;
                        let mut set = fields_v1(e);
                        set[".".to_owned()] = json!({});
                        Some((format!("k:{{\"{}\":{}}}", key.0, key.1), set))
                    })
                    .collect();
                let mut set = Value::Object(keyed);
                set[".".to_owned()] = json!({});
                set
            }
            _ => json!({}),
        };
        (format!("f:{name}"), set)
    });
    Value::Object(fields.collect())
}

/// `object` as the API server holds it: with the `uid`, `resourceVersion`, `generation` and
/// `creationTimestamp` it sets, and the managedFields of what `writer` wrote and, if `object`
/// has a status, of what `status_writer` wrote there.
fn stored(object: Value, writer: &str, status_writer: &str) -> Value {
    let mut object = held(object, writer, status_writer);
    let (kind, meta) = (object["kind"].clone(), &mut object["metadata"]);
    let (ns, name) = (meta["namespace"].clone(), meta["name"].clone());
    let at = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    meta["uid"] = json!(uid(&at(&kind), &at(&ns), &at(&name)));
    meta["resourceVersion"] = json!("184467");
    meta["generation"] = json!(3);
    meta["creationTimestamp"] = json!(CREATED);
    object
}

/// `object` as its writers made it, not stored yet (new, under admission): [`stored`] but for
/// what the API server sets.
fn held(mut object: Value, writer: &str, status_writer: &str) -> Value {
    let api_version = object["apiVersion"].clone();
    let entry = |manager: &str, fields: Value| {
        json!({"manager": manager, "operation": "Update", "apiVersion": api_version, "time": WRITTEN,
               "fieldsType": "FieldsV1", "fieldsV1": fields})
    };
    let mut written = object.clone();
    let written = written.as_object_mut().unwrap();
    let status = written.remove("status");
    written.remove("apiVersion");
    written.remove("kind");
    if let Some(meta) = written.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| ["labels", "annotations", "ownerReferences"].contains(&k.as_str()));
    }
    let mut managed = vec![entry(writer, fields_v1(&Value::Object(written.clone())))];
    if let Some(status) = status.filter(|s| s.as_object().is_some_and(|s| !s.is_empty())) {
        let mut status_entry = entry(status_writer, fields_v1(&json!({"status": status})));
        status_entry["subresource"] = json!("status");
        managed.push(status_entry);
    }
    object["metadata"]["managedFields"] = Value::Array(managed);
    object
}

/// `child` claimed as Metacontroller claims it for `parent` (contract §5.1): a controller owner
/// reference to the parent, and the `controller-uid` label of a `generateSelector` controller.
fn owned_by(mut child: Value, parent: &Value, controller_uid: bool) -> Value {
    let meta = &parent["metadata"];
    child["metadata"]["ownerReferences"] = json!([{"apiVersion": parent["apiVersion"], "kind": parent["kind"],
        "name": meta["name"], "uid": meta["uid"], "controller": true, "blockOwnerDeletion": true}]);
    if controller_uid {
        child["metadata"]["labels"]["controller-uid"] = meta["uid"].clone();
    }
    child
}

/// The controller Metacontroller sends with each request (contract §5.1): `name`'s of
/// `manifests/`, as a fixture carries it (`tests/fixtures.rs` holds the fixtures' controllers
/// to the manifests, and these requests to the fixtures' checks).
fn controller(name: &str) -> Value {
    let fixture = match name {
        "app-discovery" => {
            include_str!("../../fixtures/app-discovery/customize-namespace.request.json")
        }
        "delete-graph" => include_str!("../../fixtures/delete-graph/finalize-done.request.json"),
        "cert-rotation" => {
            include_str!("../../fixtures/cert-rotation/customize-namespace.request.json")
        }
        "mesh-root-certificate" => include_str!(
            "../../fixtures/mesh-root-certificate/customize-names-ca-secret.request.json"
        ),
        other => panic!("no controller {other}"),
    };
    let mut request: Value = serde_json::from_str(fixture).unwrap();
    request["controller"].take()
}

/// The objects of a request map, keyed `<namespace>/<name>` as a v2 hook's map is.
fn keyed(objs: Vec<Value>) -> Value {
    Value::Object(
        objs.into_iter()
            .map(|o| {
                (
                    format!(
                        "{}/{}",
                        o["metadata"]["namespace"].as_str().unwrap(),
                        o["metadata"]["name"].as_str().unwrap()
                    ),
                    o,
                )
            })
            .collect(),
    )
}

/// The labels of an object a user or Keptn made for the app `app`.
fn app_labels(name: &str) -> Value {
    json!({"app.kubernetes.io/part-of": "shop", "app.kubernetes.io/name": name, "team": "payments"})
}

/// A user's AppDiscovery of the namespace `ns`.
fn app_discovery(ns: &str) -> Value {
    stored(
        json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "AppDiscovery",
                  "metadata": {"name": "discovery", "namespace": ns, "labels": app_labels("discovery")},
                  "spec": {"selector": {"matchLabels": {"app.kubernetes.io/managed-by": "keptn"}}, "timeoutSeconds": 30}}),
        "kubectl-client-side-apply",
        "metacontroller",
    )
}

/// A KeptnAppCreationRequest of a single-service app, as Keptn's webhook makes it for a
/// workload's app, `labelled` by the AppDiscovery's webhook or not yet (its fields only: the
/// caller has it [`held`] or [`stored`]).
fn app_creation_request(app: &str, ns: &str, labelled: bool) -> Value {
    let labels = if labelled {
        json!({"app.kubernetes.io/managed-by": "keptn"})
    } else {
        json!({})
    };
    json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnAppCreationRequest",
           "metadata": {"name": format!("{app}-request"), "namespace": ns,
                        "labels": labels, "annotations": {"keptn.sh/app-type": "single-service"}},
           "spec": {"appName": app}})
}

/// An AppDiscovery namespace with `n` workloads in `n / 10` apps (at least one), a due
/// single-service request and an existing managed app for each app.
pub fn app_discovery_sync(n: usize) -> Vec<u8> {
    let ns = "shop";
    let apps = n.div_ceil(10);
    let parent = app_discovery(ns);
    let workloads: Vec<Value> = (0..n).map(|i| {
        let name = format!("app-{}-workload-{i}", i % apps);
        let replica_set = format!("{name}-6d5f8c7b9");
        let replica_set_uid = uid("ReplicaSet", ns, &replica_set);
        stored(json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnWorkload",
                      "metadata": {"name": name, "namespace": ns, "labels": app_labels(&name),
                                   "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replica_set, "uid": replica_set_uid, "controller": true, "blockOwnerDeletion": true}]},
                      "spec": {"app": format!("app-{}", i % apps), "version": format!("1.{}.0", i % 7),
                               "resourceReference": {"kind": "ReplicaSet", "name": replica_set, "uid": replica_set_uid}},
                      "status": {"currentVersion": format!("1.{}.0", i % 7)}}),
               "keptn-lifecycle-operator", "keptn-lifecycle-operator")
    }).collect();
    let app_objs: Vec<Value> = (0..apps).map(|a| {
        let app = json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnApp",
                         "metadata": {"name": format!("app-{a}"), "namespace": ns, "labels": {"app.kubernetes.io/managed-by": "keptn"}},
                         "spec": {"version": "0123456789", "revision": 1, "workloads": [{"name": "workload-0", "version": "1.0.0"}]}});
        stored(owned_by(app, &parent, false), "metacontroller", "keptn-lifecycle-operator")
    }).collect();
    let requests: Vec<Value> = (0..apps)
        .map(|a| {
            let request = app_creation_request(&format!("app-{a}"), ns, true);
            stored(
                owned_by(request, &parent, false),
                "keptn-lifecycle-operator",
                "",
            )
        })
        .collect();
    serde_json::to_vec(&json!({
        "controller": controller("app-discovery"),
        "parent": parent,
        "children": {"KeptnAppCreationRequest.lifecycle.keptn.sh/v1": keyed(requests), "KeptnApp.lifecycle.keptn.sh/v1": keyed(app_objs.clone())},
        "related": {"KeptnWorkload.lifecycle.keptn.sh/v1": keyed(workloads), "KeptnApp.lifecycle.keptn.sh/v1": keyed(app_objs)},
        "finalizing": false
    })).unwrap()
}

fn call(id: &str, body: &Value) -> Value {
    let rng = ring::rand::SystemRandom::new();
    let ctx = HookContext {
        now: now(),
        rng: &rng,
        memo: &Default::default(),
    };
    let out = (find(id).unwrap().run)(&serde_json::to_vec(body).unwrap(), &ctx).unwrap();
    serde_json::from_slice(&out.body).unwrap()
}

/// The spec of a WorkloadSet of `n` workloads, each needing the two before it.
fn workload_set_spec(n: usize) -> Value {
    let workloads: serde_json::Map<String, Value> = (0..n).map(|i| {
        let mut deps = serde_json::Map::new();
        if i >= 1 { deps.insert(format!("w-{}", i - 1), json!("ADD_COND_RUNNING")); }
        if i >= 2 { deps.insert(format!("w-{}", i - 2), json!("ADD_COND_SUCCEEDED")); }
        (format!("w-{i}"), json!({"dependencies": deps, "restartPolicy": "ALWAYS",
            "template": {"metadata": {"labels": {"app": format!("w-{i}")}},
                         "spec": {"containers": [{"name": "main", "image": format!("registry.example.com/shop/w-{i}:1.4.2"),
                                                  "env": [{"name": "LOG_LEVEL", "value": "info"}], "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]}}}))
    }).collect();
    json!({"workloads": workloads})
}

/// A user's WorkloadSet `shop` of the namespace `ns` with `spec`.
fn workload_set(ns: &str, spec: Value) -> Value {
    stored(
        json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet",
                  "metadata": {"name": "shop", "namespace": ns, "labels": app_labels("shop")}, "spec": spec}),
        "kubectl-client-side-apply",
        "metacontroller",
    )
}

/// A WorkloadSet of `n` workloads, each needing the two before it, every Pod observed running.
pub fn delete_graph_sync(n: usize) -> Vec<u8> {
    let ns = "shop";
    let parent = workload_set(ns, workload_set_spec(n));
    let mut request = json!({
        "controller": controller("delete-graph"), "parent": parent,
        "children": {"Pod.v1": {}}, "related": {}, "finalizing": false
    });
    // The desired Pods, as the hook names them (dependencies are not part of the name, so one
    // call without them creates every Pod), observed running.
    let mut independent = request.clone();
    for w in independent["parent"]["spec"]["workloads"]
        .as_object_mut()
        .unwrap()
        .values_mut()
    {
        w["dependencies"] = json!({});
    }
    let desired = call("delete-graph/sync", &independent);
    let spec_of = |name: &str| request["parent"]["spec"]["workloads"][name].clone();
    let pods: Vec<Value> = desired["children"].as_array().unwrap().iter().map(|p| {
        let mut pod = owned_by(p.clone(), &request["parent"], true);
        let workload = pod["metadata"]["labels"]["metahooks.dev/workload"].as_str().unwrap().to_owned();
        pod["metadata"]["namespace"] = json!(ns);
        pod["metadata"]["annotations"] = json!({"metahooks.dev/dependencies": spec_of(&workload)["dependencies"].to_string()});
        pod["spec"]["nodeName"] = json!("node-1");
        pod["status"] = json!({"phase": "Running", "podIP": "10.0.0.1", "startTime": CREATED});
        stored(pod, "metacontroller", "kubelet")
    }).collect();
    request["children"]["Pod.v1"] = keyed(pods);
    serde_json::to_vec(&request).unwrap()
}

/// The Tresor CA Secret `<name>-ca` of the MRC `mrc` as its DecoratorController attaches it,
/// its certificate and key new.
fn ca_secret(mrc: &Value, rng: &ring::rand::SystemRandom) -> Value {
    use base64::Engine;
    let name = mrc["metadata"]["name"].as_str().unwrap();
    let pair = metahooks_hooks::pki::generate_ca(name, "cluster.local", now(), rng).unwrap();
    let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": format!("{name}-ca"), "namespace": mrc["metadata"]["namespace"],
                     "labels": {"app.kubernetes.io/managed-by": "metahooks", "metahooks.dev/mesh-root-certificate": name},
                     "annotations": {"metacontroller.k8s.io/decorator-controller": "mesh-root-certificate"}},
        "data": {"ca.crt": b(&pair.cert_pem), "private.key": b(&pair.key_pem)}});
    stored(owned_by(secret, mrc, false), "metacontroller", "")
}

/// A user's MRC of `role` whose Tresor CA is the Secret `<name>-ca` (its fields only: the
/// caller has it [`held`] or [`stored`]).
fn mrc_fields(name: &str, ns: &str, role: &str) -> Value {
    json!({"apiVersion": "config.openservicemesh.io/v1alpha2", "kind": "MeshRootCertificate",
           "metadata": {"name": name, "namespace": ns, "labels": app_labels(name)},
           "spec": {"role": role, "trustDomain": "cluster.local", "spiffeEnabled": false,
                    "provider": {"tresor": {"ca": {"secretRef": {"name": format!("{name}-ca"), "namespace": ns}}}}}})
}

/// A user's MRC of `role` whose Tresor CA is the Secret `<name>-ca`, stored.
fn mrc(name: &str, ns: &str, role: &str) -> Value {
    stored(
        mrc_fields(name, ns, role),
        "kubectl-client-side-apply",
        "metacontroller",
    )
}

/// A user's CertificateManager `name` of `n` leaves, signing with `mrc-a` and validating with
/// `mrc-b`.
fn certificate_manager(name: &str, n: usize, ns: &str) -> Value {
    let certificates: Vec<Value> = (0..n).map(|i| json!({"secretName": format!("svc-{i}-tls"), "commonName": format!("svc-{i}.{ns}.cluster.local"), "dnsNames": [format!("svc-{i}.{ns}.svc")], "validity": "24h"})).collect();
    stored(
        json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "CertificateManager",
                  "metadata": {"name": name, "namespace": ns, "labels": app_labels(name)},
                  "spec": {"trustBundle": {"configMapName": "mesh-ca-bundle"}, "certificates": certificates},
                  "status": {"signingIssuer": "mrc-a", "validatingIssuer": "mrc-b"}}),
        "kubectl-client-side-apply",
        "metacontroller",
    )
}

/// A CertificateManager with two MRCs (one active, one passive) and `n` leaves; with `reuse`
/// every leaf is observed valid (nothing to issue), else none is (all are issued).
pub fn cert_rotation_sync(n: usize, reuse: bool) -> Vec<u8> {
    let ns = "mesh";
    let rng = ring::rand::SystemRandom::new();
    let mrcs = [mrc("mrc-a", ns, "active"), mrc("mrc-b", ns, "passive")];
    let secrets: Vec<Value> = mrcs.iter().map(|m| ca_secret(m, &rng)).collect();
    let mut request = json!({
        "controller": controller("cert-rotation"),
        "parent": certificate_manager("mesh", n, ns),
        "children": {"ConfigMap.v1": {}, "Secret.v1": {}},
        "related": {"MeshRootCertificate.config.openservicemesh.io/v1alpha2": keyed(mrcs.to_vec()),
                    "Secret.v1": keyed(secrets.clone())},
        "finalizing": false
    });
    if reuse {
        let issued = call("cert-rotation/sync", &request);
        let mut leaves = Vec::new();
        let mut cms = Vec::new();
        for c in issued["children"].as_array().unwrap() {
            let mut o = owned_by(c.clone(), &request["parent"], true);
            o["metadata"]["namespace"] = json!(ns);
            let o = stored(o, "metacontroller", "");
            if o["kind"] == "Secret" {
                leaves.push(o)
            } else {
                cms.push(o)
            }
        }
        request["children"]["ConfigMap.v1"] = keyed(cms);
        request["children"]["Secret.v1"] = keyed(leaves.clone());
        request["related"]["Secret.v1"] = keyed(secrets.into_iter().chain(leaves).collect());
    }
    serde_json::to_vec(&request).unwrap()
}

/// [`delete_graph_sync`]'s request once its WorkloadSet is deleted: the finalize hook's, with
/// every Pod still running (the teardown's first step).
pub fn delete_graph_finalize(n: usize) -> Vec<u8> {
    let mut request: Value = serde_json::from_slice(&delete_graph_sync(n)).unwrap();
    let metadata = &mut request["parent"]["metadata"];
    metadata["deletionTimestamp"] = json!("2026-06-01T11:30:00Z");
    metadata["deletionGracePeriodSeconds"] = json!(0);
    metadata["finalizers"] = json!(["metacontroller.io/compositecontroller-delete-graph"]);
    request["finalizing"] = json!(true);
    serde_json::to_vec(&request).unwrap()
}

/// An AdmissionReview v1 as the API server sends it for `operation` on `object` (and `old`, for
/// an UPDATE): with the user, the options and the dry-run flag it carries.
fn admission_review(operation: &str, object: &Value, old: Option<&Value>) -> Vec<u8> {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap();
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())});
    let options = if operation == "CREATE" {
        "CreateOptions"
    } else {
        "UpdateOptions"
    };
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
                    "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"], "operation": operation,
                    "userInfo": {"username": "kubernetes-admin", "uid": "aws-iam-authenticator:123456789012:AROAEXAMPLE", "groups": ["system:masters", "system:authenticated"]},
                    "object": object, "oldObject": old, "dryRun": false,
                    "options": {"apiVersion": "meta.k8s.io/v1", "kind": options, "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"}}
    })).unwrap()
}

/// The customize request of `controller` for `parent`.
fn customize_request(controller_name: &str, parent: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"controller": controller(controller_name), "parent": parent}))
        .unwrap()
}

/// The AppDiscovery of [`app_discovery_sync`], to customize.
pub fn app_discovery_customize() -> Vec<u8> {
    customize_request("app-discovery", app_discovery("shop"))
}

/// A KeptnAppCreationRequest created by Keptn's operator, under admission.
pub fn app_discovery_mutate() -> Vec<u8> {
    let request = app_creation_request("app-0", "shop", false);
    let request = held(request, "keptn-lifecycle-operator", "");
    admission_review("CREATE", &request, None)
}
/// An update of a WorkloadSet of `n` workloads (as [`delete_graph_sync`]'s, each run once, so
/// that the webhook has nothing to warn of) that changes the first workload's image, under
/// admission.
pub fn delete_graph_validate(n: usize) -> Vec<u8> {
    let mut spec = workload_set_spec(n);
    for w in spec["workloads"].as_object_mut().unwrap().values_mut() {
        w["restartPolicy"] = json!("NEVER");
    }
    let old = workload_set("shop", spec);
    let mut object = old.clone();
    object["spec"]["workloads"]["w-0"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.example.com/shop/w-0:1.4.3");
    admission_review("UPDATE", &object, Some(&old))
}

/// The CertificateManager of [`cert_rotation_sync`], `n` leaves, to customize.
pub fn cert_rotation_customize(n: usize) -> Vec<u8> {
    customize_request("cert-rotation", certificate_manager("mesh", n, "mesh"))
}

/// The sync of the active MRC of [`cert_rotation_sync`]'s two: its CA Secret generated by
/// metahooks and attached; among the related objects the passive MRC and the namespace's `n`
/// CertificateManagers, each of about 1.5 KB (four leaves, managedFields), all signing and
/// validating with the active MRC.
pub fn mesh_root_certificate_sync(n: usize) -> Vec<u8> {
    let ns = "mesh";
    let rng = ring::rand::SystemRandom::new();
    let mut active = mrc_fields("mrc-a", ns, "active");
    active["status"] = json!({"state": "active", "conditions": []});
    let active = stored(active, "kubectl-client-side-apply", "metacontroller");
    let ca = ca_secret(&active, &rng);
    let managers: Vec<Value> = (0..n)
        .map(|i| {
            let mut manager = certificate_manager(&format!("mesh-{i}"), 4, ns);
            manager["status"] = json!({"signingIssuer": "mrc-a", "validatingIssuer": "mrc-a"});
            manager
        })
        .collect();
    serde_json::to_vec(&json!({
        "controller": controller("mesh-root-certificate"),
        "object": active,
        "attachments": {"Secret.v1": keyed(vec![ca.clone()])},
        "related": {"MeshRootCertificate.config.openservicemesh.io/v1alpha2": keyed(vec![active.clone(), mrc("mrc-b", ns, "passive")]),
                    "CertificateManager.metahooks.dev/v1alpha1": keyed(managers),
                    "Secret.v1": keyed(vec![ca])},
        "finalizing": false
    })).unwrap()
}

/// An MRC, to customize.
pub fn mesh_root_certificate_customize() -> Vec<u8> {
    customize_request("mesh-root-certificate", mrc("mrc-a", "mesh", "active"))
}

/// An update of a passive MRC to active (its CA trusted everywhere first), under admission.
pub fn mesh_root_certificate_validate() -> Vec<u8> {
    let old = mrc("mrc-b", "mesh", "passive");
    let mut object = old.clone();
    object["spec"]["role"] = json!("active");
    admission_review("UPDATE", &object, Some(&old))
}

/// A new MRC without the fields the webhook defaults, under admission.
pub fn mesh_root_certificate_mutate() -> Vec<u8> {
    let mut object = mrc_fields("mrc-c", "mesh", "passive");
    let spec = object["spec"].as_object_mut().unwrap();
    spec.remove("trustDomain");
    spec.remove("spiffeEnabled");
    let object = held(object, "kubectl-client-side-apply", "metacontroller");
    admission_review("CREATE", &object, None)
}
