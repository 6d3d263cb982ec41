//! mesh-root-certificate: the decorator of every MeshRootCertificate (its Tresor CA Secret and
//! its rotation stage) and the MRC admission rules (../shared/spec/cert-rotation.md §4, §6).

pub mod admission;
pub mod model;
pub mod sync;

use crate::contract::{
    decode, parent_namespace, AdmissionReview, CustomizeRequest, CustomizeResponse,
    RelatedResourceRule,
};
use crate::registry::{HookContext, HookOutput, Subject};
use crate::RequestError;
use admission::Admitted;
use model::{tresor_secret_name, Mrc, MANAGER_API, MRC_API};
use sync::SyncRequest;

/// The kind of the decorated object.
const KIND: &str = "MeshRootCertificate";

/// `POST /mesh-root-certificate/customize`: the namespace's MRCs and CertificateManagers, and
/// the MRC's named CA Secret (so that a user's own CA is visible).
pub fn customize_hook(body: &[u8], _ctx: &HookContext) -> Result<HookOutput, RequestError> {
    let req: CustomizeRequest<Mrc> = decode(body)?;
    let ns = parent_namespace(&req.parent.metadata.namespace, "parent", KIND)?;
    let mut rules = vec![
        RelatedResourceRule::in_namespace(MRC_API, "meshrootcertificates", ns),
        RelatedResourceRule::in_namespace(MANAGER_API, "certificatemanagers", ns),
    ];
    if let Some(secret) = tresor_secret_name(&req.parent.spec.provider) {
        let mut rule = RelatedResourceRule::in_namespace("v1", "secrets", ns);
        rule.names = Some(vec![secret.to_owned()]);
        rules.push(rule);
    }
    HookOutput::json(
        Subject::object(KIND, &req.parent.metadata),
        &CustomizeResponse {
            related_resources: rules,
        },
    )
}

crate::memo::decoded_request!(
    /// A sync request with the bytes it was decoded from, for the memo of decoded requests.
    DecodedSync,
    SyncRequest
);

/// `POST /mesh-root-certificate/sync`.
pub fn sync_hook(body: &[u8], ctx: &HookContext) -> Result<HookOutput, RequestError> {
    ctx.memo
        .requests
        .mesh_root_certificate
        .with_request(body, |req| {
            parent_namespace(&req.object.metadata.namespace, "object", KIND)?;
            let response = sync::sync(req, ctx.now, ctx.rng, &ctx.memo.pki.cas);
            let subject = Subject::object(KIND, &req.object.metadata);
            let conditions = response.status.as_ref().map_or(&[][..], |s| &s.conditions);
            HookOutput::sync(subject, &response, conditions, "Accepted")
        })
        .map(HookOutput::read_as)
}

/// `POST /mesh-root-certificate/validate`.
pub fn validate_hook(body: &[u8], _ctx: &HookContext) -> Result<HookOutput, RequestError> {
    let review: AdmissionReview<Admitted> = decode(body)?;
    let response = admission::validate(&review.request);
    HookOutput::admission(&review, response)
}

/// `POST /mesh-root-certificate/mutate`.
pub fn mutate_hook(body: &[u8], _ctx: &HookContext) -> Result<HookOutput, RequestError> {
    let review: AdmissionReview<Admitted> = decode(body)?;
    let response = admission::mutate(&review.request);
    HookOutput::admission(&review, response)
}

#[cfg(test)]
mod tests;
