//! The binary's command line (API.md "The program"): `list` prints the hook table, `run` reads
//! a request from stdin too and refuses what it cannot run with a clear message, `certs` writes
//! a CA and a serving certificate that the API server would trust, and `serve` refuses limits
//! that would refuse every request and names a file it cannot read. (`run` over every request
//! fixture is in tests/fixtures.rs; what `serve` serves is in tests/http.rs and the tests beside
//! it.)

mod common;

use base64::Engine;
use common::tls::{https_get_trusting, openssl_handshake_trusting};
use common::TestServer;
use metahooks_hooks::HOOKS;
use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs the binary with `args`, `stdin` written to its standard input.
fn metahooks(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_metahooks"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A child that refuses its arguments may exit before it reads stdin.
    if let Err(e) = child.stdin.take().unwrap().write_all(stdin) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn list_prints_one_row_per_hook() {
    let output = metahooks(&["list"], b"");
    assert!(output.status.success());
    let text = stdout(&output);
    let mut lines = text.lines();
    let header: Vec<_> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["ID", "ROUTE", "KIND"]);
    let rows: Vec<_> = lines.collect();
    assert_eq!(rows.len(), HOOKS.len());
    for (row, hook) in rows.iter().zip(HOOKS) {
        let mut columns = row.split_whitespace();
        assert_eq!(columns.next(), Some(hook.id), "{row}");
        assert_eq!(columns.next(), Some(hook.route().as_str()), "{row}");
        assert_eq!(columns.collect::<Vec<_>>().join(" "), hook.kind.as_str());
    }
}

/// `-` and no file both read the request from stdin.
#[test]
fn run_reads_the_request_from_stdin() {
    let request = common::fixture("app-discovery/mutate-adds-label.request.json");
    let expected: serde_json::Value = serde_json::from_slice(&common::fixture(
        "app-discovery/mutate-adds-label.response.json",
    ))
    .unwrap();
    for args in [
        &["run", "app-discovery/mutate", "-"][..],
        &["run", "app-discovery/mutate"][..],
    ] {
        let output = metahooks(args, &request);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let answer: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(answer, expected, "{args:?}");
    }
}

/// Each refusal exits 1 with one line on stderr naming what is wrong, and prints nothing on
/// stdout that could be taken for an answer.
#[test]
fn run_refuses_what_it_cannot_run() {
    let cases: [(&[&str], &[u8], &str); 4] = [
        (
            &["run", "delete-graph/sync"],
            br#"{"parent": []}"#,
            "metahooks: bad request at parent: ",
        ),
        (
            &["run", "delete-graph/resync", "-"],
            b"{}",
            "metahooks: unknown hook 'delete-graph/resync'; `metahooks list` shows the hooks",
        ),
        (
            &["run", "delete-graph/sync", "--now", "yesterday"],
            b"{}",
            "metahooks: --now 'yesterday' is not an RFC 3339 timestamp",
        ),
        (
            &["run", "delete-graph/sync", "/nonexistent/request.json"],
            b"",
            "metahooks: reading /nonexistent/request.json: ",
        ),
    ];
    for (args, stdin, message) in cases {
        let output = metahooks(args, stdin);
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        assert!(output.stdout.is_empty(), "{args:?}: {}", stdout(&output));
        let text = stderr(&output);
        assert!(text.starts_with(message), "{args:?}: {text}");
        assert_eq!(text.lines().count(), 1, "{args:?}: {text}");
    }
}

/// A body limit, timeout or in-flight bound of zero would make the server refuse every hook
/// request, and a Retry-After of zero have Metacontroller retry an overloaded server at once:
/// `serve` exits at once (status 2, clap's usage error) naming the flag. Its listen
/// address is taken already, so that a server which accepted the flag would exit too (status 1)
/// instead of serving for ever.
#[test]
fn serve_refuses_limits_of_zero() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    for (flag, value) in [
        ("--hook-body-limit", "0"),
        ("--admission-body-limit", "0KiB"),
        ("--request-timeout", "0s"),
        ("--header-read-timeout", "0ms"),
        ("--idle-timeout", "0s"),
        ("--max-in-flight", "0"),
        ("--max-in-flight-admission", "0"),
        ("--max-connections", "0"),
        ("--max-in-flight-bytes", "0MiB"),
        ("--retry-after", "0"),
    ] {
        let output = metahooks(&["serve", "--listen", &listen, flag, value], b"");
        assert_eq!(output.status.code(), Some(2), "{flag} {value}");
        let text = stderr(&output);
        let first = text.lines().next().unwrap_or_default();
        assert!(
            first.starts_with(&format!("error: invalid value '{value}' for '{flag} <")),
            "{flag}: {text}"
        );
        assert!(first.contains("zero"), "{flag}: {text}");
    }
}

/// A file `serve` is given that it cannot read stops it at start with a message naming that
/// file and the flag that named it (before, a missing `--tls-cert` said only "No such file or
/// directory"). Files are read before a port is bound: the listening port here is taken, so a
/// server that got past its files fails on the port instead of serving.
#[test]
fn serve_names_each_file_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let certs = dir.path().join("certs");
    let made = metahooks(&["certs", "--out", certs.to_str().unwrap()], b"");
    assert!(made.status.success(), "{}", stderr(&made));
    let file = |name: &str| certs.join(name).to_str().unwrap().to_owned();
    let (cert, key, ca) = (file("tls.crt"), file("tls.key"), file("ca.crt"));
    let missing = dir.path().join("missing.pem").to_str().unwrap().to_owned();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = taken.local_addr().unwrap().to_string();
    let serve = ["serve", "--listen", &listen, "--tls-listen", "127.0.0.1:0"];
    for (flag, [cert, key, ca]) in [
        ("--tls-cert, --tls-key", [&missing, &key, &ca]),
        ("--tls-cert, --tls-key", [&cert, &missing, &ca]),
        ("--tls-client-ca", [&cert, &key, &missing]),
    ] {
        let files = ["--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca];
        let output = metahooks(&[&serve[..], &files].concat(), b"");
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{flag}: {text}");
        assert!(
            text.contains(&format!("{flag}: reading {missing}: ")),
            "{flag}: {text}"
        );
    }
    // A client CA file that holds no certificate (here a key) would refuse every client.
    let files = [
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-client-ca",
        &key,
    ];
    let text = stderr(&metahooks(&[&serve[..], &files].concat(), b""));
    let message = format!("--tls-client-ca: {key}: no root trust anchors were provided");
    assert!(text.contains(&message), "{text}");
    let token = ["--bearer-token-file", &missing];
    let text = stderr(&metahooks(&[&serve[..3], &token].concat(), b""));
    let message = format!("--bearer-token-file: reading {missing}: ");
    assert!(text.contains(&message), "{text}");
    // A token file of blank lines would refuse every sync: it is refused at start instead.
    let blank = dir.path().join("blank").to_str().unwrap().to_owned();
    std::fs::write(&blank, " \n\n").unwrap();
    let token = ["--bearer-token-file", &blank];
    let text = stderr(&metahooks(&[&serve[..3], &token].concat(), b""));
    let message = format!("--bearer-token-file: {blank} holds no token");
    assert!(text.contains(&message), "{text}");
}

/// The CA and serving certificate serve TLS that a client trusting only the CA accepts for the
/// Service's DNS names, as the API server calls a webhook, on rustls and on OpenSSL under its
/// strict rules; both begin an hour before the run; the key is readable by its owner only;
/// stdout is the caBundle (base64 of ca.crt) and nothing else.
#[test]
fn certs_writes_a_serving_certificate_the_ca_bundle_vouches_for() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    let args = [
        "certs",
        "--service",
        "hooks",
        "--namespace",
        "ops",
        "--days",
        "30",
    ];
    let made = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let output = metahooks(
        &[&args[..], &["--out", out.to_str().unwrap()]].concat(),
        b"",
    );
    assert!(output.status.success(), "{}", stderr(&output));

    let ca = std::fs::read_to_string(out.join("ca.crt")).unwrap();
    let bundle = base64::engine::general_purpose::STANDARD
        .decode(stdout(&output).trim_end())
        .unwrap();
    assert_eq!(bundle, ca.as_bytes());
    assert!(!stderr(&output).contains("PRIVATE KEY"));
    let mode = |name: &str| {
        std::fs::metadata(out.join(name))
            .unwrap()
            .permissions()
            .mode()
    };
    assert_eq!(mode("tls.key") & 0o777, 0o600);
    assert_eq!(mode("tls.crt") & 0o777, 0o644);

    let (cert, key) = (out.join("tls.crt"), out.join("tls.key"));
    let server = TestServer::start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let https = server.https.unwrap();
    for name in [
        "hooks",
        "hooks.ops",
        "hooks.ops.svc",
        "hooks.ops.svc.cluster.local",
    ] {
        assert_eq!(https_get_trusting(https, &ca, name), Ok(200), "{name}");
        // OpenSSL's strict rules ask more of the pair than WebPKI: the serving certificate
        // names its CA's key identifier (RFC 5280 §4.2.1.1).
        assert_eq!(
            openssl_handshake_trusting(https, &ca, name),
            Ok(()),
            "{name}"
        );
    }
    assert!(https_get_trusting(https, &ca, "hooks.other.svc").is_err());
    let other = openssl_handshake_trusting(https, &ca, "hooks.other.svc");
    assert_eq!(
        other,
        Err("certificate verify failed: X509_V_ERR_HOSTNAME_MISMATCH".into())
    );

    // Validity: from an hour before it was made, for an API server whose clock is behind, to
    // --days from then; the CA's too.
    let skew = metahooks::tls::CLOCK_SKEW_ALLOWANCE.whole_seconds();
    for file in [&cert, &out.join("ca.crt")] {
        let pem = x509_parser::pem::parse_x509_pem(std::fs::read(file).unwrap().as_slice())
            .unwrap()
            .1;
        let validity = pem.parse_x509().unwrap().validity().clone();
        let (begins, ends) = (
            validity.not_before.timestamp(),
            validity.not_after.timestamp(),
        );
        assert!((made - skew..made - skew + 5).contains(&begins), "{file:?}");
        let days_on = made + 30 * 86_400;
        assert!((days_on..days_on + 5).contains(&ends), "{file:?}");
    }
}

/// `certs` refuses, naming the flag and writing nothing, what would give a certificate no API
/// server can use: a Service or namespace name Kubernetes does not allow (the certificate names
/// `<service>.<namespace>.svc`), no days of validity, or an end past the year 9999 (that was a
/// panic).
#[test]
fn certs_refuses_names_and_validities_no_webhook_can_use() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    let out = out.to_str().unwrap();
    let service = "'--service <SERVICE>': a Service name is";
    let namespace = "'--namespace <NAMESPACE>': a namespace name is";
    for (flags, exit, says) in [
        (&["--service", "Bad_Name"][..], 2, service),
        (&["--service", ""], 2, service),
        (&["--service", "1st"], 2, service),
        (&["--namespace", "a.b"], 2, namespace),
        (&["--days", "0"], 2, "'--days <DAYS>'"),
        (
            &["--days", "3000000"],
            1,
            "--days 3000000 ends after the year 9999",
        ),
    ] {
        let mut args = vec!["certs", "--out", out];
        args.extend_from_slice(flags);
        let output = metahooks(&args, b"");
        let text = stderr(&output);
        assert_eq!(output.status.code(), Some(exit), "{flags:?}: {text}");
        assert!(text.contains(says), "{flags:?}: {text}");
        assert!(!std::path::Path::new(out).exists(), "{flags:?} wrote files");
    }
}

/// A key file left by an earlier run with wider permissions is narrowed when overwritten.
#[test]
fn certs_narrows_an_existing_key_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("tls.key");
    std::fs::write(&key, "old").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let output = metahooks(&["certs", "--out", dir.path().to_str().unwrap()], b"");
    assert!(output.status.success(), "{}", stderr(&output));
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(std::fs::read_to_string(&key)
        .unwrap()
        .starts_with("-----BEGIN PRIVATE KEY-----"));
}
