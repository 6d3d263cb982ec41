//! Rules of cert-rotation.md §4 and §6, each test naming the rule it checks.

use super::admission::{mutate, validate};
use super::model::b64;
use super::sync::{sync, SyncRequest};
use crate::contract::{decode, AdmissionReview};
use crate::pki::generate_ca;
use serde_json::{json, Value};
use time::macros::datetime;

const NOW: time::OffsetDateTime = datetime!(2026-06-01 12:00:00 UTC);
const NS: &str = "mesh";

fn mrc(name: &str, role: &str, state: Option<&str>) -> Value {
    let mut m = json!({"metadata": {"name": name, "namespace": NS, "generation": 1},
        "spec": {"role": role, "trustDomain": "cluster.local", "spiffeEnabled": false,
                 "provider": {"tresor": {"ca": {"secretRef": {"name": format!("{name}-ca"), "namespace": NS}}}}}});
    if let Some(s) = state {
        m["status"] = json!({"state": s});
    }
    m
}

fn ca_secret(name: &str) -> Value {
    let pair = generate_ca(name, "cluster.local", NOW, &ring::rand::SystemRandom::new()).unwrap();
    json!({"metadata": {"name": name, "namespace": NS, "uid": "u"}, "type": "Opaque",
           "data": {"ca.crt": b64(pair.cert_pem.as_bytes()), "private.key": b64(pair.key_pem.as_bytes())}})
}

fn manager(s: Option<&str>, v: Option<&str>) -> Value {
    json!({"metadata": {"name": "mgr", "namespace": NS}, "spec": {"certificates": [{"validity": "2h"}]},
           "status": {"signingIssuer": s, "validatingIssuer": v}})
}

fn keyed(objs: &[Value]) -> Value {
    Value::Object(
        objs.iter()
            .map(|o| {
                (
                    format!("{NS}/{}", o["metadata"]["name"].as_str().unwrap()),
                    o.clone(),
                )
            })
            .collect(),
    )
}

fn run(
    object: &Value,
    attachments: &[Value],
    mrcs: &[Value],
    managers: &[Value],
    secrets: &[Value],
) -> Value {
    let body = serde_json::to_vec(&json!({"controller": {}, "object": object,
        "attachments": {"Secret.v1": keyed(attachments)},
        "related": {"MeshRootCertificate.config.openservicemesh.io/v1alpha2": keyed(mrcs),
                    "CertificateManager.metahooks.dev/v1alpha1": keyed(managers), "Secret.v1": keyed(secrets)}})).unwrap();
    let req: SyncRequest = decode(&body).unwrap();
    let rng = ring::rand::SystemRandom::new();
    serde_json::to_value(sync(&req, NOW, &rng, &Default::default())).unwrap()
}

fn accepted(resp: &Value) -> (&str, &str) {
    let c = &resp["status"]["conditions"][0];
    (c["status"].as_str().unwrap(), c["reason"].as_str().unwrap())
}

#[test]
fn rule_4_1_generates_a_missing_ca_when_not_in_use() {
    let m = mrc("b", "inactive", None);
    let resp = run(&m, &[], std::slice::from_ref(&m), &[], &[]);
    let att = resp["attachments"].as_array().unwrap();
    assert_eq!(att.len(), 1);
    assert_eq!(att[0]["metadata"]["name"], "b-ca");
    assert_eq!(att[0]["type"], "Opaque");
    assert_eq!(
        att[0]["metadata"]["labels"]["metahooks.dev/mesh-root-certificate"],
        "b"
    );
    use base64::Engine;
    let crt = base64::engine::general_purpose::STANDARD
        .decode(att[0]["data"]["ca.crt"].as_str().unwrap())
        .unwrap();
    let der = x509_parser::pem::Pem::iter_from_buffer(&crt)
        .next()
        .unwrap()
        .unwrap()
        .contents;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    assert!(cert.is_ca());
    assert_eq!(cert.subject().to_string(), "CN=b, O=cluster.local");
    assert_eq!(resp["status"]["state"], "inactive");
    assert_eq!(accepted(&resp), ("True", "CAReady"));
    assert!(resp.get("labels").is_none() && resp.get("annotations").is_none());
    assert!(!serde_json::to_string(&resp["status"])
        .unwrap()
        .contains("PRIVATE"));
}

#[test]
fn rule_4_1_observed_attachment_returned_exactly_and_never_regenerated() {
    let m = mrc("a", "active", Some("active"));
    let secret = ca_secret("a-ca");
    let resp = run(
        &m,
        std::slice::from_ref(&secret),
        std::slice::from_ref(&m),
        &[manager(Some("a"), Some("a"))],
        std::slice::from_ref(&secret),
    );
    assert_eq!(resp["attachments"][0]["data"], secret["data"]);
    assert_eq!(resp["attachments"].as_array().unwrap().len(), 1);
    assert_eq!(resp["status"]["state"], "active");
    // A broken attachment is reported, not repaired.
    let mut broken = secret.clone();
    broken["data"]["private.key"] = json!(b64(b"nope"));
    let resp = run(
        &m,
        std::slice::from_ref(&broken),
        std::slice::from_ref(&m),
        &[],
        std::slice::from_ref(&broken),
    );
    assert_eq!(resp["attachments"][0]["data"], broken["data"]);
    assert_eq!(resp["status"]["state"], "error");
    assert_eq!(accepted(&resp), ("False", "CAUnusable"));
}

#[test]
fn rule_4_1_users_own_ca_is_used_not_returned() {
    let m = mrc("a", "active", None);
    let resp = run(&m, &[], std::slice::from_ref(&m), &[], &[ca_secret("a-ca")]);
    assert_eq!(resp["attachments"], json!([]));
    assert_eq!(accepted(&resp), ("True", "CAReady"));
}

#[test]
fn rule_4_1_missing_ca_in_use_is_not_generated() {
    let m = mrc("a", "active", Some("active"));
    let resp = run(
        &m,
        &[],
        std::slice::from_ref(&m),
        &[manager(Some("a"), Some("a"))],
        &[],
    );
    assert_eq!(resp["attachments"], json!([]));
    assert_eq!(resp["status"]["state"], "error");
    assert_eq!(accepted(&resp), ("False", "CASecretMissing"));
    // Validating alone is in use too.
    let n = mrc("n", "passive", Some("validatingRollout"));
    let resp = run(
        &n,
        &[],
        std::slice::from_ref(&n),
        &[manager(Some("a"), Some("n"))],
        &[],
    );
    assert_eq!(resp["attachments"], json!([]));
    assert_eq!(accepted(&resp), ("False", "CASecretMissing"));
}

/// §4.1 and §2: a generated CA Secret carries the MRC's name as a label value, which holds at
/// most 63 characters. For a longer name none is generated (the API server would refuse it while
/// the status said `CAReady`); the status asks for the user's own Secret, which then serves.
#[test]
fn rule_4_1_no_ca_is_generated_for_a_name_no_label_can_hold() {
    let longest = mrc(&"m".repeat(63), "inactive", None);
    let resp = run(&longest, &[], std::slice::from_ref(&longest), &[], &[]);
    assert_eq!(accepted(&resp), ("True", "CAReady"));
    assert_eq!(resp["attachments"].as_array().unwrap().len(), 1);

    let long_name = "m".repeat(64);
    let long = mrc(&long_name, "inactive", None);
    let resp = run(&long, &[], std::slice::from_ref(&long), &[], &[]);
    assert_eq!(resp["attachments"], json!([]));
    assert_eq!(resp["status"]["state"], "error");
    assert_eq!(accepted(&resp), ("False", "CASecretMissing"));
    let message = resp["status"]["conditions"][0]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("CA Secret {long_name}-ca is missing"))
            && message.contains("more than 63 characters"),
        "{message}"
    );

    let users = ca_secret(&format!("{long_name}-ca"));
    let resp = run(&long, &[], std::slice::from_ref(&long), &[], &[users]);
    assert_eq!(resp["attachments"], json!([]));
    assert_eq!(resp["status"]["state"], "inactive");
    assert_eq!(accepted(&resp), ("True", "CAReady"));
}

/// A CA Secret name no Secret can have (the API server takes only DNS-1123 subdomains) is an
/// `InvalidSpec` naming the field: nothing is generated, which the API server would refuse on
/// every sync while the MRC said `CAReady`, and no user's Secret can ever be found by it. A
/// name with a part past 63 characters is a Secret's name and is generated.
#[test]
fn rule_4_2_a_ca_secret_name_no_secret_can_have_is_invalid() {
    for bad in ["Bad_Name", "ca.", &"c".repeat(254)] {
        let mut m = mrc("a", "inactive", None);
        m["spec"]["provider"]["tresor"]["ca"]["secretRef"]["name"] = json!(bad);
        let resp = run(&m, &[], std::slice::from_ref(&m), &[], &[]);
        assert_eq!(resp["attachments"], json!([]), "{bad}");
        assert_eq!(resp["status"]["state"], "error", "{bad}");
        assert_eq!(accepted(&resp), ("False", "InvalidSpec"), "{bad}");
        assert_eq!(
            resp["status"]["conditions"][0]["message"],
            "spec.provider.tresor.ca.secretRef.name is not a Secret name (a DNS-1123 subdomain), \
             so no CA Secret can have it",
            "{bad}"
        );
    }
    let long_part = format!("{}.ca", "c".repeat(64));
    let mut m = mrc("a", "inactive", None);
    m["spec"]["provider"]["tresor"]["ca"]["secretRef"]["name"] = json!(long_part);
    let resp = run(&m, &[], std::slice::from_ref(&m), &[], &[]);
    assert_eq!(accepted(&resp), ("True", "CAReady"));
    assert_eq!(resp["attachments"][0]["metadata"]["name"], json!(long_part));
}

/// §4.1: the user's CA is the Secret of that name in the MRC's own namespace; one of the same
/// name elsewhere is not it, and the CA is generated.
#[test]
fn rule_4_1_a_secret_of_the_name_in_another_namespace_is_not_the_users_ca() {
    let m = mrc("b", "inactive", None);
    let mut elsewhere = ca_secret("b-ca");
    elsewhere["metadata"]["namespace"] = json!("other");
    let resp = run(&m, &[], &[], &[], &[elsewhere, ca_secret("x")]);
    assert_eq!(accepted(&resp), ("True", "CAReady"));
    assert_eq!(resp["attachments"][0]["metadata"]["name"], "b-ca");
    assert_eq!(resp["attachments"][0]["metadata"]["namespace"], NS);
}

/// §4.2 `InvalidRoleCombination` counts the in-use MRCs of the namespace: itself with its own
/// role, not terminating ones, not other namespaces', not inactive ones.
#[test]
fn rule_4_2_role_combination_counts_the_namespaces_live_mrcs_in_use() {
    let with = |name: &str, role: &str, edit: &dyn Fn(&mut Value)| {
        let mut m = mrc(name, role, None);
        edit(&mut m);
        m
    };
    let a = mrc("a", "active", None);
    let secret = ca_secret("a-ca");
    let reason = |related: &[Value]| {
        let resp = run(&a, std::slice::from_ref(&secret), related, &[], &[]);
        accepted(&resp).1.to_owned()
    };
    let terminating = |m: &mut Value| {
        m["metadata"]["deletionTimestamp"] = json!("2026-06-01T11:00:00Z");
    };
    let elsewhere = |m: &mut Value| m["metadata"]["namespace"] = json!("other");
    // Live in this namespace: a (active) and d (passive), a valid pair.
    let related = [
        mrc("a", "passive", None),
        with("b", "active", &terminating),
        with("c", "active", &elsewhere),
        with("c2", "active", &elsewhere),
        mrc("d", "passive", None),
        mrc("e", "inactive", None),
    ];
    assert_eq!(reason(&related), "CAReady");
    // Two passives beside it: three in use.
    let related = [mrc("d", "passive", None), mrc("d2", "passive", None)];
    assert_eq!(reason(&related), "InvalidRoleCombination");
}

#[test]
fn rule_4_2_errors_in_order() {
    let mut bad_role = mrc("a", "standby", None);
    assert_eq!(
        accepted(&run(&bad_role, &[], &[], &[], &[])),
        ("False", "InvalidSpec")
    );
    bad_role["spec"]["role"] = json!("active");
    bad_role["spec"]["provider"] = json!({"vault": {"host": "v"}});
    assert_eq!(
        accepted(&run(&bad_role, &[], &[], &[], &[])),
        ("False", "UnsupportedProvider")
    );
    bad_role["spec"]["provider"] = json!({"tresor": {"ca": {}}, "certManager": {}});
    let resp = run(&bad_role, &[], &[], &[], &[]);
    assert_eq!(accepted(&resp), ("False", "InvalidSpec"));
    assert_eq!(
        resp["status"]["conditions"][0]["message"],
        "spec.provider names more than one provider"
    );
    // Two passives: in use by role and the set is invalid.
    let a = mrc("a", "passive", None);
    let b = mrc("b", "passive", None);
    let resp = run(&a, &[ca_secret("a-ca")], &[a.clone(), b.clone()], &[], &[]);
    assert_eq!(accepted(&resp), ("False", "InvalidRoleCombination"));
    assert_eq!(resp["status"]["state"], "error");
    // An inactive MRC is not part of the invalid set.
    let c = mrc("c", "inactive", None);
    let resp = run(&c, &[ca_secret("c-ca")], &[a, b, c.clone()], &[], &[]);
    assert_eq!(accepted(&resp), ("True", "CAReady"));
}

#[test]
fn rule_4_3_state_table() {
    let m = |state: Option<&str>| mrc("x", "active", state);
    let secret = ca_secret("x-ca");
    let state = |object: Value, mgr: Value| {
        run(
            &object,
            std::slice::from_ref(&secret),
            std::slice::from_ref(&object),
            &[mgr],
            &[],
        )["status"]["state"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(state(m(None), manager(Some("x"), Some("x"))), "active");
    assert_eq!(
        state(m(Some("active")), manager(Some("x"), Some("y"))),
        "active"
    );
    assert_eq!(
        state(m(Some("validatingRollout")), manager(Some("x"), Some("y"))),
        "issuingRollout"
    );
    assert_eq!(
        state(m(Some("active")), manager(Some("y"), Some("x"))),
        "issuingRollback"
    );
    assert_eq!(
        state(m(Some("issuingRollout")), manager(Some("y"), Some("x"))),
        "issuingRollback"
    );
    assert_eq!(
        state(m(Some("inactive")), manager(Some("y"), Some("x"))),
        "validatingRollout"
    );
    assert_eq!(
        state(m(Some("issuingRollback")), manager(Some("y"), Some("y"))),
        "validatingRollback"
    );
    assert_eq!(
        state(m(Some("validatingRollout")), manager(Some("y"), Some("y"))),
        "inactive"
    );
    assert_eq!(state(m(None), manager(None, None)), "inactive");
}

#[test]
fn rule_4_3_validating_rollback_waits_out_the_grace() {
    let secret = ca_secret("x-ca");
    let sync_of = |x: &Value| {
        let managers = [manager(Some("y"), Some("y"))];
        run(
            x,
            std::slice::from_ref(&secret),
            std::slice::from_ref(x),
            &managers,
            &[],
        )
    };
    let mut x = mrc("x", "inactive", Some("active"));
    let resp = sync_of(&x);
    assert_eq!(resp["status"]["state"], "validatingRollback");
    assert_eq!(
        resp["resyncAfterSeconds"], 7200,
        "grace = longest validity, 2h"
    );
    assert_eq!(resp["status"]["conditions"][1]["reason"], "NotInUse");
    // An hour after InUse turned False: still rolling back.
    x["status"] = resp["status"].clone();
    x["status"]["conditions"][1]["lastTransitionTime"] = json!("2026-06-01T11:00:00Z");
    let resp = sync_of(&x);
    assert_eq!(resp["status"]["state"], "validatingRollback");
    assert_eq!(resp["resyncAfterSeconds"], 3600);
    // At the grace's end, and past it: inactive, no resync.
    x["status"]["conditions"][1]["lastTransitionTime"] = json!("2026-06-01T10:00:00Z");
    assert_eq!(sync_of(&x)["status"]["state"], "inactive");
    x["status"]["conditions"][1]["lastTransitionTime"] = json!("2026-06-01T09:59:59Z");
    let resp = sync_of(&x);
    assert_eq!(resp["status"]["state"], "inactive");
    assert!(resp.get("resyncAfterSeconds").is_none());
    // A transition time so late that the grace would end after the year 9999: the grace ends
    // then (still rolling back), never a panic.
    x["status"]["conditions"][1]["lastTransitionTime"] = json!("9999-12-31T23:00:00Z");
    let resp = sync_of(&x);
    assert_eq!(resp["status"]["state"], "validatingRollback");
    assert_eq!(
        resp["resyncAfterSeconds"], 3_153_600_000u64,
        "the most a response asks for"
    );
}

/// The sync reads of each CertificateManager its namespace, the issuers its status names and the
/// longest validity its spec asks for, nothing else: a manager whose labels are no map or whose
/// spec is no map (which its own sync reports) does not stop the MRC's sync, and asks for no
/// grace.
#[test]
fn rule_4_3_managers_are_read_for_what_the_sync_uses() {
    let secret = ca_secret("x-ca");
    let mut odd = manager(Some("y"), Some("y"));
    odd["metadata"] = json!({"name": "odd", "namespace": NS, "labels": [], "annotations": 7});
    odd["spec"] = json!([{"validity": "90h"}]);
    let x = mrc("x", "inactive", Some("active"));
    let managers = [manager(Some("y"), Some("y")), odd];
    let resp = run(
        &x,
        std::slice::from_ref(&secret),
        std::slice::from_ref(&x),
        &managers,
        &[],
    );
    assert_eq!(resp["status"]["state"], "validatingRollback");
    assert_eq!(
        resp["resyncAfterSeconds"], 7200,
        "the grace of the manager with a spec"
    );
}

#[test]
fn rule_4_4_in_use_reasons() {
    let secret = ca_secret("x-ca");
    let x = mrc("x", "active", Some("active"));
    let reason = |mgr| {
        run(
            &x,
            std::slice::from_ref(&secret),
            std::slice::from_ref(&x),
            &[mgr],
            &[],
        )["status"]["conditions"][1]["reason"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        reason(manager(Some("x"), Some("x"))),
        "SigningAndValidating"
    );
    assert_eq!(reason(manager(Some("x"), Some("y"))), "Signing");
    assert_eq!(reason(manager(Some("y"), Some("x"))), "Validating");
}

fn review(
    op: &str,
    object: Option<Value>,
    old: Option<Value>,
    user: &str,
) -> AdmissionReview<super::admission::Admitted> {
    serde_json::from_value(json!({"request": {"uid": "u-7", "kind": {"group": "config.openservicemesh.io", "version": "v1alpha2", "kind": "MeshRootCertificate"},
        "operation": op, "name": "a", "namespace": NS, "object": object, "oldObject": old, "userInfo": {"username": user}}})).unwrap()
}

fn denial(resp: &crate::contract::AdmissionResponse) -> Option<String> {
    resp.status.as_ref().map(|s| s.message.clone())
}

#[test]
fn rule_6_validate_create() {
    let ok = mrc("a", "active", None);
    assert_eq!(
        denial(&validate(
            &review("CREATE", Some(ok.clone()), None, "u").request
        )),
        None
    );
    let mut cases = vec![];
    let mut m = ok.clone();
    m["spec"]["trustDomain"] = json!("");
    cases.push((m, "trust-domain-empty"));
    let mut m = ok.clone();
    m["spec"]["provider"] = json!({});
    cases.push((m, "provider-missing"));
    let mut m = ok.clone();
    m["spec"]["provider"]["vault"] = json!({"host": "v"});
    cases.push((m, "provider-multiple"));
    let mut m = ok.clone();
    m["spec"]["provider"]["tresor"]["ca"]["secretRef"]["namespace"] = json!("");
    cases.push((m, "provider-fields"));
    let mut m = ok.clone();
    m["spec"]["provider"] = json!({"vault": {"host": "v", "role": "r", "protocol": "ftp", "port": 8200, "token": {"secretKeyRef": {"name": "n", "key": "k", "namespace": "ns"}}}});
    cases.push((m, "provider-fields"));
    let mut m = ok.clone();
    m["spec"]["provider"] =
        json!({"certManager": {"issuerName": "i", "issuerKind": "Other", "issuerGroup": "g"}});
    cases.push((m, "provider-fields"));
    let mut m = ok.clone();
    m["spec"]["role"] = json!("standby");
    cases.push((m, "role-invalid"));
    for (object, key) in cases {
        let resp = validate(&review("CREATE", Some(object), None, "u").request);
        assert!(!resp.allowed);
        assert_eq!(resp.status.as_ref().unwrap().code, 403);
        let message = denial(&resp).unwrap();
        assert!(
            message.starts_with(&format!("{key}: MeshRootCertificate mesh/a: ")),
            "{message}"
        );
    }
    // Vault and certManager done right are admitted.
    let mut m = ok.clone();
    m["spec"]["provider"] = json!({"certManager": {"issuerName": "i", "issuerKind": "ClusterIssuer", "issuerGroup": "cert-manager.io"}});
    assert!(validate(&review("CREATE", Some(m), None, "u").request).allowed);
}

/// §6 `provider-fields`: each field of each provider, broken in turn, is named; the same
/// providers whole are admitted.
#[test]
fn rule_6_provider_fields_are_each_checked() {
    let vault = json!({"vault": {"host": "v", "role": "r", "protocol": "https", "port": 8200,
        "token": {"secretKeyRef": {"name": "n", "key": "k", "namespace": "ns"}}}});
    let cert_manager =
        json!({"certManager": {"issuerName": "i", "issuerKind": "Issuer", "issuerGroup": "g"}});
    let tresor = mrc("a", "active", None)["spec"]["provider"].clone();
    let cases = [
        (
            &tresor,
            "/tresor/ca/secretRef/name",
            json!(""),
            "tresor.ca.secretRef.name must not be empty",
        ),
        (
            &tresor,
            "/tresor/ca/secretRef/namespace",
            json!(""),
            "tresor.ca.secretRef.namespace must not be empty",
        ),
        (
            &vault,
            "/vault/host",
            json!(""),
            "vault.host must not be empty",
        ),
        (
            &vault,
            "/vault/role",
            json!(null),
            "vault.role must not be empty",
        ),
        (
            &vault,
            "/vault/protocol",
            json!("ftp"),
            "vault.protocol must be http or https",
        ),
        (
            &vault,
            "/vault/port",
            json!(0),
            "vault.port must be between 1 and 65535",
        ),
        (
            &vault,
            "/vault/port",
            json!(65536),
            "vault.port must be between 1 and 65535",
        ),
        (
            &vault,
            "/vault/port",
            json!("8200"),
            "vault.port must be between 1 and 65535",
        ),
        (
            &vault,
            "/vault/token/secretKeyRef/name",
            json!(""),
            "vault.token.secretKeyRef.name must not be empty",
        ),
        (
            &vault,
            "/vault/token/secretKeyRef/key",
            json!(""),
            "vault.token.secretKeyRef.key must not be empty",
        ),
        (
            &vault,
            "/vault/token/secretKeyRef/namespace",
            json!(""),
            "vault.token.secretKeyRef.namespace must not be empty",
        ),
        (
            &cert_manager,
            "/certManager/issuerName",
            json!(""),
            "certManager.issuerName must not be empty",
        ),
        (
            &cert_manager,
            "/certManager/issuerKind",
            json!("Other"),
            "certManager.issuerKind must be Issuer or ClusterIssuer",
        ),
        (
            &cert_manager,
            "/certManager/issuerGroup",
            json!(""),
            "certManager.issuerGroup must not be empty",
        ),
    ];
    let with_provider = |provider: Value| {
        let mut m = mrc("a", "active", None);
        m["spec"]["provider"] = provider;
        validate(&review("CREATE", Some(m), None, "u").request)
    };
    for (provider, pointer, value, problem) in cases {
        let mut broken = provider.clone();
        *broken.pointer_mut(pointer).unwrap() = value;
        assert_eq!(
            denial(&with_provider(broken)).as_deref(),
            Some(
                format!("provider-fields: MeshRootCertificate mesh/a: spec.provider.{problem}")
                    .as_str()
            ),
            "{pointer}"
        );
    }
    for port in [1, 65535] {
        let mut edge = vault.clone();
        edge["vault"]["port"] = json!(port);
        assert!(with_provider(edge).allowed, "port {port}");
    }
    for provider in [tresor, vault, cert_manager] {
        assert!(with_provider(provider.clone()).allowed, "{provider}");
    }
}

#[test]
fn rule_6_validate_update() {
    let old = mrc("a", "active", None);
    let check = |new: Value| {
        denial(&validate(
            &review("UPDATE", Some(new), Some(old.clone()), "u").request,
        ))
        .map(|m| m.split(':').next().unwrap().to_owned())
    };
    let mut m = old.clone();
    m["spec"]["provider"]["tresor"]["ca"]["secretRef"]["name"] = json!("other");
    assert_eq!(check(m).as_deref(), Some("provider-immutable"));
    let mut m = old.clone();
    m["spec"]["trustDomain"] = json!("example.org");
    assert_eq!(check(m).as_deref(), Some("trust-domain-immutable"));
    let mut m = old.clone();
    m["spec"]["spiffeEnabled"] = json!(true);
    assert_eq!(check(m).as_deref(), Some("spiffe-immutable"));
    let mut m = old.clone();
    m["spec"]["role"] = json!("inactive");
    assert_eq!(check(m).as_deref(), Some("role-active-to-inactive"));
    let mut m = old.clone();
    m["spec"]["role"] = json!("passive");
    assert_eq!(check(m), None);
    let mut m = old.clone();
    m["status"] = json!({"state": "active"});
    m["metadata"]["labels"] = json!({"x": "y"});
    assert_eq!(check(m), None, "status and metadata changes pass");
    // Even of an MRC stored with a role the rules refuse (made before the webhook was installed):
    // annotating it for deletion passes, a change of its spec that keeps that role does not.
    let mut stored = old.clone();
    stored["spec"]["role"] = json!("primary");
    let mut annotated = stored.clone();
    annotated["metadata"]["annotations"] = json!({"metahooks.dev/allow-delete": "true"});
    let update = |new: &Value| {
        denial(&validate(
            &review("UPDATE", Some(new.clone()), Some(stored.clone()), "u").request,
        ))
        .map(|m| m.split(':').next().unwrap().to_owned())
    };
    assert_eq!(update(&annotated), None);
    annotated["spec"]["extra"] = json!(1);
    assert_eq!(update(&annotated).as_deref(), Some("role-invalid"));
    // The stored role counts as inactive: such an MRC goes through passive as any other not in use.
    let mut fixed = stored.clone();
    fixed["spec"]["role"] = json!("active");
    assert_eq!(update(&fixed).as_deref(), Some("role-inactive-to-active"));
    fixed["spec"]["role"] = json!("passive");
    assert_eq!(update(&fixed), None);
    // Absent trustDomain counts as cluster.local.
    let mut m = old.clone();
    m["spec"].as_object_mut().unwrap().remove("trustDomain");
    assert_eq!(check(m), None);
    let inactive = mrc("a", "inactive", None);
    let resp = validate(&review("UPDATE", Some(old.clone()), Some(inactive), "u").request);
    assert!(denial(&resp)
        .unwrap()
        .starts_with("role-inactive-to-active:"));
}

#[test]
fn rule_6_validate_delete() {
    let deny = |old: Value, user: &str| {
        denial(&validate(&review("DELETE", None, Some(old), user).request))
    };
    assert!(deny(mrc("a", "active", None), "u")
        .unwrap()
        .starts_with("delete-in-use: MeshRootCertificate mesh/a:"));
    assert!(deny(mrc("a", "inactive", Some("validatingRollout")), "u").is_some());
    let mut in_use = mrc("a", "inactive", Some("inactive"));
    in_use["status"]["conditions"] = json!([{"type": "InUse", "status": "True"}]);
    assert!(deny(in_use.clone(), "u").is_some());
    // Only InUse=True counts: Accepted=True and InUse=False do not.
    in_use["status"]["conditions"] = json!([
        {"type": "Accepted", "status": "True"}, {"type": "InUse", "status": "False"}]);
    assert_eq!(deny(in_use, "u"), None);
    assert_eq!(
        deny(mrc("a", "inactive", Some("validatingRollback")), "u"),
        None
    );
    assert_eq!(
        deny(
            mrc("a", "active", None),
            "system:serviceaccount:kube-system:namespace-controller"
        ),
        None
    );
    let mut annotated = mrc("a", "active", None);
    annotated["metadata"]["annotations"] = json!({"metahooks.dev/allow-delete": "true"});
    assert_eq!(deny(annotated, "u"), None);
    assert!(validate(&review("DELETE", None, None, "u").request).allowed);
}

/// The object's own name and namespace are named in a denial, the request's when the object
/// has none; objects of another kind are not validated.
#[test]
fn rule_6_denials_name_the_object_and_other_kinds_pass() {
    let mut bad = mrc("own", "standby", None);
    bad["metadata"]["namespace"] = json!("own-ns");
    let denied = |object: Value| {
        denial(&validate(
            &review("CREATE", Some(object), None, "u").request,
        ))
    };
    assert!(denied(bad.clone())
        .unwrap()
        .starts_with("role-invalid: MeshRootCertificate own-ns/own: "));
    let mut anonymous = bad.clone();
    anonymous["metadata"] = json!({});
    assert!(denied(anonymous)
        .unwrap()
        .starts_with("role-invalid: MeshRootCertificate mesh/a: "));
    let mut other = review("CREATE", Some(bad), None, "u");
    other.request.kind.kind = "ConfigMap".into();
    assert!(validate(&other.request).allowed);
}

#[test]
fn rule_6_mutate_defaults_on_create() {
    use base64::Engine;
    let patch = |object: Value| -> Option<Value> {
        let resp = mutate(&review("CREATE", Some(object), None, "u").request);
        assert!(resp.allowed);
        resp.patch.map(|p| {
            serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(p).unwrap())
                .unwrap()
        })
    };
    assert_eq!(
        patch(json!({"metadata": {"name": "a"}})),
        Some(
            json!([{"op": "add", "path": "/spec", "value": {"role": "inactive", "trustDomain": "cluster.local", "spiffeEnabled": false}}])
        )
    );
    assert_eq!(
        patch(json!({"spec": {"role": null, "trustDomain": "", "provider": {}}})),
        Some(json!([
        {"op": "add", "path": "/spec/role", "value": "inactive"},
        {"op": "add", "path": "/spec/spiffeEnabled", "value": false}]))
    );
    assert_eq!(patch(mrc("a", "active", None)), None);
    let resp = mutate(&review("UPDATE", Some(json!({})), None, "u").request);
    assert!(resp.allowed && resp.patch.is_none());
}

#[test]
fn rule_2_customize_names_the_ca_secret() {
    let out = crate::registry::answer_of(
        super::customize_hook,
        &json!({"controller": {}, "parent": mrc("a", "active", None)}),
        NOW,
    );
    assert_eq!(
        out["relatedResources"],
        json!([
        {"apiVersion": "config.openservicemesh.io/v1alpha2", "resource": "meshrootcertificates", "namespace": NS},
        {"apiVersion": "metahooks.dev/v1alpha1", "resource": "certificatemanagers", "namespace": NS},
        {"apiVersion": "v1", "resource": "secrets", "namespace": NS, "names": ["a-ca"]}])
    );
}
