//! The customize hook (contract §6): which related objects Metacontroller should send.

use super::map_only;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `{controller, parent}`: the field is `parent` for decorators too.
#[derive(Debug, Deserialize)]
#[serde(remote = "Self")]
pub struct CustomizeRequest<Parent> {
    #[serde(default)]
    pub controller: IgnoredAny,
    pub parent: Parent,
}

map_only! {
    impl['de, Parent] CustomizeRequest<Parent> where [Parent: Deserialize<'de>];
}

#[derive(Debug, Serialize)]
pub struct CustomizeResponse {
    #[serde(rename = "relatedResources")]
    pub related_resources: Vec<RelatedResourceRule>,
}

/// One rule of `relatedResources`. Metacontroller decodes these strictly, so only its fields exist.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RelatedResourceRule {
    pub api_version: String,
    /// Plural, lowercase resource name (`keptnworkloads`).
    pub resource: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub names: Option<Vec<String>>,
}

impl RelatedResourceRule {
    /// Every object of a resource in one namespace.
    pub fn in_namespace(api_version: &str, resource: &str, namespace: &str) -> Self {
        RelatedResourceRule {
            api_version: api_version.to_owned(),
            resource: resource.to_owned(),
            label_selector: None,
            namespace_selector: None,
            namespace: Some(namespace.to_owned()),
            names: None,
        }
    }
}

/// A metav1.LabelSelector.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LabelSelectorRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}
