//! Pure hook logic of metahooks: the Metacontroller and AdmissionReview wire types, the three
//! controllers and the registry of hooks the server mounts. Nothing here does I/O, reads a clock
//! or draws randomness of its own: `now` and the random source come in through [`HookContext`].
#![forbid(unsafe_code)]

pub mod app_discovery;
pub mod cert_rotation;
pub mod contract;
pub mod delete_graph;
pub mod error;
pub mod json;
pub mod memo;
pub mod mesh_root_certificate;
pub mod meta;
pub mod pki;
pub mod registry;

pub use error::RequestError;
pub use memo::Reading;
pub use registry::{Hook, HookContext, HookKind, HookOutput, Subject, SyncCondition, HOOKS};
