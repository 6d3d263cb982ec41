//! Wire types of the Metacontroller hook contract (composite and decorator sync/finalize,
//! customize) and of AdmissionReview v1, with the decode and encode helpers every hook uses.
//!
//! Requests are decoded leniently (unknown fields ignored, absent maps empty) into structs that
//! name only what the hooks read; object maps accept the v1 (`name`, `ns/name`) and v2 (`ns/name`)
//! keys alike because the keys are never read. Responses serialize only the fields the contract
//! defines, with integers where Kubernetes stores integers, so strict (v2) decoding accepts them.

mod admission;
mod composite;
mod customize;
mod decorator;
mod object;
mod object_map;
mod patch;

pub use admission::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, AdmissionReviewResponse,
    GroupVersionKind, StatusDetails, UserInfo,
};
pub use composite::{CompositeRequest, CompositeResponse};
pub use customize::{CustomizeRequest, CustomizeResponse, LabelSelector, RelatedResourceRule};
pub use decorator::{DecoratorRequest, DecoratorResponse};
pub use object::{lenient_string, Lenient, Object, ObjectMeta};
pub use object_map::ObjectMap;
pub use patch::{escape_pointer, PatchOp};

use crate::RequestError;
use serde::{Deserialize, Serialize};

/// Decodes a request body, naming the JSON path of the first thing that does not fit.
/// Trailing bytes after the JSON document are an error.
pub fn decode<'de, T: Deserialize<'de>>(body: &'de [u8]) -> Result<T, RequestError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| RequestError::new(e.path(), e.inner()))?;
    de.end().map_err(|e| RequestError::new(".", e))?;
    Ok(value)
}

/// Encodes a response. The wire types serialize infallibly (string keys, no floats that could be
/// NaN), so a failure here is a programming error reported as a request error rather than a panic.
pub fn encode<T: Serialize>(response: &T) -> Result<Vec<u8>, RequestError> {
    let mut out = Vec::with_capacity(4096);
    serde_json::to_writer(&mut out, response)
        .map_err(|e| RequestError::new(".", format!("response could not be encoded: {e}")))?;
    Ok(out)
}
