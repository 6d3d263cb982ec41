//! `/app-discovery/sync` (app-discovery.md §4-§5): requests wait out the discovery window, then
//! the KeptnApp is created or updated from the namespace's workloads and the request is dropped.

use super::selector::Selector;
use super::version::{app_version, derived_traceparent, short_name};
use crate::contract::{
    map_only, object_maps, without, CompositeRequest, CompositeResponse, ControllerRef, Lenient,
    MetaOut, NameMeta, Object, ObjectMeta, Strings, Text,
};
use crate::json::Json;
use crate::meta::{is_dns1123_subdomain, parse_rfc3339, rfc3339, Condition, PreviousConditions};
use foldhash::{HashMap, HashMapExt};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use time::OffsetDateTime;

pub const KEPTN_API: &str = "lifecycle.keptn.sh/v1";
pub const KACR_KEY: &str = "KeptnAppCreationRequest.lifecycle.keptn.sh/v1";
pub const APP_KEY: &str = "KeptnApp.lifecycle.keptn.sh/v1";
pub const WORKLOAD_KEY: &str = "KeptnWorkload.lifecycle.keptn.sh/v1";
pub use crate::meta::LABEL_MANAGED_BY as MANAGED_BY;
pub const APP_TYPE: &str = "keptn.sh/app-type";
const METACONTROLLER_PREFIX: &str = "metacontroller.k8s.io/";
const DEFAULT_TIMEOUT: u64 = 30;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct AppDiscoverySpec<'a> {
    #[serde(default, borrow)]
    pub selector: Json<'a>,
    #[serde(default, borrow)]
    pub timeout_seconds: Json<'a>,
}

/// Of the previous status only the conditions are read (for their transition times).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct AppDiscoveryStatus {
    #[serde(default)]
    pub conditions: PreviousConditions,
}

pub type AppDiscovery<'a> = Object<'a, AppDiscoverySpec<'a>, AppDiscoveryStatus>;

/// A KACR: spec kept whole, its strings borrowed (it is re-emitted as observed).
pub type KeptnObject<'a> = Object<'a, Json<'a>>;

/// A KeptnApp: as a KACR, and the object that controls it (an app another object controls is
/// not one this parent can update).
pub type KeptnApp<'a> = Object<'a, Json<'a>, IgnoredAny, ObjectMeta<'a, ControllerRef<'a>>>;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct WorkloadSpec<'a> {
    #[serde(default, borrow)]
    pub app: Lenient<'a>,
    #[serde(default, borrow)]
    pub version: Lenient<'a>,
}

map_only! {
    impl['de, 'a] AppDiscoverySpec<'a> where ['de: 'a];
    impl['de] AppDiscoveryStatus;
    impl['de, 'a] WorkloadSpec<'a> where ['de: 'a];
}

/// Of a workload only its name, namespace, app and version are read.
pub type KeptnWorkload<'a> = Object<'a, WorkloadSpec<'a>, IgnoredAny, NameMeta<'a>>;

object_maps! {
    /// The children: the KACRs and the KeptnApps this AppDiscovery made.
    pub kept struct Children<'a> {
        requests: KeptnObject<'a> = KACR_KEY,
        apps: KeptnApp<'a> = APP_KEY,
    }
}

object_maps! {
    /// The related objects: workloads and apps of the namespace, each decoded into its own type.
    pub struct Related<'a> {
        workloads: KeptnWorkload<'a> = WORKLOAD_KEY,
        apps: KeptnApp<'a> = APP_KEY,
    }
}

pub type SyncRequest<'a> = CompositeRequest<AppDiscovery<'a>, Children<'a>, Related<'a>>;

/// A child in the response: a KACR or a KeptnApp, rebuilt from scratch. An observed child's
/// strings, labels, annotations and spec are borrowed from the request.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Child<'r> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub metadata: MetaOut<'r>,
    pub spec: Cow<'r, Json<'r>>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub apps: BTreeMap<String, AppSummary>,
    pub pending_requests: Vec<PendingRequest>,
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Serialize)]
pub struct AppSummary {
    pub version: String,
    pub workloads: usize,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingRequest {
    pub name: String,
    pub app_name: String,
    pub due_at: String,
}

pub type SyncResponse<'r> = CompositeResponse<Status, Child<'r>>;

/// An annotation Metacontroller keeps for itself, never written back.
fn is_metacontroller_key(key: &str) -> bool {
    key.starts_with(METACONTROLLER_PREFIX)
}

/// An observed object re-emitted unchanged: identity, labels, annotations and spec only.
fn rebuilt<'r, Owners>(
    kind: &'static str,
    obj: &'r Object<'r, Json<'r>, IgnoredAny, ObjectMeta<'r, Owners>>,
    namespace: &'r str,
) -> Child<'r> {
    Child {
        api_version: KEPTN_API,
        kind,
        metadata: MetaOut::observed(&obj.metadata, namespace, is_metacontroller_key),
        spec: Cow::Borrowed(&obj.spec),
    }
}

fn is_generated(obj: &KeptnApp) -> bool {
    obj.metadata.labels.get(MANAGED_BY).map(Text::as_str) == Some("keptn")
}

/// What becomes of one KACR.
enum Outcome<'a> {
    /// Its app is user-defined: left out (Metacontroller deletes it), nothing else happens.
    UserDefined,
    /// Malformed: kept unchanged, reported, not pending.
    Malformed,
    /// Inside its window: kept and pending.
    Waiting(&'a str, OffsetDateTime),
    /// Due: its app is discovered and the request left out, unless the app is held.
    Due(&'a str, OffsetDateTime),
    /// Due, but its app is held (by a workload without a version, or by another object that
    /// controls it): kept and pending.
    Held(&'a str, OffsetDateTime),
}

/// The app stays as it is, and its due requests (`kacrs`, indexes into `outcomes`) wait for a
/// fix.
fn hold(outcomes: &mut [Outcome], kacrs: &[usize]) {
    for &i in kacrs {
        if let Outcome::Due(app, due_at) = outcomes[i] {
            outcomes[i] = Outcome::Held(app, due_at);
        }
    }
}

/// The sync of one AppDiscovery at `now`.
pub fn sync<'r>(req: &'r SyncRequest<'r>, now: OffsetDateTime) -> SyncResponse<'r> {
    let parent = &req.parent;
    let namespace = parent.metadata.namespace.as_deref().unwrap_or("");
    let previous = &parent.status.conditions;
    let generation = parent.metadata.generation;

    let mut requests: Vec<&KeptnObject> = req.children.requests.iter().map(Arc::as_ref).collect();
    requests.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut child_apps: Vec<&KeptnApp> = req.children.apps.iter().map(Arc::as_ref).collect();
    child_apps.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

    // Step 0: the discovery window, and a selector that selects the apps this parent makes and
    // no others (docs/DECISIONS.md, app-discovery).
    let timeout = match &parent.spec.timeout_seconds {
        Json::Null => Some(DEFAULT_TIMEOUT),
        Json::Number(n) => n.as_u64(),
        _ => None,
    }
    .ok_or_else(|| "spec.timeoutSeconds must be a non-negative integer".to_owned());
    let selector = Selector::parse(&parent.spec.selector).and_then(|selector| {
        let misses = selector.misses_made_apps().map(|miss| {
            format!(
                "{miss} does not select the KeptnApps this AppDiscovery makes, which carry the \
                 labels of spec.selector.matchLabels and {MANAGED_BY}: keptn"
            )
        });
        let broad = (!selector.selects_only_generated()).then(|| {
            format!(
                "spec.selector selects objects without {MANAGED_BY}: keptn, so Metacontroller \
                 adopts the KeptnApps users made themselves and deleting this AppDiscovery \
                 deletes them; put {MANAGED_BY}: keptn in spec.selector.matchLabels"
            )
        });
        let problems: Vec<String> = [misses, broad].into_iter().flatten().collect();
        if problems.is_empty() {
            Ok(selector)
        } else {
            Err(problems.join("; "))
        }
    });
    let (timeout, selector) = match (timeout, selector) {
        (Ok(timeout), Ok(selector)) => (timeout, selector),
        (timeout, selector) => {
            let problems: Vec<String> = [timeout.err(), selector.err()]
                .into_iter()
                .flatten()
                .collect();
            let ready = previous.condition(
                "Ready",
                false,
                "InvalidSpec",
                problems.join("; "),
                generation,
                now,
            );
            return invalid_spec(&requests, &child_apps, namespace, ready);
        }
    };

    let related_apps: Vec<&KeptnApp> = req
        .related
        .apps
        .iter()
        .map(Arc::as_ref)
        .filter(|a| a.metadata.namespace_or(namespace) == namespace)
        .collect();
    let find_app = |name: &str| {
        child_apps
            .iter()
            .chain(related_apps.iter())
            .find(|a| a.metadata.name == name)
            .copied()
    };

    let mut problems: Vec<String> = Vec::new();
    let mut outcomes: Vec<Outcome> = Vec::with_capacity(requests.len());
    // app name -> indexes (into `requests`) of its due KACRs, in name order.
    let mut due: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut resync: Option<u64> = None;

    // Step 1: each KACR.
    for (i, kacr) in requests.iter().enumerate() {
        let name = &kacr.metadata.name;
        let app_name = match kacr.spec.get("appName") {
            None | Some(Json::Null) => Err("spec.appName is missing"),
            Some(Json::String(s)) if s.is_empty() => Err("spec.appName is empty"),
            Some(Json::String(s)) if !is_dns1123_subdomain(s) => {
                Err("spec.appName is not a DNS-1123 subdomain")
            }
            Some(Json::String(s)) => Ok(s.as_ref()),
            Some(_) => Err("spec.appName is not a string"),
        };
        let app_name = match app_name {
            Ok(a) => a,
            Err(problem) => {
                problems.push(format!("KeptnAppCreationRequest {name}: {problem}"));
                outcomes.push(Outcome::Malformed);
                continue;
            }
        };
        if find_app(app_name).is_some_and(|app| !is_generated(app)) {
            outcomes.push(Outcome::UserDefined);
            continue;
        }
        let Some(created) = kacr
            .metadata
            .creation_timestamp
            .as_deref()
            .and_then(parse_rfc3339)
        else {
            problems.push(format!(
                "KeptnAppCreationRequest {name}: metadata.creationTimestamp is not an RFC 3339 time"
            ));
            outcomes.push(Outcome::Malformed);
            continue;
        };
        let single =
            kacr.metadata.annotations.get(APP_TYPE).map(Text::as_str) == Some("single-service");
        let window = if single { 0 } else { timeout };
        // A window that ends after the year 9999 ends then: the request waits.
        let window = time::Duration::seconds(i64::try_from(window).unwrap_or(i64::MAX));
        let due_at = created.saturating_add(window);
        if single || now > due_at {
            due.entry(app_name).or_default().push(i);
            outcomes.push(Outcome::Due(app_name, due_at));
        } else {
            let wait = (due_at - now).as_seconds_f64().ceil().max(1.0) as u64;
            resync = Some(resync.map_or(wait, |r| r.min(wait)));
            outcomes.push(Outcome::Waiting(app_name, due_at));
        }
    }

    // Discovery for each app with a due request.
    let workloads: Vec<&KeptnWorkload> = {
        let mut w: Vec<&KeptnWorkload> = req
            .related
            .workloads
            .iter()
            .map(Arc::as_ref)
            .filter(|w| w.metadata.namespace_or(namespace) == namespace)
            .collect();
        w.sort_unstable_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        w
    };
    let mut by_app: HashMap<&str, Vec<&KeptnWorkload>> = HashMap::new();
    // A workload whose `spec.app` is there but not a string could be any app's: while one is
    // listed, every due app is held, as an app is for a workload of its own without a version.
    let mut unassigned: Vec<&str> = Vec::new();
    for w in &workloads {
        match &w.spec.app {
            Lenient::Str(app) => by_app.entry(app).or_default().push(w),
            Lenient::Other => unassigned.push(w.metadata.name.as_str()),
            Lenient::Absent => {}
        }
    }
    if !due.is_empty() {
        problems.extend(
            unassigned
                .iter()
                .map(|w| format!("KeptnWorkload {w}: spec.app is not a string")),
        );
    }
    let mut apps_out: BTreeMap<String, Child> = child_apps
        .iter()
        .map(|a| {
            (
                a.metadata.name.to_string(),
                rebuilt("KeptnApp", a, namespace),
            )
        })
        .collect();
    for (app_name, kacrs) in &due {
        let child = child_apps.iter().find(|a| a.metadata.name == *app_name);
        let existing = child
            .or_else(|| {
                related_apps
                    .iter()
                    .find(|a| a.metadata.name == *app_name && is_generated(a))
            })
            .copied();
        // A generated app that is no child of this parent because another object controls it
        // (another AppDiscovery of the namespace), or because its labels do not match the
        // selector: Metacontroller could not write it, so the requests wait, reported, until
        // this parent adopts the app.
        let unwritable = existing.filter(|_| child.is_none()).and_then(|app| {
            let meta = &app.metadata;
            match meta.owner_references.0.as_ref() {
                Some(owner) if Some(&owner.uid) != parent.metadata.uid.as_ref() => {
                    Some(format!("controlled by {} {}", owner.kind, owner.name))
                }
                _ => selector
                    .miss(&meta.labels)
                    .map(|miss| format!("its labels do not match {miss}")),
            }
        });
        if let Some(why) = unwritable {
            problems.push(format!(
                "KeptnApp {app_name}: {why}, so this AppDiscovery cannot update it"
            ));
            hold(&mut outcomes, kacrs);
            continue;
        }
        let listed = by_app.get(app_name).map(Vec::as_slice).unwrap_or(&[]);
        let unversioned: Vec<&str> = listed
            .iter()
            .filter(|w| w.spec.version.as_str().is_none())
            .map(|w| w.metadata.name.as_str())
            .collect();
        if !unassigned.is_empty() || !unversioned.is_empty() {
            for w in unversioned {
                let what = if listed
                    .iter()
                    .any(|x| x.metadata.name == w && x.spec.version == Lenient::Absent)
                {
                    "is missing"
                } else {
                    "is not a string"
                };
                problems.push(format!("KeptnWorkload {w}: spec.version {what}"));
            }
            hold(&mut outcomes, kacrs);
            continue;
        }
        let pairs: Vec<(&str, &str)> = listed
            .iter()
            .map(|w| {
                (
                    w.metadata.name.as_str(),
                    w.spec.version.as_str().unwrap_or(""),
                )
            })
            .collect();
        let version = app_version(&pairs);
        let app = match existing {
            Some(app) => updated_app(app, &pairs, app_name, version, namespace),
            None => created_app(
                requests[kacrs[0]],
                &pairs,
                app_name,
                version,
                namespace,
                selector.made_labels(),
            ),
        };
        apps_out.insert((*app_name).to_owned(), app);
    }

    // Response.
    let mut children: Vec<Child> = Vec::with_capacity(requests.len() + apps_out.len());
    let mut pending = Vec::new();
    for (kacr, outcome) in requests.iter().zip(&outcomes) {
        let pending_for = match outcome {
            Outcome::UserDefined | Outcome::Due(..) => continue,
            Outcome::Malformed => None,
            Outcome::Waiting(app, due_at) | Outcome::Held(app, due_at) => Some((app, due_at)),
        };
        children.push(rebuilt("KeptnAppCreationRequest", kacr, namespace));
        if let Some((app_name, due_at)) = pending_for {
            pending.push(PendingRequest {
                name: kacr.metadata.name.to_string(),
                app_name: (*app_name).to_owned(),
                due_at: rfc3339(*due_at),
            });
        }
    }
    let apps = summaries(apps_out.values());
    children.extend(apps_out.into_values());
    problems.sort();
    let ready = if problems.is_empty() {
        previous.condition("Ready", true, "Synced", "", generation, now)
    } else {
        previous.condition(
            "Ready",
            false,
            "MalformedObjects",
            problems.join("; "),
            generation,
            now,
        )
    };
    CompositeResponse {
        status: Status {
            apps,
            pending_requests: pending,
            conditions: vec![ready],
        },
        children,
        resync_after_seconds: resync,
        finalized: None,
    }
}

fn summaries<'a, 'r: 'a>(
    apps: impl Iterator<Item = &'a Child<'r>>,
) -> BTreeMap<String, AppSummary> {
    apps.map(|a| {
        let version = a.spec.get("version").and_then(Json::as_str).unwrap_or("");
        let workloads = a
            .spec
            .get("workloads")
            .and_then(Json::as_array)
            .map_or(0, <[Json]>::len);
        (
            a.metadata.name.to_string(),
            AppSummary {
                version: version.to_owned(),
                workloads,
            },
        )
    })
    .collect()
}

fn text<'r>(value: impl Into<Cow<'r, str>>) -> Json<'r> {
    Json::String(value.into())
}

fn workload_entry<'r>(name: &'r str, version: &'r str) -> Json<'r> {
    Json::object(vec![
        (Cow::Borrowed("name"), text(name)),
        (Cow::Borrowed("version"), text(version)),
    ])
}

/// A KeptnApp's spec: its version and workload list, and the revision when it had one.
fn app_spec<'r>(revision: Option<&Json<'r>>, version: String, entries: Vec<Json<'r>>) -> Json<'r> {
    let mut members = vec![
        (Cow::Borrowed("version"), text(version)),
        (Cow::Borrowed("workloads"), Json::Array(entries)),
    ];
    if let Some(revision) = revision {
        members.push((Cow::Borrowed("revision"), revision.clone()));
    }
    Json::object(members)
}

/// §4.3: a new KeptnApp from the first due request of the app.
fn created_app<'r>(
    kacr: &'r KeptnObject<'r>,
    workloads: &[(&'r str, &'r str)],
    app_name: &'r str,
    version: String,
    namespace: &'r str,
    labels: Strings<'r>,
) -> Child<'r> {
    let mut annotations = without(&kacr.metadata.annotations, is_metacontroller_key).into_owned();
    annotations
        .entry("traceparent".into())
        .or_insert_with(|| derived_traceparent(namespace, app_name, &version).into());
    let entries = workloads
        .iter()
        .map(|(name, v)| workload_entry(short_name(name, app_name), v))
        .collect();
    Child {
        api_version: KEPTN_API,
        kind: "KeptnApp",
        metadata: MetaOut {
            name: Cow::Borrowed(app_name),
            namespace: Cow::Borrowed(namespace),
            labels: Cow::Owned(labels),
            annotations: Cow::Owned(annotations),
        },
        spec: Cow::Owned(app_spec(None, version, entries)),
    }
}

/// §4.4: the existing app with its workload list brought up to date, order kept.
fn updated_app<'r>(
    app: &'r KeptnApp<'r>,
    workloads: &[(&'r str, &'r str)],
    app_name: &str,
    version: String,
    namespace: &'r str,
) -> Child<'r> {
    let mut entries: Vec<Json> = app
        .spec
        .get("workloads")
        .and_then(Json::as_array)
        .map(<[Json]>::to_vec)
        .unwrap_or_default();
    let shorts: Vec<(&str, &str)> = workloads
        .iter()
        .map(|(name, v)| (short_name(name, app_name), *v))
        .collect();
    fn entry_name<'e>(e: &'e Json) -> Option<&'e str> {
        e.get("name").and_then(Json::as_str)
    }
    for (short, v) in &shorts {
        // The first entry of that name only, as Keptn's loop breaks there: a list that names a
        // workload twice keeps its later entries as they were. Only an object has a name, so
        // the entry found is one.
        if let Some(Json::Object(members)) =
            entries.iter_mut().find(|e| entry_name(e) == Some(short))
        {
            members.insert(Cow::Borrowed("version"), text(*v));
        } else {
            entries.push(workload_entry(short, v));
        }
    }
    entries.retain(|e| entry_name(e).is_some_and(|n| shorts.iter().any(|(s, _)| *s == n)));
    let mut child = rebuilt("KeptnApp", app, namespace);
    child.spec = Cow::Owned(app_spec(app.spec.get("revision"), version, entries));
    child
}

/// Step 0 failed: every observed child back unchanged, nothing pending, no resync.
fn invalid_spec<'r>(
    requests: &[&'r KeptnObject<'r>],
    apps: &[&'r KeptnApp<'r>],
    namespace: &'r str,
    ready: Condition,
) -> SyncResponse<'r> {
    let mut children: Vec<Child> = requests
        .iter()
        .map(|r| rebuilt("KeptnAppCreationRequest", r, namespace))
        .collect();
    let app_children: Vec<Child> = apps
        .iter()
        .map(|a| rebuilt("KeptnApp", a, namespace))
        .collect();
    let summary = summaries(app_children.iter());
    children.extend(app_children);
    CompositeResponse {
        status: Status {
            apps: summary,
            pending_requests: Vec::new(),
            conditions: vec![ready],
        },
        children,
        resync_after_seconds: None,
        finalized: None,
    }
}
