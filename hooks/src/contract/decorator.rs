//! DecoratorController sync and finalize (contract §7).

use super::{map_only, ObjectMap};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The body Metacontroller POSTs to a decorator `sync` or `finalize` hook: the target is
/// `object`, its children are `attachments` (an `object_maps!` `kept struct`, as a composite's
/// `children`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(remote = "Self")]
#[serde(bound(
    deserialize = "Target: Deserialize<'de> + super::Named, Attachments: Deserialize<'de> + Default, Related: Deserialize<'de> + Default"
))]
pub struct DecoratorRequest<
    Target,
    Attachments = ObjectMap<IgnoredAny>,
    Related = ObjectMap<IgnoredAny>,
> {
    #[serde(default)]
    pub controller: IgnoredAny,
    /// Refused without a name ([`super::Named`]).
    #[serde(deserialize_with = "super::named")]
    pub object: Target,
    #[serde(default)]
    pub attachments: Attachments,
    #[serde(default)]
    pub related: Related,
    #[serde(default)]
    pub finalizing: bool,
}

map_only! {
    impl['de, Target, Attachments, Related] DecoratorRequest<Target, Attachments, Related> where [
        Target: Deserialize<'de> + super::Named, Attachments: Deserialize<'de> + Default,
        Related: Deserialize<'de> + Default];
}

/// The answer to a decorator hook. Labels and annotations merge (a `None` value deletes the key);
/// an absent `status` leaves the target's status as it is; `attachments` is the complete set.
#[derive(Debug, Serialize)]
pub struct DecoratorResponse<Status, Attachment> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, Option<String>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, Option<String>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    pub attachments: Vec<Attachment>,
    /// At most [`super::MAX_RESYNC_AFTER_SECONDS`], as for composite hooks.
    #[serde(
        rename = "resyncAfterSeconds",
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::capped_resync"
    )]
    pub resync_after_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalized: Option<bool>,
}
