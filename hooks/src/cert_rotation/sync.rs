//! `/cert-rotation/sync` (cert-rotation.md §3): issuers from the MRCs' roles, the trust bundle,
//! and leaf certificates kept or re-issued.

use super::spec::{self, Certificate, ManagerSpec};
use crate::contract::{
    map_only, object_maps, CompositeRequest, CompositeResponse, MetaOut, Object, Strings, Text,
};
use crate::json::Json;
use crate::memo::{made_from, Kept, Memo, Recent};
use crate::mesh_root_certificate::model::{
    b64, check_combination, provider, role, spiffe_enabled, trust_domain, DataObject,
    DataObjectOut, DataValue, Mrc, Provider, Role, CONFIGMAP_KEY, MANAGED_BY, MRC_KEY, SECRET_KEY,
};
use crate::meta::{Condition, PreviousConditions};
use crate::pki::{Ca, CheckedCas, CheckedLeaves, LeafRequest};
use foldhash::{HashMap, HashSet};
use ring::rand::SecureRandom;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use time::OffsetDateTime;

pub const LABEL_MANAGER: &str = "metahooks.dev/certificate-manager";
pub const ANNOTATION_SIGNING: &str = "metahooks.dev/signing-issuer";
pub const ANNOTATION_VALIDATING: &str = "metahooks.dev/validating-issuer";
/// The signing CA's seal of the leaf ([`crate::pki::Seal`]).
pub const ANNOTATION_SEAL: &str = "metahooks.dev/leaf-seal";

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct ManagerStatus<'a> {
    #[serde(default, borrow, deserialize_with = "crate::contract::lenient_string")]
    pub signing_issuer: Option<Text<'a>>,
    #[serde(default, borrow, deserialize_with = "crate::contract::lenient_string")]
    pub validating_issuer: Option<Text<'a>>,
    #[serde(default)]
    pub conditions: PreviousConditions,
}

map_only! {
    impl['de, 'a] ManagerStatus<'a> where ['de: 'a];
}

pub type Manager<'a> = Object<'a, Json<'a>, ManagerStatus<'a>>;

object_maps! {
    /// The children: the trust-bundle ConfigMap and the leaf Secrets.
    pub kept struct Children<'a> {
        config_maps: DataObject<'a> = CONFIGMAP_KEY,
        secrets: DataObject<'a> = SECRET_KEY,
    }
}

object_maps! {
    /// The namespace's MRCs and Secrets.
    pub struct Related<'a> {
        mrcs: Mrc<'a> = MRC_KEY,
        secrets: DataObject<'a> = SECRET_KEY,
    }
}

pub type SyncRequest<'a> = CompositeRequest<Manager<'a>, Children<'a>, Related<'a>>;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_issuer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validating_issuer: Option<String>,
    pub conditions: Vec<Condition>,
}

pub type SyncResponse<'a> = CompositeResponse<Status, DataObjectOut<'a>>;

/// A check of §3.1 that failed: the Ready reason and a message naming the objects involved.
struct Frozen {
    reason: &'static str,
    message: String,
}

fn frozen(reason: &'static str, message: impl Into<String>) -> Frozen {
    Frozen {
        reason,
        message: message.into(),
    }
}

/// The issuers chosen for this sync, with their CAs.
struct Issuers<'a> {
    signing: &'a Mrc<'a>,
    validating: &'a Mrc<'a>,
    signing_ca: Arc<Ca>,
    trust: Arc<TrustBundle>,
}

/// The trust bundle of a signing and a validating CA as a response carries it, each form written
/// as a JSON string once: the ConfigMap's `ca.crt` (the signing CA's certificate, then the
/// validating one's when its text differs) and every leaf Secret's `ca.crt` (its base64).
struct TrustBundle {
    config_map: DataValue<'static>,
    secret: DataValue<'static>,
}

/// Trust bundles written before, remembered between syncs: every resync of a CertificateManager
/// writes the same bundle, and writing it (base64, then JSON escaping, of a few KB) took about a
/// tenth of a 25 KB resync. An entry is found by the two CAs' `ca.crt` texts and compared with
/// them byte for byte, as [`CheckedCas`] finds a CA. Bounded: the [`Self::CAPACITY`] most
/// recently used.
#[derive(Debug)]
pub struct TrustBundles {
    recent: Recent<Kept<TrustBundle>>,
}

impl Default for TrustBundles {
    fn default() -> Self {
        TrustBundles {
            // A bundle is a few certificates: bounded by count alone.
            recent: Recent::new(Self::CAPACITY, usize::MAX),
        }
    }
}

impl TrustBundles {
    pub const CAPACITY: usize = 64;

    /// The bundle of `signing` and `validating`, written the first time and then remembered.
    fn get(&self, signing: &Ca, validating: &Ca) -> Arc<TrustBundle> {
        let (signing, validating) = (signing.pem(), validating.pem());
        let texts = made_from(&[Some(signing.as_bytes()), Some(validating.as_bytes())]);
        // counted by number, not size
        let Ok(bundle) = self.recent.recall_or_make(texts, 0, || {
            let mut pem = with_newline(signing);
            if validating != signing {
                pem.push_str(&with_newline(validating));
            }
            Ok::<_, Infallible>(TrustBundle {
                secret: DataValue::shared(b64(pem.as_bytes())),
                config_map: DataValue::shared(pem),
            })
        });
        bundle
    }

    /// How many bundles are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.recent.len()
    }
}

pub fn sync<'a>(
    req: &'a SyncRequest<'a>,
    now: OffsetDateTime,
    rng: &dyn SecureRandom,
    memo: &Memo,
) -> SyncResponse<'a> {
    let parent = &req.parent;
    let previous = &parent.status;
    let generation = parent.metadata.generation;
    match plan(req, now, &memo.pki.cas, &memo.trust_bundles) {
        Ok((spec, issuers)) => issue(req, &spec, &issuers, now, rng, &memo.pki.leaves),
        Err(f) => freeze(req, f, previous, generation, now),
    }
}

/// §3.1 and §3.2: the checks, in order, and the choice of the signing and validating issuers.
fn plan<'r>(
    req: &'r SyncRequest,
    now: OffsetDateTime,
    cas: &CheckedCas,
    bundles: &TrustBundles,
) -> Result<(ManagerSpec, Issuers<'r>), Frozen> {
    let parent = &req.parent;
    let ns = parent.metadata.namespace.as_deref().unwrap_or("");
    let spec = spec::parse(&parent.spec).map_err(|m| frozen("InvalidSpec", m))?;

    let in_ns = |meta: &crate::contract::ObjectMeta| meta.namespace_or(ns) == ns;
    let related_secrets: Vec<&DataObject> = req
        .related
        .secrets
        .iter()
        .map(Arc::as_ref)
        .filter(|s| in_ns(&s.metadata))
        .collect();
    let ours: HashSet<&str> = req
        .children
        .secrets
        .iter()
        .map(|s| s.metadata.name.as_str())
        .collect();
    let existing: HashSet<&str> = related_secrets
        .iter()
        .map(|s| s.metadata.name.as_str())
        .collect();
    for cert in &spec.certificates {
        let name = cert.secret_name.as_str();
        if !ours.contains(name) && existing.contains(name) {
            return Err(frozen(
                "SecretConflict",
                format!(
                    "Secret {} exists and is not a leaf of this CertificateManager",
                    cert.secret_name
                ),
            ));
        }
    }

    let mut mrcs: Vec<&Mrc> = req
        .related
        .mrcs
        .iter()
        .map(Arc::as_ref)
        .filter(|m| in_ns(&m.metadata) && !m.metadata.is_terminating())
        .collect();
    mrcs.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut in_use: Vec<(&Mrc, Role)> = Vec::new();
    for m in &mrcs {
        match role(&m.spec) {
            Ok(Role::Inactive) => {}
            Ok(r) => in_use.push((m, r)),
            Err(r) => {
                return Err(frozen(
                    "InvalidMRC",
                    format!(
                        "MeshRootCertificate {}: unknown role '{r}'",
                        m.metadata.name
                    ),
                ))
            }
        }
    }
    let roles: Vec<Role> = in_use.iter().map(|(_, r)| *r).collect();
    let names = |list: &[(&Mrc, Role)]| {
        list.iter()
            .map(|(m, _)| m.metadata.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Err(bad) = check_combination(&roles) {
        let message = match in_use.len() {
            0 => "no MeshRootCertificate is active or passive".to_owned(),
            _ => format!("MeshRootCertificates in use: {}", names(&in_use)),
        };
        return Err(frozen(bad.reason(), message));
    }

    let (signing, validating) = choose(&in_use, parent.status.signing_issuer.as_deref())
        .ok_or_else(|| frozen("NoActiveMRC", "no active MeshRootCertificate"))?;
    step_keeps_trust(&parent.status, signing, validating, &mrcs)?;
    let signing_ca = usable_ca(signing, &related_secrets, now, cas)?;
    let validating_ca = usable_ca(validating, &related_secrets, now, cas)?;
    spiffe_ids_writable(signing, &spec)?;
    let trust = bundles.get(&signing_ca, &validating_ca);
    Ok((
        spec,
        Issuers {
            signing,
            validating,
            signing_ca,
            trust,
        },
    ))
}

/// §3.2: {X:A} -> (X, X); {X:A, Y:P} -> (X, Y); {X:A, Y:A} -> the current signer keeps signing,
/// else the name that sorts first. `in_use` is sorted by name and already checked.
fn choose<'a>(
    in_use: &[(&'a Mrc<'a>, Role)],
    current_signer: Option<&str>,
) -> Option<(&'a Mrc<'a>, &'a Mrc<'a>)> {
    match in_use {
        [(x, Role::Active)] => Some((x, x)),
        [(x, Role::Active), (y, Role::Passive)] => Some((x, y)),
        [(x, Role::Passive), (y, Role::Active)] => Some((y, x)),
        [(x, Role::Active), (y, Role::Active)] => {
            if current_signer == Some(y.metadata.name.as_str()) {
                Some((y, x))
            } else {
                Some((x, y))
            }
        }
        _ => None,
    }
}

/// The move from the current pair to the chosen one is one rotation step (§5): the new signer is
/// trusted now, and the signer of the leaves in use is trusted after. So workloads that have
/// reloaded their leaf Secret and workloads that have not yet still trust each other. Roles
/// the webhook admits one by one can skip a step when they pass through combinations the
/// manager refused (frozen meanwhile), which would otherwise switch the signer to a CA no
/// workload trusts (DECISIONS). No current pair (a first sync), or a current signer that no
/// longer names an MRC of the namespace (deleted on purpose), holds nothing back.
fn step_keeps_trust(
    current: &ManagerStatus,
    signing: &Mrc,
    validating: &Mrc,
    mrcs: &[&Mrc],
) -> Result<(), Frozen> {
    let Some(signs_now) = current.signing_issuer.as_deref() else {
        return Ok(());
    };
    if !mrcs.iter().any(|m| m.metadata.name == signs_now) {
        return Ok(());
    }
    let validates_now = current.validating_issuer.as_deref().unwrap_or(signs_now);
    let (s, v) = (
        signing.metadata.name.as_str(),
        validating.metadata.name.as_str(),
    );
    if s != signs_now && s != validates_now {
        let trusted = match validates_now == signs_now {
            true => signs_now.to_owned(),
            false => format!("{signs_now} and {validates_now}"),
        };
        return Err(frozen(
            "RotationStepSkipped",
            format!(
                "MeshRootCertificate {s} would sign before the leaves trust it (they trust \
                 {trusted}): roles go one rotation step at a time, {s} passive beside \
                 {signs_now}, which signs now, before it is active (ROTATION.md)"
            ),
        ));
    }
    if signs_now != s && signs_now != v {
        return Err(frozen(
            "RotationStepSkipped",
            format!(
                "MeshRootCertificate {signs_now} signs the leaves in use and would no longer be \
                 trusted: roles go one rotation step at a time, {signs_now} passive while {s} \
                 signs, before it is inactive (ROTATION.md)"
            ),
        ));
    }
    Ok(())
}

/// §3.1 step 5 for one issuer: its provider and its Tresor CA.
fn usable_ca(
    mrc: &Mrc,
    secrets: &[&DataObject],
    now: OffsetDateTime,
    cas: &CheckedCas,
) -> Result<Arc<Ca>, Frozen> {
    let name = &mrc.metadata.name;
    let secret_name = match provider(&mrc.spec) {
        Ok(Provider::Tresor(secret)) => secret,
        Ok(Provider::Vault) | Ok(Provider::CertManager) => {
            return Err(frozen(
                "UnsupportedProvider",
                format!("MeshRootCertificate {name}: only the tresor provider is supported"),
            ))
        }
        Err(p) => {
            return Err(frozen(
                "InvalidMRC",
                format!("MeshRootCertificate {name}: {}", p.message()),
            ))
        }
    };
    let Some(secret) = secrets.iter().find(|s| s.metadata.name == secret_name) else {
        return Err(frozen(
            "CAUnavailable",
            format!("MeshRootCertificate {name}: CA Secret {secret_name} does not exist yet"),
        ));
    };
    let (crt, key) = (secret.value("ca.crt"), secret.value("private.key"));
    cas.get(crt.as_deref(), key.as_deref(), now).map_err(|e| {
        frozen(
            "CAUnavailable",
            format!("MeshRootCertificate {name}: CA Secret {secret_name}: {e}"),
        )
    })
}

fn with_newline(text: &str) -> String {
    if text.ends_with('\n') {
        text.to_owned()
    } else {
        format!("{text}\n")
    }
}

fn labels<'a>(manager: &str) -> Cow<'a, Strings<'a>> {
    Cow::Owned(BTreeMap::from([
        (MANAGED_BY.into(), "metahooks".into()),
        (LABEL_MANAGER.into(), manager.to_owned().into()),
    ]))
}

/// §3.3-§3.5: the trust bundle and every leaf, kept when still good, else issued anew.
fn issue<'a>(
    req: &'a SyncRequest<'a>,
    spec: &ManagerSpec,
    issuers: &Issuers<'a>,
    now: OffsetDateTime,
    rng: &dyn SecureRandom,
    leaves: &CheckedLeaves,
) -> SyncResponse<'a> {
    let parent = &req.parent;
    let ns = parent.metadata.namespace.as_deref().unwrap_or("");
    let manager = parent.metadata.name.as_str();
    let s = issuers.signing.metadata.name.as_str();
    let v = issuers.validating.metadata.name.as_str();
    let mut children = Vec::with_capacity(1 + spec.certificates.len());
    children.push(DataObjectOut {
        api_version: "v1",
        kind: "ConfigMap",
        metadata: MetaOut {
            name: Cow::Owned(spec.config_map_name.clone()),
            namespace: Cow::Borrowed(ns),
            labels: labels(manager),
            annotations: Cow::default(),
        },
        type_: None,
        data: BTreeMap::from([(Text::from("ca.crt"), issuers.trust.config_map.clone())]),
    });
    let observed_leaves: HashMap<&str, &DataObject> = req
        .children
        .secrets
        .iter()
        .map(Arc::as_ref)
        .map(|o| (o.metadata.name.as_str(), o))
        .collect();
    let mut earliest_renewal: Option<OffsetDateTime> = None;
    for cert in &spec.certificates {
        let want = LeafRequest {
            common_name: &cert.common_name,
            dns_names: &cert.dns_names,
            uri: spiffe_uri(issuers.signing, cert),
            validity: cert.validity,
        };
        let observed = observed_leaves.get(cert.secret_name.as_str()).copied();
        let kept = observed.and_then(|o| keep(o, &want, issuers, now, leaves));
        let leaf = match kept {
            Some(k) => k,
            None => match issuers.signing_ca.issue(&want, now, rng) {
                Ok(issued) => LeafOut {
                    tls_crt: DataValue::Made(b64(issued.cert_pem.as_bytes())),
                    tls_key: DataValue::Made(b64(issued.key_pem.as_bytes())),
                    renewal: now.saturating_add(cert.validity) - cert.validity / 3,
                    seal: issued.seal.text().to_owned().into(),
                },
                Err(e) => {
                    return freeze(
                        req,
                        frozen(
                            "CAUnavailable",
                            format!("MeshRootCertificate {s}: issuing {}: {e}", cert.secret_name),
                        ),
                        &parent.status,
                        parent.metadata.generation,
                        now,
                    )
                }
            },
        };
        let renewal = leaf.renewal;
        earliest_renewal = Some(earliest_renewal.map_or(renewal, |e| e.min(renewal)));
        children.push(DataObjectOut {
            api_version: "v1",
            kind: "Secret",
            metadata: MetaOut {
                name: Cow::Owned(cert.secret_name.clone()),
                namespace: Cow::Borrowed(ns),
                labels: labels(manager),
                annotations: Cow::Owned(BTreeMap::from([
                    (ANNOTATION_SIGNING.into(), s.into()),
                    (ANNOTATION_VALIDATING.into(), v.into()),
                    (ANNOTATION_SEAL.into(), leaf.seal),
                ])),
            },
            type_: Some("kubernetes.io/tls".to_owned()),
            data: BTreeMap::from([
                (Text::from("ca.crt"), issuers.trust.secret.clone()),
                (Text::from("tls.crt"), leaf.tls_crt),
                (Text::from("tls.key"), leaf.tls_key),
            ]),
        });
    }
    let ready = parent.status.conditions.condition(
        "Ready",
        true,
        "IssuersReady",
        format!("signing with {s}, validating with {v}"),
        parent.metadata.generation,
        now,
    );
    CompositeResponse {
        status: Status {
            signing_issuer: Some(s.to_owned()),
            validating_issuer: Some(v.to_owned()),
            conditions: vec![ready],
        },
        children,
        resync_after_seconds: earliest_renewal
            .map(|r| ((r - now).as_seconds_f64().ceil().max(1.0)) as u64),
        finalized: None,
    }
}

/// A signer with `spiffeEnabled` writes a SPIFFE ID into every leaf (§3.4), which peers parse
/// as a URI and SPIFFE verifiers as a SPIFFE ID: its trust domain and each `commonName`'s path
/// must be ones the SPIFFE standard allows, or the leaf would be refused where it is presented.
fn spiffe_ids_writable(signing: &Mrc, spec: &ManagerSpec) -> Result<(), Frozen> {
    if !spiffe_enabled(&signing.spec) {
        return Ok(());
    }
    let name = &signing.metadata.name;
    let domain = trust_domain(&signing.spec);
    if !is_spiffe_trust_domain(domain) {
        return Err(frozen(
            "InvalidMRC",
            format!(
                "MeshRootCertificate {name}: spec.trustDomain is not a SPIFFE trust domain \
                 (parts between dots of lowercase letters, digits, '-' and '_', 255 characters \
                 in all), which the SPIFFE IDs of its leaves need"
            ),
        ));
    }
    match spec
        .certificates
        .iter()
        .position(|c| !is_spiffe_path(spiffe_path(domain, &c.common_name)))
    {
        Some(i) => Err(frozen(
            "InvalidSpec",
            format!(
                "spec.certificates[{i}].commonName does not make a SPIFFE ID path (parts between \
                 dots of letters, digits, '-' and '_'), which a leaf {name} signs needs"
            ),
        )),
        None => Ok(()),
    }
}

/// A SPIFFE trust domain: lowercase letters, digits, `-` and `_` between dots, no part empty
/// (an empty one is not a host a URI parser takes), at most 255 characters.
fn is_spiffe_trust_domain(domain: &str) -> bool {
    domain.len() <= 255
        && dot_parts_made_of(
            domain,
            |b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_'),
        )
}

/// The path of a leaf's SPIFFE ID: `commonName` without a trailing `.<trust domain>` (§3.4),
/// its dots the ID's slashes.
fn spiffe_path<'c>(domain: &str, common_name: &'c str) -> &'c str {
    common_name
        .strip_suffix(domain)
        .and_then(|rest| rest.strip_suffix('.'))
        .unwrap_or(common_name)
}

/// Whether a path's parts between dots are SPIFFE path segments: not empty, and of letters,
/// digits, `-` and `_` (a dot in a segment cannot arise: dots become slashes).
fn is_spiffe_path(path: &str) -> bool {
    dot_parts_made_of(path, |b| {
        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_')
    })
}

/// Whether every part of `s` between dots is non-empty and made of bytes `allowed` takes.
fn dot_parts_made_of(s: &str, allowed: impl Fn(u8) -> bool) -> bool {
    s.split('.')
        .all(|part| !part.is_empty() && part.bytes().all(&allowed))
}

/// `spiffe://<trust domain>/<path>` when the signing MRC has SPIFFE enabled (§3.4).
fn spiffe_uri(signing: &Mrc, cert: &Certificate) -> Option<String> {
    if !spiffe_enabled(&signing.spec) {
        return None;
    }
    let domain = trust_domain(&signing.spec);
    let path = spiffe_path(domain, &cert.common_name);
    Some(format!("spiffe://{domain}/{}", path.replace('.', "/")))
}

/// A leaf Secret's values, kept or issued, with its renewal point and S's seal of it as written.
struct LeafOut<'a> {
    tls_crt: DataValue<'a>,
    tls_key: DataValue<'a>,
    renewal: OffsetDateTime,
    seal: Text<'a>,
}

/// §3.3: an observed leaf is kept when it is ours under (S, V), signed by S, names what the spec
/// asks for, and has more than a third of its validity left.
fn keep<'a>(
    observed: &DataObject<'a>,
    want: &LeafRequest,
    issuers: &Issuers,
    now: OffsetDateTime,
    leaves: &CheckedLeaves,
) -> Option<LeafOut<'a>> {
    let annotations = &observed.metadata.annotations;
    if annotations.get(ANNOTATION_SIGNING).map(Text::as_str)
        != Some(issuers.signing.metadata.name.as_str())
        || annotations.get(ANNOTATION_VALIDATING).map(Text::as_str)
            != Some(issuers.validating.metadata.name.as_str())
    {
        return None;
    }
    let (crt, key) = (observed.data.get("tls.crt")?, observed.data.get("tls.key")?);
    let written = annotations.get(ANNOTATION_SEAL);
    let leaf = issuers.signing_ca.issued_leaf(
        &crt.text(),
        &key.text(),
        written.map(Text::as_str),
        &observed.leaf_digest,
        want,
        leaves,
    )?;
    let validity = leaf.validity;
    let lifetime = validity.not_after - validity.not_before;
    (validity.not_after - now >= lifetime / 3).then(|| LeafOut {
        tls_crt: DataValue::Raw(crt.clone()),
        tls_key: DataValue::Raw(key.clone()),
        renewal: validity.not_after - lifetime / 3,
        // Most leaves come with their seal: written back as sent.
        seal: match written {
            Some(text) if leaf.seal.is_written_as(text) => text.clone(),
            _ => leaf.seal.text().to_owned().into(),
        },
    })
}

/// §3.6: nothing issued, nothing deleted, the previous issuers kept, Ready=False.
fn freeze<'a>(
    req: &'a SyncRequest<'a>,
    f: Frozen,
    previous: &ManagerStatus,
    generation: Option<i64>,
    now: OffsetDateTime,
) -> SyncResponse<'a> {
    let ns = req.parent.metadata.namespace.as_deref().unwrap_or("");
    let mut config_maps: Vec<&DataObject> =
        req.children.config_maps.iter().map(Arc::as_ref).collect();
    config_maps.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut secrets: Vec<&DataObject> = req.children.secrets.iter().map(Arc::as_ref).collect();
    secrets.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let children = config_maps
        .into_iter()
        .map(|c| DataObjectOut::observed("ConfigMap", c, ns))
        .chain(
            secrets
                .into_iter()
                .map(|s| DataObjectOut::observed("Secret", s, ns)),
        )
        .collect();
    let ready = previous
        .conditions
        .condition("Ready", false, f.reason, f.message, generation, now);
    CompositeResponse {
        status: Status {
            signing_issuer: previous.signing_issuer.as_deref().map(str::to_owned),
            validating_issuer: previous.validating_issuer.as_deref().map(str::to_owned),
            conditions: vec![ready],
        },
        children,
        resync_after_seconds: None,
        finalized: None,
    }
}
