//! TLS for the admission listener: certificates from files, re-read on the first handshake after
//! they change (see [`crate::reload`]), or a self-signed certificate made at start, each checked
//! to be a pair and its expiry published; the client CA, re-read the same way; and the CA +
//! serving certificate of `metahooks certs`.

use crate::reload::Reloading;
use anyhow::{anyhow, Context, Result};
use rustls::crypto::aws_lc_rs::sign::any_supported_type;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::InconsistentKeys;
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Where the serving certificate comes from.
#[derive(Debug)]
pub enum CertSource {
    Files { cert: PathBuf, key: PathBuf },
    SelfSigned { dns_names: Vec<String> },
}

/// Hands rustls the current certificate, checking the files on every handshake (two `stat`s)
/// and reloading them when either changed. A failed reload keeps serving the previous one.
#[derive(Debug)]
pub struct ReloadingResolver(Reloading<CertifiedKey>);

/// A certificate that expires within this many days is logged at `warn` when it is loaded.
const EXPIRY_WARNING_DAYS: i64 = 30;

impl ReloadingResolver {
    /// `expiry` is where the NotAfter of the certificate in service goes (`/metrics`), in Unix
    /// seconds.
    pub fn new(source: &CertSource, expiry: Arc<AtomicI64>) -> Result<Self> {
        let certificate = match source {
            CertSource::Files { cert, key } => {
                let (cert, key) = (cert.clone(), key.clone());
                let files = vec![cert.clone(), key.clone()];
                Reloading::from_files("serving certificate", files, Duration::ZERO, move || {
                    let (certified, not_after) = load_files(&cert, &key)?;
                    in_service(&expiry, not_after);
                    Ok(certified)
                })
                .context("--tls-cert, --tls-key")?
            }
            CertSource::SelfSigned { dns_names } => {
                let (cert_pem, key_pem) = self_signed(dns_names)?;
                let (certified, not_after) =
                    certified_key(cert_pem.as_bytes(), key_pem.as_bytes())?;
                in_service(&expiry, not_after);
                Reloading::fixed(certified)
            }
        };
        Ok(ReloadingResolver(certificate))
    }
}

impl ResolvesServerCert for ReloadingResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.get())
    }
}

/// Publishes the NotAfter of a certificate put in service, and warns when it is near or past.
fn in_service(expiry: &AtomicI64, not_after: OffsetDateTime) {
    expiry.store(not_after.unix_timestamp(), Ordering::Relaxed);
    let left = not_after - OffsetDateTime::now_utc();
    if left < time::Duration::days(EXPIRY_WARNING_DAYS) {
        let not_after = not_after.format(&Rfc3339).unwrap_or_default();
        if left.is_negative() {
            let message = "the serving certificate has expired: the API server refuses it";
            tracing::warn!(%not_after, "{message}");
        } else {
            let days_left = left.whole_days();
            tracing::warn!(%not_after, days_left, "the serving certificate expires soon");
        }
    }
}

/// The certificate and key of two files, and when the certificate expires.
fn load_files(cert: &Path, key: &Path) -> Result<(CertifiedKey, OffsetDateTime)> {
    let cert_pem = std::fs::read(cert).with_context(|| format!("reading {}", cert.display()))?;
    let key_pem = std::fs::read(key).with_context(|| format!("reading {}", key.display()))?;
    certified_key(&cert_pem, &key_pem)
        .with_context(|| format!("loading {} and {}", cert.display(), key.display()))
}

/// A certificate chain and its key from PEM, checked to be a pair, and when the certificate
/// expires.
fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<(CertifiedKey, OffsetDateTime)> {
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
    let (_, end_entity) = x509_parser::parse_x509_certificate(&chain[0])
        .map_err(|e| anyhow!("the first certificate: {e}"))?;
    let not_after = end_entity.validity().not_after.to_datetime();
    // A key that is not the certificate's would fail every handshake, at start or after a
    // reload that replaced a good pair.
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(InconsistentKeys::Unknown)) => {
            Ok((certified, not_after))
        }
        Err(rustls::Error::InconsistentKeys(_)) => Err(anyhow!(
            "the private key is not the certificate's: their public keys differ"
        )),
        Err(e) => Err(anyhow!("the first certificate: {e}")),
    }
}

/// rustls configuration of the HTTPS listener, with the aws-lc-rs provider (for its post-quantum
/// key exchange, X25519MLKEM768, which Go's clients offer first) and ALPN h2 + http/1.1;
/// with `client_ca`, clients must present a certificate signed by one of its CAs, and the
/// configuration is made again on the first handshake after that file changes.
pub fn server_configs(
    resolver: Arc<ReloadingResolver>,
    client_ca: Option<&Path>,
) -> Result<Reloading<ServerConfig>> {
    match client_ca {
        None => Ok(Reloading::fixed(server_config(resolver, None)?)),
        Some(path) => {
            let path = path.to_owned();
            Reloading::from_files("client CA", vec![path.clone()], Duration::ZERO, move || {
                server_config(resolver.clone(), Some(&path))
            })
            .context("--tls-client-ca")
        }
    }
}

fn server_config(
    resolver: Arc<ReloadingResolver>,
    client_ca: Option<&Path>,
) -> Result<ServerConfig> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
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
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
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

/// How long before it is made a certificate of `metahooks certs` begins: an API server whose
/// clock is behind the machine that made it would refuse it until then.
pub const CLOCK_SKEW_ALLOWANCE: time::Duration = time::Duration::HOUR;

/// A CA and a serving certificate signed by it, valid for the Service's DNS names from an hour
/// ago ([`CLOCK_SKEW_ALLOWANCE`]) until `days` from now.
pub fn webhook_certs(service: &str, namespace: &str, days: u32) -> Result<WebhookCerts> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let now = OffsetDateTime::now_utc();
    let not_before = now - CLOCK_SKEW_ALLOWANCE;
    let not_after = now
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
    // RFC 5280 asks it of every certificate a CA issues, and OpenSSL's strict rules (Python's
    // default since 3.13) refuse a chain without it; Go and rustls do not look.
    params.use_authority_key_identifier_extension = true;
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
