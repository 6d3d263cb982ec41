//! cert-rotation: the CertificateManager of a namespace turns the roles of its
//! MeshRootCertificates into signing and validating issuers, keeps the trust bundle and the leaf
//! certificates (../shared/spec/cert-rotation.md §3).

pub mod spec;
pub mod sync;

use crate::contract::{decode, CustomizeRequest, CustomizeResponse, Object, RelatedResourceRule};
use crate::mesh_root_certificate::model::MRC_API;
use crate::registry::{HookContext, HookOutput, Subject};
use crate::RequestError;

/// `POST /cert-rotation/customize`: the namespace's MRCs and all its Secrets (a user's own CA
/// Secret carries no label to select on).
pub fn customize_hook(body: &[u8], _ctx: &mut HookContext) -> Result<HookOutput, RequestError> {
    let req: CustomizeRequest<Object> = decode(body)?;
    let ns = req.parent.metadata.namespace.as_deref().unwrap_or_default();
    if ns.is_empty() {
        return Err(RequestError::new(
            "parent.metadata.namespace",
            "missing: a CertificateManager is namespaced",
        ));
    }
    let response = CustomizeResponse {
        related_resources: vec![
            RelatedResourceRule::in_namespace(MRC_API, "meshrootcertificates", ns),
            RelatedResourceRule::in_namespace("v1", "secrets", ns),
        ],
    };
    HookOutput::json(
        Subject::object("CertificateManager", &req.parent.metadata),
        &response,
    )
}

/// `POST /cert-rotation/sync`.
pub fn sync_hook(body: &[u8], ctx: &mut HookContext) -> Result<HookOutput, RequestError> {
    let req: sync::SyncRequest = decode(body)?;
    let response = sync::sync(&req, ctx.now, ctx.rng, &ctx.memo.pki);
    HookOutput::json(
        Subject::object("CertificateManager", &req.parent.metadata),
        &response,
    )
}

#[cfg(test)]
mod tests;
