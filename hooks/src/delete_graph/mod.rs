//! delete-graph: Ankaios-style inter-workload dependencies. A WorkloadSet owns one Pod per
//! workload; add conditions gate creation, the delete graph gates deletion
//! (../shared/spec/delete-graph.md).

pub mod graph;
pub mod plan;
pub mod spec;
pub mod sync;

use crate::contract::{decode, parent_namespace, AdmissionResponse, AdmissionReview};
use crate::json::{Json, NULL};
use crate::registry::{HookContext, HookOutput, Subject};
use crate::RequestError;
use spec::validate;
use sync::{reconcile, SyncRequest};

/// The parent's kind.
const KIND: &str = "WorkloadSet";

crate::memo::decoded_request!(
    /// A sync request with the bytes it was decoded from, for the memo of decoded requests.
    DecodedSync,
    SyncRequest
);

/// `POST /delete-graph/sync`: a sync, or the teardown when `finalizing` is true.
pub fn sync_hook(body: &[u8], ctx: &HookContext) -> Result<HookOutput, RequestError> {
    answer(body, ctx, false)
}

/// `POST /delete-graph/finalize`: always the teardown.
pub fn finalize_hook(body: &[u8], ctx: &HookContext) -> Result<HookOutput, RequestError> {
    answer(body, ctx, true)
}

/// The sync or teardown of the WorkloadSet in `body`, its spec planned through the memo.
fn answer(body: &[u8], ctx: &HookContext, teardown: bool) -> Result<HookOutput, RequestError> {
    ctx.memo.requests.delete_graph.with_request(body, |req| {
        let parent = &req.parent;
        parent_namespace(&parent.metadata.namespace, "parent", KIND)?;
        let plan = ctx
            .memo
            .plans
            .plan(parent.spec.map(|raw| raw.0), &parent.metadata.name)?;
        let response = reconcile(req, &plan, teardown || req.finalizing, ctx.now)?;
        let subject = Subject::object(KIND, &parent.metadata);
        let conditions = response.status.conditions();
        HookOutput::sync(subject, &response, conditions, "Valid")
    })
}

/// `POST /delete-graph/validate`: denies invalid specs and dependency cycles on CREATE and
/// UPDATE, warns about dependencies that wait forever; everything else is allowed.
pub fn validate_hook(body: &[u8], _ctx: &HookContext) -> Result<HookOutput, RequestError> {
    let review: AdmissionReview<Json> = decode(body)?;
    let req = &review.request;
    let response = admit(
        req.operation.as_str(),
        req.object.as_ref(),
        req.old_object.as_ref(),
        &req.kind.kind,
        &req.uid,
    );
    HookOutput::admission(&review, response)
}

fn admit(
    operation: &str,
    object: Option<&Json>,
    old_object: Option<&Json>,
    kind: &str,
    uid: &str,
) -> AdmissionResponse {
    if operation != "CREATE" && operation != "UPDATE" {
        return AdmissionResponse::allow(uid);
    }
    let Some(object) = object.filter(|o| o.as_object().is_some()) else {
        return AdmissionResponse::allow(uid)
            .with_warnings(vec!["no object to validate; allowed".into()]);
    };
    let object_kind = object.get("kind").and_then(Json::as_str).unwrap_or(kind);
    if object_kind != KIND {
        return AdmissionResponse::allow(uid).with_warnings(vec![format!(
            "object is a '{object_kind}', not a WorkloadSet; allowed without validation"
        )]);
    }
    let metadata = object.get("metadata");
    let name = metadata
        .and_then(|m| m.get("name"))
        .and_then(Json::as_str)
        .unwrap_or("");
    let spec = object.get("spec").unwrap_or(&NULL);
    let validated = validate(spec, name);
    let by_name: foldhash::HashMap<&str, &spec::Workload> =
        validated.workloads.iter().map(|w| (w.name, w)).collect();
    let mut warnings = Vec::new();
    for w in &validated.workloads {
        for (dep, cond) in &w.dependencies {
            match by_name.get(dep) {
                None => warnings.push(format!(
                    "workload '{}' depends on '{dep}', which is not part of this WorkloadSet; it waits until such a workload exists",
                    w.name
                )),
                Some(d) if !d.restart_policy.can_reach(*cond) => warnings.push(format!(
                    "workload '{}': condition {} on '{dep}' can never hold with restartPolicy {}",
                    w.name,
                    cond.as_str(),
                    d.restart_policy.as_str()
                )),
                Some(_) => {}
            }
        }
    }
    let unchanged = || {
        operation == "UPDATE"
            && old_object.is_some_and(|old| old.get("spec").unwrap_or(&NULL) == spec)
    };
    let response = match validated.invalid {
        None => AdmissionResponse::allow(uid),
        // An update that leaves an invalid spec as it was (a label, an annotation, the finalizer
        // Metacontroller adds and removes) is let through: such a set exists when it was written
        // before this webhook or under fewer rules, sync freezes it, and refusing its metadata
        // would keep it from ever being deleted.
        Some(invalid) if unchanged() => {
            warnings.push(format!(
                "the spec is invalid and this update leaves it so: {}",
                invalid.message
            ));
            AdmissionResponse::allow(uid)
        }
        Some(invalid) => AdmissionResponse::deny(uid, 403, invalid.message),
    };
    response.with_warnings(warnings)
}

#[cfg(test)]
mod tests;
