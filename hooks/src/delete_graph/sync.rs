//! Sync and teardown of a WorkloadSet (delete-graph.md §3-§8): one pure function of the request.

use super::graph::DeleteGraph;
use super::plan::{Plan, Planned};
use super::spec::AddCondition;
use crate::contract::{
    encode_raw, lenient_string, map_only, object_maps, CompositeRequest, CompositeResponse,
    Lenient, Named, Object, ObjectMeta, RawJson, Text,
};
use crate::meta::{Condition, PreviousConditions};
use crate::RequestError;
use foldhash::{HashMap, HashMapExt};
use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use time::OffsetDateTime;

pub const LABEL_SET: &str = "metahooks.dev/workload-set";
pub const LABEL_WORKLOAD: &str = "metahooks.dev/workload";
pub const ANNOTATION_DEPENDENCIES: &str = "metahooks.dev/dependencies";
const POD_KEY: &str = "Pod.v1";

/// The WorkloadSet parent: the spec is kept as raw JSON (borrowed from the request), which its
/// [`Plan`] reads; validation must describe (not reject) whatever shape it has.
pub type WorkloadSet<'a> = Object<'a, Option<RawJson<'a>>, WorkloadSetStatus<'a>>;

/// The previous status: its conditions, and the parts a freeze copies back untouched.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct WorkloadSetStatus<'a> {
    #[serde(default)]
    pub conditions: PreviousConditions,
    #[serde(default, borrow)]
    pub workloads: Option<RawJson<'a>>,
    #[serde(default, borrow)]
    pub delete_graph: Option<RawJson<'a>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct PodStatus<'a> {
    #[serde(default, borrow, deserialize_with = "lenient_string")]
    pub phase: Option<Text<'a>>,
}

map_only! {
    impl['de, 'a] WorkloadSetStatus<'a> where ['de: 'a];
    impl['de, 'a] PodStatus<'a> where ['de: 'a];
}

/// An observed Pod: its spec is kept as raw JSON (borrowed from the request), to be returned
/// untouched when the Pod is kept.
pub type Pod<'a> = Object<'a, Option<RawJson<'a>>, PodStatus<'a>, PodMetadata<'a>>;

/// An observed Pod's metadata, with what a sync works out of it kept beside it the first time it
/// is needed: the decoded request is kept between syncs, and a teardown's resyncs read every
/// lingering Pod's dependencies annotation and return every such Pod as observed, so they read
/// and write each once. What is kept is no longer than the labels' and annotations' text in the
/// request and the annotation's once more. Compares as the metadata alone.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct PodMetadata<'a> {
    #[serde(borrow)]
    meta: ObjectMeta<'a>,
    /// The labels and annotations as JSON (an error only as [`encode_raw`] fails).
    #[serde(skip)]
    written: OnceLock<Result<WrittenStrings, RequestError>>,
    /// The RUNNING edges of the dependencies annotation ([`annotated_running_dependencies`]).
    #[serde(skip)]
    running_dependencies: OnceLock<Vec<String>>,
}

/// A Pod's labels and annotations as JSON objects.
#[derive(Debug, Clone)]
struct WrittenStrings {
    labels: Box<RawValue>,
    annotations: Box<RawValue>,
}

impl<'a> std::ops::Deref for PodMetadata<'a> {
    type Target = ObjectMeta<'a>;
    fn deref(&self) -> &ObjectMeta<'a> {
        &self.meta
    }
}

impl PartialEq for PodMetadata<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.meta == other.meta
    }
}

impl PodMetadata<'_> {
    /// The labels and annotations as JSON, written on the first call.
    fn written(&self) -> Result<&WrittenStrings, RequestError> {
        self.written
            .get_or_init(|| {
                Ok(WrittenStrings {
                    labels: encode_raw(&self.meta.labels)?,
                    annotations: encode_raw(&self.meta.annotations)?,
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The workloads the Pod's dependencies annotation says it needs running, read on the first
    /// call.
    fn running_dependencies(&self) -> &[String] {
        self.running_dependencies
            .get_or_init(|| annotated_running_dependencies(&self.meta))
    }
}

impl<Spec, Status> Named for Object<'_, Spec, Status, PodMetadata<'_>> {
    fn name(&self) -> Option<&str> {
        Some(&self.metadata.name)
    }
}

object_maps! {
    /// The children: the Pods of the set.
    pub kept struct Children<'a> {
        pods: Pod<'a> = POD_KEY,
    }
}

pub type SyncRequest<'a> = CompositeRequest<WorkloadSet<'a>, Children<'a>>;

/// A child Pod in the response.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodOut<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: PodMeta<'a>,
    /// The planned spec for a Pod to create or keep, the observed one for a Pod kept as it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<&'a RawValue>,
}

/// A child Pod's metadata: borrowed from the plan for a planned Pod, from the request for an
/// observed one; labels and annotations as JSON written once, with the plan or the observed
/// Pod's [`PodMetadata`].
#[derive(Debug, Serialize)]
pub struct PodMeta<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub labels: &'a RawValue,
    pub annotations: &'a RawValue,
}

/// `{state, subState, message}` of one workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadState {
    pub state: &'static str,
    pub sub_state: &'static str,
    pub message: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status<W, G> {
    pub workloads: W,
    pub delete_graph: G,
    pub conditions: Vec<Condition>,
}

/// The response of a sync in normal mode, and of a freeze (statuses copied as they were).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum SyncStatus<'a> {
    Computed(Status<BTreeMap<&'a str, WorkloadState>, Cow<'a, DeleteGraph>>),
    Frozen(Status<Copied<'a>, Copied<'a>>),
}

impl SyncStatus<'_> {
    pub fn conditions(&self) -> &[Condition] {
        match self {
            SyncStatus::Computed(status) => &status.conditions,
            SyncStatus::Frozen(status) => &status.conditions,
        }
    }
}

/// A part of the previous status copied back: the raw JSON when it was an object, else `{}`.
#[derive(Debug)]
pub struct Copied<'a>(Option<RawJson<'a>>);

impl Serialize for Copied<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self
            .0
            .filter(|raw| raw.0.get().trim_start().starts_with('{'))
        {
            Some(raw) => raw.0.serialize(s),
            None => s.serialize_map(Some(0))?.end(),
        }
    }
}

pub type SyncResponse<'a> = CompositeResponse<SyncStatus<'a>, PodOut<'a>>;

type State = (&'static str, &'static str);
const PENDING_STARTING: State = ("Pending", "Starting");
const PENDING_WAITING: State = ("Pending", "WaitingToStart");
const RUNNING_OK: State = ("Running", "Ok");
const SUCCEEDED_OK: State = ("Succeeded", "Ok");
const FAILED_EXEC: State = ("Failed", "ExecFailed");
const FAILED_UNKNOWN: State = ("Failed", "Unknown");
const STOPPING_REQUESTED: State = ("Stopping", "RequestedAtRuntime");
const STOPPING_WAITING: State = ("Stopping", "WaitingToStop");

/// The state of an observed Pod (§2 table).
fn observed_state(pod: &Pod) -> State {
    if pod.metadata.is_terminating() {
        return STOPPING_REQUESTED;
    }
    match pod.status.phase.as_deref() {
        None | Some("Pending") => PENDING_STARTING,
        Some("Running") => RUNNING_OK,
        Some("Succeeded") => SUCCEEDED_OK,
        Some("Failed") => FAILED_EXEC,
        Some(_) => FAILED_UNKNOWN,
    }
}

fn holds(cond: AddCondition, state: State) -> bool {
    match cond {
        AddCondition::Running => state == RUNNING_OK,
        AddCondition::Succeeded => state == SUCCEEDED_OK,
        AddCondition::Failed => state == FAILED_EXEC,
    }
}

/// A state that holds back the deletion of a dependency (§2, DelCondNotPendingNorRunning).
fn is_pending_or_running(state: State) -> bool {
    state == PENDING_STARTING || state == RUNNING_OK
}

/// The Pod of a planned workload, to create or keep.
fn planned_pod<'a>(planned: &'a Planned, namespace: &'a str) -> PodOut<'a> {
    PodOut {
        api_version: "v1",
        kind: "Pod",
        metadata: PodMeta {
            name: &planned.pod_name,
            namespace,
            labels: &planned.labels,
            annotations: &planned.annotations,
        },
        spec: Some(&planned.spec),
    }
}

/// An observed Pod returned as it is: identity, labels, annotations and spec; nothing else.
fn rebuilt<'a>(pod: &'a Pod<'a>, namespace: &'a str) -> Result<PodOut<'a>, RequestError> {
    let written = pod.metadata.written()?;
    Ok(PodOut {
        api_version: "v1",
        kind: "Pod",
        metadata: PodMeta {
            name: &pod.metadata.name,
            namespace: pod.metadata.namespace_or(namespace),
            labels: &written.labels,
            annotations: &written.annotations,
        },
        spec: pod.spec.map(|raw| raw.0),
    })
}

/// RUNNING edges recorded on a Pod at creation: `{<dep>: ADD_COND_RUNNING}` entries of its
/// dependencies annotation, in name order, a name given twice counting as its last. Missing or
/// unparsable annotations, or one that is no JSON object, give none. Values other than strings
/// are skipped, not built.
fn annotated_running_dependencies(meta: &ObjectMeta) -> Vec<String> {
    let Some(text) = meta.annotations.get(ANNOTATION_DEPENDENCIES) else {
        return Vec::new();
    };
    let Ok(map) = serde_json::from_str::<BTreeMap<Text, Lenient>>(text) else {
        return Vec::new();
    };
    map.into_iter()
        .filter(|(_, v)| v.as_str() == Some(AddCondition::Running.as_str()))
        .map(|(k, _)| k.0.into_owned())
        .collect()
}

/// Sync (`teardown == false`) or finalize (`teardown == true`) of one WorkloadSet, whose spec
/// gave `plan`. Fails only as [`encode_raw`] does.
pub fn reconcile<'a>(
    req: &'a SyncRequest<'a>,
    plan: &'a Plan,
    teardown: bool,
    now: OffsetDateTime,
) -> Result<SyncResponse<'a>, RequestError> {
    let parent = &req.parent;
    let namespace = parent.metadata.namespace.as_deref().unwrap_or("");
    let generation = parent.metadata.generation;
    let previous = &parent.status.conditions;
    let valid = match &plan.invalid {
        None => previous.condition("Valid", true, "Valid", "", generation, now),
        Some(invalid) => previous.condition(
            "Valid",
            false,
            invalid.reason(),
            invalid.message.clone(),
            generation,
            now,
        ),
    };
    let pods = &req.children.pods;

    if plan.invalid.is_some() && !teardown {
        return freeze(pods, namespace, &parent.status, valid);
    }
    let workloads: &[Planned] = if teardown { &[] } else { &plan.workloads };

    // 1. The spec workloads by name, classification and states of the observed Pods.
    let desired: HashMap<&str, &Planned> = workloads.iter().map(|w| (w.name.as_str(), w)).collect();
    let states: Vec<State> = pods.iter().map(Arc::as_ref).map(observed_state).collect();
    let workload_of = |pod: &'a Pod<'a>| pod.metadata.labels.get(LABEL_WORKLOAD).map(Text::as_str);
    let mut pods_of: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut current_of: HashMap<&str, usize> = HashMap::new();
    let mut obsolete: Vec<usize> = Vec::new();
    for (i, pod) in pods.iter().enumerate() {
        let w = workload_of(pod);
        if let Some(w) = w {
            pods_of.entry(w).or_default().push(i);
        }
        match w.and_then(|w| desired.get(w)) {
            Some(d) if pod.metadata.name == d.pod_name => {
                current_of.insert(&d.name, i);
            }
            _ => obsolete.push(i),
        }
    }
    // A current Pod that is not terminating: the one add conditions are checked against.
    let live_current = |w: &str| {
        current_of
            .get(w)
            .copied()
            .filter(|&i| !pods[i].metadata.is_terminating())
    };

    // 2. The delete graph, from the spec (made with the plan; none in a teardown) and from
    // obsolete Pods' annotations: copied only when those add an edge.
    let mut graph = if teardown {
        Cow::Owned(DeleteGraph::default())
    } else {
        Cow::Borrowed(&plan.graph)
    };
    let annotated: Vec<(&str, &str)> = obsolete
        .iter()
        .filter_map(|&i| workload_of(&pods[i]).map(|x| (i, x)))
        .flat_map(|(i, x)| {
            pods[i]
                .metadata
                .running_dependencies()
                .iter()
                .map(move |dep| (dep.as_str(), x))
        })
        .filter(|(dep, x)| !graph.contains(dep, x))
        .collect();
    if !annotated.is_empty() {
        graph.to_mut().extend(annotated);
    }

    // 3. Delete gating of obsolete, non-terminating Pods.
    let lingering = obsolete
        .iter()
        .filter(|&&i| !pods[i].metadata.is_terminating())
        .filter_map(|&i| workload_of(&pods[i]));
    let components = graph.components(lingering);
    let any_active = |x: &str| {
        pods_of.get(x).is_some_and(|ix| {
            ix.iter()
                .any(|&i| !pods[i].metadata.is_terminating() && is_pending_or_running(states[i]))
        })
    };
    let current_active =
        |x: &str| live_current(x).is_some_and(|i| is_pending_or_running(states[i]));
    let mut children: Vec<PodOut> = Vec::with_capacity(pods.len() + workloads.len());
    let mut kept_for: HashMap<&str, Vec<&str>> = HashMap::new();
    for &i in &obsolete {
        let pod = &pods[i];
        if pod.metadata.is_terminating() {
            continue;
        }
        let d = workload_of(pod);
        let blockers: Vec<&str> = d
            .map(|d| {
                graph
                    .dependents(d)
                    .filter(|x| {
                        if components.same(d, x) {
                            current_active(x)
                        } else {
                            any_active(x)
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        // Left out (deleted now) unless a dependent still needs it.
        if let (Some(d), false) = (d, blockers.is_empty()) {
            children.push(rebuilt(pod, namespace)?);
            let list = kept_for.entry(d).or_default();
            for b in blockers {
                if !list.contains(&b) {
                    list.push(b);
                }
            }
        }
    }

    // 4. Each spec workload: keep its current Pod, create it, or wait.
    let mut status: BTreeMap<&str, WorkloadState> = BTreeMap::new();
    for w in workloads {
        let entry = if let Some(i) = live_current(&w.name) {
            children.push(planned_pod(w, namespace));
            let (state, sub_state) = states[i];
            // The state is the current Pod's. An older Pod kept beside it (one Metacontroller's
            // caches had not heard of when this one was made, DECISIONS) is said here.
            let message = kept_for
                .get(w.name.as_str())
                .map(|b| waiting_for_dependents("an older Pod waits for dependents to stop: ", b))
                .unwrap_or_default();
            WorkloadState {
                state,
                sub_state,
                message,
            }
        } else if pods_of.contains_key(w.name.as_str()) {
            stopping_state(&w.name, &kept_for)
        } else {
            let unmet: Vec<String> = w
                .dependencies
                .iter()
                .filter(|(dep, cond)| !live_current(dep).is_some_and(|i| holds(*cond, states[i])))
                .map(|(dep, cond)| {
                    if desired.contains_key(dep.as_str()) {
                        format!("{dep} ({})", cond.as_str())
                    } else {
                        format!("{dep} (not in this WorkloadSet)")
                    }
                })
                .collect();
            if unmet.is_empty() {
                children.push(planned_pod(w, namespace));
                WorkloadState {
                    state: PENDING_STARTING.0,
                    sub_state: PENDING_STARTING.1,
                    message: String::new(),
                }
            } else {
                WorkloadState {
                    state: PENDING_WAITING.0,
                    sub_state: PENDING_WAITING.1,
                    message: format!("waiting for {}", unmet.join(", ")),
                }
            }
        };
        status.insert(&w.name, entry);
    }
    // Workloads that only live on as Pods.
    for (w, _) in pods_of.iter() {
        if !desired.contains_key(w) {
            status.insert(w, stopping_state(w, &kept_for));
        }
    }

    children.sort_unstable_by(|a, b| a.metadata.name.cmp(b.metadata.name));
    Ok(CompositeResponse {
        status: SyncStatus::Computed(Status {
            workloads: status,
            delete_graph: graph,
            conditions: vec![valid],
        }),
        children,
        resync_after_seconds: None,
        finalized: teardown.then_some(pods.is_empty()),
    })
}

/// The state of a workload whose Pods are all obsolete or terminating.
fn stopping_state(w: &str, kept_for: &HashMap<&str, Vec<&str>>) -> WorkloadState {
    match kept_for.get(w) {
        Some(blockers) => WorkloadState {
            state: STOPPING_WAITING.0,
            sub_state: STOPPING_WAITING.1,
            message: waiting_for_dependents("waiting for dependents to stop: ", blockers),
        },
        None => WorkloadState {
            state: STOPPING_REQUESTED.0,
            sub_state: STOPPING_REQUESTED.1,
            message: String::new(),
        },
    }
}

/// `prefix` and the dependents an obsolete Pod waits for, joined with `, `.
fn waiting_for_dependents(prefix: &str, blockers: &[&str]) -> String {
    let mut message = String::with_capacity(prefix.len() + 16 * blockers.len());
    message.push_str(prefix);
    for (i, b) in blockers.iter().enumerate() {
        if i > 0 {
            message.push_str(", ");
        }
        message.push_str(b);
    }
    message
}

/// A bad spec: keep every non-terminating Pod, create nothing, keep the previous status (§6.1).
fn freeze<'a>(
    pods: &'a [Arc<Pod<'a>>],
    namespace: &'a str,
    previous: &WorkloadSetStatus<'a>,
    valid: Condition,
) -> Result<SyncResponse<'a>, RequestError> {
    let mut children: Vec<PodOut> = pods
        .iter()
        .filter(|p| !p.metadata.is_terminating())
        .map(|p| rebuilt(p, namespace))
        .collect::<Result<_, _>>()?;
    children.sort_unstable_by(|a, b| a.metadata.name.cmp(b.metadata.name));
    Ok(CompositeResponse {
        status: SyncStatus::Frozen(Status {
            workloads: Copied(previous.workloads),
            delete_graph: Copied(previous.delete_graph),
            conditions: vec![valid],
        }),
        children,
        resync_after_seconds: None,
        finalized: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running_dependencies(annotation: Option<&str>) -> Vec<String> {
        let annotations = annotation.map_or(
            serde_json::json!({}),
            |text| serde_json::json!({ ANNOTATION_DEPENDENCIES: text }),
        );
        let text =
            serde_json::json!({"metadata": {"name": "p", "annotations": annotations}}).to_string();
        let pod: Pod = serde_json::from_str(&text).unwrap();
        annotated_running_dependencies(&pod.metadata)
    }

    /// A Pod's labels and annotations are written, and its dependencies annotation read, once
    /// and as serde_json writes and reads them; what is kept of them is no part of comparing two
    /// Pods, so the memo still finds a Pod decoded again equal to the kept one.
    #[test]
    fn pod_metadata_works_out_its_maps_once_and_compares_as_metadata() {
        let text = serde_json::json!({"metadata": {"name": "p",
            "labels": {"b": "2", "a": "\u{e9}\u{1}\"", LABEL_WORKLOAD: "w"},
            "annotations": {ANNOTATION_DEPENDENCIES:
                r#"{"d":"ADD_COND_RUNNING","c":"ADD_COND_RUNNING","e":"ADD_COND_FAILED"}"#}}})
        .to_string();
        let kept: Pod = serde_json::from_str(&text).unwrap();
        let written = kept.metadata.written().unwrap();
        assert_eq!(
            written.labels.get(),
            r#"{"a":"é\u0001\"","b":"2","metahooks.dev/workload":"w"}"#
        );
        assert_eq!(
            written.annotations.get(),
            r#"{"metahooks.dev/dependencies":"{\"d\":\"ADD_COND_RUNNING\",\"c\":\"ADD_COND_RUNNING\",\"e\":\"ADD_COND_FAILED\"}"}"#
        );
        assert!(std::ptr::eq(written, kept.metadata.written().unwrap()));
        let running = kept.metadata.running_dependencies();
        assert_eq!(running, ["c", "d"]);
        assert!(std::ptr::eq(running, kept.metadata.running_dependencies()));

        let again: Pod = serde_json::from_str(&text).unwrap();
        assert_eq!(kept, again);
        let relabelled = text.replace(r#""b":"2""#, r#""b":"3""#);
        let relabelled: Pod = serde_json::from_str(&relabelled).unwrap();
        assert_ne!(kept, relabelled);
    }

    /// Rule 4: the RUNNING edges an obsolete Pod's annotation records, however it is written.
    #[test]
    fn rule_4_annotated_running_dependencies_of_every_shape() {
        let cases: [(Option<&str>, &[&str]); 15] = [
            (None, &[]),
            (Some("{}"), &[]),
            (
                Some(r#"{"b":"ADD_COND_RUNNING","a":"ADD_COND_RUNNING"}"#),
                &["a", "b"],
            ),
            (
                Some(r#"{"a":"ADD_COND_RUNNING","b":"ADD_COND_SUCCEEDED"}"#),
                &["a"],
            ),
            (Some(r#"{"a":"BOGUS","b":"ADD_COND_RUNNING"}"#), &["b"]),
            // A value of another type is no edge, and stops no other.
            (
                Some(
                    r#"{"a":["ADD_COND_RUNNING"],"b":{"c":"ADD_COND_RUNNING"},"c":1,"d":null,"e":true,"f":"ADD_COND_RUNNING"}"#,
                ),
                &["f"],
            ),
            // A name given twice counts as its last.
            (
                Some(r#"{"a":"ADD_COND_RUNNING","a":"ADD_COND_FAILED"}"#),
                &[],
            ),
            (
                Some(r#"{"a":"ADD_COND_FAILED","a":"ADD_COND_RUNNING"}"#),
                &["a"],
            ),
            // Escapes are read as JSON reads them, in names and values.
            (Some(r#"{"\u0061":"ADD_COND_\u0052UNNING"}"#), &["a"]),
            // Anything but one JSON object gives none.
            (Some(r#"["a"]"#), &[]),
            (Some(r#""a""#), &[]),
            (Some("null"), &[]),
            (Some("not json"), &[]),
            (Some(r#"{"a":"ADD_COND_RUNNING"} x"#), &[]),
            (Some(r#"{"a":"ADD_COND_RUNNING""#), &[]),
        ];
        for (annotation, want) in cases {
            assert_eq!(running_dependencies(annotation), want, "{annotation:?}");
        }
    }
}
