//! Generated requests of realistic shape: every object about 1.5 KB, with managedFields, owner
//! references and status, as Metacontroller sends them from its informer cache.

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

/// The managedFields, labels and owner references that make an object about 1.5 KB.
fn server_metadata(name: &str, ns: &str, kind: &str) -> Value {
    json!({
        "name": name, "namespace": ns, "uid": format!("9b1deb4d-3b7d-4bad-9bdd-{:012}", name.len()),
        "resourceVersion": "184467", "generation": 3, "creationTimestamp": "2026-06-01T11:00:00Z",
        "labels": {"app.kubernetes.io/part-of": "shop", "app.kubernetes.io/name": name, "team": "payments"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{name}-6d5f8c7b9"), "uid": "5f0c0c4e-0b3a-4d2c-9f0e-1a2b3c4d5e6f", "controller": true, "blockOwnerDeletion": true}],
        "managedFields": [
            {"manager": "keptn-lifecycle-operator", "operation": "Update", "apiVersion": "lifecycle.keptn.sh/v1", "time": "2026-06-01T11:00:00Z", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app.kubernetes.io/name": {}, "f:app.kubernetes.io/part-of": {}, "f:team": {}}, "f:ownerReferences": {".": {}, "k:{\"uid\":\"5f0c0c4e-0b3a-4d2c-9f0e-1a2b3c4d5e6f\"}": {}}},
                          "f:spec": {".": {}, "f:app": {}, "f:resourceReference": {".": {}, "f:kind": {}, "f:name": {}, "f:uid": {}}, "f:version": {}, "f:workloadName": {}}}},
            {"manager": kind, "operation": "Update", "apiVersion": "lifecycle.keptn.sh/v1", "time": "2026-06-01T11:00:05Z", "fieldsType": "FieldsV1", "subresource": "status",
             "fieldsV1": {"f:status": {".": {}, "f:currentPhase": {}, "f:deploymentStatus": {}, "f:phaseTraceIDs": {".": {}, "f:WorkloadDeploy": {}}, "f:status": {}}}}
        ]
    })
}

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

/// An AppDiscovery namespace with `n` workloads in `n / 10` apps (at least one), a due
/// single-service request and an existing managed app for each app.
pub fn app_discovery_sync(n: usize) -> Vec<u8> {
    let ns = "shop";
    let apps = n.div_ceil(10);
    let workloads: Vec<Value> = (0..n).map(|i| {
        let name = format!("app-{}-workload-{i}", i % apps);
        json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnWorkload", "metadata": server_metadata(&name, ns, "KeptnWorkload"),
               "spec": {"app": format!("app-{}", i % apps), "version": format!("1.{}.0", i % 7),
                        "resourceReference": {"kind": "ReplicaSet", "name": format!("{name}-6d5f8c7b9"), "uid": "5f0c0c4e-0b3a-4d2c-9f0e-1a2b3c4d5e6f"}},
               "status": {"currentVersion": format!("1.{}.0", i % 7)}})
    }).collect();
    let app_objs: Vec<Value> = (0..apps).map(|a| {
        let mut meta = server_metadata(&format!("app-{a}"), ns, "KeptnApp");
        meta["labels"]["app.kubernetes.io/managed-by"] = json!("keptn");
        json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnApp", "metadata": meta,
               "spec": {"version": "0123456789", "revision": 1, "workloads": [{"name": "workload-0", "version": "1.0.0"}]}})
    }).collect();
    let requests: Vec<Value> = (0..apps).map(|a| {
        let mut meta = server_metadata(&format!("app-{a}-request"), ns, "KeptnAppCreationRequest");
        meta["annotations"] = json!({"keptn.sh/app-type": "single-service"});
        json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnAppCreationRequest", "metadata": meta, "spec": {"appName": format!("app-{a}")}})
    }).collect();
    serde_json::to_vec(&json!({
        "controller": {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": {"name": "app-discovery"}, "spec": {"hooks": {"sync": {"version": "v2"}}}},
        "parent": {"apiVersion": "metahooks.dev/v1alpha1", "kind": "AppDiscovery", "metadata": {"name": "discovery", "namespace": ns, "uid": "p", "generation": 1},
                   "spec": {"selector": {"matchLabels": {"app.kubernetes.io/managed-by": "keptn"}}, "timeoutSeconds": 30}, "status": {}},
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

/// A WorkloadSet of `n` workloads, each needing the two before it, every Pod observed running.
pub fn delete_graph_sync(n: usize) -> Vec<u8> {
    let ns = "shop";
    let mut request = json!({
        "controller": {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": {"name": "delete-graph"}},
        "parent": {"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet", "metadata": {"name": "shop", "namespace": ns, "uid": "p", "generation": 1},
                   "spec": workload_set_spec(n)},
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
        let mut pod = p.clone();
        let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
        let workload = pod["metadata"]["labels"]["metahooks.dev/workload"].as_str().unwrap().to_owned();
        let mut meta = server_metadata(&name, ns, "kubelet");
        meta["labels"] = pod["metadata"]["labels"].clone();
        meta["annotations"] = json!({"metahooks.dev/dependencies": spec_of(&workload)["dependencies"].to_string()});
        pod["metadata"] = meta;
        pod["spec"]["nodeName"] = json!("node-1");
        pod["status"] = json!({"phase": "Running", "podIP": "10.0.0.1", "startTime": "2026-06-01T11:00:00Z"});
        pod
    }).collect();
    request["children"]["Pod.v1"] = keyed(pods);
    serde_json::to_vec(&request).unwrap()
}

/// A Tresor CA Secret named `<name>-ca`, its certificate and key new.
fn ca_secret(name: &str, ns: &str, rng: &ring::rand::SystemRandom) -> Value {
    use base64::Engine;
    let pair = metahooks_hooks::pki::generate_ca(name, "cluster.local", now(), rng).unwrap();
    let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": server_metadata(&format!("{name}-ca"), ns, "metacontroller"), "type": "Opaque",
           "data": {"ca.crt": b(&pair.cert_pem), "private.key": b(&pair.key_pem)}})
}

/// An MRC of `role` whose Tresor CA is the Secret `<name>-ca`.
fn mrc(name: &str, ns: &str, role: &str) -> Value {
    json!({"apiVersion": "config.openservicemesh.io/v1alpha2", "kind": "MeshRootCertificate",
    "metadata": server_metadata(name, ns, "kubectl"),
    "spec": {"role": role, "trustDomain": "cluster.local", "spiffeEnabled": false, "provider": {"tresor": {"ca": {"secretRef": {"name": format!("{name}-ca"), "namespace": ns}}}}}})
}

/// The CertificateManager `mesh` of `n` leaves, signing with `mrc-a` and validating with `mrc-b`.
fn certificate_manager(n: usize, ns: &str) -> Value {
    let certificates: Vec<Value> = (0..n).map(|i| json!({"secretName": format!("svc-{i}-tls"), "commonName": format!("svc-{i}.{ns}.cluster.local"), "dnsNames": [format!("svc-{i}.{ns}.svc")], "validity": "24h"})).collect();
    json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "CertificateManager", "metadata": {"name": "mesh", "namespace": ns, "uid": "p", "generation": 1},
           "spec": {"trustBundle": {"configMapName": "mesh-ca-bundle"}, "certificates": certificates},
           "status": {"signingIssuer": "mrc-a", "validatingIssuer": "mrc-b"}})
}

/// A CertificateManager with two MRCs (one active, one passive) and `n` leaves; with `reuse`
/// every leaf is observed valid (nothing to issue), else none is (all are issued).
pub fn cert_rotation_sync(n: usize, reuse: bool) -> Vec<u8> {
    let ns = "mesh";
    let rng = ring::rand::SystemRandom::new();
    let secrets = vec![ca_secret("mrc-a", ns, &rng), ca_secret("mrc-b", ns, &rng)];
    let mut request = json!({
        "controller": {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": {"name": "cert-rotation"}},
        "parent": certificate_manager(n, ns),
        "children": {"ConfigMap.v1": {}, "Secret.v1": {}},
        "related": {"MeshRootCertificate.config.openservicemesh.io/v1alpha2": keyed(vec![mrc("mrc-a", ns, "active"), mrc("mrc-b", ns, "passive")]),
                    "Secret.v1": keyed(secrets.clone())},
        "finalizing": false
    });
    if reuse {
        let issued = call("cert-rotation/sync", &request);
        let mut leaves = Vec::new();
        let mut cms = Vec::new();
        for c in issued["children"].as_array().unwrap() {
            let mut o = c.clone();
            let name = o["metadata"]["name"].as_str().unwrap().to_owned();
            let mut meta = server_metadata(&name, ns, "metacontroller");
            meta["labels"] = o["metadata"]["labels"].clone();
            meta["annotations"] = o["metadata"]
                .get("annotations")
                .cloned()
                .unwrap_or(json!({}));
            o["metadata"] = meta;
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
    request["parent"]["metadata"]["deletionTimestamp"] = json!("2026-06-01T11:30:00Z");
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
fn customize_request(controller: &str, kind: &str, parent: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "controller": {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": kind, "metadata": {"name": controller}},
        "parent": parent
    })).unwrap()
}

/// The AppDiscovery of [`app_discovery_sync`], with its server-side metadata, to customize.
pub fn app_discovery_customize() -> Vec<u8> {
    let parent = json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "AppDiscovery", "metadata": server_metadata("discovery", "shop", "kubectl"),
                        "spec": {"selector": {"matchLabels": {"app.kubernetes.io/managed-by": "keptn"}}, "timeoutSeconds": 30}});
    customize_request("app-discovery", "CompositeController", parent)
}

/// A KeptnAppCreationRequest created by Keptn's operator, under admission.
pub fn app_discovery_mutate() -> Vec<u8> {
    let mut meta = server_metadata("app-0-request", "shop", "keptn-lifecycle-operator");
    meta["annotations"] = json!({"keptn.sh/app-type": "single-service"});
    let kacr = json!({"apiVersion": "lifecycle.keptn.sh/v1", "kind": "KeptnAppCreationRequest", "metadata": meta, "spec": {"appName": "app-0"}});
    admission_review("CREATE", &kacr, None)
}

/// An update of a WorkloadSet of `n` workloads (as [`delete_graph_sync`]'s, each run once, so
/// that the webhook has nothing to warn of) that changes the first workload's image, under
/// admission.
pub fn delete_graph_validate(n: usize) -> Vec<u8> {
    let mut spec = workload_set_spec(n);
    for w in spec["workloads"].as_object_mut().unwrap().values_mut() {
        w["restartPolicy"] = json!("NEVER");
    }
    let old = json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "WorkloadSet", "metadata": server_metadata("shop", "shop", "kubectl"),
                     "spec": spec});
    let mut object = old.clone();
    object["spec"]["workloads"]["w-0"]["template"]["spec"]["containers"][0]["image"] =
        json!("registry.example.com/shop/w-0:1.4.3");
    admission_review("UPDATE", &object, Some(&old))
}

/// The CertificateManager of [`cert_rotation_sync`], `n` leaves, to customize.
pub fn cert_rotation_customize(n: usize) -> Vec<u8> {
    customize_request(
        "cert-rotation",
        "CompositeController",
        certificate_manager(n, "mesh"),
    )
}

/// The sync of the active MRC of [`cert_rotation_sync`]'s two: its CA Secret generated by
/// metahooks and attached; among the related objects the passive MRC and the namespace's `n`
/// CertificateManagers, each of about 1.5 KB (four leaves, managedFields), all signing and
/// validating with the active MRC.
pub fn mesh_root_certificate_sync(n: usize) -> Vec<u8> {
    let ns = "mesh";
    let rng = ring::rand::SystemRandom::new();
    let mut ca = ca_secret("mrc-a", ns, &rng);
    ca["metadata"]["labels"] = json!({"app.kubernetes.io/managed-by": "metahooks", "metahooks.dev/mesh-root-certificate": "mrc-a"});
    let mut active = mrc("mrc-a", ns, "active");
    active["status"] = json!({"state": "active", "conditions": []});
    let managers: Vec<Value> = (0..n)
        .map(|i| {
            let mut manager = certificate_manager(4, ns);
            manager["metadata"] = server_metadata(&format!("mesh-{i}"), ns, "kubectl");
            manager["status"] = json!({"signingIssuer": "mrc-a", "validatingIssuer": "mrc-a"});
            manager
        })
        .collect();
    serde_json::to_vec(&json!({
        "controller": {"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController", "metadata": {"name": "mesh-root-certificate"}},
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
    customize_request(
        "mesh-root-certificate",
        "DecoratorController",
        mrc("mrc-a", "mesh", "active"),
    )
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
    let mut object = mrc("mrc-c", "mesh", "passive");
    let spec = object["spec"].as_object_mut().unwrap();
    spec.remove("trustDomain");
    spec.remove("spiffeEnabled");
    admission_review("CREATE", &object, None)
}
