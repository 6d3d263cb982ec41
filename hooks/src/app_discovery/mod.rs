//! app-discovery: Keptn's automatic application discovery as Metacontroller hooks
//! (../shared/spec/app-discovery.md).

mod selector;
pub mod sync;
pub mod version;

use crate::contract::{
    decode, escape_pointer, map_only, parent_namespace, AdmissionResponse, AdmissionReview,
    CustomizeRequest, CustomizeResponse, Object, PatchOp, RelatedResourceRule,
};
use crate::registry::{HookContext, HookOutput, Subject};
use crate::RequestError;
use serde::Deserialize;
use serde_json::{json, Value};
use sync::{SyncRequest, KEPTN_API, MANAGED_BY};

/// The parent's kind.
const KIND: &str = "AppDiscovery";

/// `POST /app-discovery/customize`: the namespace's KeptnWorkloads and KeptnApps.
pub fn customize_hook(body: &[u8], _ctx: &HookContext) -> Result<HookOutput, RequestError> {
    let req: CustomizeRequest<Object> = decode(body)?;
    let ns = parent_namespace(&req.parent.metadata.namespace, "parent", KIND)?;
    let response = CustomizeResponse {
        related_resources: vec![
            RelatedResourceRule::in_namespace(KEPTN_API, "keptnworkloads", ns),
            RelatedResourceRule::in_namespace(KEPTN_API, "keptnapps", ns),
        ],
    };
    HookOutput::json(Subject::object(KIND, &req.parent.metadata), &response)
}

crate::memo::decoded_request!(
    /// A sync request with the bytes it was decoded from, for the memo of decoded requests.
    DecodedSync,
    SyncRequest
);

/// `POST /app-discovery/sync`.
pub fn sync_hook(body: &[u8], ctx: &HookContext) -> Result<HookOutput, RequestError> {
    ctx.memo
        .requests
        .app_discovery
        .with_request(body, |req| {
            parent_namespace(&req.parent.metadata.namespace, "parent", KIND)?;
            let response = sync::sync(req, ctx.now);
            let subject = Subject::object(KIND, &req.parent.metadata);
            let conditions = &response.status.conditions;
            HookOutput::sync(subject, &response, conditions, "Ready")
        })
        .map(HookOutput::read_as)
}

/// The part of an object under admission that the mutating webhook reads: its labels. The rest
/// (managedFields above all) is skipped unread.
#[derive(Debug, Deserialize)]
#[serde(remote = "Self")]
struct Labelled {
    /// Absent or null: none.
    #[serde(default)]
    metadata: Option<LabelsOnly>,
}

#[derive(Debug, Deserialize)]
#[serde(remote = "Self")]
struct LabelsOnly {
    /// Taken as any JSON: a map is added to, anything else replaced.
    #[serde(default)]
    labels: Value,
}

map_only! {
    impl['de] Labelled;
    impl['de] LabelsOnly;
}

/// `POST /app-discovery/mutate`: labels new KeptnAppCreationRequests `managed-by: keptn` so that
/// the AppDiscovery adopts them. Never denies.
pub fn mutate_hook(body: &[u8], _ctx: &HookContext) -> Result<HookOutput, RequestError> {
    let review: AdmissionReview<Labelled> = decode(body)?;
    let req = &review.request;
    let applies = req.operation == "CREATE"
        && req.kind.group == "lifecycle.keptn.sh"
        && req.kind.kind == "KeptnAppCreationRequest";
    let mut ops = Vec::new();
    if let (true, Some(object)) = (applies, req.object.as_ref()) {
        match &object.metadata {
            Some(LabelsOnly {
                labels: Value::Object(labels),
            }) => {
                if labels.get(MANAGED_BY).and_then(Value::as_str) != Some("keptn") {
                    ops.push(PatchOp::add(
                        format!("/metadata/labels/{}", escape_pointer(MANAGED_BY)),
                        json!("keptn"),
                    ));
                }
            }
            Some(_) => {
                ops.push(PatchOp::add(
                    "/metadata/labels",
                    json!({ MANAGED_BY: "keptn" }),
                ));
            }
            None => ops.push(PatchOp::add(
                "/metadata",
                json!({"labels": { MANAGED_BY: "keptn" }}),
            )),
        }
    }
    let response = AdmissionResponse::allow(&req.uid).with_patch(&ops);
    HookOutput::admission(&review, response)
}

#[cfg(test)]
mod tests;
