//! cert-rotation end to end: the walk-through of cert-rotation.md §5 (O = mrc-a, N = mrc-b) on
//! the simulator with the project's manifests (CRDs, admission webhooks, the CompositeController
//! and the DecoratorController). After every step: the issuers and MRC states of the table, a
//! trust bundle holding exactly the table's CAs, and every leaf verifying against it and sealed.

mod common;
mod sim;

use base64::Engine;
use common::mesh_tls::{Mounted, Stack};
use serde_json::json;
use sim::Sim;
use std::collections::BTreeMap;
use x509_parser::pem::Pem;

const NS: &str = "osm-system";
/// The leaf Secrets the manager [`sim`] makes asks for.
const LEAF_SECRETS: [&str; 2] = ["web-tls", "api-tls"];
/// The annotation holding a leaf's seal (DECISIONS.md, "Leaf seals").
const SEAL: &str = "metahooks.dev/leaf-seal";

fn sim() -> Sim {
    let mut sim = Sim::with_manifests(&["cert-rotation"]);
    sim.apply(&json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "CertificateManager",
        "metadata": {"name": "mesh", "namespace": NS},
        "spec": {"trustBundle": {"configMapName": "osm-ca-bundle"},
                 "certificates": [{"secretName": "web-tls", "commonName": "web.mesh.cluster.local", "validity": "1h"},
                                  {"secretName": "api-tls", "commonName": "api.mesh.cluster.local", "dnsNames": ["api.mesh.svc"], "validity": "24h"}]}})
    .to_string())
    .unwrap();
    sim
}

/// A new MRC named `name` whose Tresor CA Secret is `<name>-ca`, with no other field.
fn new_mrc(name: &str) -> serde_json::Value {
    json!({"apiVersion": "config.openservicemesh.io/v1alpha2", "kind": "MeshRootCertificate",
    "metadata": {"name": name, "namespace": NS},
    "spec": {"provider": {"tresor": {"ca": {"secretRef": {"name": format!("{name}-ca"), "namespace": NS}}}}}})
}

/// Creates an MRC (the mutating webhook fills in defaults) or changes its role.
fn set_role(sim: &mut Sim, name: &str, role: Option<&str>) -> Result<(), String> {
    let mut m = match sim.get("MeshRootCertificate", NS, name) {
        Some(m) => m.clone(),
        None => new_mrc(name),
    };
    if let Some(r) = role {
        m["spec"]["role"] = json!(r);
    }
    sim.apply(&m.to_string())?;
    sim.run_until_quiet();
    Ok(())
}

fn state(sim: &Sim, name: &str) -> String {
    sim.get("MeshRootCertificate", NS, name).unwrap()["status"]["state"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The first condition in the status of the `kind` object `name` of the namespace: a manager's
/// `Ready`, an MRC's `Accepted`.
fn first_condition<'s>(sim: &'s Sim, kind: &str, name: &str) -> &'s serde_json::Value {
    &sim.get(kind, NS, name).unwrap()["status"]["conditions"][0]
}

fn issuers(sim: &Sim) -> (String, String) {
    let s = &sim.get("CertificateManager", NS, "mesh").unwrap()["status"];
    (
        s["signingIssuer"].as_str().unwrap().to_owned(),
        s["validatingIssuer"].as_str().unwrap().to_owned(),
    )
}

/// The leaf Secrets the manager asks for (`spec.certificates[].secretName`).
fn leaf_secrets(sim: &Sim) -> Vec<String> {
    sim.get("CertificateManager", NS, "mesh").unwrap()["spec"]["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["secretName"].as_str().unwrap().to_owned())
        .collect()
}

/// The issuers a leaf Secret's annotations say it was issued under.
fn leaf_issuers(sim: &Sim, name: &str) -> (String, String) {
    let annotations = &sim.get("Secret", NS, name).unwrap()["metadata"]["annotations"];
    let issuer = |key: &str| annotations[key].as_str().unwrap().to_owned();
    (
        issuer("metahooks.dev/signing-issuer"),
        issuer("metahooks.dev/validating-issuer"),
    )
}

fn leaves(sim: &Sim) -> BTreeMap<String, String> {
    leaf_secrets(sim)
        .into_iter()
        .map(|n| {
            let crt = sim.get("Secret", NS, &n).unwrap()["data"]["tls.crt"]
                .as_str()
                .unwrap()
                .to_owned();
            (n, crt)
        })
        .collect()
}

fn cn(c: &x509_parser::certificate::X509Certificate) -> String {
    c.subject()
        .iter_common_name()
        .next()
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// The DER of the certificate in a leaf Secret's `tls.crt`.
fn leaf_der(sim: &Sim, name: &str) -> Vec<u8> {
    first_certificate_der(&Mounted::from_secret(sim.get("Secret", NS, name).unwrap()).tls_crt)
}

/// The DER of the first PEM block of `pem`.
fn first_certificate_der(pem: &[u8]) -> Vec<u8> {
    Pem::iter_from_buffer(pem).next().unwrap().unwrap().contents
}

/// The CN of each CA in the trust bundle, in order, after checking that every leaf's `ca.crt`
/// is the bundle and that every leaf verifies against a CA of the bundle, the signing one.
fn check_trust(sim: &Sim) -> Vec<String> {
    let bundle = sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap()["data"]["ca.crt"]
        .as_str()
        .unwrap()
        .to_owned();
    let ders: Vec<Vec<u8>> = Pem::iter_from_buffer(bundle.as_bytes())
        .map(|p| p.unwrap().contents)
        .collect();
    let cas: Vec<_> = ders
        .iter()
        .map(|d| x509_parser::parse_x509_certificate(d).unwrap().1)
        .collect();
    let (s, v) = issuers(sim);
    for name in leaf_secrets(sim) {
        let leaf = sim.get("Secret", NS, &name).unwrap();
        let decode = |k: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(leaf["data"][k].as_str().unwrap())
                .unwrap()
        };
        assert_eq!(
            decode("ca.crt"),
            bundle.as_bytes(),
            "{name}: ca.crt is the bundle"
        );
        assert_eq!(leaf_issuers(sim, &name), (s.clone(), v.clone()), "{name}");
        let seal = leaf["metadata"]["annotations"][SEAL]
            .as_str()
            .unwrap_or_default();
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(seal)
                .map(|s| s.len()),
            Ok(32),
            "{name}: sealed by its signer"
        );
        let der = leaf_der(sim, &name);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let signer = cas
            .iter()
            .find(|ca| ca.subject().as_raw() == cert.issuer().as_raw())
            .expect("issuer in the bundle");
        cert.verify_signature(Some(signer.public_key()))
            .expect("leaf verifies against the bundle");
        assert_eq!(cn(signer), s, "{name} signed by S");
    }
    cas.iter().map(cn).collect()
}

#[test]
fn full_rotation_step_by_step() {
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    assert_eq!(state(&sim, "mrc-a"), "active");
    assert_eq!(check_trust(&sim), ["mrc-a"]);
    let step0 = leaves(&sim);

    // 1: N created without a role: the webhook defaults it to inactive; its CA is generated.
    set_role(&mut sim, "mrc-b", None).unwrap();
    assert_eq!(
        sim.get("MeshRootCertificate", NS, "mrc-b").unwrap()["spec"]["role"],
        "inactive"
    );
    assert!(sim.get("Secret", NS, "mrc-b-ca").is_some());
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("active".into(), "inactive".into())
    );
    assert_eq!(check_trust(&sim), ["mrc-a"]);
    assert_eq!(leaves(&sim), step0, "byte-identical");

    // Admission keeps the walk on its steps.
    let err = set_role(&mut sim, "mrc-b", Some("active")).unwrap_err();
    assert!(err.starts_with("role-inactive-to-active:"), "{err}");

    // 2: N passive.
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("active".into(), "validatingRollout".into())
    );
    assert_eq!(check_trust(&sim), ["mrc-a", "mrc-b"]);
    let step2 = leaves(&sim);
    assert!(
        step2.iter().all(|(k, v)| step0[k] != *v),
        "re-issued by O with both CAs"
    );

    // 3: N active (sticky).
    set_role(&mut sim, "mrc-b", Some("active")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("active".into(), "validatingRollout".into())
    );
    assert_eq!(check_trust(&sim), ["mrc-a", "mrc-b"]);
    assert_eq!(leaves(&sim), step2);

    // 4: O passive.
    set_role(&mut sim, "mrc-a", Some("passive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-a".into()));
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("issuingRollback".into(), "issuingRollout".into())
    );
    assert_eq!(check_trust(&sim), ["mrc-b", "mrc-a"]);
    let step4 = leaves(&sim);
    assert!(step4.iter().all(|(k, v)| step2[k] != *v));

    // O cannot be deleted while it is in use.
    assert!(sim
        .delete("MeshRootCertificate", NS, "mrc-a")
        .unwrap_err()
        .starts_with("delete-in-use:"));

    // 5: O inactive.
    set_role(&mut sim, "mrc-a", Some("inactive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-b".into()));
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("validatingRollback".into(), "active".into())
    );
    assert_eq!(check_trust(&sim), ["mrc-b"]);
    let step5 = leaves(&sim);
    assert!(step5.iter().all(|(k, v)| step4[k] != *v));

    // 6: the grace (longest leaf validity, 24h) ends. Leaves renew on the way (web-tls lives 1h).
    for _ in 0..24 {
        sim.advance(3600);
        sim.run_until_quiet();
        check_trust(&sim);
    }
    sim.advance(60);
    sim.run_until_quiet();
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("inactive".into(), "active".into())
    );
    assert_eq!(check_trust(&sim), ["mrc-b"]);

    // 7: O deleted, allowed now.
    sim.delete("MeshRootCertificate", NS, "mrc-a").unwrap();
    sim.run_until_quiet();
    assert!(
        sim.get("Secret", NS, "mrc-a-ca").is_none(),
        "its CA Secret goes with it"
    );
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-b".into()));
    assert_eq!(check_trust(&sim), ["mrc-b"]);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// manifests/examples/cert-rotation.yaml and the rotation its comment gives: mrc-a signs the
/// manager's leaf at once, for the names asked; then mrc-b created (inactive), passive, active,
/// mrc-a passive, inactive moves the signing to mrc-b, every leaf trusted at every step.
#[test]
fn the_example_starts_with_mrc_a_and_rotates_to_mrc_b_as_its_comment_says() {
    let mut sim = Sim::with_manifests(&["cert-rotation"]);
    sim.apply_example("cert-rotation", NS).unwrap();
    sim.run_until_quiet();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    assert_eq!(check_trust(&sim), ["mrc-a"]);
    let der = leaf_der(&sim, "bookstore-tls");
    let (_, leaf) = x509_parser::parse_x509_certificate(&der).unwrap();
    assert_eq!(cn(&leaf), "bookstore.bookstore.cluster.local");
    let names: Vec<String> = leaf
        .subject_alternative_name()
        .unwrap()
        .unwrap()
        .value
        .general_names
        .iter()
        .map(|n| n.to_string())
        .collect();
    assert_eq!(names, ["DNSName(bookstore.bookstore.svc)"]);

    let steps: [(&str, &str, &[&str]); 5] = [
        ("mrc-b", "inactive", &["mrc-a"]),
        ("mrc-b", "passive", &["mrc-a", "mrc-b"]),
        ("mrc-b", "active", &["mrc-a", "mrc-b"]),
        ("mrc-a", "passive", &["mrc-b", "mrc-a"]),
        ("mrc-a", "inactive", &["mrc-b"]),
    ];
    for (mrc, role, bundle) in steps {
        set_role(&mut sim, mrc, Some(role)).unwrap();
        assert_eq!(check_trust(&sim), bundle, "{mrc} {role}");
    }
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-b".into()));
    assert_eq!(
        sim.get_row("CertificateManager", NS, "mesh"),
        sim::row(&[
            ("Name", "mesh"),
            ("Signing", "mrc-b"),
            ("Validating", "mrc-b"),
            ("Ready", "True"),
            ("Age", &sim.created("CertificateManager", NS, "mesh")),
            ("Reason", "IssuersReady")
        ])
    );
    assert_eq!(
        sim.get_row("MeshRootCertificate", NS, "mrc-b"),
        sim::row(&[
            ("Name", "mrc-b"),
            ("Role", "active"),
            ("State", "active"),
            ("Age", &sim.created("MeshRootCertificate", NS, "mrc-b")),
            ("Reason", "CAReady")
        ])
    );
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

#[test]
fn rollback_from_the_middle_of_a_rotation() {
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    set_role(&mut sim, "mrc-b", Some("inactive")).unwrap();
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    set_role(&mut sim, "mrc-b", Some("active")).unwrap();
    set_role(&mut sim, "mrc-a", Some("passive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-a".into()));
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-a".into()), "sticky");
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("issuingRollback".into(), "issuingRollout".into())
    );
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("issuingRollout".into(), "issuingRollback".into())
    );
    assert_eq!(check_trust(&sim), ["mrc-a", "mrc-b"]);
    set_role(&mut sim, "mrc-b", Some("inactive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("active".into(), "validatingRollback".into())
    );
    assert_eq!(check_trust(&sim), ["mrc-a"]);
}

#[test]
fn an_invalid_combination_is_an_error_and_touches_no_certificate() {
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    let before = (
        leaves(&sim),
        sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap()["data"].clone(),
    );
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    set_role(&mut sim, "mrc-c", Some("passive")).unwrap();
    let manager = sim.get("CertificateManager", NS, "mesh").unwrap();
    assert_eq!(
        manager["status"]["conditions"][0]["reason"],
        "TooManyMRCsInUse"
    );
    assert_eq!(
        issuers(&sim),
        ("mrc-a".into(), "mrc-b".into()),
        "last good issuers kept"
    );
    for m in ["mrc-a", "mrc-b", "mrc-c"] {
        assert_eq!(state(&sim, m), "error", "{m}");
    }
    let row = sim.get_row("CertificateManager", NS, "mesh");
    assert_eq!(row[3..4], sim::row(&[("Ready", "False")]));
    assert_eq!(row[5..], sim::row(&[("Reason", "TooManyMRCsInUse")]));
    let row = sim.get_row("MeshRootCertificate", NS, "mrc-c");
    assert_eq!(row[2..3], sim::row(&[("State", "error")]));
    assert_eq!(row[4..], sim::row(&[("Reason", "InvalidRoleCombination")]));
    let mid = (
        leaves(&sim),
        sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap()["data"].clone(),
    );
    assert_ne!(
        mid, before,
        "the valid step before (mrc-b passive) did re-issue"
    );
    // Time passes while frozen: nothing is renewed or replaced.
    sim.advance(7200);
    sim.run_until_quiet();
    assert_eq!(
        (
            leaves(&sim),
            sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap()["data"].clone()
        ),
        mid
    );
    // Fixed: back to work.
    set_role(&mut sim, "mrc-c", Some("inactive")).unwrap();
    assert_eq!(
        first_condition(&sim, "CertificateManager", "mesh")["reason"],
        "IssuersReady"
    );
    check_trust(&sim);
}

/// Roles the webhook admits one at a time can pass through combinations the manager refuses,
/// and come out a rotation step too far: mrc-a signed with mrc-b trusted beside it, and after
/// mrc-c passive (three in use), mrc-a passive, then inactive (none active), mrc-c active would
/// sign leaves no workload trusts. A random walk found it. The manager keeps its issuers and
/// says `RotationStepSkipped`; the way back is a step at a time, each one talking to the one
/// before, to mrc-c signing alone.
#[test]
fn a_rotation_step_skipped_through_refused_roles_is_refused_too() {
    let mut sim = sim();
    let mut steps = walk(&mut sim, &[("mrc-a", "active"), ("mrc-b", "passive")]);
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    let before = leaves(&sim);
    for (mrc, role, reason) in [
        ("mrc-c", "passive", "TooManyMRCsInUse"),
        ("mrc-a", "passive", "TooManyMRCsInUse"),
        ("mrc-a", "inactive", "NoActiveMRC"),
        ("mrc-c", "active", "RotationStepSkipped"),
    ] {
        set_role(&mut sim, mrc, Some(role)).unwrap();
        let ready = first_condition(&sim, "CertificateManager", "mesh");
        assert_eq!(ready["reason"], reason, "{mrc} {role}");
    }
    assert_eq!(
        first_condition(&sim, "CertificateManager", "mesh")["message"],
        "MeshRootCertificate mrc-c would sign before the leaves trust it (they trust mrc-a and \
         mrc-b): roles go one rotation step at a time, mrc-c passive beside mrc-a, which signs \
         now, before it is active (ROTATION.md)"
    );
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    assert_eq!(leaves(&sim), before);
    // §4.3: it signs with mrc-b beside it, after the error of the combinations before.
    assert_eq!(state(&sim, "mrc-a"), "issuingRollout");
    assert_eq!(state(&sim, "mrc-c"), "inactive", "no manager uses it");

    // Back one step at a time: mrc-a active with mrc-c beside it, then mrc-c signs.
    for (mrc, role) in [
        ("mrc-a", "passive"),
        ("mrc-c", "passive"),
        ("mrc-b", "inactive"),
    ] {
        set_role(&mut sim, mrc, Some(role)).unwrap();
    }
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    let back = [
        ("mrc-a", "active"),
        ("mrc-c", "active"),
        ("mrc-a", "passive"),
        ("mrc-a", "inactive"),
    ];
    steps.extend(walk(&mut sim, &back));
    assert_eq!(issuers(&sim), ("mrc-c".into(), "mrc-c".into()));
    assert_eq!(
        first_condition(&sim, "CertificateManager", "mesh")["reason"],
        "IssuersReady"
    );
    check_trust(&sim);
    assert_each_step_talks_to_the_one_before(&sim, &steps);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// A leaf write that fails leaves the manager's status ahead of the leaves: Metacontroller
/// writes the status even when a child's write failed (contract §9, step 10). Here the caches
/// are behind on web-tls, so its update meets a Conflict at every retry. The manager then says
/// the step's issuers while web-tls holds the step before's, as its annotations show; a user who
/// went on to step 4 on the status alone would leave web refusing api's new leaf. The leaf lands
/// once the caches catch up. ROTATION.md has the user wait for the leaves' annotations too.
#[test]
fn a_leaf_write_that_fails_leaves_the_status_ahead_until_it_lands() {
    let mut sim = sim();
    walk(&mut sim, &[("mrc-a", "active"), ("mrc-b", "inactive")]);
    sim.hold_in_caches("Secret", NS, "web-tls");
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    assert_eq!(state(&sim, "mrc-b"), "validatingRollout");
    assert_eq!(
        leaf_issuers(&sim, "api-tls"),
        ("mrc-a".into(), "mrc-b".into())
    );
    assert_eq!(
        leaf_issuers(&sim, "web-tls"),
        ("mrc-a".into(), "mrc-a".into())
    );
    assert!(
        sim.sync_errors
            .iter()
            .any(|e| e.contains("web-tls") && e.contains("Conflict")),
        "{:?}",
        sim.sync_errors
    );
    sim.advance(1);
    sim.run_until_quiet();
    assert_eq!(
        leaf_issuers(&sim, "web-tls"),
        ("mrc-a".into(), "mrc-a".into())
    );

    // Steps 3 and 4 on the status alone: web still trusts mrc-a only.
    for (mrc, role) in [("mrc-b", "active"), ("mrc-a", "passive")] {
        set_role(&mut sim, mrc, Some(role)).unwrap();
    }
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-a".into()));
    let now = mounted(&sim);
    let failed = refused(&sim, &now, &now);
    assert!(
        failed
            .iter()
            .any(|f| f.contains("web.mesh.cluster.local -> api.mesh.svc")),
        "{failed:?}"
    );

    sim.catch_up_caches();
    sim.run_until_quiet();
    assert_eq!(
        leaf_issuers(&sim, "web-tls"),
        ("mrc-b".into(), "mrc-a".into())
    );
    check_trust(&sim);
    let now = mounted(&sim);
    assert_eq!(refused(&sim, &now, &now), Vec::<String>::new());
}

/// A manager its caches hold from before its last status write: at step 2 its sync reads
/// `(mrc-a, mrc-a)` and writes `(mrc-a, mrc-b)`, and the leaves and the bundle follow, but the
/// MRCs' decorators read the manager through the same caches, so mrc-b stays `inactive`, which
/// is what ROTATION.md's wait for the MRCs' states holds a user on. One who goes on at the
/// manager's status alone takes steps 3 and 4. Step 4's sync reads `(mrc-a, mrc-a)` again,
/// refuses mrc-b as a signer the leaves do not trust, and writes the pair it read over the one
/// the manager has (Metacontroller's AtomicStatusUpdate). The leaves stay as they are, so no
/// workload is refused, but the freeze outlives the caches' catch-up, since the status now says
/// so. Undoing the last edit and making it again ends it (ROTATION.md).
#[test]
fn a_manager_read_before_its_last_status_write_writes_its_old_pair_back() {
    let mut sim = sim();
    walk(&mut sim, &[("mrc-a", "active"), ("mrc-b", "inactive")]);
    sim.hold_in_caches("CertificateManager", NS, "mesh");
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    let step_2 = ("mrc-a".to_owned(), "mrc-b".to_owned());
    assert_eq!(issuers(&sim), step_2);
    assert!(children_follow_the_status(&sim));
    assert_eq!(
        state(&sim, "mrc-b"),
        "inactive",
        "the wait that holds a user"
    );
    assert!(states_agree_with_issuers(&sim).is_err());

    for (mrc, role) in [("mrc-b", "active"), ("mrc-a", "passive")] {
        set_role(&mut sim, mrc, Some(role)).unwrap();
    }
    let ready = first_condition(&sim, "CertificateManager", "mesh");
    assert_eq!(ready["reason"], "RotationStepSkipped", "{ready}");
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    sim.catch_up_caches();
    sim.run_until_quiet();
    let ready = first_condition(&sim, "CertificateManager", "mesh");
    assert_eq!(ready["reason"], "RotationStepSkipped", "{ready}");
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    for name in LEAF_SECRETS {
        assert_eq!(leaf_issuers(&sim, name), step_2, "{name} as step 2 left it");
    }
    let now = mounted(&sim);
    assert_eq!(refused(&sim, &now, &now), Vec::<String>::new());

    let before = now;
    for (mrc, role) in [("mrc-a", "active"), ("mrc-a", "passive")] {
        set_role(&mut sim, mrc, Some(role)).unwrap();
    }
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-a".into()));
    assert_eq!(
        first_condition(&sim, "CertificateManager", "mesh")["reason"],
        "IssuersReady"
    );
    assert_eq!(state(&sim, "mrc-a"), "issuingRollback");
    assert_eq!(state(&sim, "mrc-b"), "issuingRollout");
    check_trust(&sim);
    assert_eq!(refused(&sim, &before, &mounted(&sim)), Vec::<String>::new());
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// Annotates an MRC `metahooks.dev/allow-delete: "true"` and deletes it, which the validating
/// webhook then lets through even while it is in use (ROTATION.md), and syncs.
fn force_out(sim: &mut Sim, name: &str) -> Result<(), String> {
    let mut m = sim.get("MeshRootCertificate", NS, name).unwrap().clone();
    m["metadata"]["annotations"]["metahooks.dev/allow-delete"] = json!("true");
    sim.apply(&m.to_string())?;
    sim.delete("MeshRootCertificate", NS, name)?;
    sim.run_until_quiet();
    Ok(())
}

/// A signing CA forced out, as a user drops a compromised one: refused as a plain delete while
/// it signs, and with `metahooks.dev/allow-delete` the manager moves to the MRC left at once,
/// its step check not holding it to a signer no MRC names (DECISIONS, "A pair a rotation step
/// away"). The workloads that reloaded then refuse those that still present the old CA's
/// leaves, which is what the user asked for; among themselves they talk.
#[test]
fn a_signing_mrc_forced_out_hands_the_mesh_to_the_one_left() {
    let mut sim = sim();
    let steps = walk(
        &mut sim,
        &[
            ("mrc-a", "active"),
            ("mrc-b", "passive"),
            ("mrc-b", "active"),
        ],
    );
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    let before = mounted(&sim);
    let refused_delete = sim.delete("MeshRootCertificate", NS, "mrc-a").unwrap_err();
    assert!(refused_delete.contains("allow-delete"), "{refused_delete}");

    force_out(&mut sim, "mrc-a").unwrap();
    assert!(sim.get("MeshRootCertificate", NS, "mrc-a").is_none());
    assert!(
        sim.get("Secret", NS, "mrc-a-ca").is_none(),
        "its CA Secret went with it"
    );
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-b".into()));
    assert_eq!(
        first_condition(&sim, "CertificateManager", "mesh")["reason"],
        "IssuersReady"
    );
    assert_eq!(state(&sim, "mrc-b"), "active");
    check_trust(&sim);
    assert_each_step_talks_to_the_one_before(&sim, &steps);
    let now = mounted(&sim);
    assert_eq!(refused(&sim, &now, &now), Vec::<String>::new());
    assert!(!refused(&sim, &before, &now).is_empty());
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// An MRC's decorator that has not heard of the CA Secret it created (the caches hear of creates
/// late) finds no attachment on its next sync and generates another, which the API server
/// refuses as AlreadyExists and Metacontroller swallows: the CA Secret keeps the key it was
/// created with, and the leaves issued under it verify against the bundle (§4.1).
#[test]
fn an_mrc_whose_ca_secret_is_not_heard_of_yet_generates_one_that_never_lands() {
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    sim.caches_hear_creates_late = true;
    set_role(&mut sim, "mrc-b", None).unwrap();
    let created = sim.get("Secret", NS, "mrc-b-ca").unwrap()["data"].clone();
    // Each write of the CA Secret the API server took, as the store's log has it.
    let writes = |sim: &Sim| {
        sim.store
            .events
            .iter()
            .filter(|e| e.ends_with(r#""Secret", "osm-system", "mrc-b-ca")"#))
            .count()
    };
    assert_eq!(writes(&sim), 1, "{:?}", sim.store.events);
    let unseen_while_there = sim
        .requests
        .iter()
        .filter(|(path, r)| {
            path.ends_with("/mesh-root-certificate/sync")
                && r["object"]["metadata"]["name"] == "mrc-b"
                && r["attachments"]["Secret.v1"]
                    .as_object()
                    .is_some_and(|a| a.is_empty())
        })
        .count();
    assert!(unseen_while_there >= 2, "{unseen_while_there} syncs");
    assert_eq!(state(&sim, "mrc-b"), "inactive");

    sim.caches_on_time();
    sim.run_until_quiet();
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    assert_eq!(sim.get("Secret", NS, "mrc-b-ca").unwrap()["data"], created);
    assert_eq!(writes(&sim), 1, "{:?}", sim.store.events);
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    assert_eq!(check_trust(&sim), ["mrc-a", "mrc-b"]);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// An MRC whose name no label value can hold (64 characters) gets no generated CA Secret, which
/// the API server would refuse on every sync while the MRC said `CAReady`: it is in error and
/// asks for the user's own Secret; with that Secret it is accepted and signs the mesh's leaves.
#[test]
fn an_mrc_named_past_a_labels_length_asks_for_its_own_ca_secret() {
    let mut sim = sim();
    let long = "m".repeat(64);
    set_role(&mut sim, &long, None).unwrap();
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
    assert!(sim.get("Secret", NS, &format!("{long}-ca")).is_none());
    let row = sim.get_row("MeshRootCertificate", NS, &long);
    assert_eq!(row[2..3], sim::row(&[("State", "error")]));
    assert_eq!(row[4..], sim::row(&[("Reason", "CASecretMissing")]));

    let pair = metahooks_hooks::pki::generate_ca(
        &long,
        "cluster.local",
        time::OffsetDateTime::from_unix_timestamp(sim.now()).unwrap(),
        &ring::rand::SystemRandom::new(),
    )
    .unwrap();
    let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    sim.apply(
        &json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{long}-ca"), "namespace": NS}, "type": "Opaque",
        "data": {"ca.crt": b64(&pair.cert_pem), "private.key": b64(&pair.key_pem)}})
        .to_string(),
    )
    .unwrap();
    sim.run_until_quiet();
    assert_eq!(state(&sim, &long), "inactive");
    set_role(&mut sim, &long, Some("passive")).unwrap();
    set_role(&mut sim, &long, Some("active")).unwrap();
    assert_eq!(issuers(&sim), (long.clone(), long.clone()));
    assert_eq!(state(&sim, &long), "active");
    assert_eq!(check_trust(&sim), [long]);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// An MRC naming a CA Secret no Secret can be called (`OSM_CA`) is in error with the field
/// named: no Secret is generated (the API server would refuse it on every sync while the MRC
/// said `CAReady`), and a manager it would sign for keeps its issuers, saying why.
#[test]
fn an_mrc_naming_a_ca_secret_no_secret_can_be_is_an_error_and_signs_nothing() {
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    let before = leaves(&sim);
    let mut bad = new_mrc("mrc-b");
    bad["spec"]["provider"]["tresor"]["ca"]["secretRef"]["name"] = json!("OSM_CA");
    // §6 asks only for a name that is not empty.
    sim.apply(&bad.to_string()).unwrap();
    sim.run_until_quiet();
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
    assert!(sim.get("Secret", NS, "OSM_CA").is_none());
    let row = sim.get_row("MeshRootCertificate", NS, "mrc-b");
    assert_eq!(row[2..3], sim::row(&[("State", "error")]));
    assert_eq!(row[4..], sim::row(&[("Reason", "InvalidSpec")]));

    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    let ready = first_condition(&sim, "CertificateManager", "mesh");
    assert_eq!(ready["reason"], "InvalidMRC");
    assert_eq!(
        ready["message"],
        "MeshRootCertificate mrc-b: spec.provider.tresor.ca.secretRef.name is not a Secret name \
         (a DNS-1123 subdomain), so no CA Secret can have it"
    );
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    assert_eq!(leaves(&sim), before);
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

#[test]
fn leaves_renew_near_expiry_on_the_virtual_clock() {
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    let first = leaves(&sim);
    sim.advance(39 * 60);
    sim.run_until_quiet();
    assert_eq!(leaves(&sim), first, "two thirds of 1h not reached");
    // At the renewal point (40 min) a third is left: still kept; the resync it schedules one
    // second later renews it.
    sim.advance(60);
    sim.run_until_quiet();
    assert_eq!(leaves(&sim), first);
    sim.advance(1);
    sim.run_until_quiet();
    let second = leaves(&sim);
    assert_ne!(
        second["web-tls"], first["web-tls"],
        "renewed by the scheduled resync"
    );
    assert_eq!(second["api-tls"], first["api-tls"]);
    check_trust(&sim);
}

/// DECISIONS.md "Leaf seals", the upgrade: leaves written before metahooks sealed them (no seal
/// in the Secret nor in Metacontroller's last-applied copy) are verified, kept as they are and
/// sealed once, with the seal they had; the next syncs write nothing more.
#[test]
fn leaves_from_before_seals_are_kept_and_sealed_once() {
    const LAST_APPLIED: &str = "metacontroller.k8s.io/last-applied-configuration";
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    let issued = leaves(&sim);
    let seal_of = |sim: &Sim, name: &str| {
        sim.get("Secret", NS, name).unwrap()["metadata"]["annotations"][SEAL].clone()
    };
    let seals: Vec<_> = LEAF_SECRETS.iter().map(|n| seal_of(&sim, n)).collect();
    for name in LEAF_SECRETS {
        let mut leaf = sim.get("Secret", NS, name).unwrap().clone();
        let annotations = leaf["metadata"]["annotations"].as_object_mut().unwrap();
        annotations.remove(SEAL);
        let mut applied: serde_json::Value =
            serde_json::from_str(annotations[LAST_APPLIED].as_str().unwrap()).unwrap();
        applied["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove(SEAL);
        annotations[LAST_APPLIED] = json!(applied.to_string());
        sim.apply(&leaf.to_string()).unwrap();
        assert!(seal_of(&sim, name).is_null(), "{name}: as before seals");
    }
    sim.run_until_quiet();
    assert_eq!(leaves(&sim), issued, "kept, not issued again");
    let resealed: Vec<_> = LEAF_SECRETS.iter().map(|n| seal_of(&sim, n)).collect();
    assert_eq!(resealed, seals);
    check_trust(&sim);
    let versions = |sim: &Sim| -> Vec<serde_json::Value> {
        LEAF_SECRETS
            .iter()
            .map(|n| sim.get("Secret", NS, n).unwrap()["metadata"]["resourceVersion"].clone())
            .collect()
    };
    let settled = versions(&sim);
    // A label on the manager syncs it again.
    let mut manager = sim.get("CertificateManager", NS, "mesh").unwrap().clone();
    manager["metadata"]["labels"]["touched"] = json!("yes");
    sim.apply(&manager.to_string()).unwrap();
    assert!(sim.run_until_quiet() > 0, "synced again");
    assert_eq!(versions(&sim), settled, "written once");
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// Removing metahooks as the README's "Removing metahooks" says keeps what the mesh uses: the
/// manager deleted with `--cascade=orphan` leaves its trust bundle and its leaf Secrets as they
/// were, owned by nothing; with the two controllers deleted after it, the MRC keeps its CA
/// Secret and nothing more is written. A plain delete of the manager takes the leaves with it.
#[test]
fn removing_metahooks_keeps_the_certificates_the_mesh_uses() {
    let made = |sim: &Sim| {
        let mut objects: Vec<_> = LEAF_SECRETS
            .map(|n| sim.get("Secret", NS, n).cloned())
            .into();
        objects.push(sim.get("ConfigMap", NS, "osm-ca-bundle").cloned());
        objects
    };
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    let before = made(&sim);
    let ca = sim.get("Secret", NS, "mrc-a-ca").unwrap().clone();

    sim.delete_orphaning("CertificateManager", NS, "mesh")
        .unwrap();
    sim.run_until_quiet();
    sim.remove_controller("CompositeController", "cert-rotation");
    sim.remove_controller("DecoratorController", "mesh-root-certificate");
    sim.run_until_quiet();
    assert!(sim.get("CertificateManager", NS, "mesh").is_none());
    for (kept, was) in made(&sim).into_iter().zip(before) {
        let (kept, was) = (kept.expect("kept"), was.unwrap());
        assert_eq!(kept["metadata"]["ownerReferences"], serde_json::json!([]));
        assert_eq!(kept["data"], was["data"]);
        assert_eq!(kept["metadata"]["labels"], was["metadata"]["labels"]);
    }
    assert_eq!(sim.get("Secret", NS, "mrc-a-ca"), Some(&ca));
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);

    let mut sim = self::sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    sim.delete("CertificateManager", NS, "mesh").unwrap();
    sim.run_until_quiet();
    assert_eq!(made(&sim), [None, None, None], "a plain delete takes them");
}

/// A manager made again under its old name after a delete with `--cascade=orphan` (metahooks
/// removed and installed again): Metacontroller does not adopt what the first one made, whose
/// `controller-uid` label names the first one's uid. The old leaf Secrets freeze the new manager
/// (`SecretConflict`), and its trust bundle, which it cannot see, would never be written (the
/// create meets `AlreadyExists`). Labelled with the new uid, as the README says, all of it is
/// adopted: the leaves are kept as they were, and the next rotation step reaches the bundle.
#[test]
fn a_manager_made_again_takes_back_what_it_made_once_relabelled() {
    let made = |sim: &Sim| {
        let mut objects: Vec<_> = LEAF_SECRETS
            .map(|n| sim.get("Secret", NS, n).unwrap().clone())
            .into();
        objects.push(sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap().clone());
        objects
    };
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    let manager = sim.get("CertificateManager", NS, "mesh").unwrap().clone();
    let before = made(&sim);
    sim.delete_orphaning("CertificateManager", NS, "mesh")
        .unwrap();
    sim.run_until_quiet();

    let again = json!({"apiVersion": manager["apiVersion"], "kind": manager["kind"],
        "metadata": {"name": "mesh", "namespace": NS}, "spec": manager["spec"]});
    sim.apply(&again.to_string()).unwrap();
    sim.run_until_quiet();
    let ready = first_condition(&sim, "CertificateManager", "mesh");
    assert_eq!(ready["reason"], "SecretConflict", "{ready}");
    for object in made(&sim) {
        assert_eq!(
            object["metadata"]["ownerReferences"],
            json!([]),
            "not adopted"
        );
    }

    let uid = sim.get("CertificateManager", NS, "mesh").unwrap()["metadata"]["uid"].clone();
    assert_ne!(uid, manager["metadata"]["uid"]);
    for mut object in made(&sim) {
        object["metadata"]["labels"]["controller-uid"] = uid.clone();
        sim.apply(&object.to_string()).unwrap();
    }
    sim.run_until_quiet();
    let ready = first_condition(&sim, "CertificateManager", "mesh");
    assert_eq!(ready["reason"], "IssuersReady", "{ready}");
    for (object, was) in made(&sim).into_iter().zip(before) {
        assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], uid);
        assert_eq!(object["data"], was["data"], "kept as it was");
    }
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    let bundle = sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap()["data"]["ca.crt"].clone();
    assert_eq!(
        bundle
            .as_str()
            .unwrap()
            .matches("BEGIN CERTIFICATE")
            .count(),
        2,
        "both CAs in the bundle"
    );
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// Creates an MRC that writes SPIFFE IDs into the leaves it signs, with `trust_domain`.
fn create_spiffe_mrc(sim: &mut Sim, name: &str, role: &str, trust_domain: &str) {
    let mut m = new_mrc(name);
    m["spec"]["role"] = json!(role);
    m["spec"]["trustDomain"] = json!(trust_domain);
    m["spec"]["spiffeEnabled"] = json!(true);
    sim.apply(&m.to_string()).unwrap();
    sim.run_until_quiet();
}

/// The URI SAN of each leaf the manager asks for.
fn spiffe_ids(sim: &Sim) -> Vec<String> {
    leaf_secrets(sim)
        .iter()
        .map(|name| {
            let der = leaf_der(sim, name);
            let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
            let san = cert.subject_alternative_name().unwrap().unwrap();
            san.value
                .general_names
                .iter()
                .find_map(|g| match g {
                    x509_parser::extensions::GeneralName::URI(uri) => Some(uri.to_string()),
                    _ => None,
                })
                .unwrap_or_default()
        })
        .collect()
}

/// docs/ROTATION.md, "What the manager refuses": under SPIFFE, an incoming MRC whose trust domain
/// cannot make SPIFFE IDs is met at step 4, when it would sign. The manager freezes on the pair
/// it had and touches no leaf; O made active again signs on; N goes back to inactive, and the
/// rotation starts again with an MRC whose trust domain can, whose SPIFFE IDs the leaves then
/// carry.
#[test]
fn a_rotation_to_a_trust_domain_spiffe_refuses_stops_at_step_4_and_goes_back() {
    let mut sim = sim();
    create_spiffe_mrc(&mut sim, "mrc-a", "active", "cluster.local");
    assert_eq!(
        spiffe_ids(&sim),
        [
            "spiffe://cluster.local/web/mesh",
            "spiffe://cluster.local/api/mesh"
        ]
    );
    // Admission takes the trust domain: §6 checks only that it is not empty.
    create_spiffe_mrc(&mut sim, "mrc-b", "inactive", "Mesh.Local");
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    set_role(&mut sim, "mrc-b", Some("active")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    assert_eq!(check_trust(&sim), ["mrc-a", "mrc-b"]);
    let step3 = leaves(&sim);

    // 4: O passive would make N sign: frozen, nothing touched.
    set_role(&mut sim, "mrc-a", Some("passive")).unwrap();
    let ready = first_condition(&sim, "CertificateManager", "mesh");
    assert_eq!(ready["reason"], "InvalidMRC");
    assert_eq!(
        ready["message"],
        "MeshRootCertificate mrc-b: spec.trustDomain is not a SPIFFE trust domain (parts between \
         dots of lowercase letters, digits, '-' and '_', 255 characters in all), which the \
         SPIFFE IDs of its leaves need"
    );
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    assert_eq!(leaves(&sim), step3);
    assert_eq!(check_trust(&sim), ["mrc-a", "mrc-b"]);

    // Back: O active again signs on, as the kept pair says; then N leaves.
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    let ready = first_condition(&sim, "CertificateManager", "mesh");
    assert_eq!(ready["reason"], "IssuersReady");
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-b".into()));
    assert_eq!(leaves(&sim), step3);
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    set_role(&mut sim, "mrc-b", Some("inactive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    assert_eq!(check_trust(&sim), ["mrc-a"]);

    // Again, to an MRC whose trust domain SPIFFE takes.
    create_spiffe_mrc(&mut sim, "mrc-c", "inactive", "mesh.local");
    set_role(&mut sim, "mrc-c", Some("passive")).unwrap();
    set_role(&mut sim, "mrc-c", Some("active")).unwrap();
    set_role(&mut sim, "mrc-a", Some("passive")).unwrap();
    assert_eq!(issuers(&sim), ("mrc-c".into(), "mrc-a".into()));
    assert_eq!(check_trust(&sim), ["mrc-c", "mrc-a"]);
    assert_eq!(
        spiffe_ids(&sim),
        [
            "spiffe://mesh.local/web/mesh/cluster/local",
            "spiffe://mesh.local/api/mesh/cluster/local"
        ]
    );
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// What each workload of the manager mounts from its leaf Secret, beside the name its peers ask
/// for when they call it: its first `dnsNames` entry, else its `commonName` (§3.4).
fn mounted(sim: &Sim) -> Vec<(String, Mounted)> {
    sim.get("CertificateManager", NS, "mesh").unwrap()["spec"]["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let name = c["dnsNames"][0].as_str().or(c["commonName"].as_str());
            let secret = sim.get("Secret", NS, c["secretName"].as_str().unwrap());
            (
                name.unwrap().to_owned(),
                Mounted::from_secret(secret.unwrap()),
            )
        })
        .collect()
}

/// Makes each role edit in turn; what the workloads mount after each.
fn walk(sim: &mut Sim, edits: &[(&str, &str)]) -> Vec<Vec<(String, Mounted)>> {
    edits
        .iter()
        .map(|(mrc, role)| {
            set_role(sim, mrc, Some(role)).unwrap();
            mounted(sim)
        })
        .collect()
}

/// Each call, both ways, between every workload holding `a` and every one holding `b`, at the
/// simulator's time, on each TLS stack, that fails: on which stack who called whom, and why.
fn refused(sim: &Sim, a: &[(String, Mounted)], b: &[(String, Mounted)]) -> Vec<String> {
    let mut failed = Vec::new();
    for stack in Stack::ALL {
        for (client, server) in [(a, b), (b, a)] {
            for (from, mounted_by_client) in client {
                for (to, mounted_by_server) in server {
                    let called =
                        stack.handshake(mounted_by_client, mounted_by_server, to, sim.now());
                    if let Err(e) = called {
                        failed.push(format!("{stack:?}: {from} -> {to}: {e}"));
                    }
                }
            }
        }
    }
    failed
}

/// Asserts that after each step of `steps` (what the workloads mount, as [`walk`] returns it)
/// workloads holding its leaves complete mutual TLS with each other and with those that still
/// hold the leaves of the step before.
fn assert_each_step_talks_to_the_one_before(sim: &Sim, steps: &[Vec<(String, Mounted)>]) {
    for (i, step) in steps.iter().enumerate() {
        let before = &steps[i.saturating_sub(1)];
        assert_eq!(refused(sim, before, step), Vec::<String>::new(), "step {i}");
        assert_eq!(refused(sim, step, step), Vec::<String>::new(), "step {i}");
    }
}

/// The role edits of cert-rotation.md §5, steps 0 to 5 (O = mrc-a, N = mrc-b).
const WALK: [(&str, &str); 6] = [
    ("mrc-a", "active"),
    ("mrc-b", "inactive"),
    ("mrc-b", "passive"),
    ("mrc-b", "active"),
    ("mrc-a", "passive"),
    ("mrc-a", "inactive"),
];

/// §5's rollback from step 4, back to O alone.
const BACK_FROM_STEP_4: [(&str, &str); 3] = [
    ("mrc-a", "active"),
    ("mrc-b", "passive"),
    ("mrc-b", "inactive"),
];

/// The rotation's promise (cert-rotation.md §5): workloads that reloaded their leaf Secrets
/// after an edit and workloads that still hold them from before it complete mutual TLS, both
/// ways, at every step of the walk, of a rollback from step 4 and of the walk again. Checked
/// as a TLS peer checks (rustls' WebPKI verifiers: the chain to a CA of the caller's `ca.crt`,
/// validity on the simulator's clock, key usages, the name called), not by a signature alone.
/// Two steps apart across step 5 they do not: step 3's leaves, signed by O, against step 5's
/// trust in N alone, the reason ROTATION.md says to wait for every reload before step 5.
#[test]
fn workloads_a_step_apart_complete_mutual_tls_through_the_rotation_and_its_rollback() {
    let mut sim = sim();
    let edits = [&WALK[..5], &BACK_FROM_STEP_4, &WALK[2..]].concat();
    let steps = walk(&mut sim, &edits);
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-b".into()));
    assert_each_step_talks_to_the_one_before(&sim, &steps);
    let (step3, step5) = (&steps[9], &steps[11]);
    let failed = refused(&sim, step3, step5);
    // OpenSSL sends the chain it builds from its own trust, O's CA after the leaf, which the
    // other side finds untrusted.
    let unknown_issuer = [
        "invalid peer certificate: UnknownIssuer",
        "certificate verify failed: X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN",
    ];
    for (stack, said) in Stack::ALL.into_iter().zip(unknown_issuer) {
        let on_stack = |f: &&String| f.starts_with(&format!("{stack:?}: "));
        let failed_on_stack: Vec<_> = failed.iter().filter(on_stack).collect();
        assert_eq!(failed_on_stack.len(), 8, "{failed:?}");
        assert!(
            failed_on_stack.iter().all(|f| f.ends_with(said)),
            "{failed:?}"
        );
    }

    // The verifiers check the name called: web's leaf is not api's.
    let (web, api) = (&step5[0].1, &step5[1].1);
    let wrong_name = [
        "client: invalid peer certificate: certificate not valid for name",
        "client: certificate verify failed: X509_V_ERR_HOSTNAME_MISMATCH",
    ];
    for (stack, said) in Stack::ALL.into_iter().zip(wrong_name) {
        let right = stack.handshake(api, web, "web.mesh.cluster.local", sim.now());
        assert_eq!(right, Ok(()), "{stack:?}");
        let wrong = stack.handshake(api, web, "api.mesh.svc", sim.now());
        assert!(
            wrong.as_ref().unwrap_err().starts_with(said),
            "{stack:?}: {wrong:?}"
        );
    }
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// The signature algorithm of a mounted leaf certificate, as an OID.
fn signature_algorithm(mounted: &Mounted) -> String {
    let der = first_certificate_der(&mounted.tls_crt);
    let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
    cert.signature_algorithm.algorithm.to_id_string()
}

/// Creates a CA Secret of the user's own, `name`, with `ca.crt` and `private.key` (PEM).
fn create_users_ca(sim: &mut Sim, name: &str, crt: &str, key: &str) {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    sim.apply(
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": NS},
            "data": {"ca.crt": b64(crt), "private.key": b64(key)}})
        .to_string(),
    )
    .unwrap();
}

/// A rotation between two CAs of the user's own (cert-rotation.md §2: OSM's CA Secrets hold
/// RSA keys), made with OpenSSL (hooks/testdata): from an RSA 2048 CA to a P-384 one. The
/// leaves are signed with RSA-SHA256, then ECDSA-SHA384, and workloads a step apart complete
/// mutual TLS at every step; the user's Secrets are read, never written.
#[test]
fn a_rotation_from_a_users_rsa_ca_to_a_users_p384_ca_keeps_mutual_tls() {
    let mut sim = sim();
    // The CAs begin on 2026-11-30T19:07:34Z, and OpenSSL peers refuse their leaves before: the
    // clock moves on to 2026-12-01T12:00:00Z.
    sim.advance(183 * 86_400);
    let cas = [
        (
            "mrc-a-ca",
            include_str!("../hooks/testdata/rsa2048-ca.crt"),
            include_str!("../hooks/testdata/rsa2048-ca.key"),
        ),
        (
            "mrc-b-ca",
            include_str!("../hooks/testdata/p384-ca.crt"),
            include_str!("../hooks/testdata/p384-ca.key"),
        ),
    ];
    for (name, crt, key) in cas {
        create_users_ca(&mut sim, name, crt, key);
    }
    let users =
        |sim: &Sim| cas.map(|(name, ..)| sim.get("Secret", NS, name).unwrap()["data"].clone());
    let given = users(&sim);
    let steps = walk(&mut sim, &WALK);
    assert_each_step_talks_to_the_one_before(&sim, &steps);
    assert_eq!(issuers(&sim), ("mrc-b".into(), "mrc-b".into()));
    let algorithms = |i: usize| {
        steps[i]
            .iter()
            .map(|(_, m)| signature_algorithm(m))
            .collect::<Vec<_>>()
    };
    assert_eq!(algorithms(0), ["1.2.840.113549.1.1.11"; 2], "RSA-SHA256");
    assert_eq!(algorithms(5), ["1.2.840.10045.4.3.3"; 2], "ECDSA-SHA384");
    assert_eq!(
        (state(&sim, "mrc-a"), state(&sim, "mrc-b")),
        ("validatingRollback".into(), "active".into())
    );
    for mrc in ["mrc-a", "mrc-b"] {
        let accepted = first_condition(&sim, "MeshRootCertificate", mrc);
        assert_eq!(
            (&accepted["type"], &accepted["reason"]),
            (&json!("Accepted"), &json!("CAReady"))
        );
    }
    assert_eq!(users(&sim), given, "never written");
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// A CA of the user's own whose validity has not begun is used (docs/DECISIONS.md): the P-384
/// test CA begins on 2026-11-30T19:07:34Z, half a year after the simulator's clock. Its leaves
/// are issued at once, and OpenSSL peers, which check the dates of the CA they trust, refuse
/// every call until it begins (rustls' WebPKI reads no date of a trust anchor); once it has
/// begun, the leaves then mounted complete mutual TLS on both stacks. So ROTATION.md says to
/// let such a CA sign only after its start.
#[test]
fn a_users_ca_not_begun_yet_signs_leaves_openssl_peers_refuse_until_it_begins() {
    let mut sim = sim();
    create_users_ca(
        &mut sim,
        "mrc-a-ca",
        include_str!("../hooks/testdata/p384-ca.crt"),
        include_str!("../hooks/testdata/p384-ca.key"),
    );
    let steps = walk(&mut sim, &WALK[..1]);
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    let failed = refused(&sim, &steps[0], &steps[0]);
    let on_openssl = |f: &&String| f.starts_with("OpenSsl: ");
    let failed_on_openssl: Vec<_> = failed.iter().filter(on_openssl).collect();
    assert_eq!(failed_on_openssl.len(), 8, "{failed:?}");
    // Where the two stacks part: WebPKI takes every call (a change in either stack shows here).
    assert_eq!(failed.len(), failed_on_openssl.len(), "{failed:?}");
    let not_yet = "certificate verify failed: X509_V_ERR_CERT_NOT_YET_VALID";
    assert!(
        failed_on_openssl.iter().all(|f| f.ends_with(not_yet)),
        "{failed:?}"
    );

    sim.advance(183 * 86_400);
    sim.run_until_quiet();
    let begun = mounted(&sim);
    assert_eq!(refused(&sim, &begun, &begun), Vec::<String>::new());
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// A CA of the user's own whose subject repeats attribute types and has an RDN of two
/// attributes (`DC=com, DC=example, O=Example + OU=Platform, OU=Mesh, CN=osm-ca`, as
/// enterprise CAs are named; hooks/testdata/README.md): its leaves name it as their issuer byte
/// for byte, so that peers chain them to it, and are kept from one sync to the next. Before the
/// sixty-second round the manager froze on it (`CAUnavailable`, "signing failed"); a subject
/// with repeated types alone got leaves naming one `DC` of the two, re-issued at every sync.
#[test]
fn a_users_ca_whose_subject_repeats_attributes_signs_leaves_its_peers_chain() {
    let mut sim = sim();
    create_users_ca(
        &mut sim,
        "mrc-a-ca",
        include_str!("../hooks/testdata/dn-ca.crt"),
        include_str!("../hooks/testdata/dn-ca.key"),
    );
    let steps = walk(&mut sim, &WALK[..1]);
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    assert_each_step_talks_to_the_one_before(&sim, &steps);
    let issued = leaves(&sim);
    // The manager edited (a label), so that it syncs again.
    let mut manager = sim.get("CertificateManager", NS, "mesh").unwrap().clone();
    manager["metadata"]["labels"] = json!({"team": "mesh"});
    let syncs = |sim: &Sim| {
        let calls = sim.calls.iter();
        calls.filter(|c| c.path == "/cert-rotation/sync").count()
    };
    let before = syncs(&sim);
    sim.apply(&manager.to_string()).unwrap();
    sim.run_until_quiet();
    assert!(syncs(&sim) > before);
    assert_eq!(leaves(&sim), issued, "kept");
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// A CA Secret of the user's own made from one file of the certificate and its key: `ca.crt`
/// holds the key too. The trust bundle would publish that text as it is (cert-rotation.md §2),
/// so the CA is refused (§8): the MRC says `CAUnusable`, the manager `CAUnavailable`, and no
/// ConfigMap or leaf is written. Once the Secret holds the certificate alone, the leaves come,
/// and no object the manager owns holds a key but the leaves' own.
#[test]
fn a_users_ca_crt_holding_its_key_is_refused_and_never_published() {
    let mut sim = sim();
    let (crt, key) = (
        include_str!("../hooks/testdata/dn-ca.crt"),
        include_str!("../hooks/testdata/dn-ca.key"),
    );
    create_users_ca(&mut sim, "mrc-a-ca", &format!("{crt}{key}"), key);
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    let accepted = first_condition(&sim, "MeshRootCertificate", "mrc-a");
    assert_eq!(accepted["reason"], "CAUnusable");
    let ready = first_condition(&sim, "CertificateManager", "mesh");
    assert_eq!(ready["reason"], "CAUnavailable");
    assert_eq!(
        ready["message"],
        "MeshRootCertificate mrc-a: CA Secret mrc-a-ca: ca.crt holds a private key, which the \
         trust bundle would publish"
    );
    assert!(sim.get("ConfigMap", NS, "osm-ca-bundle").is_none());
    assert!(leaf_secrets(&sim)
        .iter()
        .all(|name| sim.get("Secret", NS, name).is_none()));

    create_users_ca(&mut sim, "mrc-a-ca", crt, key);
    sim.run_until_quiet();
    assert_eq!(issuers(&sim), ("mrc-a".into(), "mrc-a".into()));
    let bundle = sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap()["data"]["ca.crt"].clone();
    assert_eq!(bundle, json!(crt));
    for (_, mounted) in mounted(&sim) {
        assert_eq!(mounted.ca_crt, crt.as_bytes());
    }
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// A hand edit of what the manager wrote is undone at the next sync, as Metacontroller's
/// in-place update puts back every field a hook sends (contract §10): in the middle of a
/// rotation, a trust bundle cut to O's CA holds N's again, and so does a leaf's `ca.crt`, with
/// the leaf kept. A key the edit added beside them stays, as Metacontroller keeps what it never
/// applied.
#[test]
fn a_trust_bundle_cut_by_hand_is_put_back_at_the_next_sync() {
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    set_role(&mut sim, "mrc-b", None).unwrap();
    set_role(&mut sim, "mrc-b", Some("passive")).unwrap();
    assert_eq!(check_trust(&sim), ["mrc-a", "mrc-b"]);
    let step2 = leaves(&sim);

    let mut bundle = sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap().clone();
    let both = bundle["data"]["ca.crt"].as_str().unwrap().to_owned();
    let end = "-----END CERTIFICATE-----\n";
    let o_only = &both[..both.find(end).unwrap() + end.len()];
    bundle["data"] = json!({"ca.crt": o_only, "notes": "trimmed by hand"});
    sim.apply(&bundle.to_string()).unwrap();
    let mut web = sim.get("Secret", NS, "web-tls").unwrap().clone();
    web["data"]["ca.crt"] = json!(base64::engine::general_purpose::STANDARD.encode(o_only));
    sim.apply(&web.to_string()).unwrap();
    sim.run_until_quiet();

    let bundle = &sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap()["data"];
    assert_eq!(bundle["ca.crt"], json!(both), "both CAs again");
    assert_eq!(
        bundle["notes"], "trimmed by hand",
        "a key of the user's own"
    );
    assert_eq!(check_trust(&sim), ["mrc-a", "mrc-b"]);
    assert_eq!(leaves(&sim), step2, "no leaf issued again");
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// A Secret the manager does not own, named as one of its leaves (a user's Opaque Secret, or an
/// MRC's CA Secret), freezes the manager with `SecretConflict` (§3.1 item 2) and is never
/// written: no leaf data, label, owner or type lands on it. Once the name is free, the leaves
/// come.
#[test]
fn a_secret_of_a_leafs_name_the_manager_does_not_own_is_never_written() {
    let mut sim = sim();
    let password = base64::engine::general_purpose::STANDARD.encode("hunter2");
    sim.apply(
        &json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": "web-tls", "namespace": NS, "labels": {"team": "payments"}},
        "data": {"password": password}})
        .to_string(),
    )
    .unwrap();
    let users = sim.get("Secret", NS, "web-tls").unwrap().clone();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();

    let ready = first_condition(&sim, "CertificateManager", "mesh");
    assert_eq!(ready["reason"], "SecretConflict", "{ready}");
    assert_eq!(
        sim.get("Secret", NS, "web-tls"),
        Some(&users),
        "the user's Secret as it was"
    );
    assert!(
        sim.get("Secret", NS, "api-tls").is_none(),
        "frozen: no leaf issued"
    );
    assert_eq!(
        state(&sim, "mrc-a"),
        "inactive",
        "no manager signs with it yet (§4.3)"
    );

    sim.delete("Secret", NS, "web-tls").unwrap();
    sim.run_until_quiet();
    assert_eq!(
        first_condition(&sim, "CertificateManager", "mesh")["reason"],
        "IssuersReady"
    );
    assert_eq!(check_trust(&sim), ["mrc-a"]);
    assert_eq!(state(&sim, "mrc-a"), "active");
    let issued = leaves(&sim);

    // An MRC's CA Secret is not the manager's either.
    let ca = sim.get("Secret", NS, "mrc-a-ca").unwrap().clone();
    let mut manager = sim.get("CertificateManager", NS, "mesh").unwrap().clone();
    manager["spec"]["certificates"][0]["secretName"] = json!("mrc-a-ca");
    sim.apply(&manager.to_string()).unwrap();
    sim.run_until_quiet();
    assert_eq!(
        first_condition(&sim, "CertificateManager", "mesh")["reason"],
        "SecretConflict"
    );
    assert_eq!(
        sim.get("Secret", NS, "mrc-a-ca"),
        Some(&ca),
        "the CA Secret as it was"
    );
    for name in LEAF_SECRETS {
        let leaf = &sim.get("Secret", NS, name).unwrap()["data"]["tls.crt"];
        assert_eq!(
            leaf.as_str(),
            Some(issued[name].as_str()),
            "{name} kept while frozen"
        );
    }
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);
}

/// The manager cannot see ConfigMaps: §2's customize answer relates MRCs and Secrets only. A
/// ConfigMap named as its trust bundle that it did not make (a user's, or another manager's of
/// the same `configMapName`) is never written: Metacontroller's create of the bundle meets
/// `AlreadyExists`, which it swallows (contract §10), and the manager says `IssuersReady`. The
/// leaves carry the trust in their own `ca.crt`. The README (A CertificateManager's spec) says
/// so, how to tell, and that a new name moves the bundle, as the end of this scenario does.
#[test]
fn a_configmap_of_the_bundles_name_the_manager_did_not_make_stays_as_it_was() {
    let mut sim = sim();
    sim.apply(
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "osm-ca-bundle", "namespace": NS, "labels": {"team": "payments"}},
        "data": {"ca.crt": "the payments team's own CA\n"}})
        .to_string(),
    )
    .unwrap();
    let users = sim.get("ConfigMap", NS, "osm-ca-bundle").unwrap().clone();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();

    assert_eq!(
        first_condition(&sim, "CertificateManager", "mesh")["reason"],
        "IssuersReady"
    );
    assert_eq!(sim.get("ConfigMap", NS, "osm-ca-bundle"), Some(&users));
    let ca = sim.get("Secret", NS, "mrc-a-ca").unwrap()["data"]["ca.crt"].clone();
    for name in LEAF_SECRETS {
        assert_eq!(sim.get("Secret", NS, name).unwrap()["data"]["ca.crt"], ca);
    }
    assert!(sim.sync_errors.is_empty(), "{:?}", sim.sync_errors);

    let mut manager = sim.get("CertificateManager", NS, "mesh").unwrap().clone();
    manager["spec"]["trustBundle"]["configMapName"] = json!("mesh-ca-bundle");
    sim.apply(&manager.to_string()).unwrap();
    sim.run_until_quiet();
    let bundle = sim.get("ConfigMap", NS, "mesh-ca-bundle").unwrap();
    assert_eq!(bundle["metadata"]["ownerReferences"][0]["name"], "mesh");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(ca.as_str().unwrap())
        .unwrap();
    assert_eq!(bundle["data"]["ca.crt"].as_str().unwrap().as_bytes(), ca);
    assert_eq!(sim.get("ConfigMap", NS, "osm-ca-bundle"), Some(&users));
}

// ---- random walks ----
//
// Random role edits of up to three MRCs (each created with a random role or none), deletions,
// and time passing while the manager is ready, from a mesh whose leaves mrc-a signs. The webhook
// admits what it admits; the managers and MRCs do what they do with it, frozen or not. After every step: the trust
// bundle and the leaves agree with the manager's issuers (`check_trust`), each MRC's state
// agrees with them (§4.3), and workloads holding the step's leaves complete mutual TLS with
// each other and with those still holding the leaves of the step before, on both TLS stacks:
// no workload ever holds a certificate its peers do not trust.

use common::walk::{seeds, Rng};

const MRCS: [&str; 3] = ["mrc-a", "mrc-b", "mrc-c"];
const ROLES: [&str; 3] = ["active", "passive", "inactive"];

/// Each MRC's state against the manager's issuers, once nothing is left to sync (§4.3).
fn states_agree_with_issuers(sim: &Sim) -> Result<(), String> {
    let (s, v) = issuers(sim);
    for m in sim.list("MeshRootCertificate", NS) {
        let name = m["metadata"]["name"].as_str().unwrap();
        let state = m["status"]["state"].as_str().unwrap_or_default();
        let agrees = match state {
            "active" | "issuingRollout" => s == name,
            "validatingRollout" | "issuingRollback" => v == name && s != name,
            "inactive" | "validatingRollback" => s != name && v != name,
            _ => true, // `error`: the manager may keep using it (§4.2)
        };
        if !agrees {
            return Err(format!("{name} is {state} with issuers {s}/{v}"));
        }
    }
    Ok(())
}

/// §3.2's pair for the MRCs' roles as the API server has them, chosen from `current`, and
/// whether the move from `current` is a rotation step (DECISIONS, "A pair a rotation step
/// away"); none when the MRCs in use are no combination a manager takes.
fn expected_pair(sim: &Sim, current: &(String, String)) -> Option<((String, String), bool)> {
    let mrcs: Vec<_> = sim
        .list("MeshRootCertificate", NS)
        .into_iter()
        .filter(|m| m["metadata"].get("deletionTimestamp").is_none())
        .collect();
    let in_use: Vec<(&str, &str)> = mrcs
        .iter()
        .filter_map(|m| {
            let role = m["spec"]["role"].as_str()?;
            let name = m["metadata"]["name"].as_str()?;
            (role == "active" || role == "passive").then_some((name, role))
        })
        .collect();
    let (x, y) = match in_use.as_slice() {
        [(x, "active")] => (x, x),
        [(x, "active"), (y, "passive")] | [(y, "passive"), (x, "active")] => (x, y),
        [(x, "active"), (y, "active")] if current.0 == *y => (y, x),
        [(x, "active"), (y, "active")] => (x, y),
        _ => return None,
    };
    let (s, v) = current;
    let signer_left = !mrcs.iter().any(|m| m["metadata"]["name"] == **s);
    // The signer stays, or the one trusted beside it signs and the signer stays trusted.
    let step = signer_left || x == s || (x == v && s == y);
    Some((((*x).to_owned(), (*y).to_owned()), step))
}

/// One walk of `steps` random steps from `seed`; each step is said on standard error, which
/// the test shows when it fails. With `caches_behind`, Metacontroller's caches fall behind on
/// the manager, its children and the MRCs now and then, and the user waits before each edit as
/// ROTATION.md says.
fn cert_rotation_walk(seed: u64, steps: usize, caches_behind: bool) {
    eprintln!("seed {seed}");
    let mut rng = Rng::new(seed);
    let mut sim = sim();
    set_role(&mut sim, "mrc-a", Some("active")).unwrap();
    let mut before = mounted(&sim);
    let mut signer_forced_out = false;
    // The manager's issuers as the API server had them before the user's last action (a role
    // edit, a delete).
    let mut before_edit = issuers(&sim);
    for step in 0..steps {
        let draw = rng.below(if caches_behind { 130 } else { 100 });
        if caches_behind && draw < 100 {
            // The user edits only once every leaf carries the manager's issuers, the bundle
            // holds their CAs, the MRCs' states are the issuers' and the workloads have loaded
            // them (ROTATION.md), and minutes do not pass with the caches behind:
            // Metacontroller's retries land once they catch up.
            let edit = draw < 65;
            if !edit
                || !children_follow_the_status(&sim)
                || states_agree_with_issuers(&sim).is_err()
            {
                eprintln!("{step}: the caches catch up");
                sim.catch_up_caches();
                sim.run_until_quiet();
                if edit {
                    before = mounted(&sim);
                }
            }
        }
        // A frozen manager renews nothing (§3.6), and its `Ready=False` is the alarm a user
        // answers: time passes in the walk only while the manager is ready.
        let ready = first_condition(&sim, "CertificateManager", "mesh")["status"] == "True";
        if draw < 65 {
            before_edit = issuers(&sim);
        }
        match draw {
            0..=54 => {
                let name = *rng.pick(&MRCS);
                let role = match sim.get("MeshRootCertificate", NS, name) {
                    Some(_) => Some(*rng.pick(&ROLES)),
                    None => *rng.pick(&[None, Some("active"), Some("passive"), Some("inactive")]),
                };
                let edited = set_role(&mut sim, name, role);
                eprintln!("{step}: {name} {role:?}: {edited:?}");
            }
            55..=61 => {
                let name = *rng.pick(&MRCS);
                if sim.get("MeshRootCertificate", NS, name).is_some() {
                    let deleted = sim.delete("MeshRootCertificate", NS, name);
                    eprintln!("{step}: delete {name}: {deleted:?}");
                    sim.run_until_quiet();
                }
            }
            62..=64 => {
                let name = *rng.pick(&MRCS);
                if sim.get("MeshRootCertificate", NS, name).is_some() {
                    eprintln!("{step}: {name} forced out");
                    signer_forced_out |= issuers(&sim).0 == name;
                    force_out(&mut sim, name).unwrap();
                }
            }
            65..=94 if ready => {
                let minutes = 1 + rng.below(15) as i64;
                eprintln!("{step}: {minutes} minutes on");
                sim.advance(60 * minutes);
                sim.run_until_quiet();
            }
            95..=99 if ready => {
                // A day on: every workload has reloaded its Secrets since the step before.
                eprintln!("{step}: a day on");
                sim.advance(25 * 3600);
                sim.run_until_quiet();
                before = mounted(&sim);
            }
            65..=99 => eprintln!("{step}: frozen, no time passes"),
            100..=114 => {
                let (kind, name) = *rng.pick(&[
                    ("Secret", "web-tls"),
                    ("Secret", "api-tls"),
                    ("ConfigMap", "osm-ca-bundle"),
                    ("CertificateManager", "mesh"),
                    ("MeshRootCertificate", MRCS[0]),
                    ("MeshRootCertificate", MRCS[1]),
                    ("MeshRootCertificate", MRCS[2]),
                ]);
                if sim.get(kind, NS, name).is_some() {
                    eprintln!("{step}: the caches stop hearing of {name}");
                    sim.hold_in_caches(kind, NS, name);
                }
            }
            115..=119 => {
                let late = sim.turn_over_creates_heard_late();
                eprintln!("{step}: creates heard of late: {late}");
            }
            _ => {
                eprintln!("{step}: the caches catch up");
                sim.catch_up_caches();
                sim.run_until_quiet();
            }
        }
        // With the caches behind, an update meets a Conflict, which Metacontroller retries.
        let conflict = |e: &String| caches_behind && e.contains(sim::CONFLICT_CACHES_BEHIND);
        assert!(
            sim.sync_errors.iter().all(conflict),
            "{:?}",
            sim.sync_errors
        );
        if !sim.caches_behind() {
            check_trust(&sim);
            states_agree_with_issuers(&sim).unwrap();
            // The manager answers the user's edit as it would have with its caches on time.
            let condition = first_condition(&sim, "CertificateManager", "mesh");
            if let Some((pair, true)) = expected_pair(&sim, &before_edit) {
                assert_ne!(
                    condition["reason"], "RotationStepSkipped",
                    "from {before_edit:?}"
                );
                if condition["status"] == "True" {
                    assert_eq!(issuers(&sim), pair, "from {before_edit:?}");
                }
            }
        }
        let now = mounted(&sim);
        // A signer forced out leaves the workloads that still hold its leaves behind, as the
        // user asked, until the manager has moved on and its leaves have landed; a validating
        // one leaves nobody behind.
        if !signer_forced_out {
            assert_eq!(refused(&sim, &before, &now), Vec::<String>::new());
        }
        // So is a leaf whose update has not landed yet, with the caches behind.
        let landed = children_follow_the_status(&sim);
        if !signer_forced_out || landed {
            assert_eq!(refused(&sim, &now, &now), Vec::<String>::new());
        }
        signer_forced_out &=
            first_condition(&sim, "CertificateManager", "mesh")["status"] != "True" || !landed;
        before = now;
    }
}

/// Whether every leaf Secret's issuer annotations are the manager's and the trust bundle is
/// their `ca.crt` (ROTATION.md's wait).
fn children_follow_the_status(sim: &Sim) -> bool {
    let Some(bundle) = sim.get("ConfigMap", NS, "osm-ca-bundle") else {
        return false;
    };
    let bundle = base64::engine::general_purpose::STANDARD
        .encode(bundle["data"]["ca.crt"].as_str().unwrap_or_default());
    leaf_secrets(sim).iter().all(|name| {
        sim.get("Secret", NS, name)
            .is_some_and(|leaf| leaf["data"]["ca.crt"] == bundle)
            && leaf_issuers(sim, name) == issuers(sim)
    })
}

/// Random walks of a mesh's MRCs (see above); `WALK_SEEDS=<count>` walks more, `WALK_SEED=<n>`
/// replays one.
#[test]
fn random_walks_never_leave_a_workload_untrusted_by_its_peers() {
    for seed in seeds(4) {
        cert_rotation_walk(seed, 30, false);
    }
}

/// The walks above with Metacontroller's caches behind now and then on the manager's children
/// (a leaf Secret's or the bundle's changes not heard of, creates heard of late), on the manager
/// and on the MRCs, and a user who waits as ROTATION.md says before each edit: every leaf
/// carrying the manager's issuers, the bundle holding their CAs, the MRCs' states those of the
/// issuers, and the workloads having loaded them. Workloads a step apart still talk, with a leaf
/// whose update has not landed yet among them, and the manager answers each edit as it would
/// with its caches on time.
#[test]
fn random_walks_with_caches_behind_keep_workloads_a_step_apart_talking() {
    for seed in seeds(4) {
        cert_rotation_walk(seed, 30, true);
    }
}
