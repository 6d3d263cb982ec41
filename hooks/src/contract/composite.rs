//! CompositeController sync and finalize (contract §5).

use super::{map_only, ObjectMap};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

/// The body Metacontroller POSTs to a composite `sync` or `finalize` hook. `Children` and
/// `Related` are the decoded object maps: `Children` an `object_maps!` `kept struct` (objects of
/// a type the hook does not keep are refused), `Related` an `object_maps!` struct or an
/// [`ObjectMap<T>`]. The defaults decode nothing of either.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(remote = "Self")]
#[serde(bound(
    deserialize = "Parent: Deserialize<'de> + super::Named, Children: Deserialize<'de> + Default, Related: Deserialize<'de> + Default"
))]
pub struct CompositeRequest<
    Parent,
    Children = ObjectMap<IgnoredAny>,
    Related = ObjectMap<IgnoredAny>,
> {
    /// The CompositeController itself; no hook reads it (names come from the objects, so both
    /// hook versions work without looking at `spec.hooks.*.version`).
    #[serde(default)]
    pub controller: IgnoredAny,
    /// Refused without a name ([`super::Named`]).
    #[serde(deserialize_with = "super::named")]
    pub parent: Parent,
    /// Children this parent owns, keyed by `<Kind>.<apiVersion>`.
    #[serde(default)]
    pub children: Children,
    /// Objects selected by the customize hook.
    #[serde(default)]
    pub related: Related,
    /// `true` when Metacontroller calls the finalize hook.
    #[serde(default)]
    pub finalizing: bool,
}

map_only! {
    impl['de, Parent, Children, Related] CompositeRequest<Parent, Children, Related> where [
        Parent: Deserialize<'de> + super::Named, Children: Deserialize<'de> + Default,
        Related: Deserialize<'de> + Default];
}

/// The answer to a composite hook. `children` is the complete desired set: an omitted child is
/// deleted, so every hook returns every child it means to keep.
#[derive(Debug, Serialize)]
pub struct CompositeResponse<Status, Child> {
    /// Replaces the parent's whole `.status` (null would wipe it, so it is always an object).
    pub status: Status,
    pub children: Vec<Child>,
    /// One extra sync after this many seconds; an integer so it never decodes as a float.
    /// Written as at most [`super::MAX_RESYNC_AFTER_SECONDS`].
    #[serde(
        rename = "resyncAfterSeconds",
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::capped_resync"
    )]
    pub resync_after_seconds: Option<u64>,
    /// Finalize only: the controller finalizer may go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalized: Option<bool>,
}
