//! delete-graph: Ankaios-style inter-workload dependencies. A WorkloadSet owns one Pod per
//! workload; add conditions gate creation, the delete graph gates deletion
//! (../shared/spec/delete-graph.md).

mod admission;
pub mod graph;
pub mod plan;
pub mod spec;
pub mod sync;

use crate::contract::parent_namespace;
use crate::registry::{HookContext, HookOutput, Subject};
use crate::RequestError;
use sync::{reconcile, SyncRequest};

pub use admission::validate_hook;

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
    ctx.memo
        .requests
        .delete_graph
        .with_request(body, |req| {
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
        .map(HookOutput::read_as)
}

#[cfg(test)]
mod tests;
