//! Two workloads of the mesh talking mutual TLS, in memory, with what their leaf Secrets mount:
//! each presents its `tls.crt` and `tls.key` and checks the other's certificate against its own
//! `ca.crt` with rustls' WebPKI verifiers, as a TLS peer checks it (the chain to a CA of
//! `ca.crt` by name and signature, the leaf's validity and key usages, the name called), not
//! only a signature. WebPKI reads no more of a trusted CA than its name and key: a CA's own
//! dates and key usage are not checked here (docs/DECISIONS.md says what other stacks do).

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::ring;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::time_provider::TimeProvider;
use rustls::{
    ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection,
};
use std::sync::Arc;
use std::time::Duration;

/// What a workload mounts from its leaf Secret (each value decoded from `data`).
#[derive(Debug)]
pub struct Mounted {
    pub tls_crt: Vec<u8>,
    pub tls_key: Vec<u8>,
    pub ca_crt: Vec<u8>,
}

impl Mounted {
    /// The three keys of a `kubernetes.io/tls` Secret as the API server returns it.
    pub fn from_secret(secret: &serde_json::Value) -> Mounted {
        use base64::Engine;
        let decode = |key: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(secret["data"][key].as_str().unwrap_or_default())
                .unwrap_or_default()
        };
        Mounted {
            tls_crt: decode("tls.crt"),
            tls_key: decode("tls.key"),
            ca_crt: decode("ca.crt"),
        }
    }
}

/// The clock both peers check validity against: the simulator's, not the machine's.
#[derive(Debug)]
struct At(u64);

impl TimeProvider for At {
    fn current_time(&self) -> Option<UnixTime> {
        Some(UnixTime::since_unix_epoch(Duration::from_secs(self.0)))
    }
}

/// Whether `client` reaches `server`, asking for `server_name`, at the Unix time `now`: `Err`
/// holds what the side that gave up said.
pub fn handshake(
    client: &Mounted,
    server: &Mounted,
    server_name: &str,
    now: i64,
) -> Result<(), String> {
    let provider = Arc::new(ring::default_provider());
    let clock = Arc::new(At(u64::try_from(now).expect("a time after 1970")));
    let client_trust = roots(&client.ca_crt)?;
    let server_verifier =
        WebPkiServerVerifier::builder_with_provider(client_trust, provider.clone())
            .build()
            .map_err(|e| format!("client's ca.crt: {e}"))?;
    let client_config = ClientConfig::builder_with_details(provider.clone(), clock.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(server_verifier)
        .with_client_auth_cert(chain(&client.tls_crt)?, key(&client.tls_key)?)
        .map_err(|e| format!("client's tls.key: {e}"))?;
    let client_verifier =
        WebPkiClientVerifier::builder_with_provider(roots(&server.ca_crt)?, provider.clone())
            .build()
            .map_err(|e| format!("server's ca.crt: {e}"))?;
    let server_config = ServerConfig::builder_with_details(provider, clock)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(client_verifier)
        .with_single_cert(chain(&server.tls_crt)?, key(&server.tls_key)?)
        .map_err(|e| format!("server's tls.key: {e}"))?;
    let name = ServerName::try_from(server_name.to_owned()).map_err(|e| e.to_string())?;
    let mut c = Connection::from(
        ClientConnection::new(Arc::new(client_config), name).map_err(|e| e.to_string())?,
    );
    let mut s = Connection::from(
        ServerConnection::new(Arc::new(server_config)).map_err(|e| e.to_string())?,
    );
    while c.is_handshaking() || s.is_handshaking() {
        let sent = pass(&mut c, &mut s).map_err(|e| format!("server: {e}"))?;
        let answered = pass(&mut s, &mut c).map_err(|e| format!("client: {e}"))?;
        if !sent && !answered {
            return Err("the handshake stalled".into());
        }
    }
    Ok(())
}

/// Moves what `from` has to send into `to` and lets `to` process it; whether anything moved.
fn pass(from: &mut Connection, to: &mut Connection) -> Result<bool, rustls::Error> {
    let mut wire = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut wire).expect("writing to memory");
    }
    let mut rest = &wire[..];
    while !rest.is_empty() {
        to.read_tls(&mut rest).expect("reading from memory");
        to.process_new_packets()?;
    }
    Ok(!wire.is_empty())
}

fn roots(pem: &[u8]) -> Result<Arc<RootCertStore>, String> {
    let mut store = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        store
            .add(cert.map_err(|e| format!("ca.crt: {e}"))?)
            .map_err(|e| format!("ca.crt: {e}"))?;
    }
    Ok(Arc::new(store))
}

fn chain(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("tls.crt: {e}"))
}

fn key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("tls.key: {e}"))
}
