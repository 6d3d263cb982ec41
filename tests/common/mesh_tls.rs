//! Two workloads of the mesh talking mutual TLS, in memory, with what their leaf Secrets mount:
//! each presents its `tls.crt` and `tls.key` and checks the other's certificate against its own
//! `ca.crt`, as a TLS peer checks it (the chain to a CA of `ca.crt` by name and signature,
//! validity, key usages, the name called), not only a signature. Each call is made with two TLS
//! stacks, as a mesh holds workloads built on either ([`Stack`]): rustls' WebPKI verifiers,
//! which read no more of a trusted CA than its name and key, and the system's OpenSSL, which
//! also checks a CA's own dates, key usage and basic constraints, under its strict X.509 rules.

use rustls::client::WebPkiServerVerifier;
use rustls::crypto::aws_lc_rs;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::time_provider::TimeProvider;
use rustls::{
    ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection,
};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::Duration;

/// A TLS implementation a workload of the mesh may be built on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stack {
    Rustls,
    OpenSsl,
}

impl Stack {
    pub const ALL: [Stack; 2] = [Stack::Rustls, Stack::OpenSsl];

    /// Whether `client` reaches `server`, asking for `server_name`, at the Unix time `now`, both
    /// built on this stack: `Err` holds what the side that gave up said.
    pub fn handshake(
        self,
        client: &Mounted,
        server: &Mounted,
        server_name: &str,
        now: i64,
    ) -> Result<(), String> {
        match self {
            Stack::Rustls => rustls_handshake(client, server, server_name, now),
            Stack::OpenSsl => openssl_handshake(client, server, server_name, now),
        }
    }
}

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

fn rustls_handshake(
    client: &Mounted,
    server: &Mounted,
    server_name: &str,
    now: i64,
) -> Result<(), String> {
    let provider = Arc::new(aws_lc_rs::default_provider());
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

/// The handshake of two OpenSSL peers over a socket pair, each on its own thread. Each side
/// verifies at `now` with `X509_V_FLAG_X509_STRICT` (as `openssl verify -x509_strict`), the
/// client also the name it calls (SNI and host name check); the server asks for a certificate
/// and refuses a client without one.
fn openssl_handshake(
    client: &Mounted,
    server: &Mounted,
    server_name: &str,
    now: i64,
) -> Result<(), String> {
    use openssl::ssl::{Ssl, SslVerifyMode};
    let (client_end, server_end) = UnixStream::pair().map_err(|e| e.to_string())?;
    let client_context = openssl_context(client, SslVerifyMode::PEER)?;
    let mut client_ssl = Ssl::new(&client_context).map_err(|e| e.to_string())?;
    verify_at(client_ssl.param_mut(), now)?;
    client_ssl
        .param_mut()
        .set_host(server_name)
        .map_err(|e| e.to_string())?;
    client_ssl
        .set_hostname(server_name)
        .map_err(|e| e.to_string())?;
    let server_context = openssl_context(
        server,
        SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT,
    )?;
    let mut server_ssl = Ssl::new(&server_context).map_err(|e| e.to_string())?;
    verify_at(server_ssl.param_mut(), now)?;
    // Each side drops its end as soon as it is done, so that the other's handshake ends too.
    let (server_said, client_said) = std::thread::scope(|s| {
        let accepting = s.spawn(move || {
            let accepted = server_ssl.accept(server_end);
            accepted.map(drop).map_err(openssl_failure)
        });
        let connected = client_ssl.connect(client_end);
        let client_said = connected.map(drop).map_err(openssl_failure);
        (accepting.join().expect("the server's thread"), client_said)
    });
    client_said.map_err(|e| format!("client: {e}"))?;
    server_said.map_err(|e| format!("server: {e}"))
}

/// A context that presents `mounted`'s leaf and key and trusts the CAs of its `ca.crt` alone.
fn openssl_context(
    mounted: &Mounted,
    mode: openssl::ssl::SslVerifyMode,
) -> Result<openssl::ssl::SslContext, String> {
    use openssl::pkey::PKey;
    use openssl::ssl::{SslContext, SslMethod};
    use openssl::x509::X509;
    let stack = |e: openssl::error::ErrorStack| e.to_string();
    let mut context = SslContext::builder(SslMethod::tls()).map_err(stack)?;
    context.set_cert_store(openssl_trust(&mounted.ca_crt).map_err(|e| format!("ca.crt: {e}"))?);
    let leaf = X509::from_pem(&mounted.tls_crt).map_err(|e| format!("tls.crt: {e}"))?;
    context.set_certificate(&leaf).map_err(stack)?;
    let key = PKey::private_key_from_pem(&mounted.tls_key).map_err(|e| format!("tls.key: {e}"))?;
    context.set_private_key(&key).map_err(stack)?;
    context
        .check_private_key()
        .map_err(|e| format!("tls.key does not match tls.crt: {e}"))?;
    context.set_verify(mode);
    Ok(context.build())
}

/// An OpenSSL store that trusts the CAs of a PEM bundle and nothing else.
pub fn openssl_trust(pem: &[u8]) -> Result<openssl::x509::store::X509Store, String> {
    use openssl::x509::store::X509StoreBuilder;
    use openssl::x509::X509;
    let mut trust = X509StoreBuilder::new().map_err(|e| e.to_string())?;
    for ca in X509::stack_from_pem(pem).map_err(|e| e.to_string())? {
        trust.add_cert(ca).map_err(|e| e.to_string())?;
    }
    Ok(trust.build())
}

/// Peers' certificates checked at `now`, under OpenSSL's strict X.509 rules.
fn verify_at(
    param: &mut openssl::x509::verify::X509VerifyParamRef,
    now: i64,
) -> Result<(), String> {
    use openssl::x509::verify::X509VerifyFlags;
    param.set_time(now);
    param
        .set_flags(X509VerifyFlags::X509_STRICT)
        .map_err(|e| e.to_string())
}

/// What OpenSSL said of a handshake that failed: the verification's result when a certificate
/// was refused (by its code's name where [`VERIFY_ERRORS`] has it), else the error.
pub fn openssl_failure<S>(e: openssl::ssl::HandshakeError<S>) -> String {
    use openssl::ssl::HandshakeError;
    use openssl::x509::X509VerifyResult;
    match e {
        HandshakeError::Failure(mid) | HandshakeError::WouldBlock(mid) => {
            let verified = mid.ssl().verify_result();
            if verified == X509VerifyResult::OK {
                return mid.error().to_string();
            }
            let named = VERIFY_ERRORS
                .iter()
                .find(|(code, _)| *code == verified.as_raw());
            let why =
                named.map_or_else(|| verified.error_string().to_owned(), |(_, n)| (*n).into());
            format!("certificate verify failed: {why}")
        }
        HandshakeError::SetupFailure(e) => e.to_string(),
    }
}

/// The verification errors the tests expect, by their codes' names: every OpenSSL version keeps
/// the codes, while their text changes (1.1 says `self signed certificate in certificate
/// chain`, 3.0 `self-signed`).
const VERIFY_ERRORS: &[(i32, &str)] = &[
    (
        openssl_sys::X509_V_ERR_CERT_NOT_YET_VALID,
        "X509_V_ERR_CERT_NOT_YET_VALID",
    ),
    (
        openssl_sys::X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
        "X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN",
    ),
    (
        openssl_sys::X509_V_ERR_HOSTNAME_MISMATCH,
        "X509_V_ERR_HOSTNAME_MISMATCH",
    ),
];
