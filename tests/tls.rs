//! Real TLS handshakes against the HTTPS listener: self-signed at start, and certificate files
//! and the client CA reloaded after a kubelet-style `..data` symlink swap without a restart; a
//! certificate and a key that are not a pair refused, at start and on a reload; the expiry of
//! the certificate in service in `/metrics`, and one near its end or past it logged; admission
//! over HTTP/2; a caller gone mid-body without TLS's close; the key exchange, post-quantum with
//! a client that offers it.

mod common;

use common::mounted::{mount_files, swap_data, write_files};
use common::tls::{
    der_of, https_get, key_exchange, mount, try_https_get, write_pair, write_version,
};
use common::{LogCapture, TestServer};
use time::{Duration, OffsetDateTime};

#[test]
fn self_signed_certificate_serves_https() {
    let server = TestServer::start(&["--tls-self-signed"]);
    let (status, cert) = https_get(server.https.expect("HTTPS listener"));
    assert_eq!(status, 200);
    assert!(!cert.is_empty());
    // The plain listener keeps working beside it.
    assert_eq!(common::get(&server, "/healthz").status, 200);
}

/// The key exchange follows the client's order of preference: the hybrid X25519MLKEM768 with
/// a client that prefers it, as Go's have since 1.24 (the API server's from Kubernetes 1.33,
/// Metacontroller's), so that what a recorded request carries (a CA's private key in a
/// cert-rotation sync) cannot be read once the classical part falls; X25519 or P-256 with
/// clients that offer no hybrid, and with a TLS 1.2 client, which cannot use it. No client is
/// asked for another key share first, and `/metrics` counts each handshake under its version
/// and group.
#[test]
fn key_exchange_is_post_quantum_with_a_client_that_offers_it() {
    use rustls::crypto::aws_lc_rs::kx_group::{SECP256R1, SECP384R1, X25519, X25519MLKEM768};
    use rustls::version::{TLS12, TLS13};
    use rustls::{HandshakeKind, NamedGroup};
    let server = TestServer::start(&["--tls-self-signed"]);
    let addr = server.https.expect("HTTPS listener");
    let go = [X25519MLKEM768, X25519, SECP256R1, SECP384R1];
    let cases: [(&[_], &[_], _); 4] = [
        (&[&TLS13], &go, NamedGroup::X25519MLKEM768),
        (
            &[&TLS13],
            &[X25519, SECP256R1, SECP384R1],
            NamedGroup::X25519,
        ),
        (&[&TLS13], &[SECP256R1], NamedGroup::secp256r1),
        (&[&TLS12], &go, NamedGroup::X25519),
    ];
    for (versions, offered, chosen) in cases {
        let got = key_exchange(addr, versions, offered);
        assert_eq!(got, (chosen, HandshakeKind::Full));
    }
    let metrics = String::from_utf8(common::get(&server, "/metrics").body).unwrap();
    let counted: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("metahooks_tls_handshakes_total{"))
        .collect();
    assert_eq!(
        counted,
        [
            r#"metahooks_tls_handshakes_total{version="TLSv1_2",group="X25519"} 1"#,
            r#"metahooks_tls_handshakes_total{version="TLSv1_3",group="X25519"} 1"#,
            r#"metahooks_tls_handshakes_total{version="TLSv1_3",group="X25519MLKEM768"} 1"#,
            r#"metahooks_tls_handshakes_total{version="TLSv1_3",group="secp256r1"} 1"#,
        ]
    );
}

#[test]
fn certificate_files_are_reloaded_after_a_symlink_swap() {
    let dir = tempfile::tempdir().unwrap();
    let first = write_version(dir.path(), "..2026_06_01_a");
    let (cert, key) = mount(dir.path(), "..2026_06_01_a");
    let server = TestServer::start(&["--tls-cert", &cert, "--tls-key", &key]);
    let addr = server.https.unwrap();
    assert_eq!(https_get(addr), (200, der_of(&first)));

    let second = write_version(dir.path(), "..2026_06_02_b");
    swap_data(dir.path(), "..2026_06_02_b");
    assert_eq!(https_get(addr), (200, der_of(&second)));

    // A broken new pair keeps the last good certificate in service.
    write_pair(dir.path(), "..2026_06_03_c", "garbage", "garbage");
    swap_data(dir.path(), "..2026_06_03_c");
    assert_eq!(https_get(addr), (200, der_of(&second)));

    // So does a pair whose key is not the certificate's, which would fail every handshake.
    write_mismatched(dir.path(), "..2026_06_04_d");
    swap_data(dir.path(), "..2026_06_04_d");
    assert_eq!(https_get(addr), (200, der_of(&second)));
}

/// Writes into `dir/version` a certificate and the key of another.
fn write_mismatched(dir: &std::path::Path, version: &str) {
    let (cert, _) = metahooks::tls::self_signed(&["localhost".to_owned()]).unwrap();
    let (_, other_key) = metahooks::tls::self_signed(&["localhost".to_owned()]).unwrap();
    write_pair(dir, version, &cert, &other_key);
}

/// A key that is not the certificate's stops the server at start, naming both files.
#[test]
fn a_key_that_is_not_the_certificates_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    write_mismatched(dir.path(), "a");
    let (cert, key) = (dir.path().join("a/tls.crt"), dir.path().join("a/tls.key"));
    let (cert_arg, key_arg) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let flags = ["--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0"];
    let files = ["--tls-cert", cert_arg, "--tls-key", key_arg];
    let config = metahooks::config::ServeConfig::from_args(&[&flags[..], &files].concat()).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let error = runtime
        .block_on(metahooks::server::start(&config))
        .err()
        .expect("a mismatched pair refused");
    let message = format!("{error:#}");
    let files = format!("loading {} and {}", cert.display(), key.display());
    assert!(message.contains(&files), "{message}");
    assert!(
        message.contains("the private key is not the certificate's"),
        "{message}"
    );
}

/// A client CA (PEM) and a client certificate it signs (PEM certificate, PEM key).
fn client_ca() -> (String, (String, String)) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca, &ca_key);
    let client_key = rcgen::KeyPair::generate().unwrap();
    let client = rcgen::CertificateParams::new(vec!["kube-apiserver".to_owned()]).unwrap();
    let client_cert = client.signed_by(&client_key, &issuer).unwrap();
    (
        ca_cert.pem(),
        (client_cert.pem(), client_key.serialize_pem()),
    )
}

/// Whether a handshake presenting `client` (PEM certificate, PEM key) is served.
fn served(addr: std::net::SocketAddr, client: &(String, String)) -> bool {
    try_https_get(addr, Some((&client.0, &client.1))).is_ok_and(|(status, _)| status == 200)
}

#[test]
fn client_certificates_are_required_with_a_client_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, client) = client_ca();
    let (stranger_cert, stranger_key) =
        metahooks::tls::self_signed(&["stranger".to_owned()]).unwrap();
    let ca_path = dir.path().join("client-ca.crt");
    std::fs::write(&ca_path, ca).unwrap();
    let server = TestServer::start(&[
        "--tls-self-signed",
        "--tls-client-ca",
        ca_path.to_str().unwrap(),
    ]);
    let addr = server.https.unwrap();
    assert!(served(addr, &client));
    assert!(try_https_get(addr, None).is_err(), "no client certificate");
    assert!(
        !served(addr, &(stranger_cert, stranger_key)),
        "not signed by the client CA"
    );
}

/// The client CA file is read again on the first handshake after it changes (here a ConfigMap
/// mounted the kubelet's way), so that a new client CA needs no restart: a file holding the old
/// CA and the new one lets clients of both in during the move, and one that does not load keeps
/// the CAs in service.
#[test]
fn the_client_ca_is_reloaded_after_a_symlink_swap() {
    let dir = tempfile::tempdir().unwrap();
    let ((old_ca, old_client), (new_ca, new_client)) = (client_ca(), client_ca());
    let version = |name: &str, ca: &str| {
        write_files(dir.path(), name, &[("ca.crt", ca)]);
        swap_data(dir.path(), name);
    };
    write_files(dir.path(), "..a", &[("ca.crt", &old_ca)]);
    let [ca_path] = mount_files(dir.path(), "..a", ["ca.crt"]);
    let server = TestServer::start(&["--tls-self-signed", "--tls-client-ca", &ca_path]);
    let addr = server.https.unwrap();
    assert!(served(addr, &old_client));
    assert!(!served(addr, &new_client));

    version("..b", &format!("{old_ca}{new_ca}"));
    assert!(served(addr, &old_client));
    assert!(served(addr, &new_client));

    version("..c", &new_ca);
    assert!(!served(addr, &old_client));
    assert!(served(addr, &new_client));

    version("..d", "garbage");
    assert!(served(addr, &new_client));
    assert!(!served(addr, &old_client));
}

/// Writes a self-signed pair for `localhost` that ends at `not_after` into `dir/version`.
fn write_ending(dir: &std::path::Path, version: &str, not_after: OffsetDateTime) {
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.not_before = not_after - Duration::days(90);
    params.not_after = not_after;
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    write_pair(dir, version, &cert.pem(), &key.serialize_pem());
}

/// The gauge of `/metrics` that says when the certificate in service expires, in Unix seconds.
fn expiry_in_metrics(server: &TestServer) -> Option<i64> {
    common::metric(server, "metahooks_certificate_expiry_timestamp_seconds")
}

/// `/metrics` says when the certificate in service expires, at start and after a reload, so that
/// an alert can fire before the API server refuses it; one that ends within 30 days, or has
/// ended, is logged at `warn` when it is put in service, and a pair that does not load is warned
/// about once, not on every handshake (the only test of this binary that reads the logs: a
/// process has one log subscriber).
#[test]
fn the_certificate_in_service_has_its_expiry_in_metrics_and_a_near_end_is_logged() {
    let capture = LogCapture::install("info");
    let dir = tempfile::tempdir().unwrap();
    let now = OffsetDateTime::now_utc().replace_nanosecond(0).unwrap();
    let soon = now + Duration::days(10);
    write_ending(dir.path(), "..soon", soon);
    let (cert, key) = mount(dir.path(), "..soon");
    let server = TestServer::start(&["--tls-cert", &cert, "--tls-key", &key]);
    assert_eq!(expiry_in_metrics(&server), Some(soon.unix_timestamp()));
    let warnings = |message: &str| {
        let text = capture.text();
        let lines = text.lines().filter(|l| l.contains(message));
        lines
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    let logged = warnings("the serving certificate expires soon");
    assert_eq!(logged.len(), 1, "{}", capture.text());
    assert_eq!(logged[0]["level"], "WARN");
    assert!(
        matches!(logged[0]["days_left"].as_i64(), Some(9 | 10)),
        "{}",
        logged[0]
    );

    let later = now + Duration::days(400);
    write_ending(dir.path(), "..later", later);
    swap_data(dir.path(), "..later");
    https_get(server.https.unwrap()); // the handshake that reloads
    assert_eq!(expiry_in_metrics(&server), Some(later.unix_timestamp()));
    assert_eq!(warnings("the serving certificate expires soon").len(), 1);

    let past = now - Duration::days(1);
    write_ending(dir.path(), "..past", past);
    swap_data(dir.path(), "..past");
    let _ = try_https_get(server.https.unwrap(), None);
    assert_eq!(expiry_in_metrics(&server), Some(past.unix_timestamp()));
    let expired = warnings("the serving certificate has expired: the API server refuses it");
    assert_eq!(expired.len(), 1, "{}", capture.text());
    assert_eq!(expired[0]["level"], "WARN");

    // A pair that does not load is warned about once, not on every handshake after it.
    write_mismatched(dir.path(), "..broken");
    swap_data(dir.path(), "..broken");
    for _ in 0..3 {
        let _ = try_https_get(server.https.unwrap(), None);
    }
    let not_reloaded = warnings("serving certificate not reloaded; keeping the previous one");
    let ours = not_reloaded.iter().filter(|l| l["file"] == cert.as_str());
    assert_eq!(ours.count(), 1, "{}", capture.text());
    assert_eq!(expiry_in_metrics(&server), Some(past.unix_timestamp()));

    // Without HTTPS there is no certificate, and no such gauge.
    assert_eq!(expiry_in_metrics(&TestServer::start(&[])), None);
}

/// The HTTPS listener offers HTTP/2 by ALPN (`h2`). The API server asks webhook Services for
/// HTTP/1.1 only (since Kubernetes 1.16, to spread calls over Pods), but a client that takes h2
/// (curl; the API server for a webhook at a loopback URL, in later releases) must get the same
/// answers: over one HTTP/2 connection an admission review gets the fixture's answer, and a
/// refused request its JSON error.
#[test]
fn admission_reviews_are_answered_over_http2() {
    let server = TestServer::start(&["--tls-self-signed"]);
    let addr = server.https.unwrap();
    let review = common::fixture("delete-graph/validate-cycle-denied.request.json");
    let golden: serde_json::Value = serde_json::from_slice(&common::fixture(
        "delete-graph/validate-cycle-denied.response.json",
    ))
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut config = common::tls::accepting_any_certificate().with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec()];
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
            .connect(name, tcp)
            .await
            .unwrap();
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (client, connection) = h2::client::handshake(tls).await.unwrap();
        tokio::spawn(connection);

        let (status, body) = h2_post(&client, "application/json", &review).await;
        assert_eq!(status, 200);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            golden
        );

        let (status, body) = h2_post(&client, "text/plain", &review).await;
        assert_eq!(status, 415);
        let error: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(
            error["error"].as_str().unwrap().contains("Content-Type"),
            "{error}"
        );
    });
}

/// A caller that closes its side of the connection in the middle of a body without TLS's
/// `close_notify` (rustls reads the end as an unexpected end of file) is gone, a 499 as over
/// plain HTTP, not a 400; it still reads the answer, which names the missing `close_notify`.
#[test]
fn a_caller_gone_mid_body_over_https_is_499() {
    use std::io::Write;
    let server = TestServer::start(&["--tls-self-signed"]);
    let hook = "/cert-rotation/sync";
    let body = common::fixture("cert-rotation/sync-step0-issues-leaves.request.json");
    let config = common::tls::accepting_any_certificate().with_no_client_auth();
    let mut stream = common::tls::tls_connect(server.https.unwrap(), config, "localhost").unwrap();
    stream
        .write_all(common::post_head(hook, "application/json", body.len()).as_bytes())
        .unwrap();
    stream.write_all(&body[..100]).unwrap();
    stream.flush().unwrap();
    stream.sock.shutdown(std::net::Shutdown::Write).unwrap();
    let reply = common::read_reply(&mut stream);
    assert_eq!(reply.status, 499);
    let error = reply.json()["error"].as_str().unwrap().to_owned();
    assert!(error.contains("close_notify"), "{error}");
    assert_eq!(common::requests_counted(&server, hook, 499, 1), 1);
}

/// POSTs `body` to /delete-graph/validate on an HTTP/2 connection: the status and the body.
async fn h2_post(
    client: &h2::client::SendRequest<bytes::Bytes>,
    content_type: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let request = http::Request::post("https://localhost/delete-graph/validate")
        .header("content-type", content_type)
        .body(())
        .unwrap();
    let (response, _) = common::h2_send(client, request, body, true).await;
    let response = response.await.unwrap();
    let status = response.status().as_u16();
    let mut received = response.into_body();
    let mut answer = Vec::new();
    while let Some(chunk) = received.data().await {
        let chunk = chunk.unwrap();
        received
            .flow_control()
            .release_capacity(chunk.len())
            .unwrap();
        answer.extend_from_slice(&chunk);
    }
    (status, answer)
}
