//! Rules of cert-rotation.md §3, each test naming the rule it checks.

use super::sync::{sync, SyncRequest};
use crate::contract::decode;
use crate::mesh_root_certificate::model::b64;
use crate::pki::generate_ca;
use serde_json::{json, Value};
use time::macros::datetime;

const NOW: time::OffsetDateTime = datetime!(2026-06-01 12:00:00 UTC);
const NS: &str = "mesh";

fn mrc(name: &str, role: Value, provider: Value) -> Value {
    json!({"metadata": {"name": name, "namespace": NS}, "spec": {"role": role, "trustDomain": "cluster.local", "provider": provider}})
}

fn tresor(secret: &str) -> Value {
    json!({"tresor": {"ca": {"secretRef": {"name": secret, "namespace": NS}}}})
}

fn ca_secret(name: &str, cn: &str) -> Value {
    let pair = generate_ca(cn, "cluster.local", NOW, &ring::rand::SystemRandom::new()).unwrap();
    json!({"metadata": {"name": name, "namespace": NS}, "type": "Opaque",
           "data": {"ca.crt": b64(pair.cert_pem.as_bytes()), "private.key": b64(pair.key_pem.as_bytes())}})
}

fn keyed(objs: &[Value]) -> Value {
    Value::Object(
        objs.iter()
            .map(|o| {
                (
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                    o.clone(),
                )
            })
            .collect(),
    )
}

fn request(
    spec: Value,
    status: Value,
    mrcs: &[Value],
    secrets: &[Value],
    child_secrets: &[Value],
) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "parent": {"metadata": {"name": "mgr", "namespace": NS, "generation": 2}, "spec": spec, "status": status},
        "children": {"ConfigMap.v1": {}, "Secret.v1": keyed(child_secrets)},
        "related": {"MeshRootCertificate.config.openservicemesh.io/v1alpha2": keyed(mrcs), "Secret.v1": keyed(secrets)},
    }))
    .unwrap()
}

fn spec() -> Value {
    json!({"trustBundle": {"configMapName": "bundle"}, "certificates": [{"secretName": "leaf", "commonName": "web.mesh.cluster.local"}]})
}

fn run(body: &[u8]) -> Value {
    let req: SyncRequest = decode(body).unwrap();
    let rng = ring::rand::SystemRandom::new();
    serde_json::to_value(sync(&req, NOW, &rng, &Default::default())).unwrap()
}

fn ready(resp: &Value) -> (String, String) {
    let c = &resp["status"]["conditions"][0];
    (
        c["status"].as_str().unwrap().into(),
        c["reason"].as_str().unwrap().into(),
    )
}

#[test]
fn rule_3_2_single_active_signs_and_validates() {
    let resp = run(&request(
        spec(),
        json!({}),
        &[mrc("a", json!("active"), tresor("a-ca"))],
        &[ca_secret("a-ca", "a")],
        &[],
    ));
    assert_eq!(resp["status"]["signingIssuer"], "a");
    assert_eq!(resp["status"]["validatingIssuer"], "a");
    assert_eq!(ready(&resp), ("True".into(), "IssuersReady".into()));
    let kinds: Vec<&str> = resp["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["ConfigMap", "Secret"]);
    let leaf = &resp["children"][1];
    assert_eq!(
        leaf["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "metahooks"
    );
    assert_eq!(
        leaf["metadata"]["labels"]["metahooks.dev/certificate-manager"],
        "mgr"
    );
    // 24h default validity: renewal after 16h.
    assert_eq!(resp["resyncAfterSeconds"], 16 * 3600);
}

#[test]
fn rule_3_2_active_and_passive_whatever_the_names() {
    let mrcs = [
        mrc("a", json!("passive"), tresor("a-ca")),
        mrc("z", json!("active"), tresor("z-ca")),
    ];
    let resp = run(&request(
        spec(),
        json!({}),
        &mrcs,
        &[ca_secret("a-ca", "a"), ca_secret("z-ca", "z")],
        &[],
    ));
    assert_eq!(
        (
            resp["status"]["signingIssuer"].as_str(),
            resp["status"]["validatingIssuer"].as_str()
        ),
        (Some("z"), Some("a"))
    );
}

#[test]
fn rule_3_2_two_actives_sticky_then_name_order() {
    let mrcs = [
        mrc("a", json!("active"), tresor("a-ca")),
        mrc("b", json!("active"), tresor("b-ca")),
    ];
    let secrets = [ca_secret("a-ca", "a"), ca_secret("b-ca", "b")];
    let resp = run(&request(
        spec(),
        json!({"signingIssuer": "b", "validatingIssuer": "a"}),
        &mrcs,
        &secrets,
        &[],
    ));
    assert_eq!(resp["status"]["signingIssuer"], "b");
    let resp = run(&request(
        spec(),
        json!({"signingIssuer": "gone"}),
        &mrcs,
        &secrets,
        &[],
    ));
    assert_eq!(resp["status"]["signingIssuer"], "a");
    assert_eq!(resp["status"]["validatingIssuer"], "b");
}

/// The chosen pair is one rotation step from the current one: the new signer is trusted now and
/// the current signer after (DECISIONS, "A pair a rotation step away"). Otherwise the manager
/// freezes with `RotationStepSkipped`, keeping its issuers and its leaves.
#[test]
fn rule_3_2_a_pair_more_than_a_rotation_step_away_freezes() {
    let secrets: Vec<Value> = ["a", "b", "c"]
        .iter()
        .map(|n| ca_secret(&format!("{n}-ca"), n))
        .collect();
    let observed_leaf = json!({"metadata": {"name": "leaf", "namespace": NS, "uid": "x"},
        "type": "kubernetes.io/tls", "data": {"tls.crt": "AAAA", "tls.key": "BBBB", "ca.crt": "CCCC"}});
    let roles = |a: Value, b: Value, c: Value| {
        vec![
            mrc("a", a, tresor("a-ca")),
            mrc("b", b, tresor("b-ca")),
            mrc("c", c, tresor("c-ca")),
        ]
    };
    let sync = |mrcs: &[Value], current: Value| {
        let leaves = std::slice::from_ref(&observed_leaf);
        run(&request(spec(), current, mrcs, &secrets, leaves))
    };
    let pair = |resp: &Value| {
        let s = &resp["status"];
        (s["signingIssuer"].clone(), s["validatingIssuer"].clone())
    };
    let refused = |resp: &Value, message: &str| {
        assert_eq!(ready(resp), ("False".into(), "RotationStepSkipped".into()));
        assert_eq!(resp["status"]["conditions"][0]["message"], message);
        assert_eq!(resp["children"][0]["data"], observed_leaf["data"]);
    };

    // a signed with b trusted beside it; then, through combinations the manager refused, a
    // went inactive and c active: c would sign, which no workload trusts.
    let walked = roles(json!("inactive"), json!("passive"), json!("active"));
    let resp = sync(
        &walked,
        json!({"signingIssuer": "a", "validatingIssuer": "b"}),
    );
    refused(
        &resp,
        "MeshRootCertificate c would sign before the leaves trust it (they trust a and b): roles \
         go one rotation step at a time, c passive beside a, which signs now, before it is \
         active (ROTATION.md)",
    );
    assert_eq!(pair(&resp), (json!("a"), json!("b")));
    // Two edits before one sync: b created active and a made passive at once.
    let batched = roles(json!("passive"), json!("active"), json!(null));
    let resp = sync(
        &batched,
        json!({"signingIssuer": "a", "validatingIssuer": "a"}),
    );
    assert_eq!(
        resp["status"]["conditions"][0]["message"],
        "MeshRootCertificate b would sign before the leaves trust it (they trust a): roles go \
         one rotation step at a time, b passive beside a, which signs now, before it is active \
         (ROTATION.md)"
    );
    // b trusted and made the signer, c beside it, and a (signing now) no longer trusted.
    let dropped = roles(json!("inactive"), json!("active"), json!("passive"));
    let resp = sync(
        &dropped,
        json!({"signingIssuer": "a", "validatingIssuer": "b"}),
    );
    refused(
        &resp,
        "MeshRootCertificate a signs the leaves in use and would no longer be trusted: roles \
         go one rotation step at a time, a passive while b signs, before it is inactive \
         (ROTATION.md)",
    );

    // One step at a time, every move is taken.
    let steps = [
        (
            roles(json!("active"), json!("passive"), json!(null)),
            ("a", "a"),
            ("a", "b"),
        ),
        (
            roles(json!("passive"), json!("active"), json!(null)),
            ("a", "b"),
            ("b", "a"),
        ),
        (
            roles(json!("inactive"), json!("active"), json!(null)),
            ("b", "a"),
            ("b", "b"),
        ),
        (
            roles(json!("active"), json!("passive"), json!(null)),
            ("b", "a"),
            ("a", "b"),
        ),
    ];
    for (mrcs, (s, v), want) in steps {
        let resp = sync(&mrcs, json!({"signingIssuer": s, "validatingIssuer": v}));
        assert_eq!(ready(&resp).1, "IssuersReady", "from {s}/{v}");
        assert_eq!(pair(&resp), (json!(want.0), json!(want.1)), "from {s}/{v}");
    }
    // A signer deleted on purpose (its MRC gone) holds nothing back; nor does a first sync.
    let resp = sync(
        &walked[1..],
        json!({"signingIssuer": "a", "validatingIssuer": "b"}),
    );
    assert_eq!(pair(&resp), (json!("c"), json!("b")));
    let resp = sync(&walked, json!({}));
    assert_eq!(pair(&resp), (json!("c"), json!("b")));
}

#[test]
fn rule_3_1_failures_freeze_in_order() {
    let a = mrc("a", json!("active"), tresor("a-ca"));
    let a_ca = ca_secret("a-ca", "a");
    let observed_leaf = json!({"metadata": {"name": "leaf", "namespace": NS, "uid": "x",
        "annotations": {"metacontroller.k8s.io/last-applied-configuration": "{}", "keep": "1"}},
        "type": "kubernetes.io/tls", "data": {"tls.crt": "AAAA", "tls.key": "BBBB", "ca.crt": "CCCC"}});
    let prev = json!({"signingIssuer": "a", "validatingIssuer": "a"});
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            request(
                json!({"trustBundle": {}}),
                prev.clone(),
                std::slice::from_ref(&a),
                std::slice::from_ref(&a_ca),
                std::slice::from_ref(&observed_leaf),
            ),
            "InvalidSpec",
        ),
        (
            request(
                spec(),
                prev.clone(),
                std::slice::from_ref(&a),
                &[
                    a_ca.clone(),
                    json!({"metadata": {"name": "leaf"}, "data": {}}),
                ],
                &[],
            ),
            "SecretConflict",
        ),
        (
            request(
                spec(),
                prev.clone(),
                &[a.clone(), mrc("b", json!("standby"), tresor("b-ca"))],
                std::slice::from_ref(&a_ca),
                std::slice::from_ref(&observed_leaf),
            ),
            "InvalidMRC",
        ),
        (
            request(
                spec(),
                prev.clone(),
                &[mrc("a", json!("inactive"), tresor("a-ca"))],
                std::slice::from_ref(&a_ca),
                std::slice::from_ref(&observed_leaf),
            ),
            "NoMRCInUse",
        ),
        (
            request(
                spec(),
                prev.clone(),
                &[mrc("a", json!("passive"), tresor("a-ca"))],
                std::slice::from_ref(&a_ca),
                std::slice::from_ref(&observed_leaf),
            ),
            "NoActiveMRC",
        ),
        (
            request(
                spec(),
                prev.clone(),
                &[
                    a.clone(),
                    mrc("b", json!("passive"), tresor("b-ca")),
                    mrc("c", json!("active"), tresor("c-ca")),
                ],
                std::slice::from_ref(&a_ca),
                std::slice::from_ref(&observed_leaf),
            ),
            "TooManyMRCsInUse",
        ),
        (
            request(
                spec(),
                prev.clone(),
                &[mrc("a", json!("active"), json!({"vault": {"host": "v"}}))],
                &[],
                std::slice::from_ref(&observed_leaf),
            ),
            "UnsupportedProvider",
        ),
        (
            request(
                spec(),
                prev.clone(),
                &[mrc("a", json!("active"), json!({}))],
                &[],
                std::slice::from_ref(&observed_leaf),
            ),
            "InvalidMRC",
        ),
        // A CA Secret name no Secret can have: never CAUnavailable, waiting for a Secret that
        // the API server would refuse.
        (
            request(
                spec(),
                prev.clone(),
                &[mrc("a", json!("active"), tresor("A_CA"))],
                &[],
                std::slice::from_ref(&observed_leaf),
            ),
            "InvalidMRC",
        ),
        (
            request(
                spec(),
                prev.clone(),
                std::slice::from_ref(&a),
                &[],
                std::slice::from_ref(&observed_leaf),
            ),
            "CAUnavailable",
        ),
    ];
    for (body, reason) in cases {
        let resp = run(&body);
        assert_eq!(ready(&resp), ("False".into(), reason.into()));
        assert_eq!(
            resp["status"]["signingIssuer"], "a",
            "{reason}: previous issuers kept"
        );
        assert!(resp.get("resyncAfterSeconds").is_none());
        let children = resp["children"].as_array().unwrap();
        if reason != "SecretConflict" {
            assert_eq!(children.len(), 1, "{reason}: observed leaf returned");
            assert_eq!(children[0]["data"], observed_leaf["data"]);
            assert_eq!(children[0]["metadata"]["annotations"], json!({"keep": "1"}));
            assert!(children[0]["metadata"].get("uid").is_none());
        }
    }
    // Absent previous issuers stay absent.
    let resp = run(&request(json!({}), json!({}), &[], &[], &[]));
    assert!(resp["status"].get("signingIssuer").is_none());
}

#[test]
fn rule_3_1_messages_never_carry_key_material() {
    let mut broken = ca_secret("a-ca", "a");
    let key = broken["data"]["private.key"].as_str().unwrap().to_owned();
    broken["data"]["ca.crt"] = json!(key.clone());
    let resp = run(&request(
        spec(),
        json!({}),
        &[mrc("a", json!("active"), tresor("a-ca"))],
        &[broken],
        &[],
    ));
    let text = serde_json::to_string(&resp["status"]).unwrap();
    assert_eq!(ready(&resp).1, "CAUnavailable");
    assert!(text.contains("a-ca") && text.contains("ca.crt"), "{text}");
    assert!(!text.contains(&key[..20]) && !text.contains("PRIVATE"));
}

/// §8: the trust bundle holds certificates only, though §2 takes a CA's `ca.crt` as it is. A
/// `ca.crt` that holds the CA's key beside its certificate (one file of both, put in a Secret of
/// the user's own) is unusable, as signer or as validator: before, the key went into the
/// ConfigMap and into every leaf Secret's `ca.crt`.
#[test]
fn rule_8_a_ca_crt_holding_its_key_is_never_published() {
    let with_key = |name: &str| {
        let mut secret = ca_secret(name, name);
        let data = &secret["data"];
        let both = [
            data["ca.crt"].as_str().unwrap(),
            data["private.key"].as_str().unwrap(),
        ]
        .map(|v| crate::pki::from_base64(v).unwrap())
        .concat();
        secret["data"]["ca.crt"] = json!(b64(&both));
        secret
    };
    for (mrcs, secrets, named) in [
        (
            vec![mrc("a", json!("active"), tresor("a-ca"))],
            vec![with_key("a-ca")],
            "a",
        ),
        (
            vec![
                mrc("a", json!("active"), tresor("a-ca")),
                mrc("b", json!("passive"), tresor("b-ca")),
            ],
            vec![ca_secret("a-ca", "a"), with_key("b-ca")],
            "b",
        ),
    ] {
        let resp = run(&request(spec(), json!({}), &mrcs, &secrets, &[]));
        assert_eq!(ready(&resp).1, "CAUnavailable");
        let message = resp["status"]["conditions"][0]["message"].as_str().unwrap();
        assert_eq!(
            message,
            format!(
                "MeshRootCertificate {named}: CA Secret {named}-ca: ca.crt holds a private key, \
                 which the trust bundle would publish"
            )
        );
        assert_eq!(resp["children"], json!([]));
    }
}

#[test]
fn rule_3_3_unchanged_state_gives_byte_identical_children() {
    let mrcs = [mrc("a", json!("active"), tresor("a-ca"))];
    let secrets = [ca_secret("a-ca", "a")];
    let first = run(&request(spec(), json!({}), &mrcs, &secrets, &[]));
    let leaf = first["children"][1].clone();
    let second = run(&request(
        spec(),
        first["status"].clone(),
        &mrcs,
        &secrets,
        std::slice::from_ref(&leaf),
    ));
    assert_eq!(
        serde_json::to_string(&first["children"]).unwrap(),
        serde_json::to_string(&second["children"]).unwrap()
    );
    // A different commonName re-issues.
    let mut other = spec();
    other["certificates"][0]["commonName"] = json!("api.mesh.cluster.local");
    let third = run(&request(
        other,
        first["status"].clone(),
        &mrcs,
        &secrets,
        std::slice::from_ref(&leaf),
    ));
    assert_ne!(
        third["children"][1]["data"]["tls.crt"],
        leaf["data"]["tls.crt"]
    );
}

#[test]
fn rule_3_4_spiffe_uri_from_the_signing_mrc() {
    let mut a = mrc("a", json!("active"), tresor("a-ca"));
    a["spec"]["spiffeEnabled"] = json!(true);
    let resp = run(&request(
        spec(),
        json!({}),
        &[a],
        &[ca_secret("a-ca", "a")],
        &[],
    ));
    use base64::Engine;
    let crt = base64::engine::general_purpose::STANDARD
        .decode(resp["children"][1]["data"]["tls.crt"].as_str().unwrap())
        .unwrap();
    let der = x509_parser::pem::Pem::iter_from_buffer(&crt)
        .next()
        .unwrap()
        .unwrap()
        .contents;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    let san = cert.subject_alternative_name().unwrap().unwrap();
    let names: Vec<String> = san
        .value
        .general_names
        .iter()
        .map(|g| g.to_string())
        .collect();
    assert!(
        names.contains(&"URI(spiffe://cluster.local/web/mesh)".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"DNSName(web.mesh.cluster.local)".to_owned()),
        "{names:?}"
    );
}

/// A SPIFFE ID is a URI that SPIFFE verifiers and URI parsers must take: a trust domain or a
/// commonName that cannot make one freezes the manager with the field named, not as a signing
/// failure blamed on the CA, nor by issuing leaves their peers refuse; without SPIFFE a
/// commonName that is not ASCII is issued beside dnsNames that are.
#[test]
fn rule_3_4_what_a_spiffe_id_cannot_hold_is_named() {
    let with_common_name = |cn: &str| {
        json!({"trustBundle": {"configMapName": "bundle"}, "certificates": [
            {"secretName": "leaf", "commonName": "web.mesh.cluster.local"},
            {"secretName": "other", "commonName": cn, "dnsNames": ["other.mesh.svc"]}]})
    };
    let secrets = [ca_secret("a-ca", "a")];
    let sync_with = |spiffe: bool, domain: &str, spec: &Value| {
        let mut a = mrc("a", json!("active"), tresor("a-ca"));
        a["spec"]["spiffeEnabled"] = json!(spiffe);
        a["spec"]["trustDomain"] = json!(domain);
        let resp = run(&request(spec.clone(), json!({}), &[a], &secrets, &[]));
        let message = resp["status"]["conditions"][0]["message"].clone();
        (
            ready(&resp),
            message,
            resp["children"].as_array().unwrap().len(),
        )
    };
    for cn in [
        "café",
        "web mesh",
        "*.mesh.svc",
        "web..mesh",
        "web.mesh.",
        "a%41",
    ] {
        let (ready_, message, _) = sync_with(true, "cluster.local", &with_common_name(cn));
        assert_eq!(ready_, ("False".into(), "InvalidSpec".into()), "{cn}");
        assert_eq!(
            message,
            "spec.certificates[1].commonName does not make a SPIFFE ID path (parts between dots of \
             letters, digits, '-' and '_'), which a leaf a signs needs",
            "{cn}"
        );
    }
    let long = format!("{}.local", "d".repeat(250));
    for domain in [
        "grüne.local",
        "mesh local",
        "Cluster.local",
        "cluster..local",
        "",
        &long,
    ] {
        let (ready_, message, _) = sync_with(true, domain, &spec());
        assert_eq!(ready_, ("False".into(), "InvalidMRC".into()), "{domain}");
        assert_eq!(
            message,
            "MeshRootCertificate a: spec.trustDomain is not a SPIFFE trust domain (parts between \
             dots of lowercase letters, digits, '-' and '_', 255 characters in all), which the \
             SPIFFE IDs of its leaves need",
            "{domain}"
        );
    }
    // The edges that pass: the longest trust domain, `_` and `-`, a commonName that is the trust
    // domain itself (its path is then the whole name), capitals in the path.
    let longest = format!("{}.local", "d".repeat(249));
    for (domain, cn) in [
        (longest.as_str(), "Web_1-a.mesh"),
        ("my_mesh-1.local", "my_mesh-1.local"),
    ] {
        let (ready_, message, _) = sync_with(true, domain, &with_common_name(cn));
        assert_eq!(ready_, ("True".into(), "IssuersReady".into()), "{message}");
    }
    let (ready_, _, children) = sync_with(false, "grüne.local", &with_common_name("café"));
    assert_eq!(ready_, ("True".into(), "IssuersReady".into()));
    assert_eq!(children, 3);
}

/// An incoming MRC whose trust domain cannot make SPIFFE IDs is met when it would sign (step 4
/// of §5): the manager freezes on the pair it had, and making the old MRC active again (two
/// actives, the sticky signer) signs on with it, as DECISIONS tells the user.
#[test]
fn rule_3_4_a_rotation_to_a_signer_without_spiffe_ids_goes_back() {
    let old = |role: &str| mrc("o", json!(role), tresor("o-ca"));
    let mut new = mrc("n", json!("active"), tresor("n-ca"));
    new["spec"]["spiffeEnabled"] = json!(true);
    new["spec"]["trustDomain"] = json!("Mesh.Local");
    let secrets = [ca_secret("o-ca", "o"), ca_secret("n-ca", "n")];
    let step3 = json!({"signingIssuer": "o", "validatingIssuer": "n"});
    let step4 = run(&request(
        spec(),
        step3,
        &[old("passive"), new.clone()],
        &secrets,
        &[],
    ));
    assert_eq!(ready(&step4), ("False".into(), "InvalidMRC".into()));
    assert_eq!(step4["status"]["signingIssuer"], "o");
    assert_eq!(step4["status"]["validatingIssuer"], "n");
    let back = run(&request(
        spec(),
        step4["status"].clone(),
        &[old("active"), new],
        &secrets,
        &[],
    ));
    assert_eq!(ready(&back), ("True".into(), "IssuersReady".into()));
    assert_eq!(back["status"]["signingIssuer"], "o");
}

#[test]
fn rule_2_customize_asks_for_mrcs_and_secrets_of_the_namespace() {
    let out = crate::registry::answer_of(
        super::customize_hook,
        &json!({"controller": {}, "parent": {"metadata": {"name": "mgr", "namespace": NS}}}),
        NOW,
    );
    assert_eq!(
        out,
        json!({"relatedResources": [
        {"apiVersion": "config.openservicemesh.io/v1alpha2", "resource": "meshrootcertificates", "namespace": NS},
        {"apiVersion": "v1", "resource": "secrets", "namespace": NS}]})
    );
}

#[test]
fn a_shared_memo_checks_each_ca_once_and_follows_changed_ca_secrets() {
    let memo = crate::memo::Memo::default();
    let run_with = |body: &[u8]| {
        let req: SyncRequest = decode(body).unwrap();
        serde_json::to_value(sync(&req, NOW, &ring::rand::SystemRandom::new(), &memo)).unwrap()
    };
    let mrcs = [
        mrc("a", json!("active"), tresor("a-ca")),
        mrc("b", json!("passive"), tresor("b-ca")),
    ];
    let bundle = |resp: &Value| {
        resp["children"][0]["data"]["ca.crt"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let secrets = [ca_secret("a-ca", "a"), ca_secret("b-ca", "b")];
    let first = run_with(&request(spec(), json!({}), &mrcs, &secrets, &[]));
    let again = run_with(&request(spec(), json!({}), &mrcs, &secrets, &[]));
    assert_eq!(memo.pki.cas.len(), 2, "each CA Secret checked once");
    assert_eq!(memo.trust_bundles.len(), 1, "the trust bundle written once");
    assert_eq!(first["status"], again["status"]);
    assert_eq!(bundle(&first), bundle(&again));

    // The same Secret name with new content: the new CA is checked and trusted, not the old.
    let renewed = [ca_secret("a-ca", "a"), secrets[1].clone()];
    let after = run_with(&request(spec(), json!({}), &mrcs, &renewed, &[]));
    assert_eq!(memo.pki.cas.len(), 3);
    assert_eq!(memo.trust_bundles.len(), 2, "a new bundle for the new CA");
    let pem = |secret: &Value| {
        let text = crate::pki::from_base64(secret["data"]["ca.crt"].as_str().unwrap()).unwrap();
        String::from_utf8(text).unwrap()
    };
    assert!(bundle(&after).contains(&pem(&renewed[0])));
    assert!(!bundle(&after).contains(&pem(&secrets[0])));

    // A CA Secret whose key was swapped for another CA's is refused although its certificate
    // was checked before.
    let mut broken = secrets[0].clone();
    broken["data"]["private.key"] = secrets[1]["data"]["private.key"].clone();
    // A kept leaf is checked once; a spec asking for another name re-issues it all the same.
    let leaf = first["children"][1].clone();
    let kept = run_with(&request(
        spec(),
        json!({}),
        &mrcs,
        &secrets,
        std::slice::from_ref(&leaf),
    ));
    let kept_again = run_with(&request(
        spec(),
        json!({}),
        &mrcs,
        &secrets,
        std::slice::from_ref(&leaf),
    ));
    assert_eq!(kept["children"][1]["data"], leaf["data"]);
    assert_eq!(kept_again["children"][1]["data"], leaf["data"]);
    assert_eq!(memo.pki.leaves.len(), 1);
    let renamed = json!({"trustBundle": {"configMapName": "bundle"}, "certificates": [{"secretName": "leaf", "commonName": "api.mesh.cluster.local"}]});
    let reissued = run_with(&request(
        renamed,
        json!({}),
        &mrcs,
        &secrets,
        std::slice::from_ref(&leaf),
    ));
    assert_ne!(
        reissued["children"][1]["data"]["tls.crt"],
        leaf["data"]["tls.crt"]
    );

    let refused = run_with(&request(
        spec(),
        json!({}),
        &mrcs,
        &[broken, secrets[1].clone()],
        &[],
    ));
    assert_eq!(ready(&refused), ("False".into(), "CAUnavailable".into()));
}

/// The `ca.crt` text of a CA Secret made by `ca_secret`.
fn ca_pem(secret: &Value) -> String {
    let text = crate::pki::from_base64(secret["data"]["ca.crt"].as_str().unwrap()).unwrap();
    String::from_utf8(text).unwrap()
}

/// The trust PEM of a response: the ConfigMap's text, and the same in every leaf's `ca.crt`.
fn trust_pem(resp: &Value) -> String {
    let children = resp["children"].as_array().unwrap();
    let bundle = children[0]["data"]["ca.crt"].as_str().unwrap().to_owned();
    for leaf in &children[1..] {
        assert_eq!(leaf["data"]["ca.crt"], b64(bundle.as_bytes()));
    }
    bundle
}

#[test]
fn rule_2_trust_pem_is_signer_then_a_different_validator_each_ending_in_a_newline() {
    let a_ca = ca_secret("a-ca", "a");
    let z_ca = ca_secret("z-ca", "z");
    let pair = [
        mrc("a", json!("passive"), tresor("a-ca")),
        mrc("z", json!("active"), tresor("z-ca")),
    ];
    let both = [a_ca.clone(), z_ca.clone()];
    let resp = run(&request(spec(), json!({}), &pair, &both, &[]));
    assert_eq!(trust_pem(&resp), ca_pem(&z_ca) + &ca_pem(&a_ca));

    // One MRC: its text once.
    let single = [mrc("z", json!("active"), tresor("z-ca"))];
    let resp = run(&request(spec(), json!({}), &single, &both, &[]));
    assert_eq!(trust_pem(&resp), ca_pem(&z_ca));

    // Two MRCs naming one user Secret: the same text, once.
    let shared = [
        mrc("a", json!("passive"), tresor("z-ca")),
        mrc("z", json!("active"), tresor("z-ca")),
    ];
    let resp = run(&request(spec(), json!({}), &shared, &both, &[]));
    assert_eq!(resp["status"]["validatingIssuer"], "a");
    assert_eq!(trust_pem(&resp), ca_pem(&z_ca));

    // A text without its last newline is taken verbatim and given one.
    let mut bare = z_ca.clone();
    let trimmed = ca_pem(&z_ca).trim_end().to_owned();
    bare["data"]["ca.crt"] = json!(b64(trimmed.as_bytes()));
    let resp = run(&request(
        spec(),
        json!({}),
        &pair,
        &[a_ca.clone(), bare],
        &[],
    ));
    assert_eq!(trust_pem(&resp), trimmed + "\n" + &ca_pem(&a_ca));
}

#[test]
fn rule_1_terminating_and_other_namespaces_mrcs_are_ignored() {
    let mut terminating = mrc("b", json!("active"), tresor("b-ca"));
    terminating["metadata"]["deletionTimestamp"] = json!("2026-06-01T11:00:00Z");
    let mut elsewhere = mrc("c", json!("active"), tresor("c-ca"));
    elsewhere["metadata"]["namespace"] = json!("other");
    let mrcs = [
        mrc("a", json!("active"), tresor("a-ca")),
        terminating,
        elsewhere,
    ];
    let secrets = [
        ca_secret("a-ca", "a"),
        ca_secret("b-ca", "b"),
        ca_secret("c-ca", "c"),
    ];
    let resp = run(&request(spec(), json!({}), &mrcs, &secrets, &[]));
    assert_eq!(ready(&resp), ("True".into(), "IssuersReady".into()));
    assert_eq!(
        (
            resp["status"]["signingIssuer"].as_str(),
            resp["status"]["validatingIssuer"].as_str()
        ),
        (Some("a"), Some("a"))
    );
}

#[test]
fn rule_3_6_combination_messages_name_the_mrcs_in_use() {
    let message = |mrcs: &[Value]| {
        let resp = run(&request(spec(), json!({}), mrcs, &[], &[]));
        resp["status"]["conditions"][0]["message"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        message(&[mrc("a", json!("inactive"), tresor("a-ca"))]),
        "no MeshRootCertificate is active or passive"
    );
    assert_eq!(
        message(&[
            mrc("c", json!("active"), tresor("c-ca")),
            mrc("a", json!("passive"), tresor("a-ca")),
            mrc("b", json!(null), tresor("b-ca")),
            mrc("d", json!("passive"), tresor("d-ca")),
            mrc("e", json!("active"), tresor("e-ca")),
        ]),
        "MeshRootCertificates in use: a, c, d, e"
    );
}

#[test]
fn rule_3_3_a_leaf_is_kept_only_under_both_issuer_annotations() {
    let mrcs = [mrc("a", json!("active"), tresor("a-ca"))];
    let secrets = [ca_secret("a-ca", "a")];
    let first = run(&request(spec(), json!({}), &mrcs, &secrets, &[]));
    let leaf = first["children"][1].clone();
    let again = |leaf: &Value| {
        let resp = run(&request(
            spec(),
            json!({}),
            &mrcs,
            &secrets,
            std::slice::from_ref(leaf),
        ));
        resp["children"][1]["data"]["tls.crt"] == leaf["data"]["tls.crt"]
    };
    assert!(again(&leaf), "kept as it is");
    // Its renewal point is two thirds into its 24h: 16h from now, as when it was issued.
    let kept = run(&request(
        spec(),
        json!({}),
        &mrcs,
        &secrets,
        std::slice::from_ref(&leaf),
    ));
    assert_eq!(kept["resyncAfterSeconds"], 16 * 3600);
    for annotation in [
        "metahooks.dev/signing-issuer",
        "metahooks.dev/validating-issuer",
    ] {
        let mut stale = leaf.clone();
        stale["metadata"]["annotations"][annotation] = json!("b");
        assert!(
            !again(&stale),
            "{annotation} names another MRC: issued again"
        );
    }
}

/// An observed Secret without a name could only be left out of the answer, which would have
/// Metacontroller delete it: the request is refused, naming it.
#[test]
fn a_child_secret_without_a_name_is_a_request_error_naming_it() {
    let nameless = json!({"metadata": {"name": "", "namespace": NS}, "data": {}});
    let body = request(spec(), json!({}), &[], &[], &[nameless]);
    let err = decode::<SyncRequest>(&body).unwrap_err();
    assert_eq!(err.path, "children.Secret.v1..metadata.name");
}

/// §3.3 with DECISIONS.md "Leaf seals": every leaf Secret carries its signer's seal, the same for
/// a kept leaf as when it was issued; a leaf observed without it, or with another, is checked in
/// full (its signature verified) and kept with the right one; a seal copied to another CA's leaf
/// does not make it kept.
#[test]
fn rule_3_3_a_leaf_carries_its_signers_seal_whatever_seal_it_came_with() {
    const SEAL: &str = "metahooks.dev/leaf-seal";
    let mrcs = [mrc("a", json!("active"), tresor("a-ca"))];
    let secrets = [ca_secret("a-ca", "a")];
    let first = run(&request(spec(), json!({}), &mrcs, &secrets, &[]));
    let leaf = first["children"][1].clone();
    let seal = leaf["metadata"]["annotations"][SEAL].as_str().unwrap();
    assert_eq!(
        crate::pki::from_base64(seal).map(|s| s.len()),
        Some(32),
        "{seal}"
    );
    let other_leaf = run(&request(spec(), json!({}), &mrcs, &secrets, &[]))["children"][1].clone();
    let other_seal = &other_leaf["metadata"]["annotations"][SEAL];
    assert_ne!(other_seal, seal, "each leaf has its own seal");
    for written in [Value::Null, json!("garbage"), other_seal.clone()] {
        let mut observed = leaf.clone();
        match &written {
            Value::Null => {
                observed["metadata"]["annotations"]
                    .as_object_mut()
                    .unwrap()
                    .remove(SEAL);
            }
            other => observed["metadata"]["annotations"][SEAL] = other.clone(),
        }
        let resp = run(&request(spec(), json!({}), &mrcs, &secrets, &[observed]));
        let out = &resp["children"][1];
        assert_eq!(
            out["data"]["tls.crt"], leaf["data"]["tls.crt"],
            "{written}: kept"
        );
        assert_eq!(out["metadata"]["annotations"][SEAL], seal, "{written}");
    }
    // A leaf of another CA with the same Secret and subject (another key), under this one's
    // annotations and one of its seals, is issued anew.
    let other_secrets = [ca_secret("a-ca", "a")];
    let mut foreign =
        run(&request(spec(), json!({}), &mrcs, &other_secrets, &[]))["children"][1].clone();
    foreign["metadata"]["annotations"][SEAL] = json!(seal);
    let resp = run(&request(
        spec(),
        json!({}),
        &mrcs,
        &secrets,
        &[foreign.clone()],
    ));
    assert_ne!(
        resp["children"][1]["data"]["tls.crt"],
        foreign["data"]["tls.crt"]
    );
    assert_ne!(resp["children"][1]["metadata"]["annotations"][SEAL], seal);
}
