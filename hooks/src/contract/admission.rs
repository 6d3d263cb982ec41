//! AdmissionReview (admission.k8s.io/v1, and v1beta1) request and response.

use super::{map_only, PatchOp};
use base64::Engine;
use serde::{de, Deserialize, Deserializer, Serialize};
use std::fmt;

/// The review the API server sends. `apiVersion` (absent: v1) and `request` are read; the object
/// as `O`, the old object as `Old`, the same unless a hook reads less of the old one.
#[derive(Debug, Deserialize)]
#[serde(remote = "Self")]
pub struct AdmissionReview<O, Old = O> {
    #[serde(default, rename = "apiVersion")]
    pub version: ReviewVersion,
    pub request: AdmissionRequest<O, Old>,
}

/// The AdmissionReview versions the API server sends: it sends the first of a webhook's
/// `admissionReviewVersions` it knows, and refuses an answer in another version than its
/// request's. The two have the same fields; the manifests ask for v1.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    #[default]
    V1,
    V1beta1,
}

impl ReviewVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

impl<'de> Deserialize<'de> for ReviewVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Version;
        impl de::Visitor<'_> for Version {
            type Value = ReviewVersion;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("admission.k8s.io/v1 or admission.k8s.io/v1beta1")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ReviewVersion, E> {
                match v {
                    "admission.k8s.io/v1" => Ok(ReviewVersion::V1),
                    "admission.k8s.io/v1beta1" => Ok(ReviewVersion::V1beta1),
                    // Not `invalid_value`, whose message would quote the request's text.
                    _ => Err(E::custom(
                        "an AdmissionReview of another version than admission.k8s.io/v1 or \
                         admission.k8s.io/v1beta1",
                    )),
                }
            }
        }
        deserializer.deserialize_str(Version)
    }
}

#[derive(Debug, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct AdmissionRequest<O, Old = O> {
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
    pub old_object: Option<Old>,
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
    impl['de, O, Old] AdmissionReview<O, Old> where [O: Deserialize<'de>, Old: Deserialize<'de>];
    impl['de, O, Old] AdmissionRequest<O, Old> where [O: Deserialize<'de>, Old: Deserialize<'de>];
    impl['de] GroupVersionKind;
    impl['de] UserInfo;
}

/// The review sent back: an `AdmissionReview` of the request's version.
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

    /// The answer to a review of this version.
    pub fn into_review(self, version: ReviewVersion) -> AdmissionReviewResponse {
        AdmissionReviewResponse {
            api_version: version.api_version(),
            kind: "AdmissionReview",
            response: self,
        }
    }
}
