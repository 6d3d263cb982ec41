//! TLS for the admission listener: certificates from files, re-read on the first handshake after
//! they change (including the kubelet's `..data` symlink swap of a mounted Secret), or a
//! self-signed certificate made at start; and the CA + serving certificate of `metahooks certs`.

use anyhow::{anyhow, Context, Result};
use rustls::crypto::ring::sign::any_supported_type;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::InconsistentKeys;
use rustls::ServerConfig;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where the serving certificate comes from.
#[derive(Debug)]
pub enum CertSource {
    Files { cert: PathBuf, key: PathBuf },
    SelfSigned { dns_names: Vec<String> },
}

/// Identity of a file's current content as far as `stat` (following symlinks) can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_nsec: i64,
}

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    let m = std::fs::metadata(path)?;
    Ok(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec(),
    })
}

/// Hands rustls the current certificate, checking the files on every handshake (two `stat`s)
/// and reloading them when either changed. A failed reload keeps serving the previous one.
#[derive(Debug)]
pub struct ReloadingResolver {
    files: Option<(PathBuf, PathBuf)>,
    current: Mutex<Loaded>,
}

/// The certificate in use and the stamps of the files it was read from (none when self-signed).
type Loaded = (Option<(Stamp, Stamp)>, Arc<CertifiedKey>);

impl ReloadingResolver {
    pub fn new(source: &CertSource) -> Result<Self> {
        match source {
            CertSource::Files { cert, key } => {
                let stat = |path: &Path| {
                    stamp(path).with_context(|| format!("reading {}", path.display()))
                };
                let stamps = (stat(cert)?, stat(key)?);
                let certified = load_files(cert, key)?;
                Ok(ReloadingResolver {
                    files: Some((cert.clone(), key.clone())),
                    current: Mutex::new((Some(stamps), Arc::new(certified))),
                })
            }
            CertSource::SelfSigned { dns_names } => {
                let (cert_pem, key_pem) = self_signed(dns_names)?;
                let certified = certified_key(cert_pem.as_bytes(), key_pem.as_bytes())?;
                Ok(ReloadingResolver {
                    files: None,
                    current: Mutex::new((None, Arc::new(certified))),
                })
            }
        }
    }

    fn current(&self) -> Arc<CertifiedKey> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((cert, key)) = &self.files {
            if let (Ok(c), Ok(k)) = (stamp(cert), stamp(key)) {
                if current.0 != Some((c, k)) {
                    match load_files(cert, key) {
                        Ok(certified) => {
                            tracing::info!(cert = %cert.display(), "serving certificate reloaded");
                            *current = (Some((c, k)), Arc::new(certified));
                        }
                        Err(e) => {
                            tracing::warn!(cert = %cert.display(), error = %e, "serving certificate not reloaded; keeping the previous one")
                        }
                    }
                }
            }
        }
        current.1.clone()
    }
}

impl ResolvesServerCert for ReloadingResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

fn load_files(cert: &Path, key: &Path) -> Result<CertifiedKey> {
    let cert_pem = std::fs::read(cert).with_context(|| format!("reading {}", cert.display()))?;
    let key_pem = std::fs::read(key).with_context(|| format!("reading {}", key.display()))?;
    certified_key(&cert_pem, &key_pem)
        .with_context(|| format!("loading {} and {}", cert.display(), key.display()))
}

fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("certificate PEM: {e}"))?;
    if chain.is_empty() {
        return Err(anyhow!("no CERTIFICATE block in the certificate file"));
    }
    // The error names the problem, never the key material.
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|_| anyhow!("no usable PRIVATE KEY block in the key file"))?;
    let signing_key =
        any_supported_type(&key).map_err(|_| anyhow!("unsupported private key type"))?;
    // A key that is not the certificate's would fail every handshake, at start or after a
    // reload that replaced a good pair.
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => Ok(certified),
        Err(rustls::Error::InconsistentKeys(_)) => Err(anyhow!(
            "the private key is not the certificate's: their public keys differ"
        )),
        Err(e) => Err(anyhow!("the first certificate: {e}")),
    }
}

/// rustls configuration of the HTTPS listener, with the ring provider and ALPN h2 + http/1.1;
/// with `client_ca`, clients must present a certificate signed by one of its CAs.
pub fn server_config(
    resolver: Arc<ReloadingResolver>,
    client_ca: Option<&Path>,
) -> Result<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow!("TLS protocol versions: {e}"))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let pem = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| anyhow!("{}: {e}", path.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| anyhow!("{}: {e}", path.display()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| anyhow!("client CA {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// A self-signed serving certificate (PEM certificate, PEM PKCS#8 key) for these names.
pub fn self_signed(dns_names: &[String]) -> Result<(String, String)> {
    let certified = rcgen::generate_simple_self_signed(dns_names.to_vec())
        .context("making a self-signed certificate")?;
    Ok((certified.cert.pem(), certified.signing_key.serialize_pem()))
}

/// The files `metahooks certs` writes for a webhook Service.
pub struct WebhookCerts {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A CA and a serving certificate signed by it, valid for the Service's DNS names.
pub fn webhook_certs(service: &str, namespace: &str, days: u32) -> Result<WebhookCerts> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let not_before = time::OffsetDateTime::now_utc();
    let not_after = not_before
        .checked_add(time::Duration::days(i64::from(days)))
        .ok_or_else(|| {
            anyhow!("--days {days} ends after the year 9999, the last an X.509 time holds")
        })?;

    let ca_key = KeyPair::generate().context("CA key")?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).context("CA parameters")?;
    ca.distinguished_name.push(
        DnType::CommonName,
        format!("metahooks webhook CA ({namespace}/{service})"),
    );
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.not_before = not_before;
    ca.not_after = not_after;
    let ca_cert = ca.self_signed(&ca_key).context("signing the CA")?;

    let names = vec![
        service.to_owned(),
        format!("{service}.{namespace}"),
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ];
    let key = KeyPair::generate().context("serving key")?;
    let mut params = CertificateParams::new(names).context("serving certificate names")?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{service}.{namespace}.svc"));
    params.not_before = not_before;
    params.not_after = not_after;
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let issuer = rcgen::Issuer::from_params(&ca, &ca_key);
    let cert = params
        .signed_by(&key, &issuer)
        .context("signing the serving certificate")?;
    Ok(WebhookCerts {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}
