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
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    let conn = ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    let mut tls = StreamOwned::new(conn, tcp);
    tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let reply = read_reply(&mut tls);
    let cert = tls.conn.peer_certificates().unwrap()[0].to_vec();
    (reply.status, cert)
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
