//! `/mesh-root-certificate/sync` (cert-rotation.md §4): one MRC's CA Secret and its rotation
//! stage, read from the CertificateManagers' status.

use super::model::{
    b64, check_combination, provider, role, trust_domain, DataObject, DataObjectOut, DataValue,
    Mrc, Provider, Role, MANAGED_BY, MANAGER_KEY, MRC_KEY, SECRET_KEY,
};
use crate::cert_rotation::spec::LongestValidity;
use crate::cert_rotation::sync::ManagerStatus;
use crate::contract::{
    object_maps, DecoratorRequest, DecoratorResponse, MetaOut, NameMeta, Object, Text,
};
use crate::meta::{parse_rfc3339, Condition, LABEL_VALUE_MAX_LEN};
use crate::pki::{generate_ca, CheckedCas};
use ring::rand::SecureRandom;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use time::{Duration, OffsetDateTime};

pub const LABEL_MRC: &str = "metahooks.dev/mesh-root-certificate";

object_maps! {
    /// The attachments: the MRC's CA Secret.
    pub kept struct Attachments<'a> {
        secrets: DataObject<'a> = SECRET_KEY,
    }
}

/// A CertificateManager as this sync reads it: its namespace, the issuers its status names and
/// the longest leaf validity its spec asks for.
pub type Manager<'a> = Object<'a, LongestValidity, ManagerStatus<'a>, NameMeta<'a>>;

object_maps! {
    /// The namespace's MRCs and CertificateManagers, and the named CA Secret.
    pub struct Related<'a> {
        mrcs: Mrc<'a> = MRC_KEY,
        managers: Manager<'a> = MANAGER_KEY,
        secrets: DataObject<'a> = SECRET_KEY,
    }
}

pub type SyncRequest<'a> = DecoratorRequest<Mrc<'a>, Attachments<'a>, Related<'a>>;

#[derive(Debug, Serialize)]
pub struct Status {
    pub state: &'static str,
    pub conditions: Vec<Condition>,
}

pub type SyncResponse<'a> = DecoratorResponse<Status, DataObjectOut<'a>>;

/// How the namespace's managers use this MRC (their status is the only source).
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    signs: bool,
    validates: bool,
    /// Some manager signs with this MRC while validating with another.
    other_trusted_alongside: bool,
}

impl Usage {
    fn in_use(self) -> bool {
        self.signs || self.validates
    }
}

pub fn sync<'a>(
    req: &'a SyncRequest<'a>,
    now: OffsetDateTime,
    rng: &dyn SecureRandom,
    cas: &CheckedCas,
) -> SyncResponse<'a> {
    let mrc = &req.object;
    let name = mrc.metadata.name.as_str();
    let ns = mrc.metadata.namespace.as_deref().unwrap_or("");
    let managers: Vec<&Manager> = req
        .related
        .managers
        .iter()
        .map(Arc::as_ref)
        .filter(|m| m.metadata.namespace_or(ns) == ns)
        .collect();

    let mut usage = Usage::default();
    for m in &managers {
        let s = m.status.signing_issuer.as_deref();
        let v = m.status.validating_issuer.as_deref();
        if s == Some(name) {
            usage.signs = true;
            if v.is_some_and(|v| v != name) {
                usage.other_trusted_alongside = true;
            }
        }
        if v == Some(name) {
            usage.validates = true;
        }
    }

    // §4.1: every observed attachment stays; a missing CA may be generated.
    let mut attachments: Vec<DataObjectOut> = req
        .attachments
        .secrets
        .iter()
        .map(|s| DataObjectOut::observed("Secret", s, ns))
        .collect();
    let error = ca_secret(req, usage, now, rng, cas, &mut attachments)
        .err()
        .or_else(|| role_combination(req, ns).err());
    attachments.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

    let previous = &mrc.status.conditions;
    let generation = mrc.metadata.generation;
    let accepted = match &error {
        None => previous.condition(
            "Accepted",
            true,
            "CAReady",
            "the CA is usable",
            generation,
            now,
        ),
        Some((reason, message)) => {
            previous.condition("Accepted", false, reason, message.clone(), generation, now)
        }
    };
    let in_use = match (usage.signs, usage.validates) {
        (true, true) => previous.condition(
            "InUse",
            true,
            "SigningAndValidating",
            "a CertificateManager signs and validates with it",
            generation,
            now,
        ),
        (true, false) => previous.condition(
            "InUse",
            true,
            "Signing",
            "a CertificateManager signs with it",
            generation,
            now,
        ),
        (false, true) => previous.condition(
            "InUse",
            true,
            "Validating",
            "a CertificateManager validates with it",
            generation,
            now,
        ),
        (false, false) => previous.condition(
            "InUse",
            false,
            "NotInUse",
            "no CertificateManager uses it",
            generation,
            now,
        ),
    };

    let prev = mrc.status.state.as_deref().unwrap_or("");
    let mut resync = None;
    let state = if error.is_some() {
        "error"
    } else if usage.signs {
        if !usage.other_trusted_alongside || prev == "active" {
            "active"
        } else {
            "issuingRollout"
        }
    } else if usage.validates {
        if matches!(prev, "active" | "issuingRollout" | "issuingRollback") {
            "issuingRollback"
        } else {
            "validatingRollout"
        }
    } else if matches!(prev, "active" | "issuingRollout" | "issuingRollback") {
        // Always come back at least once, to move on to inactive when the grace ends.
        resync = Some(grace_left(&managers, &in_use, now).unwrap_or(1));
        "validatingRollback"
    } else if prev == "validatingRollback" {
        resync = grace_left(&managers, &in_use, now);
        if resync.is_some() {
            "validatingRollback"
        } else {
            "inactive"
        }
    } else {
        "inactive"
    };

    DecoratorResponse {
        labels: None,
        annotations: None,
        status: Some(Status {
            state,
            conditions: vec![accepted, in_use],
        }),
        attachments,
        resync_after_seconds: resync,
        finalized: None,
    }
}

/// Seconds of grace left (at least 1), or `None` once it has ended. The grace is the longest
/// leaf validity of the namespace's `managers`, counted from `InUse` turning False.
fn grace_left(managers: &[&Manager], in_use: &Condition, now: OffsetDateTime) -> Option<u64> {
    let grace = managers
        .iter()
        .filter_map(|m| m.spec.0)
        .max()
        .unwrap_or(Duration::ZERO);
    let since = parse_rfc3339(&in_use.last_transition_time).unwrap_or(now);
    let left = since.saturating_add(grace) - now;
    (left > Duration::ZERO).then(|| left.as_seconds_f64().ceil().max(1.0) as u64)
}

type Problem = (&'static str, String);

/// §4.1 and the first four errors of §4.2: the provider and the CA Secret.
fn ca_secret<'a>(
    req: &'a SyncRequest<'a>,
    usage: Usage,
    now: OffsetDateTime,
    rng: &dyn SecureRandom,
    cas: &CheckedCas,
    attachments: &mut Vec<DataObjectOut<'a>>,
) -> Result<(), Problem> {
    let mrc = &req.object;
    let name = mrc.metadata.name.as_str();
    let ns = mrc.metadata.namespace.as_deref().unwrap_or("");
    if let Err(r) = role(&mrc.spec) {
        return Err((
            "InvalidSpec",
            format!("unknown role '{r}' (expected active, passive or inactive)"),
        ));
    }
    let secret_name = match provider(&mrc.spec) {
        Ok(Provider::Tresor(s)) => s,
        Ok(Provider::Vault) => {
            return Err((
                "UnsupportedProvider",
                "the vault provider is not supported; use tresor".into(),
            ))
        }
        Ok(Provider::CertManager) => {
            return Err((
                "UnsupportedProvider",
                "the certManager provider is not supported; use tresor".into(),
            ))
        }
        Err(p) => return Err(("InvalidSpec", p.message().into())),
    };
    let attached = req
        .attachments
        .secrets
        .iter()
        .find(|s| s.metadata.name == secret_name);
    let users = req
        .related
        .secrets
        .iter()
        .find(|s| s.metadata.name == secret_name && s.metadata.namespace_or(ns) == ns);
    let secret = match attached.or(users) {
        Some(secret) => secret,
        None if usage.in_use() => {
            return Err((
                "CASecretMissing",
                format!("CA Secret {secret_name} is missing while a CertificateManager uses this MRC; it is not regenerated"),
            ))
        }
        // The generated Secret carries the MRC's name as a label value, which the API server
        // would refuse: say so rather than answer with a Secret that is never created.
        None if name.len() > LABEL_VALUE_MAX_LEN => {
            return Err((
                "CASecretMissing",
                format!("CA Secret {secret_name} is missing and is not generated for a name of more than {LABEL_VALUE_MAX_LEN} characters (its {LABEL_MRC} label); create it with ca.crt and private.key"),
            ))
        }
        None => {
            let pair = generate_ca(name, trust_domain(&mrc.spec), now, rng)
                .map_err(|e| ("CAUnusable", format!("CA Secret {secret_name}: {e}")))?;
            attachments.push(DataObjectOut {
                api_version: "v1",
                kind: "Secret",
                metadata: MetaOut {
                    name: Cow::Owned(secret_name),
                    namespace: Cow::Borrowed(ns),
                    labels: Cow::Owned(BTreeMap::from([
                        (MANAGED_BY.into(), "metahooks".into()),
                        (LABEL_MRC.into(), name.into()),
                    ])),
                    annotations: Cow::default(),
                },
                type_: Some("Opaque".to_owned()),
                data: BTreeMap::from([
                    (
                        Text::from("ca.crt"),
                        DataValue::Made(b64(pair.cert_pem.as_bytes())),
                    ),
                    (
                        Text::from("private.key"),
                        DataValue::Made(b64(pair.key_pem.as_bytes())),
                    ),
                ]),
            });
            return Ok(());
        }
    };
    let (crt, key) = (secret.value("ca.crt"), secret.value("private.key"));
    cas.get(crt.as_deref(), key.as_deref(), now)
        .map(|_| ())
        .map_err(|e| ("CAUnusable", format!("CA Secret {secret_name}: {e}")))
}

/// The last error of §4.2: this MRC is in use by role and the namespace's in-use set is invalid.
fn role_combination(req: &SyncRequest, ns: &str) -> Result<(), Problem> {
    let mrc = &req.object;
    let name = mrc.metadata.name.as_str();
    if !matches!(role(&mrc.spec), Ok(Role::Active | Role::Passive)) {
        return Ok(());
    }
    let mut roles: BTreeMap<&str, Role> = req
        .related
        .mrcs
        .iter()
        .filter(|m| m.metadata.namespace_or(ns) == ns && !m.metadata.is_terminating())
        .filter(|m| m.metadata.name != name)
        .filter_map(|m| role(&m.spec).ok().map(|r| (m.metadata.name.as_str(), r)))
        .filter(|(_, r)| *r != Role::Inactive)
        .collect();
    if let Ok(r) = role(&mrc.spec) {
        roles.insert(name, r);
    }
    let list: Vec<Role> = roles.values().copied().collect();
    check_combination(&list).map_err(|bad| {
        let names: Vec<&str> = roles.keys().copied().collect();
        (
            "InvalidRoleCombination",
            format!(
                "{}: MeshRootCertificates in use: {}",
                bad.reason(),
                names.join(", ")
            ),
        )
    })
}
