//! The one table of hooks. The server mounts each at `/<id>`, `metahooks run <id>` calls the same
//! function, metrics and logs label requests with the id, and the manifests are checked against it.
//! Adding a hook is one line here plus its module.

use crate::contract::{encode, AdmissionRequest, AdmissionResponse, AdmissionReview, ObjectMeta};
use crate::memo::{Memo, Reading};
use crate::meta::Condition;
use crate::RequestError;
use crate::{app_discovery, cert_rotation, delete_graph, mesh_root_certificate};
use ring::rand::SecureRandom;
use serde::Serialize;
use time::OffsetDateTime;

/// What a hook may use besides its request: the time, randomness for key generation, and the
/// server's memos (sync requests decoded, certificates checked and specs planned before; shared
/// between requests, they only save time).
pub struct HookContext<'a> {
    pub now: OffsetDateTime,
    pub rng: &'a dyn SecureRandom,
    pub memo: &'a Memo,
}

/// What a hook answers: the encoded response and, for logs and metrics, what the request was
/// about, whether an admission request's object was allowed, and the condition a sync answer
/// gives its object.
#[derive(Debug)]
pub struct HookOutput {
    pub body: Vec<u8>,
    pub subject: Subject,
    /// `response.allowed` of an admission answer; `None` for a Metacontroller hook.
    pub allowed: Option<bool>,
    /// The condition of a sync or finalize answer that says whether the controller moves its
    /// object on; `None` for the other hooks.
    pub condition: Option<SyncCondition>,
    /// How a sync or finalize request was read, from the memo or decoded; `None` for the other
    /// hooks, which keep no request.
    pub reading: Option<Reading>,
}

/// The condition a sync answer gives its object that tells whether the controller moves it on:
/// `Ready` (a CertificateManager frozen, an AppDiscovery that cannot work), `Valid` (a
/// WorkloadSet), `Accepted` (a MeshRootCertificate's CA). Counted in `/metrics`; its reason is
/// one of the hook's own words, never text from the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyncCondition {
    pub type_: &'static str,
    pub status: bool,
    pub reason: &'static str,
}

impl HookOutput {
    pub fn json<T: Serialize>(subject: Subject, response: &T) -> Result<Self, RequestError> {
        Ok(HookOutput {
            body: encode(response)?,
            subject,
            allowed: None,
            condition: None,
            reading: None,
        })
    }

    /// The answer made with a request read as `reading`, as
    /// [`crate::memo::DecodedRequests::with_request`] gives them.
    pub fn read_as((output, reading): (Self, Reading)) -> Self {
        HookOutput {
            reading: Some(reading),
            ..output
        }
    }

    /// The answer of a sync hook, with its condition `type_` among the `conditions` it writes.
    pub fn sync<T: Serialize>(
        subject: Subject,
        response: &T,
        conditions: &[Condition],
        type_: &'static str,
    ) -> Result<Self, RequestError> {
        let condition = conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| SyncCondition {
                type_,
                status: c.status == "True",
                reason: c.reason,
            });
        Ok(HookOutput {
            condition,
            ..Self::json(subject, response)?
        })
    }

    /// The answer to an admission review, in the review's own version.
    pub fn admission<O, Old>(
        review: &AdmissionReview<O, Old>,
        response: AdmissionResponse,
    ) -> Result<Self, RequestError> {
        let allowed = response.allowed;
        Ok(HookOutput {
            body: encode(&response.into_review(review.version))?,
            subject: Subject::admission(&review.request),
            allowed: Some(allowed),
            condition: None,
            reading: None,
        })
    }
}

/// The object a request is about: the parent or target of a Metacontroller hook, or the object
/// under admission (then `uid` is the admission request uid and `operation` its operation).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Subject {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub operation: String,
}

impl Subject {
    /// The object under admission, with the admission request's uid and operation.
    fn admission<O, Old>(req: &AdmissionRequest<O, Old>) -> Self {
        Subject {
            kind: req.kind.kind.clone(),
            namespace: req.namespace.clone().unwrap_or_default(),
            name: req.name.clone().unwrap_or_default(),
            uid: req.uid.clone(),
            operation: req.operation.clone(),
        }
    }

    pub fn object(kind: &str, meta: &ObjectMeta) -> Self {
        Subject {
            kind: kind.to_owned(),
            namespace: meta.namespace.as_deref().unwrap_or_default().to_owned(),
            name: meta.name.to_string(),
            uid: String::new(),
            operation: String::new(),
        }
    }
}

/// The contract a hook implements; decides the body limit and how the route is documented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    CompositeSync,
    CompositeFinalize,
    DecoratorSync,
    Customize,
    ValidatingAdmission,
    MutatingAdmission,
}

impl HookKind {
    /// Admission hooks are called by the API server, the others by Metacontroller.
    pub fn is_admission(self) -> bool {
        matches!(
            self,
            HookKind::ValidatingAdmission | HookKind::MutatingAdmission
        )
    }

    /// The sync and finalize hooks keep the requests they decode (`memo::Requests`), and say how
    /// each was read ([`HookOutput::reading`]).
    pub fn keeps_requests(self) -> bool {
        matches!(
            self,
            HookKind::CompositeSync | HookKind::CompositeFinalize | HookKind::DecoratorSync
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::CompositeSync => "CompositeController sync",
            HookKind::CompositeFinalize => "CompositeController finalize",
            HookKind::DecoratorSync => "DecoratorController sync",
            HookKind::Customize => "customize",
            HookKind::ValidatingAdmission => "validating admission",
            HookKind::MutatingAdmission => "mutating admission",
        }
    }
}

pub type HookFn = fn(&[u8], &HookContext) -> Result<HookOutput, RequestError>;

pub struct Hook {
    /// `<controller>/<hook>`, kebab-case; the route is `/<id>`.
    pub id: &'static str,
    pub kind: HookKind,
    pub summary: &'static str,
    pub run: HookFn,
}

impl Hook {
    pub fn route(&self) -> String {
        format!("/{}", self.id)
    }
}

/// Every hook metahooks serves.
pub const HOOKS: &[Hook] = &[
    hook(
        "app-discovery/sync",
        HookKind::CompositeSync,
        "AppDiscovery: KeptnApps from KeptnAppCreationRequests and KeptnWorkloads",
        app_discovery::sync_hook,
    ),
    hook(
        "app-discovery/customize",
        HookKind::Customize,
        "the namespace's KeptnWorkloads and KeptnApps as related",
        app_discovery::customize_hook,
    ),
    hook(
        "app-discovery/mutate",
        HookKind::MutatingAdmission,
        "labels new KeptnAppCreationRequests for adoption",
        app_discovery::mutate_hook,
    ),
    hook(
        "delete-graph/sync",
        HookKind::CompositeSync,
        "WorkloadSet Pods under add and delete conditions",
        delete_graph::sync_hook,
    ),
    hook(
        "delete-graph/finalize",
        HookKind::CompositeFinalize,
        "tears a WorkloadSet down in reverse dependency order",
        delete_graph::finalize_hook,
    ),
    hook(
        "delete-graph/validate",
        HookKind::ValidatingAdmission,
        "rejects dependency cycles and bad conditions",
        delete_graph::validate_hook,
    ),
    hook(
        "cert-rotation/sync",
        HookKind::CompositeSync,
        "CertificateManager: issuers, trust bundle, leaf certificates",
        cert_rotation::sync_hook,
    ),
    hook(
        "cert-rotation/customize",
        HookKind::Customize,
        "the namespace's MeshRootCertificates and Secrets as related",
        cert_rotation::customize_hook,
    ),
    hook(
        "mesh-root-certificate/sync",
        HookKind::DecoratorSync,
        "one MeshRootCertificate: its CA Secret and rotation stage",
        mesh_root_certificate::sync_hook,
    ),
    hook(
        "mesh-root-certificate/customize",
        HookKind::Customize,
        "the other MRCs, the CertificateManagers and the CA Secret as related",
        mesh_root_certificate::customize_hook,
    ),
    hook(
        "mesh-root-certificate/validate",
        HookKind::ValidatingAdmission,
        "MeshRootCertificate create, update and delete rules",
        mesh_root_certificate::validate_hook,
    ),
    hook(
        "mesh-root-certificate/mutate",
        HookKind::MutatingAdmission,
        "MeshRootCertificate defaults on create",
        mesh_root_certificate::mutate_hook,
    ),
];

const fn hook(id: &'static str, kind: HookKind, summary: &'static str, run: HookFn) -> Hook {
    Hook {
        id,
        kind,
        summary,
        run,
    }
}

/// The hook with this id (`delete-graph/sync`), if any.
pub fn find(id: &str) -> Option<&'static Hook> {
    HOOKS.iter().find(|h| h.id == id)
}

/// Runs `hook` on `request` at `now` with fresh randomness and empty memos, and
/// returns its JSON answer: the unit tests' way of calling a hook as the server does.
#[cfg(test)]
pub(crate) fn answer_of(
    hook: HookFn,
    request: &serde_json::Value,
    now: OffsetDateTime,
) -> serde_json::Value {
    let output = output_of(hook, request, now);
    serde_json::from_slice(&output.body).expect("a JSON answer")
}

/// As [`answer_of`], the whole output: the answer's bytes and the request's subject.
#[cfg(test)]
pub(crate) fn output_of(
    hook: HookFn,
    request: &serde_json::Value,
    now: OffsetDateTime,
) -> HookOutput {
    let body = serde_json::to_vec(request).expect("a JSON request");
    output_of_text(hook, &body, now).expect("the hook answers")
}

/// As [`output_of`], on a request's text, which can hold what a `Value` cannot (a key given
/// twice, a number out of range), and the hook's error if it fails.
#[cfg(test)]
pub(crate) fn output_of_text(
    hook: HookFn,
    body: &[u8],
    now: OffsetDateTime,
) -> Result<HookOutput, RequestError> {
    let ctx = HookContext {
        now,
        rng: &ring::rand::SystemRandom::new(),
        memo: &Memo::default(),
    };
    hook(body, &ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The route table of API.md, which is binding: every route, its contract, and who calls it.
    #[test]
    fn the_hook_table_is_api_md_route_for_route() {
        use HookKind::*;
        let table: Vec<(String, HookKind, bool)> = HOOKS
            .iter()
            .map(|h| (h.route(), h.kind, h.kind.is_admission()))
            .collect();
        let want = [
            ("/app-discovery/sync", CompositeSync, false),
            ("/app-discovery/customize", Customize, false),
            ("/app-discovery/mutate", MutatingAdmission, true),
            ("/delete-graph/sync", CompositeSync, false),
            ("/delete-graph/finalize", CompositeFinalize, false),
            ("/delete-graph/validate", ValidatingAdmission, true),
            ("/cert-rotation/sync", CompositeSync, false),
            ("/cert-rotation/customize", Customize, false),
            ("/mesh-root-certificate/sync", DecoratorSync, false),
            ("/mesh-root-certificate/customize", Customize, false),
            ("/mesh-root-certificate/validate", ValidatingAdmission, true),
            ("/mesh-root-certificate/mutate", MutatingAdmission, true),
        ];
        assert_eq!(table, want.map(|(r, k, a)| (r.to_owned(), k, a)).to_vec());
        let names: Vec<&str> = [
            CompositeSync,
            CompositeFinalize,
            DecoratorSync,
            Customize,
            ValidatingAdmission,
            MutatingAdmission,
        ]
        .map(HookKind::as_str)
        .to_vec();
        assert_eq!(
            names,
            [
                "CompositeController sync",
                "CompositeController finalize",
                "DecoratorController sync",
                "customize",
                "validating admission",
                "mutating admission"
            ]
        );
    }

    /// What a request's log line names: the parent, or the object under admission with the
    /// admission's uid and operation.
    #[test]
    fn subjects_name_the_parent_or_the_object_under_admission() {
        let run = |id: &str, request: serde_json::Value| {
            output_of(find(id).unwrap().run, &request, OffsetDateTime::UNIX_EPOCH).subject
        };
        let sync = run(
            "delete-graph/sync",
            serde_json::json!({"parent": {"metadata": {"name": "shop", "namespace": "team"}}}),
        );
        assert_eq!(
            sync,
            Subject {
                kind: "WorkloadSet".into(),
                namespace: "team".into(),
                name: "shop".into(),
                uid: String::new(),
                operation: String::new()
            }
        );
        let review = run(
            "delete-graph/validate",
            serde_json::json!({"request": {"uid": "u-1", "operation": "DELETE", "name": "shop",
                "namespace": "team", "kind": {"group": "metahooks.dev", "version": "v1alpha1", "kind": "WorkloadSet"}}}),
        );
        assert_eq!(
            review,
            Subject {
                kind: "WorkloadSet".into(),
                namespace: "team".into(),
                name: "shop".into(),
                uid: "u-1".into(),
                operation: "DELETE".into()
            }
        );
    }
}
