//! What a TLS handshake costs the HTTPS listener, by key exchange group (docs/BENCHMARKS.md,
//! "aws-lc-rs against ring"): the server's own rustls configuration (`metahooks::tls`, with a
//! self-signed certificate as `--tls-self-signed` makes) handshakes in memory with a client that
//! offers one group, as Go 1.24 offers X25519MLKEM768 (with an X25519 share beside it), as older
//! clients offer X25519, and P-256 alone. The server's side alone is timed: the CPU a new
//! connection costs it, with no socket. Run pinned for steady figures:
//! `taskset -c 0 cargo run --release --example handshake [HANDSHAKES] [ROUNDS]`.

use metahooks::tls::{server_configs, CertSource, ReloadingResolver};
use rustls::crypto::aws_lc_rs::{default_provider, kx_group};
use rustls::crypto::SupportedKxGroup;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, NamedGroup, RootCertStore, ServerConnection};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u32>().expect("a number"));
    let handshakes = args.next().unwrap_or(3000);
    let rounds = args.next().unwrap_or(3);

    let (cert_pem, key_pem) = metahooks::tls::self_signed(&["localhost".to_owned()]).unwrap();
    let dir = std::env::temp_dir().join(format!("metahooks-handshake-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &cert_pem).unwrap();
    std::fs::write(&key, &key_pem).unwrap();
    let source = CertSource::Files { cert, key };
    let resolver = ReloadingResolver::new(&source, Arc::new(AtomicI64::new(0))).unwrap();
    let server = server_configs(Arc::new(resolver), None).unwrap().get();
    std::fs::remove_dir_all(&dir).unwrap();

    let mut roots = RootCertStore::empty();
    for der in CertificateDer::pem_slice_iter(cert_pem.as_bytes()) {
        roots.add(der.unwrap()).unwrap();
    }
    let offers: [(&str, &[&'static dyn SupportedKxGroup]); 3] = [
        (
            "X25519MLKEM768",
            &[kx_group::X25519MLKEM768, kx_group::X25519],
        ),
        ("X25519", &[kx_group::X25519]),
        ("P-256", &[kx_group::SECP256R1]),
    ];
    println!("| round | group | server µs a handshake | bytes both ways |");
    println!("| ---: | --- | ---: | ---: |");
    for round in 1..=rounds {
        for (name, groups) in offers {
            let mut provider = default_provider();
            provider.kx_groups = groups.to_vec();
            let client = Arc::new(
                ClientConfig::builder_with_provider(Arc::new(provider))
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_root_certificates(roots.clone())
                    .with_no_client_auth(),
            );
            let (mut spent, mut bytes) = (Duration::ZERO, 0);
            for _ in 0..handshakes {
                let (time, sent) = handshake(&client, &server, groups[0].name());
                spent += time;
                bytes += sent;
            }
            let each = spent.as_secs_f64() * 1e6 / f64::from(handshakes);
            println!(
                "| {round} | {name} | {each:.1} | {} |",
                bytes / handshakes as usize
            );
        }
    }
}

/// One handshake in memory, which must agree on `group`: the time the server spent in it and the
/// bytes both sides sent.
fn handshake(
    client: &Arc<ClientConfig>,
    server: &Arc<rustls::ServerConfig>,
    group: NamedGroup,
) -> (Duration, usize) {
    let name = ServerName::try_from("localhost").unwrap();
    let mut client = ClientConnection::new(client.clone(), name).unwrap();
    let started = Instant::now();
    let mut server = ServerConnection::new(server.clone()).unwrap();
    let mut spent = started.elapsed();
    let (mut bytes, mut flight) = (0, Vec::new());
    while client.is_handshaking() || server.is_handshaking() {
        flight.clear();
        while client.wants_write() {
            client.write_tls(&mut flight).unwrap();
        }
        assert!(!flight.is_empty(), "the client has nothing to send");
        bytes += flight.len();
        let started = Instant::now();
        server.read_tls(&mut &flight[..]).unwrap();
        server.process_new_packets().unwrap();
        flight.clear();
        while server.wants_write() {
            server.write_tls(&mut flight).unwrap();
        }
        spent += started.elapsed();
        bytes += flight.len();
        client.read_tls(&mut &flight[..]).unwrap();
        client.process_new_packets().unwrap();
    }
    let chosen = server.negotiated_key_exchange_group().unwrap().name();
    assert_eq!(
        chosen, group,
        "the server chose another group than the client's first"
    );
    (spent, bytes)
}
