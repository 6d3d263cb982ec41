//! What a WorkloadSet's spec asks for, worked out once per spec (delete-graph.md §1, §3): the
//! validation outcome and, for a valid spec, each workload's dependencies and the Pod it yields,
//! and the delete graph of its RUNNING edges (§4).
//! It depends on the spec and the set's name only, so it is remembered between syncs
//! ([`PlanMemo`]): Metacontroller syncs a parent again on every Pod change and every resync,
//! mostly with a spec it has sent before.

use super::graph::DeleteGraph;
use super::spec::{validate, AddCondition, Invalid, Workload};
use super::sync::{ANNOTATION_DEPENDENCIES, LABEL_SET, LABEL_WORKLOAD};
use crate::contract::{decode, encode_raw};
use crate::json::{Json, JsonObject, NULL};
use crate::memo::{self, Kept, Recent};
use crate::meta::{sha256_hex, write_json_str};
use crate::RequestError;
use serde::ser::SerializeMap;
use serde::Serialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The outcome of a spec for one set.
#[derive(Debug)]
pub struct Plan {
    /// Sorted by name; empty when the spec is invalid.
    pub workloads: Vec<Planned>,
    pub invalid: Option<Invalid>,
    /// The delete graph of the spec's RUNNING edges (§4), which every sync starts from; obsolete
    /// Pods' annotations may add to it.
    pub graph: DeleteGraph,
}

/// A workload of a valid spec and the Pod it yields (§3).
#[derive(Debug)]
pub struct Planned {
    pub name: String,
    /// Sorted by dependency name.
    pub dependencies: Vec<(String, AddCondition)>,
    /// `<set>-<workload>-<hash of the rendered template>`.
    pub pod_name: String,
    /// The template's string labels plus ours, as a JSON object.
    pub labels: Box<RawValue>,
    /// The template's string annotations plus the dependencies annotation, as a JSON object.
    pub annotations: Box<RawValue>,
    /// The rendered template's `spec`: the template's, with the mapped restart policy.
    pub spec: Box<RawValue>,
}

impl Plan {
    /// Validates `spec` (the WorkloadSet's `spec` value) for the set `set` and renders each
    /// workload of a valid one.
    fn new(spec: &Json, set: &str) -> Result<Plan, RequestError> {
        let validated = validate(spec, set);
        let workloads: Vec<Planned> = match validated.invalid {
            None => validated
                .workloads
                .iter()
                .map(|w| Planned::new(set, w))
                .collect::<Result<_, _>>()?,
            Some(_) => Vec::new(),
        };
        let graph = workloads
            .iter()
            .flat_map(|w| {
                w.dependencies
                    .iter()
                    .filter(|(_, cond)| *cond == AddCondition::Running)
                    .map(|(dep, _)| (dep.as_str(), w.name.as_str()))
            })
            .collect();
        Ok(Plan {
            workloads,
            invalid: validated.invalid,
            graph,
        })
    }
}

impl Planned {
    fn new(set: &str, workload: &Workload) -> Result<Planned, RequestError> {
        let hash = sha256_hex(canonical_rendered(workload).as_bytes());
        let template = workload.template;
        let metadata = template.get("metadata");
        let mut labels = string_map(metadata.and_then(|m| m.get("labels")));
        labels.insert(LABEL_SET, set);
        labels.insert(LABEL_WORKLOAD, workload.name);
        let dependencies = workload.dependencies_annotation();
        let mut annotations = string_map(metadata.and_then(|m| m.get("annotations")));
        annotations.insert(ANNOTATION_DEPENDENCIES, &dependencies);
        let spec = RenderedSpec {
            spec: template.get("spec").and_then(Json::as_object),
            restart_policy: workload.restart_policy.pod_value(),
        };
        Ok(Planned {
            name: workload.name.to_owned(),
            dependencies: workload
                .dependencies
                .iter()
                .map(|(dep, cond)| ((*dep).to_owned(), *cond))
                .collect(),
            pod_name: format!("{set}-{}-{}", workload.name, &hash[..10]),
            labels: encode_raw(&labels)?,
            annotations: encode_raw(&annotations)?,
            spec: encode_raw(&spec)?,
        })
    }
}

/// The rendered template's `spec`: the template's members but `restartPolicy`, then the mapped
/// policy.
struct RenderedSpec<'t> {
    spec: Option<&'t JsonObject<'t>>,
    restart_policy: &'static str,
}

impl Serialize for RenderedSpec<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        for (k, v) in self.spec.iter().flat_map(|m| m.iter()) {
            if k != "restartPolicy" {
                map.serialize_entry(k, v)?;
            }
        }
        map.serialize_entry("restartPolicy", self.restart_policy)?;
        map.end()
    }
}

/// Canonical JSON of the rendered template R: the template with `spec.restartPolicy` set to the
/// mapped policy, written without copying the template.
fn canonical_rendered(workload: &Workload) -> String {
    let policy = Json::String(Cow::Borrowed(workload.restart_policy.pod_value()));
    let empty = JsonObject::default();
    let template = workload.template;
    let spec = template
        .get("spec")
        .and_then(Json::as_object)
        .unwrap_or(&empty);
    let mut spec_keys: Vec<&str> = spec.keys().filter(|k| *k != "restartPolicy").collect();
    spec_keys.push("restartPolicy");
    spec_keys.sort_unstable();
    let mut top: Vec<&str> = template.keys().filter(|k| *k != "spec").collect();
    top.push("spec");
    top.sort_unstable();
    let mut out = String::with_capacity(512);
    write_object(&mut out, &top, |key, out| {
        if key != "spec" {
            template.get(key).unwrap_or(&NULL).write_canonical(out);
            return;
        }
        write_object(out, &spec_keys, |k, out| {
            let value = if k == "restartPolicy" {
                &policy
            } else {
                spec.get(k).unwrap_or(&NULL)
            };
            value.write_canonical(out);
        });
    });
    out
}

/// Appends a JSON object of `keys` (in the order given), each value written by `value`.
fn write_object(out: &mut String, keys: &[&str], mut value: impl FnMut(&str, &mut String)) {
    out.push('{');
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json_str(key, out);
        out.push(':');
        value(key, out);
    }
    out.push('}');
}

/// The string members of a template's map.
fn string_map<'t>(v: Option<&'t Json<'t>>) -> BTreeMap<&'t str, &'t str> {
    v.and_then(Json::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k, v.as_str()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// Plans of recent specs, shared by every request of a server. An entry keeps the set's name and
/// the spec's JSON text as sent; it is found by their fingerprint and compared with them byte
/// for byte, so a spec or name that differs in any byte is planned afresh. (SHA-256 over them,
/// the key until the twenty-first round, became about a sixth of a 25 KB resync's time once the
/// request was no longer decoded.) Bounded: the [`Self::CAPACITY`] most recently used, made
/// from at most [`Self::SPEC_BYTES`] of spec text between them (a plan takes about twice its
/// spec's text in memory, 2.05-2.07 measured on the load run's requests, and the entry keeps
/// the text too: at most about 12.5 MiB); a larger spec is planned on every sync.
#[derive(Debug)]
pub struct PlanMemo(Recent<Kept<Plan>>);

impl Default for PlanMemo {
    fn default() -> Self {
        PlanMemo(Recent::new(Self::CAPACITY, Self::SPEC_BYTES))
    }
}

impl PlanMemo {
    pub const CAPACITY: usize = 256;
    pub const SPEC_BYTES: usize = 4 << 20;

    /// The plan of `spec` (the parent's `spec` as sent; `None` when absent or null) for the set
    /// `set`: remembered, or made and remembered. A spec that is not JSON serde can read into a
    /// [`Json`] is a request error under `parent.spec`.
    pub fn plan(&self, spec: Option<&RawValue>, set: &str) -> Result<Arc<Plan>, RequestError> {
        let text = spec.map_or("null", RawValue::get);
        self.0
            .recall_or_make(Self::made_from(set, text), text.len(), || {
                let json: Json = decode(text.as_bytes()).map_err(|e| e.within("parent.spec"))?;
                Plan::new(&json, set)
            })
    }

    /// The set's name and the spec's text, as the bytes a plan is made from.
    fn made_from(set: &str, text: &str) -> Vec<u8> {
        memo::made_from(&[Some(set.as_bytes()), Some(text.as_bytes())])
    }

    /// How many plans are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memo::fingerprint;

    #[test]
    fn a_remembered_plan_under_the_same_fingerprint_is_compared_not_trusted() {
        let memo = PlanMemo::default();
        let a = RawValue::from_string(r#"{"workloads":{}}"#.to_owned()).unwrap();
        let b = RawValue::from_string(r#"{"workloads": {}}"#.to_owned()).unwrap();
        let plan_a = memo.plan(Some(&a), "s").unwrap();
        assert!(Arc::ptr_eq(&plan_a, &memo.plan(Some(&a), "s").unwrap()));
        // a's plan stored under the key of b's text, as a fingerprint collision would leave it.
        let key_b = fingerprint(&PlanMemo::made_from("s", b.get()));
        let made_from_a = PlanMemo::made_from("s", a.get());
        memo.0
            .store_made_from(key_b, made_from_a, Arc::clone(&plan_a), 0);
        assert!(!Arc::ptr_eq(&plan_a, &memo.plan(Some(&b), "s").unwrap()));
        // The same text for another set is another plan too.
        assert!(!Arc::ptr_eq(&plan_a, &memo.plan(Some(&a), "t").unwrap()));
    }
}
