//! TLS helpers of the integration tests: a client that accepts any server certificate (and
//! reports it), clients that trust a CA alone (rustls, and OpenSSL under its strict rules), and
//! serving certificates in a mounted Secret.

use super::mounted::{mount_files, write_files};
use super::read_reply;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, SupportedKxGroup,
};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, HandshakeKind, NamedGroup,
    SignatureScheme, StreamOwned, SupportedProtocolVersion,
};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;

/// Accepts any server certificate (the test compares it itself) but checks the handshake
/// signatures, so a key that does not match its certificate still fails.
#[derive(Debug)]
pub struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

const GET_READYZ: &[u8] = b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

/// Handshakes, GETs /readyz over TLS, returns the status and the certificate presented.
pub fn https_get(addr: SocketAddr) -> (u16, Vec<u8>) {
    try_https_get(addr, None).expect("HTTPS request")
}

/// As [`https_get`], optionally presenting a client certificate (PEM cert, PEM key); `Err` when
/// the handshake or the exchange fails.
pub fn try_https_get(
    addr: SocketAddr,
    client: Option<(&str, &str)>,
) -> Result<(u16, Vec<u8>), String> {
    https_request(addr, client, GET_READYZ).map(|(reply, cert)| (reply.status, cert))
}

/// Sends `raw` over TLS (optionally with a client certificate): the reply and the certificate
/// the server presented; `Err` when the handshake or the exchange fails.
pub fn https_request(
    addr: SocketAddr,
    client: Option<(&str, &str)>,
    raw: &[u8],
) -> Result<(super::Reply, Vec<u8>), String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::PrivateKeyDer;
    let builder = accepting_any_certificate();
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    exchange(addr, config, "localhost", raw)
}

/// A client configuration that accepts any server certificate ([`AnyCertificate`]), before its
/// client certificate is chosen.
pub fn accepting_any_certificate(
) -> rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert> {
    accepting_any_certificate_of(
        rustls::crypto::aws_lc_rs::default_provider(),
        rustls::DEFAULT_VERSIONS,
    )
}

fn accepting_any_certificate_of(
    provider: CryptoProvider,
    versions: &[&'static SupportedProtocolVersion],
) -> rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert> {
    let provider = Arc::new(provider);
    ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
}

/// GETs /readyz over TLS from a client that speaks the TLS `versions` and offers the key exchange
/// `groups` in that order of preference, with a key share for the first (and for X25519 beside a
/// hybrid, as rustls and Go send): the group the server chose, and whether it asked for another
/// key share first (a HelloRetryRequest, one round trip more).
pub fn key_exchange(
    addr: SocketAddr,
    versions: &[&'static SupportedProtocolVersion],
    groups: &[&'static dyn SupportedKxGroup],
) -> (NamedGroup, HandshakeKind) {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    provider.kx_groups = groups.to_vec();
    let config = accepting_any_certificate_of(provider, versions).with_no_client_auth();
    let mut tls = tls_connect(addr, config, "localhost").unwrap();
    assert_eq!(send(&mut tls, GET_READYZ).unwrap().status, 200);
    let group = tls.conn.negotiated_key_exchange_group().unwrap().name();
    (group, tls.conn.handshake_kind().unwrap())
}

/// GETs /readyz over TLS, trusting only the CAs of `ca_pem` and checking that the certificate
/// names `server_name`, as the API server checks a webhook's: the status, or `Err` when the
/// handshake or the exchange fails.
pub fn https_get_trusting(
    addr: SocketAddr,
    ca_pem: &str,
    server_name: &str,
) -> Result<u16, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    exchange(addr, config, server_name, GET_READYZ).map(|(reply, _)| reply.status)
}

/// Whether an OpenSSL client that trusts `ca_pem` alone and calls `server_name` completes a
/// handshake with the HTTPS listener at `addr`, under OpenSSL's strict X.509 rules (which
/// Python's `ssl` sets by default since 3.13): `Err` holds what OpenSSL said.
pub fn openssl_handshake_trusting(
    addr: SocketAddr,
    ca_pem: &str,
    server_name: &str,
) -> Result<(), String> {
    use super::mesh_tls::{openssl_failure, openssl_trust};
    use openssl::ssl::{Ssl, SslContext, SslMethod, SslVerifyMode};
    use openssl::x509::verify::X509VerifyFlags;
    let stack = |e: openssl::error::ErrorStack| e.to_string();
    let mut context = SslContext::builder(SslMethod::tls_client()).map_err(stack)?;
    context.set_cert_store(openssl_trust(ca_pem.as_bytes())?);
    context.set_verify(SslVerifyMode::PEER);
    let mut ssl = Ssl::new(&context.build()).map_err(stack)?;
    ssl.param_mut().set_host(server_name).map_err(stack)?;
    ssl.param_mut()
        .set_flags(X509VerifyFlags::X509_STRICT)
        .map_err(stack)?;
    ssl.set_hostname(server_name).map_err(stack)?;
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    ssl.connect(tcp).map(drop).map_err(openssl_failure)
}

/// A TLS client stream to `addr` for `server_name` (its handshake made on the first write),
/// whose reads give up after 10 s.
pub fn tls_connect(
    addr: SocketAddr,
    config: ClientConfig,
    server_name: &str,
) -> Result<StreamOwned<ClientConnection, TcpStream>, String> {
    let name = ServerName::try_from(server_name.to_owned()).map_err(|e| e.to_string())?;
    let conn = ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    Ok(StreamOwned::new(conn, tcp))
}

/// Sends `raw` over a TLS connection made with `config` to `server_name` at `addr`: the reply
/// and the certificate the server presented.
fn exchange(
    addr: SocketAddr,
    config: ClientConfig,
    server_name: &str,
    raw: &[u8],
) -> Result<(super::Reply, Vec<u8>), String> {
    let mut tls = tls_connect(addr, config, server_name)?;
    let reply = send(&mut tls, raw)?;
    let cert = tls.conn.peer_certificates().unwrap()[0].to_vec();
    Ok((reply, cert))
}

/// Sends `raw` over `tls` and reads the reply; `Err` when the handshake or the exchange fails.
fn send(
    tls: &mut StreamOwned<ClientConnection, TcpStream>,
    raw: &[u8],
) -> Result<super::Reply, String> {
    tls.write_all(raw).map_err(|e| e.to_string())?;
    let mut head = [0u8; 1];
    use std::io::Read;
    tls.read_exact(&mut head).map_err(|e| e.to_string())?;
    Ok(read_reply(&mut (&head[..]).chain(tls)))
}

pub fn der_of(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// Writes a certificate and a key into a timestamped folder, as the kubelet does.
pub fn write_pair(dir: &Path, version: &str, cert: &str, key: &str) {
    write_files(dir, version, &[("tls.crt", cert), ("tls.key", key)]);
}

/// Writes a self-signed pair for `localhost` into a timestamped folder; returns the certificate.
pub fn write_version(dir: &Path, version: &str) -> String {
    let (cert, key) = metahooks::tls::self_signed(&["localhost".to_owned()]).unwrap();
    write_pair(dir, version, &cert, &key);
    cert
}

/// Makes `dir` a TLS Secret mounted the kubelet's way, showing `version`. Returns the paths of
/// `tls.crt` and `tls.key`, for `--tls-cert` and `--tls-key`.
pub fn mount(dir: &Path, version: &str) -> (String, String) {
    let [cert, key] = mount_files(dir, version, ["tls.crt", "tls.key"]);
    (cert, key)
}
