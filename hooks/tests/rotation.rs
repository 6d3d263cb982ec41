//! The rotation walk-through of cert-rotation.md §5, O = mrc-a and N = mrc-b, driven through the
//! real hook functions with a small in-process stand-in for Metacontroller (decorator attachments
//! OnDelete, manager children InPlace, status replaced). After every step it checks the issuers,
//! the MRC states, that the trust bundle holds exactly the table's CAs, that every leaf verifies
//! against the bundle, and whether leaves were re-issued or kept byte for byte.

use base64::Engine;
use metahooks_hooks::registry::{find, HookContext};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use time::macros::datetime;
use time::{Duration, OffsetDateTime};
use x509_parser::pem::Pem;

const NS: &str = "mesh";

struct World {
    now: OffsetDateTime,
    mrcs: BTreeMap<String, Value>,
    /// Secret name -> (owning MRC, object).
    ca_secrets: BTreeMap<String, (String, Value)>,
    manager: Value,
    leaves: BTreeMap<String, Value>,
    bundle: Option<Value>,
}

fn call(id: &str, body: &Value, now: OffsetDateTime) -> Value {
    let hook = find(id).unwrap();
    let mut rng = rand_core::OsRng;
    let mut ctx = HookContext { now, rng: &mut rng };
    let out = (hook.run)(&serde_json::to_vec(body).unwrap(), &mut ctx).unwrap();
    serde_json::from_slice(&out.body).unwrap()
}

fn keyed<'a>(objs: impl Iterator<Item = &'a Value>) -> Value {
    Value::Object(
        objs.map(|o| {
            (
                format!("{NS}/{}", o["metadata"]["name"].as_str().unwrap()),
                o.clone(),
            )
        })
        .collect(),
    )
}

fn mrc(name: &str, role: &str) -> Value {
    json!({"apiVersion": "config.openservicemesh.io/v1alpha2", "kind": "MeshRootCertificate",
           "metadata": {"name": name, "namespace": NS, "generation": 1},
           "spec": {"role": role, "trustDomain": "cluster.local", "spiffeEnabled": false,
                    "provider": {"tresor": {"ca": {"secretRef": {"name": format!("{name}-ca"), "namespace": NS}}}}}})
}

impl World {
    fn new() -> World {
        World {
            now: datetime!(2026-06-01 12:00:00 UTC),
            mrcs: BTreeMap::new(),
            ca_secrets: BTreeMap::new(),
            manager: json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "CertificateManager",
                "metadata": {"name": "mesh", "namespace": NS, "generation": 1, "uid": "m"},
                "spec": {"trustBundle": {"configMapName": "mesh-ca-bundle"},
                         "certificates": [{"secretName": "web-tls", "commonName": "web.mesh.cluster.local", "validity": "1h"},
                                          {"secretName": "api-tls", "commonName": "api.mesh.cluster.local", "dnsNames": ["api.mesh.svc"], "validity": "24h"}]}}),
            leaves: BTreeMap::new(),
            bundle: None,
        }
    }

    fn set_role(&mut self, name: &str, role: &str) {
        self.mrcs
            .entry(name.to_owned())
            .or_insert_with(|| mrc(name, role))["spec"]["role"] = json!(role);
    }

    fn decorate(&mut self, name: &str) -> bool {
        let object = self.mrcs[name].clone();
        let secret_name = format!("{name}-ca");
        let attachments = keyed(
            self.ca_secrets
                .values()
                .filter(|(o, _)| o == name)
                .map(|(_, s)| s),
        );
        let named = keyed(
            self.ca_secrets
                .get(&secret_name)
                .map(|(_, s)| s)
                .into_iter(),
        );
        let body = json!({"controller": {}, "object": object,
            "attachments": {"Secret.v1": attachments},
            "related": {"MeshRootCertificate.config.openservicemesh.io/v1alpha2": keyed(self.mrcs.values()),
                        "CertificateManager.metahooks.dev/v1alpha1": keyed(std::iter::once(&self.manager)),
                        "Secret.v1": named}});
        let resp = call("mesh-root-certificate/sync", &body, self.now);
        let mut changed = false;
        for a in resp["attachments"].as_array().unwrap() {
            let n = a["metadata"]["name"].as_str().unwrap().to_owned();
            if let std::collections::btree_map::Entry::Vacant(e) = self.ca_secrets.entry(n) {
                e.insert((name.to_owned(), a.clone()));
                changed = true;
            }
        }
        if let Some(status) = resp.get("status") {
            if self.mrcs[name].get("status") != Some(status) {
                self.mrcs.get_mut(name).unwrap()["status"] = status.clone();
                changed = true;
            }
        }
        changed
    }

    fn manage(&mut self) -> bool {
        let all_secrets: Vec<Value> = self
            .ca_secrets
            .values()
            .map(|(_, s)| s.clone())
            .chain(self.leaves.values().cloned())
            .collect();
        let body = json!({"controller": {}, "parent": self.manager,
            "children": {"ConfigMap.v1": keyed(self.bundle.iter()), "Secret.v1": keyed(self.leaves.values())},
            "related": {"MeshRootCertificate.config.openservicemesh.io/v1alpha2": keyed(self.mrcs.values()),
                        "Secret.v1": keyed(all_secrets.iter())}});
        let resp = call("cert-rotation/sync", &body, self.now);
        let mut changed = false;
        if self.manager.get("status") != Some(&resp["status"]) {
            self.manager["status"] = resp["status"].clone();
            changed = true;
        }
        let mut leaves = BTreeMap::new();
        let mut bundle = None;
        for c in resp["children"].as_array().unwrap() {
            match c["kind"].as_str().unwrap() {
                "ConfigMap" => bundle = Some(c.clone()),
                _ => {
                    leaves.insert(
                        c["metadata"]["name"].as_str().unwrap().to_owned(),
                        c.clone(),
                    );
                }
            }
        }
        if leaves != self.leaves || bundle != self.bundle {
            changed = true;
        }
        self.leaves = leaves;
        self.bundle = bundle;
        changed
    }

    /// Rounds of decorator syncs then a manager sync, until nothing changes.
    fn settle(&mut self) {
        for _ in 0..8 {
            let mut changed = false;
            let names: Vec<String> = self.mrcs.keys().cloned().collect();
            for n in &names {
                changed |= self.decorate(n);
            }
            changed |= self.manage();
            if !changed {
                return;
            }
        }
        panic!("did not converge");
    }

    fn state(&self, name: &str) -> &str {
        self.mrcs[name]["status"]["state"].as_str().unwrap()
    }

    fn issuers(&self) -> (&str, &str) {
        let s = &self.manager["status"];
        (
            s["signingIssuer"].as_str().unwrap(),
            s["validatingIssuer"].as_str().unwrap(),
        )
    }

    fn leaf_crts(&self) -> BTreeMap<String, String> {
        self.leaves
            .iter()
            .map(|(k, v)| (k.clone(), v["data"]["tls.crt"].as_str().unwrap().to_owned()))
            .collect()
    }

    /// The CN of each CA in the bundle, in order; and checks every leaf against the bundle.
    fn check_trust(&self) -> Vec<String> {
        let bundle = self.bundle.as_ref().unwrap()["data"]["ca.crt"]
            .as_str()
            .unwrap()
            .to_owned();
        let cas: Vec<Vec<u8>> = Pem::iter_from_buffer(bundle.as_bytes())
            .map(|p| p.unwrap().contents)
            .collect();
        let parsed: Vec<_> = cas
            .iter()
            .map(|d| x509_parser::parse_x509_certificate(d).unwrap().1)
            .collect();
        let (s, v) = self.issuers();
        for leaf in self.leaves.values() {
            let decode = |k: &str| {
                base64::engine::general_purpose::STANDARD
                    .decode(leaf["data"][k].as_str().unwrap())
                    .unwrap()
            };
            assert_eq!(
                decode("ca.crt"),
                bundle.as_bytes(),
                "leaf ca.crt is the trust bundle"
            );
            assert_eq!(leaf["type"], "kubernetes.io/tls");
            assert_eq!(
                leaf["metadata"]["annotations"]["metahooks.dev/signing-issuer"],
                s
            );
            assert_eq!(
                leaf["metadata"]["annotations"]["metahooks.dev/validating-issuer"],
                v
            );
            let crt = decode("tls.crt");
            let der = Pem::iter_from_buffer(&crt)
                .next()
                .unwrap()
                .unwrap()
                .contents;
            let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
            let signer = parsed
                .iter()
                .find(|ca| ca.subject().as_raw() == cert.issuer().as_raw())
                .expect("issuer in the bundle");
            cert.verify_signature(Some(signer.public_key()))
                .expect("leaf verifies against the bundle");
            assert_eq!(
                signer
                    .subject()
                    .iter_common_name()
                    .next()
                    .unwrap()
                    .as_str()
                    .unwrap(),
                s,
                "signed by S"
            );
        }
        parsed
            .iter()
            .map(|c| {
                c.subject()
                    .iter_common_name()
                    .next()
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }
}

#[test]
fn rule_5_full_rotation_step_by_step() {
    let mut w = World::new();
    // Step 0: O active.
    w.set_role("mrc-a", "active");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-a", "mrc-a"));
    assert_eq!(w.state("mrc-a"), "active");
    assert_eq!(w.check_trust(), ["mrc-a"]);
    let step0 = w.leaf_crts();
    assert_eq!(step0.len(), 2);

    // Step 1: create N inactive: its CA is generated, nothing else moves.
    w.set_role("mrc-b", "inactive");
    w.settle();
    assert!(w.ca_secrets.contains_key("mrc-b-ca"));
    assert_eq!((w.state("mrc-a"), w.state("mrc-b")), ("active", "inactive"));
    assert_eq!(w.check_trust(), ["mrc-a"]);
    assert_eq!(w.leaf_crts(), step0, "unchanged, byte-identical");

    // Step 2: N passive: N validates, leaves re-issued by O with both CAs.
    w.set_role("mrc-b", "passive");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-a", "mrc-b"));
    assert_eq!(
        (w.state("mrc-a"), w.state("mrc-b")),
        ("active", "validatingRollout")
    );
    assert_eq!(w.check_trust(), ["mrc-a", "mrc-b"]);
    let step2 = w.leaf_crts();
    assert!(step2.iter().all(|(k, v)| step0[k] != *v), "re-issued");

    // Step 3: N active: sticky, nothing re-issued.
    w.set_role("mrc-b", "active");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-a", "mrc-b"));
    assert_eq!(
        (w.state("mrc-a"), w.state("mrc-b")),
        ("active", "validatingRollout")
    );
    assert_eq!(w.check_trust(), ["mrc-a", "mrc-b"]);
    assert_eq!(w.leaf_crts(), step2);

    // Step 4: O passive: N signs, O validates.
    w.set_role("mrc-a", "passive");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-b", "mrc-a"));
    assert_eq!(
        (w.state("mrc-a"), w.state("mrc-b")),
        ("issuingRollback", "issuingRollout")
    );
    assert_eq!(w.check_trust(), ["mrc-b", "mrc-a"]);
    let step4 = w.leaf_crts();
    assert!(step4.iter().all(|(k, v)| step2[k] != *v));

    // Step 5: O inactive: O dropped from trust, grace starts.
    w.set_role("mrc-a", "inactive");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-b", "mrc-b"));
    assert_eq!(
        (w.state("mrc-a"), w.state("mrc-b")),
        ("validatingRollback", "active")
    );
    assert_eq!(w.check_trust(), ["mrc-b"]);
    let step5 = w.leaf_crts();
    assert!(step5.iter().all(|(k, v)| step4[k] != *v));

    // Step 6: the grace (longest leaf validity, 24h) ends.
    w.now += Duration::hours(23);
    w.settle();
    assert_eq!(w.state("mrc-a"), "validatingRollback");
    w.now += Duration::hours(1) + Duration::seconds(1);
    w.settle();
    assert_eq!((w.state("mrc-a"), w.state("mrc-b")), ("inactive", "active"));
    assert_eq!(w.check_trust(), ["mrc-b"]);

    // Step 7: O deleted.
    w.mrcs.remove("mrc-a");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-b", "mrc-b"));
    assert_eq!(w.check_trust(), ["mrc-b"]);
}

#[test]
fn rule_5_rollback_from_step_4() {
    let mut w = World::new();
    w.set_role("mrc-a", "active");
    w.settle();
    w.set_role("mrc-b", "passive");
    w.settle();
    w.set_role("mrc-b", "active");
    w.settle();
    w.set_role("mrc-a", "passive");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-b", "mrc-a"));
    // O back to active: A/A, S/V kept at N/O.
    w.set_role("mrc-a", "active");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-b", "mrc-a"));
    assert_eq!(
        (w.state("mrc-a"), w.state("mrc-b")),
        ("issuingRollback", "issuingRollout")
    );
    // N passive: O signs again.
    w.set_role("mrc-b", "passive");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-a", "mrc-b"));
    assert_eq!(
        (w.state("mrc-a"), w.state("mrc-b")),
        ("issuingRollout", "issuingRollback")
    );
    assert_eq!(w.check_trust(), ["mrc-a", "mrc-b"]);
    // N inactive: back to O alone.
    w.set_role("mrc-b", "inactive");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-a", "mrc-a"));
    assert_eq!(
        (w.state("mrc-a"), w.state("mrc-b")),
        ("active", "validatingRollback")
    );
    assert_eq!(w.check_trust(), ["mrc-a"]);
}

#[test]
fn rule_3_6_invalid_combination_freezes_without_touching_certificates() {
    let mut w = World::new();
    w.set_role("mrc-a", "active");
    w.settle();
    let before = (w.leaf_crts(), w.bundle.clone());
    // Three in use.
    w.set_role("mrc-b", "passive");
    w.set_role("mrc-c", "passive");
    // Let the new MRCs get their CAs while the set is invalid.
    w.settle();
    assert_eq!(
        w.manager["status"]["conditions"][0]["reason"],
        "TooManyMRCsInUse"
    );
    assert_eq!(w.manager["status"]["conditions"][0]["status"], "False");
    assert_eq!(w.issuers(), ("mrc-a", "mrc-a"), "previous issuers kept");
    assert_eq!((w.leaf_crts(), w.bundle.clone()), before);
    for n in ["mrc-a", "mrc-b", "mrc-c"] {
        assert_eq!(w.state(n), "error", "{n}");
        let accepted = &w.mrcs[n]["status"]["conditions"][0];
        assert_eq!(accepted["reason"], "InvalidRoleCombination");
    }
    // Fixing it resumes.
    w.set_role("mrc-c", "inactive");
    w.settle();
    assert_eq!(w.issuers(), ("mrc-a", "mrc-b"));
    assert_eq!(
        w.manager["status"]["conditions"][0]["reason"],
        "IssuersReady"
    );
}

#[test]
fn rule_3_3_leaves_are_renewed_when_a_third_of_their_validity_remains() {
    let mut w = World::new();
    w.set_role("mrc-a", "active");
    w.settle();
    let first = w.leaf_crts();
    // web-tls lives 1h: renewal point at 40 min. 39 min later nothing changes.
    w.now += Duration::minutes(39);
    w.settle();
    assert_eq!(w.leaf_crts(), first);
    w.now += Duration::minutes(2);
    w.settle();
    let second = w.leaf_crts();
    assert_ne!(second["web-tls"], first["web-tls"], "renewed");
    assert_eq!(second["api-tls"], first["api-tls"], "24h leaf kept");
    w.check_trust();
}
