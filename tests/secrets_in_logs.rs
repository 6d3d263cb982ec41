//! Secrets stay secret (cert-rotation.md §8): a full rotation on the simulator with every log at
//! trace level captured, then no private key (PEM or base64 of it) may appear in the logs, nor
//! in any status or condition message.

mod common;
mod sim;

use common::LogCapture;
use serde_json::json;
use sim::Sim;

const NS: &str = "osm-system";

fn role(sim: &mut Sim, name: &str, role: &str) {
    let mut m = sim.get("MeshRootCertificate", NS, name).cloned().unwrap_or_else(|| {
        json!({"apiVersion": "config.openservicemesh.io/v1alpha2", "kind": "MeshRootCertificate",
               "metadata": {"name": name, "namespace": NS},
               "spec": {"provider": {"tresor": {"ca": {"secretRef": {"name": format!("{name}-ca"), "namespace": NS}}}}}})
    });
    m["spec"]["role"] = json!(role);
    sim.apply(&m.to_string()).unwrap();
    sim.run_until_quiet();
}

#[test]
fn no_key_material_in_trace_logs_or_status_during_a_rotation() {
    let capture = LogCapture::install("trace");

    let mut sim = Sim::with_manifests(&["cert-rotation"]);
    sim.apply(&json!({"apiVersion": "metahooks.dev/v1alpha1", "kind": "CertificateManager",
        "metadata": {"name": "mesh", "namespace": NS},
        "spec": {"trustBundle": {"configMapName": "bundle"}, "certificates": [{"secretName": "web-tls", "commonName": "web"}]}})
    .to_string())
    .unwrap();
    role(&mut sim, "mrc-a", "active");
    role(&mut sim, "mrc-b", "inactive");
    role(&mut sim, "mrc-b", "passive");
    role(&mut sim, "mrc-b", "active");
    role(&mut sim, "mrc-a", "passive");
    role(&mut sim, "mrc-a", "inactive");
    // A broken CA on a third MRC: its errors are reported, naming the Secret, not its content.
    sim.apply(&json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mrc-c-ca", "namespace": NS},
        "data": {"ca.crt": sim.get("Secret", NS, "mrc-b-ca").unwrap()["data"]["private.key"], "private.key": "bm90IGEga2V5"}}).to_string())
    .unwrap();
    role(&mut sim, "mrc-c", "inactive");
    // Malformed requests straight to the server: the 400 messages must not echo the values.
    let key_b64 = sim.get("Secret", NS, "mrc-a-ca").unwrap()["data"]["private.key"]
        .as_str()
        .unwrap()
        .to_owned();
    let server = common::TestServer::start(&[]);
    // The key sits where a number is expected: serde would quote it in its error message.
    let body = format!(
        r#"{{"parent": {{"metadata": {{"name": "x", "namespace": "{NS}", "generation": "{key_b64}"}}}}}}"#
    );
    let reply = common::post(&server, "/cert-rotation/sync", body.as_bytes());
    assert_eq!(reply.status, 400);
    assert!(!String::from_utf8_lossy(&reply.body).contains(&key_b64[..32]));

    let logs = capture.text();
    assert!(
        logs.contains("cert-rotation/sync"),
        "the capture saw the hook spans"
    );
    let mut secrets: Vec<String> = Vec::new();
    for s in sim.list("Secret", NS) {
        for k in ["private.key", "tls.key"] {
            if let Some(v) = s["data"][k].as_str() {
                secrets.push(v.to_owned());
                use base64::Engine;
                let pem =
                    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(v).unwrap())
                        .unwrap_or_default();
                secrets.extend(
                    pem.lines()
                        .filter(|l| !l.starts_with("-----") && l.len() > 20)
                        .map(str::to_owned),
                );
            }
        }
    }
    assert!(secrets.len() > 4, "keys were found to look for");
    assert!(!logs.contains("PRIVATE KEY"));
    assert!(
        !logs.contains("LS0tLS1CRUdJTiBQUklWQVRF"),
        "base64 of a PEM key header"
    );
    for secret in &secrets {
        let probe = &secret[..secret.len().min(40)];
        assert!(!logs.contains(probe), "key material in the logs");
        for kind in ["MeshRootCertificate", "CertificateManager"] {
            for o in sim.list(kind, NS) {
                assert!(
                    !o["status"].to_string().contains(probe),
                    "key material in a status"
                );
            }
        }
    }
}
