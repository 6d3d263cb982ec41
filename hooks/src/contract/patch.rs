//! JSONPatch (RFC 6902) operations for mutating admission.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PatchOp {
    pub op: &'static str,
    pub path: String,
    pub value: Value,
}

impl PatchOp {
    pub fn add(path: impl Into<String>, value: Value) -> Self {
        PatchOp {
            op: "add",
            path: path.into(),
            value,
        }
    }
}

/// Escapes one reference token of a JSON pointer (RFC 6901): `~` as `~0`, `/` as `~1`.
pub fn escape_pointer(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}
