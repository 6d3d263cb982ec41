//! cert-rotation: the CertificateManager of a namespace turns the roles of its
//! MeshRootCertificates into signing and validating issuers, keeps the trust bundle and the leaf
//! certificates (../shared/spec/cert-rotation.md §3).

pub mod spec;
pub mod sync;

use crate::contract::{
    decode, parent_namespace, CustomizeRequest, CustomizeResponse, Object, RelatedResourceRule,
};
use crate::mesh_root_certificate::model::MRC_API;
use crate::registry::{HookContext, HookOutput, Subject};
use crate::RequestError;
use sync::SyncRequest;

/// The parent's kind.
const KIND: &str = "CertificateManager";

/// `POST /cert-rotation/customize`: the namespace's MRCs and all its Secrets (a user's own CA
/// Secret carries no label to select on).
pub fn customize_hook(body: &[u8], _ctx: &HookContext) -> Result<HookOutput, RequestError> {
    let req: CustomizeRequest<Object> = decode(body)?;
    let ns = parent_namespace(&req.parent.metadata.namespace, "parent", KIND)?;
    let response = CustomizeResponse {
        related_resources: vec![
            RelatedResourceRule::in_namespace(MRC_API, "meshrootcertificates", ns),
            RelatedResourceRule::in_namespace("v1", "secrets", ns),
        ],
    };
    HookOutput::json(Subject::object(KIND, &req.parent.metadata), &response)
}

crate::memo::decoded_request!(
    /// A sync request with the bytes it was decoded from, for the memo of decoded requests.
    DecodedSync,
    SyncRequest
);

/// `POST /cert-rotation/sync`.
pub fn sync_hook(body: &[u8], ctx: &HookContext) -> Result<HookOutput, RequestError> {
    ctx.memo
        .requests
        .cert_rotation
        .with_request(body, |req| {
            parent_namespace(&req.parent.metadata.namespace, "parent", KIND)?;
            let response = sync::sync(req, ctx.now, ctx.rng, ctx.memo);
            let subject = Subject::object(KIND, &req.parent.metadata);
            let conditions = &response.status.conditions;
            HookOutput::sync(subject, &response, conditions, "Ready")
        })
        .map(HookOutput::read_as)
}

#[cfg(test)]
mod tests;
