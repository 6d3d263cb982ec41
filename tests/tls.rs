//! Real TLS handshakes against the HTTPS listener: self-signed at start, and certificate files
//! reloaded after a kubelet-style `..data` symlink swap without a restart.

mod common;

use common::{read_reply, TestServer};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;

/// Accepts any server certificate (the test compares it itself) but checks the handshake
/// signatures, so a key that does not match its certificate still fails.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

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

/// Handshakes, GETs /readyz over TLS, returns the status and the certificate presented.
fn https_get(addr: SocketAddr) -> (u16, Vec<u8>) {
    try_https_get(addr, None).expect("HTTPS request")
}

/// As [`https_get`], optionally presenting a client certificate (PEM cert, PEM key); `Err` when
/// the handshake or the exchange fails.
fn try_https_get(addr: SocketAddr, client: Option<(&str, &str)>) -> Result<(u16, Vec<u8>), String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::PrivateKeyDer;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)));
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    let conn = ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut tls = StreamOwned::new(conn, tcp);
    tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; 1];
    use std::io::Read;
    tls.read_exact(&mut head).map_err(|e| e.to_string())?;
    let reply = read_reply(&mut (&head[..]).chain(&mut tls));
    let cert = tls.conn.peer_certificates().unwrap()[0].to_vec();
    Ok((reply.status, cert))
}

fn der_of(pem: &str) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// Writes a certificate pair into a timestamped folder, as the kubelet does.
fn write_version(dir: &Path, version: &str) -> String {
    let (cert, key) = metahooks::tls::self_signed(&["localhost".to_owned()]).unwrap();
    let folder = dir.join(version);
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join("tls.crt"), &cert).unwrap();
    std::fs::write(folder.join("tls.key"), &key).unwrap();
    cert
}

/// Points `..data` at `version` atomically (symlink to a temporary name, then rename).
fn swap_data(dir: &Path, version: &str) {
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(version, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

#[test]
fn self_signed_certificate_serves_https() {
    let server = TestServer::start(&["--tls-self-signed"]);
    let (status, cert) = https_get(server.https.expect("HTTPS listener"));
    assert_eq!(status, 200);
    assert!(!cert.is_empty());
    // The plain listener keeps working beside it.
    assert_eq!(common::get(&server, "/healthz").status, 200);
}

#[test]
fn certificate_files_are_reloaded_after_a_symlink_swap() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_version(dir.path(), "..2026_06_01_a");
    swap_data(dir.path(), "..2026_06_01_a");
    std::os::unix::fs::symlink("..data/tls.crt", dir.path().join("tls.crt")).unwrap();
    std::os::unix::fs::symlink("..data/tls.key", dir.path().join("tls.key")).unwrap();
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    let server = TestServer::start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let addr = server.https.unwrap();
    assert_eq!(https_get(addr), (200, der_of(&first)));

    let second = write_version(dir.path(), "..2026_06_02_b");
    swap_data(dir.path(), "..2026_06_02_b");
    assert_eq!(https_get(addr), (200, der_of(&second)));

    // A broken new pair keeps the last good certificate in service.
    std::fs::create_dir(dir.path().join("..2026_06_03_c")).unwrap();
    std::fs::write(dir.path().join("..2026_06_03_c/tls.crt"), "garbage").unwrap();
    std::fs::write(dir.path().join("..2026_06_03_c/tls.key"), "garbage").unwrap();
    swap_data(dir.path(), "..2026_06_03_c");
    assert_eq!(https_get(addr), (200, der_of(&second)));
}

#[test]
fn client_certificates_are_required_with_a_client_ca() {
    let dir = tempfile::tempdir().unwrap();
    // A client CA and a client certificate it signs, plus one it does not.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca, &ca_key);
    let client_key = rcgen::KeyPair::generate().unwrap();
    let client = rcgen::CertificateParams::new(vec!["kube-apiserver".to_owned()]).unwrap();
    let client_cert = client.signed_by(&client_key, &issuer).unwrap();
    let (stranger_cert, stranger_key) =
        metahooks::tls::self_signed(&["stranger".to_owned()]).unwrap();
    std::fs::write(dir.path().join("client-ca.crt"), ca_cert.pem()).unwrap();

    let ca_path = dir.path().join("client-ca.crt");
    let server = TestServer::start(&[
        "--tls-self-signed",
        "--tls-client-ca",
        ca_path.to_str().unwrap(),
    ]);
    let addr = server.https.unwrap();
    let (status, _) = try_https_get(
        addr,
        Some((&client_cert.pem(), &client_key.serialize_pem())),
    )
    .unwrap();
    assert_eq!(status, 200);
    assert!(try_https_get(addr, None).is_err(), "no client certificate");
    assert!(
        try_https_get(addr, Some((&stranger_cert, &stranger_key))).is_err(),
        "not signed by the client CA"
    );
}
