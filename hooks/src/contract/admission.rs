//! AdmissionReview v1 (admission.k8s.io/v1) request and response.

use super::{map_only, PatchOp};
use base64::Engine;
use serde::{Deserialize, Serialize};

/// The review the API server sends. Only `request` is read.
#[derive(Debug, Deserialize)]
#[serde(remote = "Self")]
pub struct AdmissionReview<O> {
    pub request: AdmissionRequest<O>,
}

#[derive(Debug, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct AdmissionRequest<O> {
    /// Echoed in the response so the API server can match it.
    pub uid: String,
    /// The kind of the object under admission (absent: no rule applies).
    #[serde(default)]
    pub kind: GroupVersionKind,
    /// CREATE, UPDATE, DELETE or CONNECT (absent: no rule applies).
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    pub object: Option<O>,
    pub old_object: Option<O>,
    #[serde(default)]
    pub user_info: UserInfo,
}

#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self")]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self")]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
}

map_only! {
    impl['de, O] AdmissionReview<O> where [O: Deserialize<'de>];
    impl['de, O] AdmissionRequest<O> where [O: Deserialize<'de>];
    impl['de] GroupVersionKind;
    impl['de] UserInfo;
}

/// The review sent back: always `admission.k8s.io/v1`, `AdmissionReview`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionReviewResponse {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub response: AdmissionResponse,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionResponse {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusDetails>,
    /// Base64 of a JSONPatch document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
}

/// The metav1.Status of a denial.
#[derive(Debug, Serialize)]
pub struct StatusDetails {
    pub code: u16,
    pub message: String,
}

impl AdmissionResponse {
    pub fn allow(uid: &str) -> Self {
        AdmissionResponse {
            uid: uid.to_owned(),
            allowed: true,
            status: None,
            patch: None,
            patch_type: None,
            warnings: None,
        }
    }

    /// A denial with HTTP-style code (403 for policy denials) and a message for the user.
    pub fn deny(uid: &str, code: u16, message: impl Into<String>) -> Self {
        AdmissionResponse {
            allowed: false,
            status: Some(StatusDetails {
                code,
                message: message.into(),
            }),
            ..AdmissionResponse::allow(uid)
        }
    }

    /// Attaches a JSONPatch; an empty list leaves the response without `patch`/`patchType`.
    pub fn with_patch(mut self, ops: &[PatchOp]) -> Self {
        if !ops.is_empty() {
            // A Vec of PatchOp with string keys serializes infallibly.
            let json = serde_json::to_vec(ops).unwrap_or_default();
            self.patch = Some(base64::engine::general_purpose::STANDARD.encode(json));
            self.patch_type = Some("JSONPatch");
        }
        self
    }

    /// Attaches warnings; none leaves the response without `warnings`.
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        if !warnings.is_empty() {
            self.warnings = Some(warnings);
        }
        self
    }

    pub fn into_review(self) -> AdmissionReviewResponse {
        AdmissionReviewResponse {
            api_version: "admission.k8s.io/v1",
            kind: "AdmissionReview",
            response: self,
        }
    }
}
