//! All certificate work of cert-rotation, behind one small module: generate a CA, check a CA
//! Secret, issue a leaf, inspect a leaf. rcgen builds, rcgen's ring keys sign, x509-parser reads
//! and verifies.
//! Randomness for keys and serials comes from the caller (ring's random source); errors name what
//! is wrong, never any key material.

use crate::memo::{made_from, Kept, Recent};
use foldhash::HashMap;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose, PublicKeyData, SanType, SerialNumber,
    SigningKey,
};
use ring::hmac;
use ring::rand::SecureRandom;
use ring::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};
use subtle::ConstantTimeEq;
use time::{Duration, OffsetDateTime};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::{GeneralName, ParsedExtension};
use x509_parser::pem::Pem;
use x509_parser::prelude::FromDer;
use x509_parser::x509::SubjectPublicKeyInfo;
use zeroize::Zeroizing;

/// Why a CA (or a leaf) cannot be used. Displayed texts name keys, never contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PkiError {
    #[error("{0} is missing")]
    Missing(&'static str),
    #[error("{0} holds no parsable CERTIFICATE")]
    BadCertificate(&'static str),
    #[error("{0} holds a private key, which the trust bundle would publish")]
    KeyInCertificate(&'static str),
    #[error("{0} is not a CA certificate")]
    NotCa(&'static str),
    #[error("{0} has expired")]
    Expired(&'static str),
    #[error("{0} is not a usable PKCS#8 private key")]
    BadKey(&'static str),
    #[error("{0} does not match the certificate")]
    KeyMismatch(&'static str),
    #[error("the certificate would end after the year 9999")]
    EndOutOfRange,
    #[error("signing failed")]
    Signing,
    #[error("the random source failed")]
    Random,
}

/// A PEM certificate and its PKCS#8 PEM private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PemPair {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A usable CA: certificate checked, key parsed and matched.
pub struct Ca {
    /// The certificate's DER.
    der: Vec<u8>,
    /// The `ca.crt` text as given, for the trust bundle.
    pem: String,
    /// The DER of the certificate's subject name.
    subject: Vec<u8>,
    /// The DER of the certificate's SubjectPublicKeyInfo, to verify leaf signatures with.
    public_key_info: Vec<u8>,
    /// What seals the leaves this CA issues ([`Seal`]): an HMAC-SHA256 key derived from the
    /// private key.
    seal_key: hmac::Key,
    /// SHA-256 of the certificate's DER and of the seal key: the CA a leaf memo entry holds for.
    leaf_memo_id: [u8; 32],
    /// The PKCS#8 DER of `private.key`, checked against the certificate.
    key_pkcs8: Zeroizing<Vec<u8>>,
    /// What signs leaves, made when the first one is issued (most syncs issue none), or why no
    /// leaf can be issued under this CA.
    signer: OnceLock<Result<Signer, PkiError>>,
    pub not_after: OffsetDateTime,
}

/// What a CA signs leaves with. rcgen writes a leaf's fields with an empty issuer name and no
/// signature ([`Draft`]); [`Signer::sign`] puts in the CA certificate's subject, its very bytes,
/// and signs. rcgen would write the issuer name from its own reading of the subject, which keeps
/// one value of each attribute type (`DC=example` of `DC=example,DC=com`) and refuses an RDN of
/// several attributes: a leaf whose issuer name is not its CA's subject chains to no CA (nor is
/// it kept, §3.3).
struct Signer {
    /// rcgen's issuer for the draft: the CA's key identifier, and its key's algorithm.
    draft: Issuer<'static, Draft>,
    /// The CA's private key.
    key: KeyPair,
    /// Whether the certificate has a subject key identifier, which leaves then name as their
    /// authority key identifier.
    names_key_identifier: bool,
}

/// The CA's key as rcgen sees it while it writes a draft: the algorithm it signs with, no public
/// key (rcgen reads one only to work out a key identifier, and the CA's is given, or none is
/// written) and an empty signature, which [`Signer::sign`] replaces.
struct Draft {
    algorithm: &'static rcgen::SignatureAlgorithm,
}

impl PublicKeyData for Draft {
    fn der_bytes(&self) -> &[u8] {
        &[]
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        self.algorithm
    }
}

impl SigningKey for Draft {
    fn sign(&self, _: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        Ok(Vec::new())
    }
}

impl Signer {
    /// The certificate `draft` (rcgen's DER) with `issuer` (a Name's DER) as its issuer name,
    /// signed with the CA's key.
    fn sign(&self, draft: &[u8], issuer: &[u8]) -> Option<Vec<u8>> {
        let (_, certificate, _) = der_element(draft)?;
        let (tbs, rest) = der_whole_element(certificate)?;
        let (algorithm, _) = der_whole_element(rest)?;
        let (_, fields, _) = der_element(tbs)?;
        let (version, rest) = der_whole_element(fields)?;
        let (serial, rest) = der_whole_element(rest)?;
        let (signature_algorithm, rest) = der_whole_element(rest)?;
        let (_, after_issuer) = der_whole_element(rest)?;
        let tbs = der_of(
            SEQUENCE,
            &[version, serial, signature_algorithm, issuer, after_issuer].concat(),
        );
        let signature = self.key.sign(&tbs).ok()?;
        let bits = der_of(BIT_STRING, &[&[0][..], &signature].concat());
        Some(der_of(SEQUENCE, &[&tbs[..], algorithm, &bits].concat()))
    }
}

/// What the certificate work remembers between requests, shared by every request of a server:
/// it saves time and never changes an answer.
#[derive(Debug, Default)]
pub struct PkiMemo {
    pub leaves: CheckedLeaves,
    pub cas: CheckedCas,
}

/// Leaves already found to be what a CA issues for a certificate request, remembered between syncs:
/// Metacontroller resyncs every parent again and again with the same leaves, and reading a leaf
/// (base64, PEM, X.509, an HMAC or an ECDSA verification) costs far more than hashing its
/// Secret values. An entry is SHA-256 over the CA's certificate and seal key, the digest of the
/// Secret's `tls.crt` and `tls.key` values as sent ([`LeafDigest`]) and the names asked for, so a
/// leaf, CA or request that differs in any byte is checked afresh; its value is the leaf's
/// validity, so that renewal is decided against each request's time, and its seal. Only leaves
/// that passed are stored. Bounded: two generations of at most [`Self::GENERATION`] entries each
/// (a hit in the older one is carried into the newer one), so at most about 7 MiB. The memo
/// changes how fast a check is, never its result.
#[derive(Debug, Default)]
pub struct CheckedLeaves {
    generations: Mutex<[HashMap<[u8; 32], CheckedLeaf>; 2]>,
}

impl CheckedLeaves {
    pub const GENERATION: usize = 28_000;

    /// The leaf stored under `digest`, carrying an old hit into the current generation.
    fn recall(&self, digest: &[u8; 32]) -> Option<CheckedLeaf> {
        let mut guard = self.lock();
        let [current, previous] = &mut *guard;
        if let Some(v) = current.get(digest) {
            return Some(*v);
        }
        let v = previous.remove(digest)?;
        Self::insert(current, previous, *digest, v);
        Some(v)
    }

    fn store(&self, digest: [u8; 32], leaf: CheckedLeaf) {
        let mut guard = self.lock();
        let [current, previous] = &mut *guard;
        Self::insert(current, previous, digest, leaf);
    }

    fn insert(
        current: &mut HashMap<[u8; 32], CheckedLeaf>,
        previous: &mut HashMap<[u8; 32], CheckedLeaf>,
        digest: [u8; 32],
        leaf: CheckedLeaf,
    ) {
        if current.len() >= Self::GENERATION {
            *previous = std::mem::take(current);
        }
        current.insert(digest, leaf);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, [HashMap<[u8; 32], CheckedLeaf>; 2]> {
        self.generations.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many leaves are remembered (both generations).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        let guard = self.lock();
        guard[0].len() + guard[1].len()
    }
}

/// CA Secrets already checked, remembered between syncs: every sync of every CertificateManager
/// checks the CA Secrets of its signing and validating MRCs, and the full check (two PEM and
/// X.509 parses and a P-256 scalar multiplication to match the key) costs more than the rest of
/// a small sync. An entry keeps the Secret's `ca.crt` and `private.key` values as sent; it is
/// found by their fingerprint and compared with them byte for byte, so a Secret that differs in
/// any byte is checked afresh. (SHA-256 over the values, the key before, took an eighth of a
/// 25 KB resync's time.) Only CAs that passed are stored, and expiry is checked against the
/// request's time on every use. Bounded: the [`Self::CAPACITY`] most recently used.
#[derive(Debug)]
pub struct CheckedCas {
    recent: Recent<Kept<Ca>>,
}

impl Default for CheckedCas {
    fn default() -> Self {
        CheckedCas {
            // CA Secrets are small: bounded by count alone.
            recent: Recent::new(Self::CAPACITY, usize::MAX),
        }
    }
}

impl CheckedCas {
    pub const CAPACITY: usize = 64;

    /// The CA of a Tresor CA Secret, from its `ca.crt` and `private.key` values (base64 of
    /// PEM, as in the Secret's `data`): [`Ca::from_secret`] the first time, then remembered.
    pub fn get(
        &self,
        ca_crt: Option<&str>,
        private_key: Option<&str>,
        now: OffsetDateTime,
    ) -> Result<Arc<Ca>, PkiError> {
        // counted by number, not size
        let ca = self
            .recent
            .recall_or_make(Self::sent(ca_crt, private_key), 0, || {
                let crt = ca_crt.and_then(from_base64);
                let key = private_key.and_then(from_base64);
                Ca::from_secret(crt.as_deref(), key.as_deref(), now)
            })?;
        // A CA remembered may have expired since; one just made was checked at `now`.
        check_expiry(ca.not_after, now)?;
        Ok(ca)
    }

    /// Both values as sent, as the bytes a remembered CA is made from.
    fn sent(ca_crt: Option<&str>, private_key: Option<&str>) -> Vec<u8> {
        made_from(&[ca_crt.map(str::as_bytes), private_key.map(str::as_bytes)])
    }

    /// How many CAs are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.recent.len()
    }
}

/// A Secret value's bytes: standard base64 with padding, as Kubernetes writes `data`; `None`
/// when it is not base64.
pub fn from_base64(value: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(value).ok()
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("Ca")
            .field("not_after", &self.not_after)
            .finish()
    }
}

/// The facts about an issued leaf that decide whether it can be kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafFacts {
    pub common_name: String,
    pub dns_names: BTreeSet<String>,
    pub uris: Vec<String>,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    /// Issuer name equals the CA's subject, and the leaf's seal is the CA's or else the
    /// signature verifies with the CA's key.
    pub signed_by_ca: bool,
    /// The CA's seal of this leaf.
    pub seal: Seal,
}

/// The label the key that seals a CA's leaves is derived under (HMAC-SHA256 keyed with the CA's
/// PKCS#8 private key).
const SEAL_KEY_LABEL: &[u8] = b"metahooks.dev/leaf-seal v1";

/// A leaf's seal: HMAC-SHA256 over the DER of its certificate and of its private key, under a key
/// derived from the private key of the CA that issued it. Only a holder of that CA key can make
/// one, and metahooks writes one only for a leaf it has just signed with that key or whose
/// signature by it it has verified, so a leaf whose seal matches is one that CA signed: its
/// signature is not verified again, which spares a first sync one ECDSA verification per leaf.
/// Kept as it is written to the leaf Secret's seal annotation: the 32 octets in standard base64,
/// 44 characters. It tells nothing of either key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Seal([u8; 44]);

impl Seal {
    /// The seal of a MAC, or `None` if it is not the 32 octets of one.
    fn of(mac: &[u8]) -> Option<Seal> {
        use base64::Engine;
        let mut text = [0u8; 44];
        let written = base64::engine::general_purpose::STANDARD.encode_slice(mac, &mut text);
        (written == Ok(text.len()) && mac.len() == 32).then_some(Seal(text))
    }

    /// The seal as written to the annotation.
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.0).unwrap_or_default()
    }

    /// Whether `text` is this seal as [`Self::text`] writes it, compared in constant time.
    pub fn is_written_as(&self, text: &str) -> bool {
        text.as_bytes().ct_eq(&self.0).into()
    }
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Seal").field(&self.text()).finish()
    }
}

/// A leaf found to be what its CA issues for a certificate request: when it is valid, and its
/// seal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedLeaf {
    pub validity: Validity,
    pub seal: Seal,
}

/// A leaf just issued: its certificate and key (PEM) and its seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedLeaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub seal: Seal,
}

/// The SHA-256 of a leaf Secret's `tls.crt` and `tls.key` values, which the leaf memo's entries
/// are made from, once worked out: kept with the Secret as a request decodes it, so that a resync
/// of a kept request does not hash the values again. Equal to any other (it follows from the
/// values, which objects compare by).
#[derive(Debug, Clone, Default)]
pub struct LeafDigest(OnceLock<[u8; 32]>);

impl PartialEq for LeafDigest {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// When a leaf is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
}

/// What to put in a leaf.
#[derive(Debug, Clone)]
pub struct LeafRequest<'a> {
    pub common_name: &'a str,
    pub dns_names: &'a [String],
    pub uri: Option<String>,
    pub validity: Duration,
}

impl LeafRequest<'_> {
    /// The DNS names a leaf carries: those asked for, or else the common name.
    fn dns_names_or_common_name(&self) -> BTreeSet<&str> {
        if self.dns_names.is_empty() {
            BTreeSet::from([self.common_name])
        } else {
            self.dns_names.iter().map(String::as_str).collect()
        }
    }
}

fn pem_blocks(bytes: &[u8]) -> impl Iterator<Item = Pem> + '_ {
    Pem::iter_from_buffer(bytes).map_while(Result::ok)
}

/// The first `CERTIFICATE` block of a PEM text.
fn first_certificate(bytes: &[u8]) -> Option<Vec<u8>> {
    pem_blocks(bytes)
        .find(|p| p.label == "CERTIFICATE")
        .map(|p| p.contents)
}

fn parse(der: &[u8]) -> Option<X509Certificate<'_>> {
    x509_parser::parse_x509_certificate(der)
        .ok()
        .map(|(_, c)| c)
}

fn time_of(t: x509_parser::time::ASN1Time) -> OffsetDateTime {
    t.to_datetime()
}

fn check_expiry(not_after: OffsetDateTime, now: OffsetDateTime) -> Result<(), PkiError> {
    if now > not_after {
        return Err(PkiError::Expired("ca.crt"));
    }
    Ok(())
}

/// A private key from PEM: a `PRIVATE KEY` (PKCS#8) block with an ECDSA P-256/P-384 or RSA key.
fn private_key(bytes: &[u8], name: &'static str) -> Result<KeyPair, PkiError> {
    let block = pem_blocks(bytes)
        .find(|p| p.label == "PRIVATE KEY")
        .ok_or(PkiError::BadKey(name))?;
    KeyPair::try_from(block.contents.as_slice()).map_err(|_| PkiError::BadKey(name))
}

/// How the BEGIN and END lines of a private key's PEM end, whatever the key's type (`PRIVATE
/// KEY`, `EC PRIVATE KEY`, `RSA PRIVATE KEY`, `ENCRYPTED PRIVATE KEY`, ...).
const PRIVATE_KEY_PEM_LINE_END: &[u8] = b"PRIVATE KEY-----";

impl Ca {
    /// Checks a Tresor CA Secret's `ca.crt` and `private.key` (both PEM, already base64-decoded).
    pub fn from_secret(
        ca_crt: Option<&[u8]>,
        private_key_pem: Option<&[u8]>,
        now: OffsetDateTime,
    ) -> Result<Ca, PkiError> {
        let ca_crt = ca_crt.ok_or(PkiError::Missing("ca.crt"))?;
        let key_pem = private_key_pem.ok_or(PkiError::Missing("private.key"))?;
        // The trust bundle and every leaf's `ca.crt` carry this text as it is (§2), and hold
        // certificates only (§8): a key in it, of any PEM label, is never published.
        if ca_crt
            .windows(PRIVATE_KEY_PEM_LINE_END.len())
            .any(|w| w == PRIVATE_KEY_PEM_LINE_END)
        {
            return Err(PkiError::KeyInCertificate("ca.crt"));
        }
        let der = first_certificate(ca_crt).ok_or(PkiError::BadCertificate("ca.crt"))?;
        let cert = parse(&der).ok_or(PkiError::BadCertificate("ca.crt"))?;
        if !cert.is_ca() {
            return Err(PkiError::NotCa("ca.crt"));
        }
        let not_after = time_of(cert.validity().not_after);
        check_expiry(not_after, now)?;
        let key = private_key(key_pem, "private.key")?;
        if key.public_key_raw() != cert.public_key().subject_public_key.data.as_ref() {
            return Err(PkiError::KeyMismatch("private.key"));
        }
        let seal_key = hmac::sign(
            &hmac::Key::new(hmac::HMAC_SHA256, key.serialized_der()),
            SEAL_KEY_LABEL,
        );
        Ok(Ca {
            leaf_memo_id: Sha256::new()
                .chain_update(&der)
                .chain_update(seal_key.as_ref())
                .finalize()
                .into(),
            seal_key: hmac::Key::new(hmac::HMAC_SHA256, seal_key.as_ref()),
            pem: String::from_utf8_lossy(ca_crt).into_owned(),
            subject: cert.subject().as_raw().to_vec(),
            public_key_info: cert.public_key().raw.to_vec(),
            der,
            key_pkcs8: Zeroizing::new(key.serialized_der().to_vec()),
            signer: OnceLock::new(),
            not_after,
        })
    }

    /// What signs this CA's leaves: made once, from the certificate and the key already checked.
    fn signer(&self) -> Result<&Signer, PkiError> {
        let made = self.signer.get_or_init(|| {
            let cert = parse(&self.der).ok_or(PkiError::Signing)?;
            let key_identifier =
                cert.extensions()
                    .iter()
                    .find_map(|e| match e.parsed_extension() {
                        ParsedExtension::SubjectKeyIdentifier(id) => Some(id.0.to_vec()),
                        _ => None,
                    });
            let key =
                KeyPair::try_from(self.key_pkcs8.as_slice()).map_err(|_| PkiError::Signing)?;
            let mut params = CertificateParams::default();
            params.distinguished_name = DistinguishedName::new();
            let names_key_identifier = key_identifier.is_some();
            if let Some(id) = key_identifier {
                params.key_identifier_method = KeyIdMethod::PreSpecified(id);
            }
            let draft = Draft {
                algorithm: key.algorithm(),
            };
            Ok(Signer {
                draft: Issuer::new(params, draft),
                key,
                names_key_identifier,
            })
        });
        made.as_ref().map_err(Clone::clone)
    }

    /// The `ca.crt` text the CA was read from.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// Issues a leaf signed by this CA (cert-rotation.md §3.4).
    pub fn issue(
        &self,
        leaf: &LeafRequest,
        now: OffsetDateTime,
        rng: &dyn SecureRandom,
    ) -> Result<IssuedLeaf, PkiError> {
        let key = new_p256_key(rng)?;
        let not_after = now
            .checked_add(leaf.validity)
            .ok_or(PkiError::EndOutOfRange)?;
        let mut params = new_params(leaf.common_name, now, not_after, rng)?;
        for name in leaf.dns_names_or_common_name() {
            let san = name.to_owned().try_into().map_err(|_| PkiError::Signing)?;
            params.subject_alt_names.push(SanType::DnsName(san));
        }
        if let Some(uri) = &leaf.uri {
            let uri = uri.clone().try_into().map_err(|_| PkiError::Signing)?;
            params.subject_alt_names.push(SanType::URI(uri));
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.is_ca = IsCa::ExplicitNoCa;
        let signer = self.signer()?;
        params.use_authority_key_identifier_extension = signer.names_key_identifier;
        let draft = params
            .signed_by(&key, &signer.draft)
            .map_err(|_| PkiError::Signing)?;
        let der = signer
            .sign(draft.der(), &self.subject)
            .ok_or(PkiError::Signing)?;
        Ok(IssuedLeaf {
            cert_pem: pem_text("CERTIFICATE", &der),
            key_pem: key.pem(),
            seal: self
                .seal(&der, key.pkcs8.as_ref())
                .ok_or(PkiError::Signing)?,
        })
    }

    /// This CA's seal of a leaf with the certificate `cert_der` and the private key `key_der`.
    fn seal(&self, cert_der: &[u8], key_der: &[u8]) -> Option<Seal> {
        let mut mac = hmac::Context::with_key(&self.seal_key);
        for der in [cert_der, key_der] {
            mac.update(&(der.len() as u64).to_be_bytes());
            mac.update(der);
        }
        Seal::of(mac.sign().as_ref())
    }

    /// The validity and seal of the leaf in a Secret's `tls.crt` and `tls.key` values (base64
    /// of PEM), when it is what this CA issues for `want`: its key matches it, its issuer is
    /// this CA with a signature by this CA's key (taken as made when `seal`, the Secret's seal
    /// annotation, is this CA's seal of the leaf), and it names the common name, the DNS names
    /// (the common name when none are asked for) and the URI asked for. `None` otherwise.
    /// Leaves that passed before are found in `memo` without being read; `digest` holds the
    /// values' SHA-256 once worked out, for the next time the same values are checked.
    pub fn issued_leaf(
        &self,
        tls_crt: &str,
        tls_key: &str,
        seal: Option<&str>,
        digest: &LeafDigest,
        want: &LeafRequest,
        memo: &CheckedLeaves,
    ) -> Option<CheckedLeaf> {
        let dns_names = want.dns_names_or_common_name();
        let values = digest.0.get_or_init(|| {
            let mut hasher = Sha256::new();
            for value in [tls_crt, tls_key] {
                hasher.update((value.len() as u64).to_be_bytes());
                hasher.update(value);
            }
            hasher.finalize().into()
        });
        let mut hasher = Sha256::new()
            .chain_update(self.leaf_memo_id)
            .chain_update(values);
        let uri = want.uri.as_deref();
        let fields = [want.common_name, uri.unwrap_or("")];
        for field in fields.into_iter().chain(dns_names.iter().copied()) {
            hasher.update((field.len() as u64).to_be_bytes());
            hasher.update(field);
        }
        hasher.update([u8::from(uri.is_some())]);
        let digest: [u8; 32] = hasher.finalize().into();
        if let Some(leaf) = memo.recall(&digest) {
            return Some(leaf);
        }
        let facts = self.inspect_leaf(&from_base64(tls_crt)?, &from_base64(tls_key)?, seal)?;
        let good = facts.signed_by_ca
            && facts.common_name == want.common_name
            && facts.dns_names.iter().map(String::as_str).eq(dns_names)
            && facts.uris.iter().map(String::as_str).eq(uri);
        if !good {
            return None;
        }
        let leaf = CheckedLeaf {
            validity: Validity {
                not_before: facts.not_before,
                not_after: facts.not_after,
            },
            seal: facts.seal,
        };
        memo.store(digest, leaf);
        Some(leaf)
    }

    /// Reads a leaf's `tls.crt` and `tls.key` (PEM), with the seal written for it if any:
    /// `None` when either does not parse or they do not match each other.
    pub fn inspect_leaf(
        &self,
        tls_crt: &[u8],
        tls_key: &[u8],
        seal: Option<&str>,
    ) -> Option<LeafFacts> {
        let der = first_certificate(tls_crt)?;
        let leaf = parse(&der)?;
        let leaf_public = leaf.public_key().subject_public_key.data.as_ref();
        let key_der = pem_blocks(tls_key)
            .find(|p| p.label == "PRIVATE KEY")?
            .contents;
        // The leaves we issue embed their public key in the PKCS#8 document. One that differs
        // from the certificate's is refused at once, before any seal is worked out. For a leaf
        // this CA sealed (issued, or checked in full, key and all) the embedded key is enough,
        // which spares a scalar multiplication per leaf; any other key is parsed in full, which
        // also checks that its private scalar is valid and gives the public key the document
        // carries.
        let embedded = embedded_ec_public_key(&key_der);
        if embedded.is_some_and(|public| public != leaf_public) {
            return None;
        }
        let own_seal = self.seal(&der, &key_der)?;
        let sealed = seal.is_some_and(|written| own_seal.is_written_as(written));
        if !(sealed && embedded.is_some()) {
            let key = KeyPair::try_from(key_der.as_slice()).ok()?;
            if key.public_key_raw() != leaf_public {
                return None;
            }
        }
        let signed_by_ca = leaf.issuer().as_raw() == self.subject.as_slice()
            && (sealed
                || SubjectPublicKeyInfo::from_der(&self.public_key_info)
                    .is_ok_and(|(_, key)| leaf.verify_signature(Some(&key)).is_ok()));
        let common_name = leaf
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .unwrap_or("")
            .to_owned();
        let mut dns_names = BTreeSet::new();
        let mut uris = Vec::new();
        if let Ok(Some(san)) = leaf.subject_alternative_name() {
            for name in &san.value.general_names {
                match name {
                    GeneralName::DNSName(d) => {
                        dns_names.insert((*d).to_owned());
                    }
                    GeneralName::URI(u) => uris.push((*u).to_owned()),
                    _ => {}
                }
            }
        }
        Some(LeafFacts {
            common_name,
            dns_names,
            uris,
            not_before: time_of(leaf.validity().not_before),
            not_after: time_of(leaf.validity().not_after),
            signed_by_ca,
            seal: own_seal,
        })
    }
}

/// DER tags read and written here.
const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;
const BIT_STRING: u8 = 0x03;

/// One DER element: (tag, content, rest). Definite lengths only, as DER requires.
fn der_element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// One DER element as a whole (tag, length and content), and the rest.
fn der_whole_element(input: &[u8]) -> Option<(&[u8], &[u8])> {
    let (_, _, rest) = der_element(input)?;
    Some(input.split_at(input.len() - rest.len()))
}

/// The DER element of `tag` holding `content`.
fn der_of(tag: u8, content: &[u8]) -> Vec<u8> {
    let len = content.len();
    let mut der = Vec::with_capacity(len + 6);
    der.push(tag);
    if len < 0x80 {
        der.push(len as u8);
    } else {
        let octets = len.to_be_bytes();
        let skip = octets.iter().take_while(|&&b| b == 0).count();
        der.push(0x80 + (octets.len() - skip) as u8);
        der.extend_from_slice(&octets[skip..]);
    }
    der.extend_from_slice(content);
    der
}

/// A PEM block labelled `label` around `der`: lines of 64 characters, LF line ends.
fn pem_text(label: &str, der: &[u8]) -> String {
    let block = pem::Pem::new(label, der);
    pem::encode_config(
        &block,
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

/// The public key an EC PKCS#8 private key carries (`ECPrivateKey.publicKey`), if any.
fn embedded_ec_public_key(pkcs8: &[u8]) -> Option<&[u8]> {
    const EC_PUBLIC_KEY_OID: &[u8] = &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
    let (SEQUENCE, info, _) = der_element(pkcs8)? else {
        return None;
    };
    let (INTEGER, _, rest) = der_element(info)? else {
        return None;
    };
    let (SEQUENCE, algorithm, rest) = der_element(rest)? else {
        return None;
    };
    if !algorithm.starts_with(EC_PUBLIC_KEY_OID) {
        return None;
    }
    let (OCTET_STRING, ec_key, _) = der_element(rest)? else {
        return None;
    };
    let (SEQUENCE, mut fields, _) = der_element(ec_key)? else {
        return None;
    };
    while !fields.is_empty() {
        let (tag, content, rest) = der_element(fields)?;
        if tag == 0xa1 {
            let (BIT_STRING, bits, _) = der_element(content)? else {
                return None;
            };
            let (&unused, point) = bits.split_first()?;
            return (unused == 0).then_some(point);
        }
        fields = rest;
    }
    None
}

/// How long a CA made by [`generate_ca`] is valid: 87600 h, ten years.
pub const CA_VALIDITY: Duration = Duration::hours(87_600);

/// A self-signed CA for a MeshRootCertificate (cert-rotation.md §4.1): ECDSA P-256, CN = the
/// MRC's name, O = its trust domain, valid [`CA_VALIDITY`] from `now`.
pub fn generate_ca(
    common_name: &str,
    organization: &str,
    now: OffsetDateTime,
    rng: &dyn SecureRandom,
) -> Result<PemPair, PkiError> {
    let key = new_p256_key(rng)?;
    let not_after = now
        .checked_add(CA_VALIDITY)
        .ok_or(PkiError::EndOutOfRange)?;
    let mut params = new_params(common_name, now, not_after, rng)?;
    params
        .distinguished_name
        .push(DnType::OrganizationName, organization);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let cert = params
        .self_signed(&key.signing_key()?)
        .map_err(|_| PkiError::Signing)?;
    Ok(PemPair {
        cert_pem: cert.pem(),
        key_pem: key.pem(),
    })
}

/// Certificate parameters with subject CN, a random serial and the validity window.
fn new_params(
    common_name: &str,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    rng: &dyn SecureRandom,
) -> Result<CertificateParams, PkiError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    let mut serial = [0u8; 16];
    rng.fill(&mut serial).map_err(|_| PkiError::Random)?;
    params.serial_number = Some(serial_of(serial));
    params.not_before = not_before;
    params.not_after = not_after;
    Ok(params)
}

/// A fresh ECDSA P-256 key drawn from `rng`, made by ring (its P-256 code computes the public
/// point about five times as fast as the `p256` crate's: docs/DECISIONS.md, "Keys"). ring writes
/// the key as PKCS#8 with the public point, as OpenSSL does.
fn new_p256_key(rng: &dyn SecureRandom) -> Result<NewKey, PkiError> {
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, rng)
        .map_err(|_| PkiError::Random)?;
    let public = embedded_ec_public_key(pkcs8.as_ref())
        .ok_or(PkiError::Signing)?
        .to_vec();
    Ok(NewKey { pkcs8, public })
}

/// A P-256 key made by [`new_p256_key`]: its PKCS#8 document, which carries the public point,
/// and that point. A leaf's key signs nothing here, so it is never parsed into a signing key
/// (ring would compute its public point a second time); a CA's key is. ring does not wipe the
/// document when it is dropped.
struct NewKey {
    pkcs8: ring::pkcs8::Document,
    /// The uncompressed SEC1 point, 65 octets.
    public: Vec<u8>,
}

impl NewKey {
    /// The PKCS#8 `PRIVATE KEY` PEM, with LF line ends as rcgen writes them.
    fn pem(&self) -> String {
        pem_text("PRIVATE KEY", self.pkcs8.as_ref())
    }

    /// The key as one that signs, for a CA.
    fn signing_key(&self) -> Result<KeyPair, PkiError> {
        KeyPair::try_from(self.pkcs8.as_ref()).map_err(|_| PkiError::Signing)
    }
}

impl rcgen::PublicKeyData for NewKey {
    fn der_bytes(&self) -> &[u8] {
        &self.public
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

/// A positive serial of 16 octets made from 16 random ones.
fn serial_of(mut bytes: [u8; 16]) -> SerialNumber {
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;
    SerialNumber::from_slice(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memo::fingerprint;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-06-01 12:00:00 UTC);

    fn rng() -> ring::rand::SystemRandom {
        ring::rand::SystemRandom::new()
    }

    /// The CA of a generated pair, checked at `NOW`.
    fn checked(pair: &PemPair) -> Ca {
        Ca::from_secret(
            Some(pair.cert_pem.as_bytes()),
            Some(pair.key_pem.as_bytes()),
            NOW,
        )
        .unwrap()
    }

    /// A leaf named `x` and nothing else, valid for `validity`.
    fn plain_leaf(validity: Duration) -> LeafRequest<'static> {
        LeafRequest {
            common_name: "x",
            dns_names: &[],
            uri: None,
            validity,
        }
    }

    #[test]
    fn generated_ca_is_usable_and_issues_verifiable_leaves() {
        let pair = generate_ca("mrc-a", "cluster.local", NOW, &rng()).unwrap();
        assert!(pair.key_pem.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        assert!(pair.cert_pem.ends_with("-----\n"));
        assert!(pair.cert_pem.lines().all(|l| l.len() <= 64));
        let ca = checked(&pair);
        let names = vec!["a.svc".to_owned(), "b.svc".to_owned()];
        let leaf = ca
            .issue(
                &LeafRequest {
                    common_name: "a.ns.cluster.local",
                    dns_names: &names,
                    uri: Some("spiffe://cluster.local/a/ns".into()),
                    validity: Duration::hours(24),
                },
                NOW,
                &rng(),
            )
            .unwrap();
        let facts = ca
            .inspect_leaf(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes(), None)
            .unwrap();
        assert!(facts.signed_by_ca);
        // ring takes the leaf's key, which it checks against the public point the key carries.
        assert!(private_key(leaf.key_pem.as_bytes(), "tls.key").is_ok());
        assert_eq!(facts.common_name, "a.ns.cluster.local");
        assert_eq!(facts.dns_names, names.iter().cloned().collect());
        assert_eq!(facts.uris, ["spiffe://cluster.local/a/ns"]);
        assert_eq!(facts.not_after - facts.not_before, Duration::hours(24));
        // Another CA did not sign it.
        let other = generate_ca("mrc-b", "cluster.local", NOW, &rng()).unwrap();
        let other = checked(&other);
        assert!(
            !other
                .inspect_leaf(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes(), None)
                .unwrap()
                .signed_by_ca
        );
    }

    /// cert-rotation.md §2: CA keys made elsewhere are read too. OSM's own CA Secrets hold RSA
    /// PKCS#8 keys; these two pairs were made with OpenSSL 3 (`openssl req -x509 -newkey
    /// rsa:2048`, and `-newkey ec -pkeyopt ec_paramgen_curve:P-384`; testdata/README.md).
    /// Each is usable and signs leaves, with the algorithm of its key (§3.4), that it verifies.
    #[test]
    fn openssl_rsa_and_p384_cas_are_usable_and_sign_with_their_own_algorithm() {
        let cases = [
            (
                include_str!("../testdata/rsa2048-ca.crt"),
                include_str!("../testdata/rsa2048-ca.key"),
                x509_parser::oid_registry::OID_PKCS1_SHA256WITHRSA,
            ),
            (
                include_str!("../testdata/p384-ca.crt"),
                include_str!("../testdata/p384-ca.key"),
                x509_parser::oid_registry::OID_SIG_ECDSA_WITH_SHA384,
            ),
        ];
        for (i, (crt, key, algorithm)) in cases.iter().enumerate() {
            let ca = Ca::from_secret(Some(crt.as_bytes()), Some(key.as_bytes()), NOW).unwrap();
            let leaf = ca
                .issue(&plain_leaf(Duration::hours(24)), NOW, &rng())
                .unwrap();
            let der = first_certificate(leaf.cert_pem.as_bytes()).unwrap();
            assert_eq!(
                &parse(&der).unwrap().signature_algorithm.algorithm,
                algorithm
            );
            let facts = ca
                .inspect_leaf(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes(), None)
                .unwrap();
            assert!(facts.signed_by_ca, "{algorithm}");
            // The two keys are not interchangeable.
            let other = cases[1 - i].1;
            assert_eq!(
                Ca::from_secret(Some(crt.as_bytes()), Some(other.as_bytes()), NOW).err(),
                Some(PkiError::KeyMismatch("private.key"))
            );
        }
    }

    /// A leaf's issuer name is its CA's subject, byte for byte, whatever the subject holds: here
    /// two `DC`, an RDN of two attributes and two `OU` (testdata/README.md). rcgen, which wrote
    /// the issuer from its own reading of the subject, kept one `DC` and one `OU` (or failed on
    /// the RDN): the leaf chained to no CA, and §3.3 re-issued it at every sync.
    #[test]
    fn the_leaf_issuer_is_the_ca_subject_byte_for_byte() {
        let crt = include_str!("../testdata/dn-ca.crt");
        let key = include_str!("../testdata/dn-ca.key");
        let ca = Ca::from_secret(Some(crt.as_bytes()), Some(key.as_bytes()), NOW).unwrap();
        let leaf = ca
            .issue(&plain_leaf(Duration::hours(24)), NOW, &rng())
            .unwrap();
        let der = first_certificate(leaf.cert_pem.as_bytes()).unwrap();
        let cert = parse(&der).unwrap();
        assert_eq!(cert.issuer().as_raw(), ca.subject.as_slice());
        assert_eq!(
            cert.issuer().to_string(),
            "DC=com, DC=example, O=Example + OU=Platform, OU=Mesh, CN=osm-ca"
        );
        let facts = ca
            .inspect_leaf(leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes(), None)
            .unwrap();
        assert!(facts.signed_by_ca, "verified, and kept at the next sync");
        assert!(leaf.cert_pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
        assert!(leaf.cert_pem.ends_with("-----END CERTIFICATE-----\n"));
        assert!(leaf.cert_pem.lines().all(|line| line.len() <= 64));
        assert!(!leaf.cert_pem.contains('\r'));
    }

    /// A certificate's subject key identifier, if it has one.
    fn subject_key_identifier(cert: &X509Certificate) -> Option<Vec<u8>> {
        cert.extensions()
            .iter()
            .find_map(|e| match e.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(id) => Some(id.0.to_vec()),
                _ => None,
            })
    }

    /// §4.1: a generated CA is what every TLS peer takes as a CA. basicConstraints CA=true,
    /// critical, without a path length; keyUsage keyCertSign and cRLSign alone, critical (OpenSSL
    /// and Go refuse every leaf of a CA without keyCertSign, which rustls does not check); a
    /// subject key identifier, which its leaves name; CN the MRC, O the trust domain; valid
    /// 87600 h from `now`.
    #[test]
    fn rule_4_1_a_generated_ca_carries_what_peers_ask_of_a_ca() {
        let pair = generate_ca("mrc-a", "mesh.local", NOW, &rng()).unwrap();
        let der = first_certificate(pair.cert_pem.as_bytes()).unwrap();
        let cert = parse(&der).unwrap();
        let constraints = cert.basic_constraints().unwrap().unwrap();
        assert!(constraints.critical);
        assert!(constraints.value.ca);
        assert_eq!(constraints.value.path_len_constraint, None);
        let usage = cert.key_usage().unwrap().unwrap();
        assert!(usage.critical);
        assert!(usage.value.key_cert_sign() && usage.value.crl_sign());
        assert_eq!(usage.value.flags.count_ones(), 2, "{}", usage.value);
        assert!(cert.extended_key_usage().unwrap().is_none());
        assert!(subject_key_identifier(&cert).is_some());
        assert_eq!(cert.subject().to_string(), "CN=mrc-a, O=mesh.local");
        assert_eq!(cert.subject().as_raw(), cert.issuer().as_raw());
        assert_eq!(time_of(cert.validity().not_before), NOW);
        assert_eq!(time_of(cert.validity().not_after), NOW + CA_VALIDITY);
    }

    /// §3.4: a leaf's key usage is digitalSignature and keyEncipherment, its extended key usage
    /// serverAuth and clientAuth (it serves and calls), basicConstraints says CA=false, and its
    /// authority key identifier is its CA's subject key identifier: under a generated CA and
    /// under OpenSSL's RSA and P-384 ones.
    #[test]
    fn rule_3_4_a_leaf_has_the_usages_and_the_key_identifier_of_the_spec() {
        let generated = generate_ca("mrc-a", "cluster.local", NOW, &rng()).unwrap();
        let cas = [
            (generated.cert_pem.as_str(), generated.key_pem.as_str()),
            (
                include_str!("../testdata/rsa2048-ca.crt"),
                include_str!("../testdata/rsa2048-ca.key"),
            ),
            (
                include_str!("../testdata/p384-ca.crt"),
                include_str!("../testdata/p384-ca.key"),
            ),
        ];
        for (crt, key) in cas {
            let ca = Ca::from_secret(Some(crt.as_bytes()), Some(key.as_bytes()), NOW).unwrap();
            let ca_cert = parse(&ca.der).unwrap();
            let leaf = ca
                .issue(&plain_leaf(Duration::hours(24)), NOW, &rng())
                .unwrap();
            let der = first_certificate(leaf.cert_pem.as_bytes()).unwrap();
            let cert = parse(&der).unwrap();
            let usage = cert.key_usage().unwrap().unwrap().value;
            assert!(usage.digital_signature() && usage.key_encipherment());
            assert_eq!(usage.flags.count_ones(), 2, "{usage}");
            let extended = cert.extended_key_usage().unwrap().unwrap().value;
            assert!(extended.server_auth && extended.client_auth);
            assert!(!extended.any && extended.other.is_empty());
            let constraints = cert.basic_constraints().unwrap().unwrap().value;
            assert!(!constraints.ca);
            let authority = cert
                .extensions()
                .iter()
                .find_map(|e| match e.parsed_extension() {
                    ParsedExtension::AuthorityKeyIdentifier(aki) => {
                        Some(aki.key_identifier.clone())
                    }
                    _ => None,
                });
            let named = authority.flatten().map(|id| id.0.to_vec());
            assert_eq!(named, subject_key_identifier(&ca_cert));
            assert!(named.is_some());
        }
    }

    /// Found by the fuzzer: a CA whose subject has an attribute type that x509-parser reads
    /// with a first arc above 2 (here the O attribute's `55 04 0a`, 2.5.4.10, patched to
    /// `95 04 0a`) made rcgen panic while it wrote the leaf's issuer. The subject is copied as it
    /// is now, and the leaf issued.
    #[test]
    fn a_subject_x509_parser_misreads_is_copied_into_the_leaf() {
        let pair = generate_ca("mrc-a", "td", NOW, &rng()).unwrap();
        let mut der = first_certificate(pair.cert_pem.as_bytes()).unwrap();
        let organization = [0x06, 0x03, 0x55, 0x04, 0x0a];
        let found: Vec<usize> = der
            .windows(organization.len())
            .enumerate()
            .filter(|(_, window)| *window == organization)
            .map(|(at, _)| at)
            .collect();
        assert_eq!(
            found.len(),
            2,
            "the O attribute of the issuer and of the subject"
        );
        for at in found {
            der[at + 2] = 0x95;
        }
        let pem = pem_text("CERTIFICATE", &der);
        let ca = Ca::from_secret(Some(pem.as_bytes()), Some(pair.key_pem.as_bytes()), NOW).unwrap();
        let leaf = ca
            .issue(&plain_leaf(Duration::hours(1)), NOW, &rng())
            .unwrap();
        let leaf_der = first_certificate(leaf.cert_pem.as_bytes()).unwrap();
        assert_eq!(
            parse(&leaf_der).unwrap().issuer().as_raw(),
            ca.subject.as_slice()
        );
        assert!(leaf_der.windows(3).any(|w| w == [0x06, 0x03, 0x95]));
    }

    /// A leaf or a CA whose end would fall after the year 9999 is an error, not a panic.
    #[test]
    fn an_end_after_the_year_9999_is_an_error() {
        let late = datetime!(9999-12-31 00:00:00 UTC);
        assert_eq!(
            generate_ca("a", "td", late, &rng()),
            Err(PkiError::EndOutOfRange)
        );
        let pair = generate_ca("a", "td", NOW, &rng()).unwrap();
        let ca = checked(&pair);
        let want = plain_leaf(Duration::hours(24));
        assert_eq!(ca.issue(&want, late, &rng()), Err(PkiError::EndOutOfRange));
    }

    #[test]
    fn unusable_cas_are_named_without_content() {
        let a = generate_ca("a", "td", NOW, &rng()).unwrap();
        let b = generate_ca("b", "td", NOW, &rng()).unwrap();
        let check = |c: Option<&str>, k: Option<&str>, now| {
            Ca::from_secret(c.map(str::as_bytes), k.map(str::as_bytes), now).unwrap_err()
        };
        assert_eq!(
            check(None, Some(&a.key_pem), NOW),
            PkiError::Missing("ca.crt")
        );
        assert_eq!(
            check(Some(&a.cert_pem), None, NOW),
            PkiError::Missing("private.key")
        );
        assert_eq!(
            check(Some("junk"), Some(&a.key_pem), NOW),
            PkiError::BadCertificate("ca.crt")
        );
        assert_eq!(
            check(Some(&a.cert_pem), Some(&b.key_pem), NOW),
            PkiError::KeyMismatch("private.key")
        );
        // A key beside the certificate, of any PEM label, even one that does not parse: the
        // bundle would publish it.
        let rsa_key = include_str!("../testdata/rsa2048-ca.key");
        let rsa_crt = include_str!("../testdata/rsa2048-ca.crt");
        for with_key in [
            format!("{}{}", a.cert_pem, a.key_pem),
            format!(
                "{}{}",
                rsa_crt,
                rsa_key.replace("PRIVATE KEY", "RSA PRIVATE KEY")
            ),
            format!("{}-----BEGIN EC PRIVATE KEY-----\nnot base64\n", a.cert_pem),
        ] {
            let error = check(Some(&with_key), Some(&a.key_pem), NOW);
            assert_eq!(error, PkiError::KeyInCertificate("ca.crt"));
            assert_eq!(
                error.to_string(),
                "ca.crt holds a private key, which the trust bundle would publish"
            );
        }
        assert_eq!(
            check(Some(&a.cert_pem), Some("junk"), NOW),
            PkiError::BadKey("private.key")
        );
        assert_eq!(
            check(
                Some(&a.cert_pem),
                Some(&a.key_pem),
                NOW + Duration::hours(87_601)
            ),
            PkiError::Expired("ca.crt")
        );
        // A leaf is not a CA.
        let ca = checked(&a);
        let leaf = ca
            .issue(&plain_leaf(Duration::hours(1)), NOW, &rng())
            .unwrap();
        assert_eq!(
            check(Some(&leaf.cert_pem), Some(&leaf.key_pem), NOW),
            PkiError::NotCa("ca.crt")
        );
        assert!(!format!("{:?}", ca).contains("PRIVATE"));
    }

    #[test]
    fn mismatched_or_broken_leaf_keys_are_not_kept() {
        let a = generate_ca("a", "td", NOW, &rng()).unwrap();
        let ca = checked(&a);
        let req = plain_leaf(Duration::hours(1));
        let one = ca.issue(&req, NOW, &rng()).unwrap();
        let two = ca.issue(&req, NOW, &rng()).unwrap();
        assert!(ca
            .inspect_leaf(one.cert_pem.as_bytes(), one.key_pem.as_bytes(), None)
            .is_some());
        assert!(
            ca.inspect_leaf(one.cert_pem.as_bytes(), two.key_pem.as_bytes(), None)
                .is_none(),
            "another key"
        );
        assert!(ca
            .inspect_leaf(one.cert_pem.as_bytes(), b"junk", None)
            .is_none());
        // The keys we issue carry their public key; a document without one is not misread.
        let der = pem_blocks(one.key_pem.as_bytes()).next().unwrap().contents;
        assert!(embedded_ec_public_key(&der).is_some());
        assert!(embedded_ec_public_key(b"\x30\x03\x02\x01\x00").is_none());
        // A key whose embedded public key is the certificate's but whose private scalar is
        // another's is not kept when no seal of this CA vouches for the pair.
        let point = der.len() - 65;
        let forged = [&key_der(&two)[..point], &der[point..]].concat();
        assert_eq!(
            embedded_ec_public_key(&forged),
            embedded_ec_public_key(&der)
        );
        let forged_pem = pem_text("PRIVATE KEY", &forged);
        let one_der = first_certificate(one.cert_pem.as_bytes()).unwrap();
        for written in [None, Some(one.seal.text())] {
            assert!(
                ca.inspect_leaf(one.cert_pem.as_bytes(), forged_pem.as_bytes(), written)
                    .is_none(),
                "a forged key, seal {written:?}"
            );
        }
        let forged_seal = sealed(&ca, &one_der, &forged);
        assert!(
            ca.inspect_leaf(
                one.cert_pem.as_bytes(),
                forged_pem.as_bytes(),
                Some(&forged_seal)
            )
            .is_some(),
            "only the CA key's holder could have sealed it"
        );
        // Keys without one (RSA) are parsed in full and compared.
        let rsa_crt = include_str!("../testdata/rsa2048-ca.crt").as_bytes();
        let rsa_key = include_str!("../testdata/rsa2048-ca.key").as_bytes();
        let p384_crt = include_str!("../testdata/p384-ca.crt").as_bytes();
        assert!(embedded_ec_public_key(&pem_blocks(rsa_key).next().unwrap().contents).is_none());
        assert!(ca.inspect_leaf(rsa_crt, rsa_key, None).is_some());
        assert!(
            ca.inspect_leaf(p384_crt, rsa_key, None).is_none(),
            "an RSA key"
        );
    }

    /// cert-rotation.md §8: a CA's Debug, which a log line could carry, shows its end and never
    /// its key or certificate.
    #[test]
    fn a_cas_debug_shows_no_key_material() {
        let pair = generate_ca("mrc-a", "cluster.local", NOW, &rng()).unwrap();
        let shown = format!("{:?}", checked(&pair));
        assert!(shown.starts_with("Ca { not_after: 2036-"), "{shown}");
        assert!(!shown.contains("key") && !shown.contains("der"), "{shown}");
    }

    /// A seal reads in Debug (test failures, a leaf memo entry's) as its annotation's text.
    #[test]
    fn a_seals_debug_is_its_text() {
        let seal = Seal::of(&[0xff; 32]).unwrap();
        assert_eq!(seal.text(), format!("{}8=", "/".repeat(42)));
        assert_eq!(format!("{seal:?}"), format!("Seal({:?})", seal.text()));
    }

    /// RFC 5280 §4.1.2.5: a certificate is valid through its notAfter, inclusive.
    #[test]
    fn a_ca_is_usable_through_its_not_after_second() {
        assert_eq!(check_expiry(NOW, NOW), Ok(()));
        assert_eq!(
            check_expiry(NOW, NOW + Duration::seconds(1)),
            Err(PkiError::Expired("ca.crt"))
        );
    }

    /// DER lengths as written: the short form up to 127, then the fewest octets that hold it.
    #[test]
    fn der_of_writes_the_shortest_length() {
        for (len, header) in [
            (0, &[0x04, 0x00][..]),
            (127, &[0x04, 0x7f]),
            (128, &[0x04, 0x81, 0x80]),
            (255, &[0x04, 0x81, 0xff]),
            (256, &[0x04, 0x82, 0x01, 0x00]),
            (65_536, &[0x04, 0x83, 0x01, 0x00, 0x00]),
        ] {
            let content = vec![7; len];
            let der = der_of(OCTET_STRING, &content);
            assert_eq!(&der[..header.len()], header, "{len}");
            assert_eq!(
                der_element(&der),
                Some((OCTET_STRING, &content[..], &b""[..]))
            );
        }
    }

    /// DER lengths: short and long forms; indefinite, over four bytes or cut short is refused.
    #[test]
    fn der_elements_are_read_with_definite_lengths_only() {
        assert_eq!(
            der_element(b"\x04\x01\xaa\xbb"),
            Some((4, &b"\xaa"[..], &b"\xbb"[..]))
        );
        assert_eq!(
            der_element(b"\x04\x81\x01\xaa"),
            Some((4, &b"\xaa"[..], &b""[..]))
        );
        assert_eq!(der_element(b"\x04\x81\x00"), Some((4, &b""[..], &b""[..])));
        let long = [&b"\x04\x82\x01\x00"[..], &[7; 256]].concat();
        assert_eq!(der_element(&long), Some((4, &[7; 256][..], &b""[..])));
        assert_eq!(
            der_element(b"\x04\x84\x00\x00\x00\x01\xaa"),
            Some((4, &b"\xaa"[..], &b""[..]))
        );
        let indefinite = [&b"\x04\x80"[..], &[0; 200]].concat();
        assert_eq!(der_element(&indefinite), None);
        assert_eq!(der_element(b"\x04\x85\x00\x00\x00\x00\x01\xaa"), None);
        assert_eq!(der_element(b"\x04\x82\x01"), None);
        assert_eq!(der_element(b"\x04\x02\xaa"), None);
        assert_eq!(der_element(b"\x04"), None);
    }

    /// Keys come from the random source handed in, so tests can fix it (cert-rotation.md §7).
    /// ring's sources are sealed: the fixed one here is ring's own, from a module it marks
    /// deprecated (see DECISIONS.md, "Keys").
    #[test]
    #[allow(deprecated)]
    fn keys_come_from_the_random_source() {
        use ring::test::rand::FixedByteRandom;
        let secret_of =
            |pair: &PemPair| pem_blocks(pair.key_pem.as_bytes()).next().unwrap().contents;

        let a = generate_ca("a", "td", NOW, &FixedByteRandom { byte: 7 }).unwrap();
        let b = generate_ca("a", "td", NOW, &FixedByteRandom { byte: 7 }).unwrap();
        assert_eq!(a.key_pem, b.key_pem);
        let c = generate_ca("a", "td", NOW, &FixedByteRandom { byte: 9 }).unwrap();
        assert_ne!(a.key_pem, c.key_pem);
        // The 32 bytes drawn are the secret scalar as they are.
        assert!(secret_of(&a).windows(32).any(|w| w == [7u8; 32]));
        // 0xff.. is never below the group order: a source that gives nothing usable is an error,
        // not an endless loop, for a CA and for a leaf.
        assert!(matches!(
            generate_ca("a", "td", NOW, &FixedByteRandom { byte: 0xff }),
            Err(PkiError::Random)
        ));
        let leaf = checked(&a).issue(
            &plain_leaf(Duration::hours(1)),
            NOW,
            &FixedByteRandom { byte: 0xff },
        );
        assert!(matches!(leaf, Err(PkiError::Random)));
        // From the system's source, two keys made alike differ.
        let one = generate_ca("a", "td", NOW, &rng()).unwrap();
        let two = generate_ca("a", "td", NOW, &rng()).unwrap();
        assert_ne!(one.key_pem, two.key_pem);
    }

    /// A new key is written as PKCS#8 carrying its public point (which its certificate is made
    /// with), and ring reads it back to the same point.
    #[test]
    fn new_keys_are_written_as_pkcs8_with_their_public_point() {
        use ring::signature::KeyPair as _;
        for _ in 0..3 {
            let key = new_p256_key(&rng()).unwrap();
            assert_eq!(key.public.len(), 65);
            let read = EcdsaKeyPair::from_pkcs8(
                &ECDSA_P256_SHA256_ASN1_SIGNING,
                key.pkcs8.as_ref(),
                &rng(),
            )
            .unwrap();
            assert_eq!(read.public_key().as_ref(), key.public.as_slice());
            assert!(key.pem().starts_with("-----BEGIN PRIVATE KEY-----\n"));
        }
    }

    /// §3.4: a positive serial whatever the source gives, and never a leading zero octet.
    #[test]
    fn serials_are_positive_sixteen_octets() {
        for (draw, first) in [(0xff, 0x7f), (0x00, 0x01), (0x80, 0x01)] {
            let bytes = serial_of([draw; 16]).to_bytes();
            assert_eq!(bytes.len(), 16);
            assert_eq!((bytes[0], bytes[15]), (first, draw), "draws of {draw:#x}");
        }
    }

    /// A leaf's PEM texts with its certificate's last octet (inside the signature) changed:
    /// the DER still parses, and the signature no longer verifies.
    fn with_broken_signature(leaf: &IssuedLeaf) -> (String, Vec<u8>) {
        let mut der = first_certificate(leaf.cert_pem.as_bytes()).unwrap();
        *der.last_mut().unwrap() ^= 1;
        (pem_text("CERTIFICATE", &der), der)
    }

    /// `ca`'s seal of a certificate and key, as written.
    fn sealed(ca: &Ca, cert_der: &[u8], key_der: &[u8]) -> String {
        ca.seal(cert_der, key_der).unwrap().text().to_owned()
    }

    /// The DER of a leaf's `tls.key`.
    fn key_der(leaf: &IssuedLeaf) -> Vec<u8> {
        pem_blocks(leaf.key_pem.as_bytes()).next().unwrap().contents
    }

    #[test]
    fn a_leaf_sealed_by_its_ca_is_taken_as_signed_and_any_other_seal_is_not() {
        let a_pair = generate_ca("a", "td", NOW, &rng()).unwrap();
        let a = checked(&a_pair);
        let b = checked(&generate_ca("b", "td", NOW, &rng()).unwrap());
        let leaf = a
            .issue(&plain_leaf(Duration::hours(1)), NOW, &rng())
            .unwrap();
        let (crt, key) = (leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes());
        let seal = leaf.seal.text();
        let facts = a.inspect_leaf(crt, key, Some(seal)).unwrap();
        assert!(facts.signed_by_ca);
        assert_eq!(
            facts.seal, leaf.seal,
            "inspecting finds the seal issuing made"
        );
        assert_eq!(a.inspect_leaf(crt, key, None).unwrap().seal, leaf.seal);
        assert_eq!(seal.len(), 44, "32 octets in standard base64");
        assert_eq!(from_base64(seal).map(|mac| mac.len()), Some(32));
        assert_eq!((Seal::of(&[0; 31]), Seal::of(&[0; 33])), (None, None));
        // The seal follows from the CA Secret alone: the same after a restart.
        assert_eq!(
            checked(&a_pair).inspect_leaf(crt, key, None).unwrap().seal,
            leaf.seal
        );

        // A leaf whose seal is its CA's is not verified again: one with a broken signature
        // that bears the CA's seal passes (only the CA key's holder could have sealed it).
        let (broken, broken_der) = with_broken_signature(&leaf);
        let broken_seal = sealed(&a, &broken_der, &key_der(&leaf));
        assert!(
            a.inspect_leaf(broken.as_bytes(), key, Some(&broken_seal))
                .unwrap()
                .signed_by_ca
        );
        // Without it, or with any other seal, the signature is verified, and fails.
        let another = a
            .issue(&plain_leaf(Duration::hours(1)), NOW, &rng())
            .unwrap();
        let b_seal = sealed(&b, &broken_der, &key_der(&leaf));
        let mut flipped = broken_seal.clone().into_bytes();
        flipped[0] = if flipped[0] == b'A' { b'B' } else { b'A' };
        let flipped = String::from_utf8(flipped).unwrap();
        for written in [
            None,
            Some(seal),
            Some(another.seal.text()),
            Some(b_seal.as_str()),
            Some(flipped.as_str()),
            Some(&broken_seal[..40]),
            Some("not base64"),
            Some(""),
        ] {
            let facts = a.inspect_leaf(broken.as_bytes(), key, written).unwrap();
            assert!(!facts.signed_by_ca, "seal {written:?}");
            assert_eq!(facts.seal.text(), broken_seal);
        }
        // The seal covers the key: the same certificate with another key is sealed otherwise.
        assert_ne!(sealed(&a, &broken_der, &key_der(&another)), broken_seal);
        // The issuer must still be the CA: another CA's leaf sealed by this one is not taken.
        let b_leaf = b
            .issue(&plain_leaf(Duration::hours(1)), NOW, &rng())
            .unwrap();
        let b_der = first_certificate(b_leaf.cert_pem.as_bytes()).unwrap();
        let sealed_by_a = sealed(&a, &b_der, &key_der(&b_leaf));
        let facts = a
            .inspect_leaf(
                b_leaf.cert_pem.as_bytes(),
                b_leaf.key_pem.as_bytes(),
                Some(&sealed_by_a),
            )
            .unwrap();
        assert!(!facts.signed_by_ca);
    }

    #[test]
    fn remembered_leaves_are_reused_and_never_vouch_for_other_bytes_or_requests() {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let a = generate_ca("a", "td", NOW, &rng()).unwrap();
        let ca = checked(&a);
        let want = LeafRequest {
            common_name: "a.ns.cluster.local",
            dns_names: &[],
            uri: None,
            validity: Duration::hours(1),
        };
        let leaf = ca.issue(&want, NOW, &rng()).unwrap();
        let (crt, key) = (b64(&leaf.cert_pem), b64(&leaf.key_pem));
        let memo = CheckedLeaves::default();
        let validity = ca
            .issued_leaf(&crt, &key, None, &LeafDigest::default(), &want, &memo)
            .unwrap()
            .validity;
        assert_eq!(validity.not_after - validity.not_before, Duration::hours(1));
        assert_eq!(memo.len(), 1);

        // A second look is answered by the memo: mark the stored entry and see it come back.
        let marked = CheckedLeaf {
            validity: Validity {
                not_before: NOW,
                not_after: NOW + Duration::days(9),
            },
            seal: Seal([b'7'; 44]),
        };
        for v in memo.lock()[0].values_mut() {
            *v = marked;
        }
        assert_eq!(
            ca.issued_leaf(&crt, &key, None, &LeafDigest::default(), &want, &memo),
            Some(marked)
        );
        assert_eq!(memo.len(), 1);
        // The values' digest, once worked out, is taken as it is (its caller keeps it with those
        // values): with it, other text is not hashed again.
        let digest = LeafDigest::default();
        assert_eq!(
            ca.issued_leaf(&crt, &key, None, &digest, &want, &memo),
            Some(marked)
        );
        assert_eq!(
            ca.issued_leaf("", "", None, &digest, &want, &memo),
            Some(marked)
        );
        assert_eq!(
            ca.issued_leaf("", "", None, &LeafDigest::default(), &want, &memo),
            None
        );

        // The same signature over a changed name is read afresh and fails.
        let mut der = first_certificate(leaf.cert_pem.as_bytes()).unwrap();
        let at = der
            .windows(4)
            .position(|w| w == b"a.ns")
            .expect("the CN is in the DER");
        der[at] = b'b';
        let forged = b64(&pem_text("CERTIFICATE", &der));
        let forged_want = LeafRequest {
            common_name: "b.ns.cluster.local",
            ..want.clone()
        };
        assert_eq!(
            ca.issued_leaf(
                &forged,
                &key,
                None,
                &LeafDigest::default(),
                &forged_want,
                &memo
            ),
            None
        );
        // Another request, another key or another CA is another entry, checked in full.
        let more_names = ["web".to_owned()];
        let other_names = LeafRequest {
            dns_names: &more_names,
            ..want.clone()
        };
        assert_eq!(
            ca.issued_leaf(
                &crt,
                &key,
                None,
                &LeafDigest::default(),
                &other_names,
                &memo
            ),
            None
        );
        let with_uri = LeafRequest {
            uri: Some("spiffe://td/a/ns".into()),
            ..want.clone()
        };
        assert_eq!(
            ca.issued_leaf(&crt, &key, None, &LeafDigest::default(), &with_uri, &memo),
            None
        );
        let other_key = b64(&ca.issue(&want, NOW, &rng()).unwrap().key_pem);
        assert_eq!(
            ca.issued_leaf(&crt, &other_key, None, &LeafDigest::default(), &want, &memo),
            None
        );
        let b = generate_ca("a", "td", NOW, &rng()).unwrap();
        let b = checked(&b);
        assert_eq!(
            b.issued_leaf(&crt, &key, None, &LeafDigest::default(), &want, &memo),
            None
        );
        assert_eq!(memo.len(), 1, "failures are not stored");
    }

    #[test]
    fn checked_cas_are_remembered_but_expiry_and_changed_bytes_are_checked_every_time() {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let a = generate_ca("a", "td", NOW, &rng()).unwrap();
        let b = generate_ca("b", "td", NOW, &rng()).unwrap();
        let (crt, key) = (b64(&a.cert_pem), b64(&a.key_pem));
        let cas = CheckedCas::default();
        let first = cas.get(Some(&crt), Some(&key), NOW).unwrap();
        assert_eq!(first.pem(), a.cert_pem);
        assert_eq!(cas.len(), 1);
        let again = cas.get(Some(&crt), Some(&key), NOW).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "the remembered CA is reused");
        assert_eq!(cas.len(), 1);

        // Remembered, yet expired at a later time.
        let later = first.not_after + Duration::seconds(1);
        assert_eq!(
            cas.get(Some(&crt), Some(&key), later).unwrap_err(),
            PkiError::Expired("ca.crt")
        );
        // Another key beside the same certificate is checked afresh, and failures are not kept.
        assert_eq!(
            cas.get(Some(&crt), Some(&b64(&b.key_pem)), NOW)
                .unwrap_err(),
            PkiError::KeyMismatch("private.key")
        );
        assert_eq!(
            cas.get(Some(&crt), None, NOW).unwrap_err(),
            PkiError::Missing("private.key")
        );
        assert_eq!(
            cas.get(Some("not base64!"), Some(&key), NOW).unwrap_err(),
            PkiError::Missing("ca.crt")
        );
        assert_eq!(cas.len(), 1);
        assert!(!format!("{cas:?}").contains("PRIVATE"));
    }

    #[test]
    fn a_remembered_ca_under_the_same_fingerprint_is_compared_not_trusted() {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let a = generate_ca("a", "td", NOW, &rng()).unwrap();
        let b = generate_ca("b", "td", NOW, &rng()).unwrap();
        let cas = CheckedCas::default();
        let (crt_a, key_a) = (b64(&a.cert_pem), b64(&a.key_pem));
        let ca_a = cas.get(Some(&crt_a), Some(&key_a), NOW).unwrap();
        // CA a stored under the key of b's values, as a fingerprint collision would leave it.
        let (crt_b, key_b) = (b64(&b.cert_pem), b64(&b.key_pem));
        let sent_b = CheckedCas::sent(Some(&crt_b), Some(&key_b));
        cas.recent
            .store_made_from(fingerprint(&sent_b), crt_a.into_bytes(), ca_a, 0);
        assert_eq!(
            cas.get(Some(&crt_b), Some(&key_b), NOW).unwrap().pem(),
            b.cert_pem
        );
    }

    #[test]
    fn the_ca_memo_is_bounded_and_keeps_what_is_used() {
        use base64::Engine;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let a = generate_ca("a", "td", NOW, &rng()).unwrap();
        let key = b64(&a.key_pem);
        // The same CA under distinct texts (trailing newlines) is one entry per text.
        let crt = |i: usize| b64(&format!("{}{}", a.cert_pem, "\n".repeat(i)));
        let cas = CheckedCas::default();
        let kept = cas.get(Some(&crt(0)), Some(&key), NOW).unwrap();
        let oldest = cas.get(Some(&crt(1)), Some(&key), NOW).unwrap();
        for i in 2..=CheckedCas::CAPACITY + 5 {
            cas.get(Some(&crt(i)), Some(&key), NOW).unwrap();
            let used = cas.get(Some(&crt(0)), Some(&key), NOW).unwrap();
            assert!(Arc::ptr_eq(&kept, &used), "used often, still there");
        }
        assert_eq!(cas.len(), CheckedCas::CAPACITY);
        let rechecked = cas.get(Some(&crt(1)), Some(&key), NOW).unwrap();
        assert!(
            !Arc::ptr_eq(&oldest, &rechecked),
            "the least recently used was dropped and is checked again"
        );
        assert_eq!(cas.len(), CheckedCas::CAPACITY);
    }

    #[test]
    fn the_leaf_memo_is_bounded_and_keeps_what_is_used() {
        let memo = CheckedLeaves::default();
        let n = CheckedLeaves::GENERATION;
        let v = CheckedLeaf {
            validity: Validity {
                not_before: NOW,
                not_after: NOW,
            },
            seal: Seal([b'0'; 44]),
        };
        let digest = |i: usize| {
            let mut d = [0u8; 32];
            d[..8].copy_from_slice(&(i as u64).to_be_bytes());
            d
        };
        let kept = [0xff; 32];
        memo.store(kept, v);
        for i in 0..2 * n + 10 {
            memo.store(digest(i), v);
            if i % 1000 == 0 {
                assert_eq!(memo.recall(&kept), Some(v), "used often");
            }
        }
        assert!(memo.len() <= 2 * n);
        assert_eq!(memo.recall(&kept), Some(v), "still there");
        assert_eq!(
            memo.recall(&digest(0)),
            None,
            "the oldest unused entry was dropped"
        );
    }
}
