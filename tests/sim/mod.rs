//! A Metacontroller simulator for end-to-end tests: an in-memory API server (objects, uids,
//! generations, finalizers, owner references and garbage collection, admission webhooks), a
//! virtual clock, a small fake kubelet, and Metacontroller's reconcile rules
//! (../shared/spec/metacontroller-contract.md §4-§10) calling the real hook server over HTTP.
//!
//! Controllers, CRDs and webhook configurations come from YAML (the project's own `manifests/`
//! for the scenarios), so a route, selector or strategy mistake there fails the scenarios.
//! Simplifications are listed in docs/SIMULATOR.md.
#![allow(dead_code)]

pub mod apply;
pub mod response;

use crate::common::{post_with_headers, TestServer};
use base64::Engine;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// apiVersion, kind, namespace ("" for cluster-scoped), name.
pub type Key = (String, String, String, String);

/// A resource type the simulated API server knows.
#[derive(Debug, Clone)]
struct Resource {
    api_version: String,
    kind: String,
    plural: String,
    namespaced: bool,
    /// The CRD's openAPIV3Schema, whose `default`s the API server applies.
    schema: Option<Value>,
    /// The CRD's `additionalPrinterColumns`: name and jsonPath.
    columns: Vec<(String, String)>,
}

/// The world as it stood when a sync's request was built, before the sync's own writes: the API
/// server's objects, and Metacontroller's caches' view of them, which the request was built from
/// (the two differ only while the caches are behind, [`Sim::hold_in_caches`]).
pub struct Before {
    pub store: Store,
    pub cached: Store,
}

impl Before {
    /// The API server's objects with those of `kind` as the caches had them: the world a sync
    /// that read those late would have met had it run before they changed.
    pub fn store_with_seen(&self, kind: &str) -> Store {
        let mut world = self.store.clone();
        world.objects.retain(|k, _| k.1 != kind);
        world.objects.extend(
            self.cached
                .objects
                .iter()
                .filter(|(k, _)| k.1 == kind)
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        world
    }
}

/// Called with [`Before`] when Metacontroller deletes or creates a child, and that child; an
/// `Err` is recorded as a violation.
pub type ChildCheck = Box<dyn FnMut(&Before, &Value) -> Result<(), String>>;

/// A row as [`Sim::get_row`] gives it, from (column, value) pairs.
pub fn row(cells: &[(&str, &str)]) -> Vec<(String, String)> {
    cells
        .iter()
        .map(|(column, value)| ((*column).to_owned(), (*value).to_owned()))
        .collect()
}

/// A printer column's jsonPath evaluated as the API server does, for the two forms the CRDs
/// use: `.a.b` and `.a[?(@.k=='v')].b`. Another form panics, so that a CRD that starts using
/// one makes this grow rather than print nothing.
fn printer_column(obj: &Value, path: &str) -> String {
    let mut at = Some(obj);
    let mut rest = path.strip_prefix('.').expect("a jsonPath starts with '.'");
    while !rest.is_empty() {
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        at = at.and_then(|v| v.get(&rest[..end]));
        rest = &rest[end..];
        if let Some(filter) = rest.strip_prefix("[?(@.") {
            let (condition, after) = filter.split_once(")]").expect("a closed filter");
            let (key, wanted) = condition.split_once("==").expect("an equality filter");
            let wanted = wanted.trim_matches('\'');
            at = at
                .and_then(Value::as_array)
                .and_then(|items| items.iter().find(|i| i[key] == wanted));
            rest = after;
        }
        rest = rest.strip_prefix('.').unwrap_or(rest);
        assert!(
            !rest.starts_with('['),
            "a jsonPath form the simulator does not know: {path}"
        );
    }
    match at {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn key_of(v: &Value) -> Key {
    (
        str_at(v, "/apiVersion").to_owned(),
        str_at(v, "/kind").to_owned(),
        str_at(v, "/metadata/namespace").to_owned(),
        str_at(v, "/metadata/name").to_owned(),
    )
}

fn rfc3339(secs: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(secs).unwrap();
    metahooks_hooks::meta::rfc3339(t)
}

/// The in-memory object store of the simulated API server.
#[derive(Default, Clone)]
pub struct Store {
    objects: BTreeMap<Key, Value>,
    next_uid: u64,
    next_rv: u64,
    /// Objects written or removed since the last drain (what informers would report).
    changed: Vec<Value>,
    /// A log of every write, for debugging failed scenarios.
    pub events: Vec<String>,
}

impl Store {
    pub fn get(&self, key: &Key) -> Option<&Value> {
        self.objects.get(key)
    }

    /// Objects of a kind (any apiVersion), optionally in one namespace, sorted by key.
    pub fn list(&self, kind: &str, namespace: Option<&str>) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|(k, _)| k.1 == kind && namespace.is_none_or(|ns| k.2 == ns))
            .map(|(_, v)| v)
            .collect()
    }

    fn list_type(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|(k, _)| {
                k.0 == api_version && k.1 == kind && namespace.is_none_or(|ns| k.2 == ns)
            })
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn by_uid(&self, uid: &str) -> Option<&Value> {
        self.objects
            .values()
            .find(|o| str_at(o, "/metadata/uid") == uid)
    }

    /// What the API server sets on a new object before validating admission sees it (the
    /// store's `BeforeCreate`): its `uid`, `generation` and `creationTimestamp`.
    fn fill_system_fields(&mut self, obj: &mut Value, now: i64) {
        self.next_uid += 1;
        let meta = obj["metadata"].as_object_mut().expect("metadata");
        meta.insert("uid".into(), json!(format!("uid-{:04}", self.next_uid)));
        meta.insert("generation".into(), json!(1));
        meta.insert("creationTimestamp".into(), json!(rfc3339(now)));
    }

    /// Stores a new object (its system fields filled), which storage gives a `resourceVersion`.
    fn create(&mut self, mut obj: Value) -> Value {
        self.next_rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.next_rv.to_string());
        self.events.push(format!("create {:?}", key_of(&obj)));
        self.objects.insert(key_of(&obj), obj.clone());
        self.changed.push(obj.clone());
        obj
    }

    /// Stores a new version; bumps generation when anything but metadata and status changed.
    fn replace(&mut self, mut obj: Value) {
        let key = key_of(&obj);
        let Some(old) = self.objects.get(&key) else {
            return;
        };
        if *old == obj {
            return;
        }
        let body = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
                m.remove("status");
            }
            v
        };
        let mut generation = old["metadata"]["generation"].as_i64().unwrap_or(1);
        if body(old) != body(&obj) {
            generation += 1;
        }
        self.next_rv += 1;
        obj["metadata"]["generation"] = json!(generation);
        obj["metadata"]["resourceVersion"] = json!(self.next_rv.to_string());
        self.events.push(format!("update {key:?}"));
        self.objects.insert(key, obj.clone());
        self.changed.push(obj);
    }

    /// Deletes an object: with finalizers (or a Pod, which the kubelet stops first) it gets a
    /// deletionTimestamp; otherwise it goes, and its dependents are garbage-collected.
    fn delete(&mut self, key: &Key, now: i64) {
        let Some(obj) = self.objects.get(key).cloned() else {
            return;
        };
        let has_finalizers = obj["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers || (key.1 == "Pod" && key.0 == "v1") {
            if obj["metadata"].get("deletionTimestamp").is_none() {
                let mut obj = obj;
                obj["metadata"]["deletionTimestamp"] = json!(rfc3339(now));
                self.replace(obj);
            }
            return;
        }
        self.remove(key, now);
    }

    /// Deletes an object with orphan propagation (`kubectl delete --cascade=orphan`): the garbage
    /// collector takes the object out of its dependents' ownerReferences (the simulator does it at
    /// once, where the API server holds an `orphan` finalizer meanwhile), then the object goes as
    /// any other, its dependents staying.
    fn delete_orphaning(&mut self, key: &Key, now: i64) {
        let Some(obj) = self.objects.get(key) else {
            return;
        };
        let uid = str_at(obj, "/metadata/uid").to_owned();
        let dependents: Vec<Value> = self
            .objects
            .values()
            .filter(|o| {
                o["metadata"]["ownerReferences"]
                    .as_array()
                    .is_some_and(|refs| refs.iter().any(|r| str_at(r, "/uid") == uid))
            })
            .cloned()
            .collect();
        for mut d in dependents {
            release(&mut d, &uid);
            self.replace(d);
        }
        self.delete(key, now);
    }

    /// Removes an object at once and garbage-collects whatever it controlled.
    fn remove(&mut self, key: &Key, now: i64) {
        let Some(obj) = self.objects.remove(key) else {
            return;
        };
        self.events.push(format!("remove {key:?}"));
        let uid = str_at(&obj, "/metadata/uid").to_owned();
        self.changed.push(obj);
        let dependents: Vec<Key> = self
            .objects
            .iter()
            .filter(|(_, o)| controller_uid(o).as_deref() == Some(uid.as_str()))
            .map(|(k, _)| k.clone())
            .collect();
        for d in dependents {
            self.delete(&d, now);
        }
    }

    /// After a finalizer is removed: an object being deleted with none left goes away.
    fn finish_if_released(&mut self, key: &Key, now: i64) {
        if let Some(o) = self.objects.get(key) {
            let empty = o["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty());
            let pod = key.1 == "Pod" && key.0 == "v1";
            if o["metadata"].get("deletionTimestamp").is_some() && empty && !pod {
                self.remove(key, now);
            }
        }
    }
}

/// Takes the owner `uid` out of `o`'s ownerReferences.
fn release(o: &mut Value, uid: &str) {
    if let Some(refs) = o["metadata"]["ownerReferences"].as_array_mut() {
        refs.retain(|r| str_at(r, "/uid") != uid);
    }
}

/// The uid of an object's controller owner.
fn controller_uid(o: &Value) -> Option<String> {
    o["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == json!(true))
        .map(|r| str_at(r, "/uid").to_owned())
}

/// metav1.LabelSelector matching (matchLabels and matchExpressions).
pub fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    if let Some(ml) = selector.get("matchLabels").and_then(Value::as_object) {
        if !ml.iter().all(|(k, v)| label(k) == v.as_str()) {
            return false;
        }
    }
    if let Some(exprs) = selector.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let k = str_at(e, "/key");
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let ok = match str_at(e, "/operator") {
                "In" => label(k).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(k).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(k).is_some(),
                "DoesNotExist" => label(k).is_none(),
                _ => false,
            };
            if !ok {
                return false;
            }
        }
    }
    true
}

fn selector_is_empty(selector: &Value) -> bool {
    selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.is_empty())
        && selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .is_none_or(|m| m.is_empty())
}

/// One hook call and its HTTP status, in call order.
#[derive(Debug, Clone)]
pub struct HookCall {
    pub path: String,
    pub status: u16,
    pub parent: String,
}

/// The two kinds of admission webhook, called in this order on a write.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Admission {
    Mutating,
    Validating,
}

pub struct Sim {
    pub store: Store,
    clock: Arc<AtomicI64>,
    addr: SocketAddr,
    _server: Option<TestServer>,
    resources: Vec<Resource>,
    composites: Vec<Value>,
    decorators: Vec<Value>,
    webhooks: Vec<(Admission, Value)>,
    queue: BTreeSet<(usize, Key)>,
    resync_at: BTreeMap<(usize, Key), i64>,
    customize_cache: HashMap<(usize, String, i64), Vec<Value>>,
    /// Answers kept for hooks with `webhook.etag.enabled`, by route and the parent's kind,
    /// namespace and name (as Metacontroller's `webhook_etag.go` keys them): tag and body.
    etag_cache: HashMap<(String, String, String, String), (String, Value)>,
    /// Whether the API server reaches metahooks' admission webhooks ([`Sim::set_webhooks_reachable`]).
    webhooks_reachable: bool,
    /// Children whose view in Metacontroller's caches is behind the store ([`Sim::hold_in_caches`]):
    /// the object as last heard of, or `None` for one not heard of yet.
    cache_holds: BTreeMap<Key, Option<Value>>,
    /// Children Metacontroller creates stay unheard of by its caches until
    /// [`Sim::catch_up_caches`], as while the informer's watch is behind.
    pub caches_hear_creates_late: bool,
    /// What Metacontroller takes without an error and a cluster suffers from, each a fault of a
    /// hook or a manifest: a field a CRD's schema dropped from what it wrote, a desired child of
    /// a type its controller does not declare, one child answered twice.
    /// [`Sim::run_until_quiet`] fails on any.
    silent_faults: Vec<String>,
    started: bool,
    pub calls: Vec<HookCall>,
    /// The path and body of each hook call, Metacontroller's and the API server's, in call
    /// order.
    pub requests: Vec<(String, Value)>,
    pub delete_checks: Vec<ChildCheck>,
    pub create_checks: Vec<ChildCheck>,
    pub violations: Vec<String>,
    /// Errors Metacontroller would record as SyncError events, in order.
    pub sync_errors: Vec<String>,
}

/// The sync error of an in-place update of a child held in the caches ([`Sim::hold_in_caches`]),
/// which Metacontroller returns and retries.
pub const CONFLICT_CACHES_BEHIND: &str = "Conflict (the caches are behind)";

/// The user Metacontroller's writes are admitted as.
const METACONTROLLER: &str = "system:serviceaccount:metacontroller:metacontroller";

/// Controllers are kept in one list; indexes below `DECORATOR` are composites.
const DECORATOR: usize = 1000;

const BUILTINS: &[(&str, &str, &str, bool)] = &[
    ("v1", "Pod", "pods", true),
    ("v1", "ConfigMap", "configmaps", true),
    ("v1", "Secret", "secrets", true),
    ("v1", "Namespace", "namespaces", false),
];

impl Sim {
    /// A simulator whose hooks are the real metahooks server, started on a loopback port with
    /// the simulator's virtual clock, and whose controllers come from `manifests/<dir>/`.
    pub fn with_manifests(dirs: &[&str]) -> Sim {
        Self::with_manifests_and_flags(dirs, &[])
    }

    /// As [`Sim::with_manifests`], with the server run with `--etag` and every controller's hooks
    /// with `webhook.etag.enabled`.
    pub fn with_manifests_and_etags(dirs: &[&str]) -> Sim {
        let mut sim = Self::with_manifests_and_flags(dirs, &["--etag"]);
        for controller in sim.composites.iter_mut().chain(&mut sim.decorators) {
            for hook in controller["spec"]["hooks"]
                .as_object_mut()
                .unwrap()
                .values_mut()
            {
                hook["webhook"]["etag"] = json!({"enabled": true});
            }
        }
        sim
    }

    /// The manifests' controllers with every hook of the version `SIM_HOOK_VERSION` names, when
    /// it is set (`make test` and `make e2e` run the scenarios again with `v1`; the manifests
    /// say `v2`), so that both hook versions of the contract play every scenario.
    fn with_manifests_and_flags(dirs: &[&str], flags: &[&str]) -> Sim {
        let mut sim = Self::with_manifests_as_written(dirs, flags);
        if let Ok(version) = std::env::var("SIM_HOOK_VERSION") {
            assert!(
                matches!(version.as_str(), "v1" | "v2"),
                "SIM_HOOK_VERSION={version}: v1 or v2"
            );
            for controller in sim.composites.iter_mut().chain(&mut sim.decorators) {
                for hook in controller["spec"]["hooks"]
                    .as_object_mut()
                    .unwrap()
                    .values_mut()
                {
                    hook["version"] = json!(version);
                }
            }
        }
        sim
    }

    fn with_manifests_as_written(dirs: &[&str], flags: &[&str]) -> Sim {
        let clock = Arc::new(AtomicI64::new(1_780_315_200)); // 2026-06-01T12:00:00Z
        let c = clock.clone();
        let server = TestServer::start_with_clock(
            flags,
            Arc::new(move || {
                time::OffsetDateTime::from_unix_timestamp(c.load(Ordering::SeqCst)).unwrap()
            }),
        );
        let mut docs = Vec::new();
        for dir in dirs {
            let path = manifests_dir().join(dir);
            let mut files: Vec<_> = std::fs::read_dir(&path)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .collect();
            files.sort();
            for f in files {
                if f.extension().is_some_and(|e| e == "yaml") && !f.ends_with("kustomization.yaml")
                {
                    docs.extend(load_yaml(&std::fs::read_to_string(&f).unwrap()));
                }
            }
        }
        let addr = server.http;
        let mut sim = Sim::new(addr, clock, docs);
        sim._server = Some(server);
        sim
    }

    /// A simulator calling hooks at `addr`, with controllers, CRDs and webhook configurations
    /// from `docs`.
    pub fn new(addr: SocketAddr, clock: Arc<AtomicI64>, docs: Vec<Value>) -> Sim {
        let mut resources: Vec<Resource> = BUILTINS
            .iter()
            .map(|(a, k, p, n)| Resource {
                api_version: (*a).into(),
                kind: (*k).into(),
                plural: (*p).into(),
                namespaced: *n,
                schema: None,
                columns: Vec::new(),
            })
            .collect();
        let mut composites = Vec::new();
        let mut decorators = Vec::new();
        let mut webhooks = Vec::new();
        for d in docs {
            match str_at(&d, "/kind") {
                "CustomResourceDefinition" => {
                    let spec = &d["spec"];
                    for v in spec["versions"].as_array().unwrap() {
                        resources.push(Resource {
                            api_version: format!(
                                "{}/{}",
                                str_at(spec, "/group"),
                                str_at(v, "/name")
                            ),
                            kind: str_at(spec, "/names/kind").into(),
                            plural: str_at(spec, "/names/plural").into(),
                            namespaced: str_at(spec, "/scope") == "Namespaced",
                            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
                            columns: v["additionalPrinterColumns"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|c| (str_at(c, "/name").into(), str_at(c, "/jsonPath").into()))
                                .collect(),
                        });
                    }
                }
                "CompositeController" => composites.push(as_stored(d, &clock)),
                "DecoratorController" => decorators.push(as_stored(d, &clock)),
                "MutatingWebhookConfiguration" => webhooks.push((Admission::Mutating, d)),
                "ValidatingWebhookConfiguration" => webhooks.push((Admission::Validating, d)),
                _ => {}
            }
        }
        Sim {
            store: Store::default(),
            clock,
            addr,
            _server: None,
            resources,
            composites,
            decorators,
            webhooks,
            queue: BTreeSet::new(),
            resync_at: BTreeMap::new(),
            customize_cache: HashMap::new(),
            etag_cache: HashMap::new(),
            webhooks_reachable: true,
            cache_holds: BTreeMap::new(),
            caches_hear_creates_late: false,
            silent_faults: Vec::new(),
            started: false,
            calls: Vec::new(),
            requests: Vec::new(),
            delete_checks: Vec::new(),
            create_checks: Vec::new(),
            violations: Vec::new(),
            sync_errors: Vec::new(),
        }
    }

    pub fn now(&self) -> i64 {
        self.clock.load(Ordering::SeqCst)
    }

    /// Moves the virtual clock forward.
    pub fn advance(&mut self, seconds: i64) {
        self.clock.fetch_add(seconds, Ordering::SeqCst);
    }

    fn resource_by_plural(&self, api_version: &str, plural: &str) -> Option<Resource> {
        self.resources
            .iter()
            .find(|r| r.api_version == api_version && r.plural == plural)
            .cloned()
    }

    /// The CRD schema of an object's kind, none for a built-in kind.
    fn schema_of(&self, obj: &Value) -> Option<Value> {
        self.resource_by_kind(str_at(obj, "/apiVersion"), str_at(obj, "/kind"))
            .and_then(|r| r.schema)
    }

    fn resource_by_kind(&self, api_version: &str, kind: &str) -> Option<Resource> {
        self.resources
            .iter()
            .find(|r| r.api_version == api_version && r.kind == kind)
            .cloned()
    }

    /// Finds an object by kind, namespace and name (any apiVersion).
    pub fn get(&self, kind: &str, namespace: &str, name: &str) -> Option<&Value> {
        self.store
            .objects
            .iter()
            .find(|(k, _)| k.1 == kind && k.2 == namespace && k.3 == name)
            .map(|(_, v)| v)
    }

    pub fn list(&self, kind: &str, namespace: &str) -> Vec<&Value> {
        self.store.list(kind, Some(namespace))
    }

    /// When an object was created (its `creationTimestamp`, which an `Age` column reads).
    pub fn created(&self, kind: &str, namespace: &str, name: &str) -> String {
        let obj = self.get(kind, namespace, name).expect("object");
        str_at(obj, "/metadata/creationTimestamp").to_owned()
    }

    /// `kubectl get` of one custom resource: its name, then each of its CRD's printer columns
    /// as the API server fills them from the object ("" where the path finds nothing), a date
    /// as the timestamp it reads. A CRD that names columns gets only those; one that names
    /// none gets the API server's default, `Age`.
    pub fn get_row(&self, kind: &str, namespace: &str, name: &str) -> Vec<(String, String)> {
        let obj = self.get(kind, namespace, name).expect("object");
        let resource = self
            .resources
            .iter()
            .find(|r| r.api_version == str_at(obj, "/apiVersion") && r.kind == kind)
            .expect("a served kind");
        let age = [("Age".to_owned(), ".metadata.creationTimestamp".to_owned())];
        let columns = match resource.columns.as_slice() {
            [] => &age[..],
            named => named,
        };
        let mut row = vec![("Name".to_owned(), name.to_owned())];
        row.extend(
            columns
                .iter()
                .map(|(column, path)| (column.clone(), printer_column(obj, path))),
        );
        row
    }

    // ---- the API server: writes with admission ----

    /// `kubectl apply` of one object (YAML or JSON text): create, or update of labels,
    /// annotations and everything but status. Admission webhooks run; a denial is the `Err`.
    pub fn apply(&mut self, text: &str) -> Result<(), String> {
        for obj in load_yaml(text) {
            self.api_write(obj, "kubernetes-admin")?;
        }
        Ok(())
    }

    /// `kubectl apply -f manifests/examples/<name>.yaml`, every object moved into `namespace`
    /// (a scenario's helpers work in one namespace). A denial is the `Err`.
    pub fn apply_example(&mut self, name: &str, namespace: &str) -> Result<(), String> {
        let path = manifests_dir()
            .join("examples")
            .join(format!("{name}.yaml"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for mut obj in load_yaml(&text) {
            obj["metadata"]["namespace"] = json!(namespace);
            self.api_write(obj, "kubernetes-admin")?;
        }
        Ok(())
    }

    /// `kubectl apply` with no admission webhook installed: an object written before the
    /// webhook configurations were, or one an older metahooks admitted under fewer rules.
    pub fn apply_before_webhooks(&mut self, text: &str) -> Result<(), String> {
        let webhooks = std::mem::take(&mut self.webhooks);
        let written = self.apply(text);
        self.webhooks = webhooks;
        written
    }

    /// Prunes what Metacontroller writes (a hook's child, or a parent's status) and records each
    /// field the schema drops: the API server would take the write and lose the field, which
    /// the hook reads back on its next sync, so [`Sim::run_until_quiet`] fails on any.
    fn prune_metacontrollers_write(&mut self, obj: &mut Value, schema: &Value) {
        let before = obj.clone();
        prune(obj, schema, true);
        let mut dropped = Vec::new();
        dropped_fields(&before, obj, "", &mut dropped);
        for field in dropped {
            self.silent_faults.push(format!(
                "a schema drops {} {}: {field}",
                str_at(obj, "/kind"),
                str_at(obj, "/metadata/name")
            ));
        }
    }

    /// Metacontroller's AtomicUpdate of a finalizer: the object as the API server has it now
    /// gets it, whatever the caches hold.
    fn add_finalizer(&mut self, key: &Key, finalizer: &str) -> Result<(), String> {
        let mut latest = self.store.get(key).cloned().expect("an object");
        if has_finalizer(&latest, finalizer) {
            return Ok(());
        }
        set_finalizer(&mut latest, finalizer, true);
        self.api_write(latest, METACONTROLLER)
    }

    /// Metacontroller's write of a parent's or target's status, labels and annotations, which
    /// no admission webhook sees here: pruned by its CRD's schema, and no write at all (so no
    /// event) when that leaves the object as it is, as the API server skips a no-op update.
    /// The `Err` is the API server's refusal of an object its schema does not allow.
    fn write_parent(&mut self, mut obj: Value) -> Result<(), String> {
        let schema = self.schema_of(&obj);
        if let Some(schema) = &schema {
            self.prune_metacontrollers_write(&mut obj, schema);
            validate_schema(&obj, schema, "")?;
        }
        if self.store.get(&key_of(&obj)) != Some(&obj) {
            self.store.replace(obj);
        }
        Ok(())
    }

    fn api_write(&mut self, mut obj: Value, user: &str) -> Result<(), String> {
        let key = key_of(&obj);
        let old = self.store.get(&key).cloned();
        let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
        if let Some(old) = &old {
            // Keep what the server owns.
            for k in [
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
                "finalizers",
                "ownerReferences",
            ] {
                if let Some(v) = old["metadata"].get(k) {
                    if obj["metadata"].get(k).is_none() {
                        obj["metadata"][k] = v.clone();
                    }
                }
            }
            if obj.get("status").is_none() {
                if let Some(s) = old.get("status") {
                    obj["status"] = s.clone();
                }
            }
        }
        let schema = self.schema_of(&obj);
        if let Some(schema) = &schema {
            if user == METACONTROLLER {
                self.prune_metacontrollers_write(&mut obj, schema);
            } else {
                prune(&mut obj, schema, true);
            }
            apply_defaults(&mut obj, schema);
        }
        // As the API server's create and update handlers: mutating admission on the object as
        // written, then the system fields of a new object and the API server's own checks,
        // then validating admission on what would be stored.
        let obj = self.admit(Admission::Mutating, operation, Some(obj), old.clone(), user)?;
        let mut obj = obj.expect("object");
        if let Some(schema) = &schema {
            prune(&mut obj, schema, true);
        }
        if old.is_none() {
            let now = self.now();
            self.store.fill_system_fields(&mut obj, now);
        }
        Self::validate_object(&obj, schema.as_ref())?;
        if let Some(old) = &old {
            validate_update(&obj, old)?;
        }
        let obj = self.admit(
            Admission::Validating,
            operation,
            Some(obj),
            old.clone(),
            user,
        )?;
        let obj = obj.expect("object");
        match old {
            None => {
                self.store.create(obj);
            }
            Some(_) => self.store.replace(obj),
        }
        Ok(())
    }

    /// The API server's own checks of an object that a hook's answer can fail: a name that is no
    /// DNS-1123 subdomain (the rule of every kind the scenarios write), a label value longer
    /// than 63 characters (every kind; a child carries its parent's name in one), a custom
    /// resource's name longer than its CRD's (`schema`) `metadata.name` `maxLength`, a custom
    /// resource against the rest of its schema ([`validate_schema`]), and a ConfigMap's or
    /// Secret's data ([`validate_data`]).
    fn validate_object(obj: &Value, schema: Option<&Value>) -> Result<(), String> {
        validate_data(obj)?;
        if let Some(schema) = schema {
            validate_schema(obj, schema, "")?;
        }
        let name = str_at(obj, "/metadata/name");
        if !metahooks_hooks::meta::is_dns1123_subdomain(name) {
            return Err(format!(
                "metadata.name: Invalid value: {name:?}: a lowercase RFC 1123 subdomain must \
                 consist of lower case alphanumeric characters, '-' or '.', and must start and \
                 end with an alphanumeric character"
            ));
        }
        validate_metadata(&obj["metadata"])?;
        let limit = schema
            .and_then(|schema| schema.pointer("/properties/metadata/properties/name/maxLength"))
            .and_then(Value::as_u64);
        match limit {
            Some(limit) if name.len() as u64 > limit => Err(format!(
                "metadata.name: Too long: may not be more than {limit} bytes"
            )),
            _ => Ok(()),
        }
    }

    /// What the API server says to `obj` written as it is, admission aside: an `Err` for a kind
    /// it does not serve, a field its CRD's schema would drop, or a value it refuses
    /// ([`Sim::validate_object`], after defaulting). An object the API server has stored
    /// (`stored_already`) carries its CRD's defaults, so there a default it lacks is an `Err`
    /// too. An object a cluster could hold passes.
    pub fn check_storable(&self, obj: &Value, stored_already: bool) -> Result<(), String> {
        let (api_version, kind) = (str_at(obj, "/apiVersion"), str_at(obj, "/kind"));
        let Some(resource) = self.resource_by_kind(api_version, kind) else {
            return Err(format!("no kind {kind:?} is served in {api_version:?}"));
        };
        let mut stored = obj.clone();
        if let Some(schema) = &resource.schema {
            prune(&mut stored, schema, true);
            let mut dropped = Vec::new();
            dropped_fields(obj, &stored, "", &mut dropped);
            if !dropped.is_empty() {
                return Err(format!("its schema drops {}", dropped.join(", ")));
            }
            apply_defaults(&mut stored, schema);
        }
        if stored_already {
            let mut defaulted = Vec::new();
            dropped_fields(&stored, obj, "", &mut defaulted);
            if !defaulted.is_empty() {
                return Err(format!(
                    "stored without its defaults {}",
                    defaulted.join(", ")
                ));
            }
        }
        Self::validate_object(&stored, resource.schema.as_ref())
    }

    /// The CompositeController or DecoratorController with a hook that calls `route`
    /// (`/app-discovery/sync`), as loaded.
    pub fn controller_calling(&self, route: &str) -> Option<&Value> {
        self.composites.iter().chain(&self.decorators).find(|c| {
            let hooks = c["spec"]["hooks"].as_object().into_iter().flatten();
            hooks
                .map(|(_, hook)| hook)
                .any(|hook| hook_path(hook) == route)
        })
    }

    /// The object-map type keys (`Kind.apiVersion`, contract §4) of a controller's
    /// `childResources` or `attachments`, in their order.
    pub fn type_keys(&self, declared: &Value) -> Vec<String> {
        let types = self.child_types(declared).into_iter();
        types
            .map(|(r, _)| format!("{}.{}", r.kind, r.api_version))
            .collect()
    }

    /// `kubectl delete`: admission runs first; a denial is the `Err`.
    pub fn delete(&mut self, kind: &str, namespace: &str, name: &str) -> Result<(), String> {
        let key = self.admit_deletion(kind, namespace, name)?;
        self.store.delete(&key, self.now());
        Ok(())
    }

    /// `kubectl delete --cascade=orphan`: admission runs first; what the object owns stays.
    pub fn delete_orphaning(
        &mut self,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Result<(), String> {
        let key = self.admit_deletion(kind, namespace, name)?;
        self.store.delete_orphaning(&key, self.now());
        Ok(())
    }

    /// The key of the object a user deletes, once admission let the deletion through.
    fn admit_deletion(&mut self, kind: &str, namespace: &str, name: &str) -> Result<Key, String> {
        let Some(obj) = self.get(kind, namespace, name).cloned() else {
            return Err(format!("{kind} {namespace}/{name} not found"));
        };
        let key = key_of(&obj);
        self.admit(
            Admission::Mutating,
            "DELETE",
            None,
            Some(obj.clone()),
            "kubernetes-admin",
        )?;
        self.admit(
            Admission::Validating,
            "DELETE",
            None,
            Some(obj),
            "kubernetes-admin",
        )?;
        Ok(key)
    }

    /// `kubectl delete compositecontroller|decoratorcontroller NAME`: Metacontroller stops
    /// syncing that controller's parents or targets. What they own stays, and so does its
    /// finalizer on them (contract §9.2).
    pub fn remove_controller(&mut self, kind: &str, name: &str) {
        // Its list, where its queue keys start, and the spec field that makes it select nothing.
        let (controllers, first_key, selects, nothing) = match kind {
            "CompositeController" => (&mut self.composites, 0, "parentResource", Value::Null),
            "DecoratorController" => (&mut self.decorators, DECORATOR, "resources", json!([])),
            other => panic!("{other} is not a Metacontroller kind"),
        };
        let i = controllers
            .iter()
            .position(|c| str_at(c, "/metadata/name") == name)
            .expect("no such controller");
        controllers[i]["spec"][selects] = nothing;
        let ctrl = first_key + i;
        self.queue.retain(|(c, _)| *c != ctrl);
        self.resync_at.retain(|(c, _), _| *c != ctrl);
        self.customize_cache.retain(|(c, _, _), _| *c != ctrl);
    }

    /// Deletes an object bypassing admission (a controller outside the simulation doing it).
    pub fn store_delete_direct(&mut self, kind: &str, namespace: &str, name: &str) {
        if let Some(obj) = self.get(kind, namespace, name).cloned() {
            self.store.delete(&key_of(&obj), self.now());
        }
    }

    /// Makes every admission call fail as a call to an unreachable server does, or succeed again:
    /// each webhook's `failurePolicy` then decides (`Ignore` admits without it; `Fail`, the
    /// default, refuses the write). Metacontroller's hook calls are not affected.
    pub fn set_webhooks_reachable(&mut self, reachable: bool) {
        self.webhooks_reachable = reachable;
    }

    /// Metacontroller's caches stop hearing of this object, as an informer behind the API
    /// server: syncs see it as it is now until [`Sim::catch_up_caches`], whatever happens to it
    /// meanwhile. A held parent or decorator target is synced as last heard of (its own status
    /// writes included). Hold a child its parent owns already: a held orphan is not adopted
    /// here.
    pub fn hold_in_caches(&mut self, kind: &str, namespace: &str, name: &str) {
        let obj = self.get(kind, namespace, name).expect("an object").clone();
        self.cache_holds.insert(key_of(&obj), Some(obj));
    }

    /// Metacontroller's caches have not heard of this child yet (one just created): syncs do not
    /// see it until [`Sim::catch_up_caches`].
    pub fn hide_from_caches(&mut self, kind: &str, namespace: &str, name: &str) {
        let obj = self.get(kind, namespace, name).expect("an object");
        self.cache_holds.insert(key_of(obj), None);
    }

    /// Turns [`Sim::caches_hear_creates_late`] on or off, as a random walk does now and then;
    /// returns what it is now.
    pub fn turn_over_creates_heard_late(&mut self) -> bool {
        self.caches_hear_creates_late = !self.caches_hear_creates_late;
        self.caches_hear_creates_late
    }

    /// The caches catch up, and hear of creates at once from now on: a walk's end.
    pub fn caches_on_time(&mut self) {
        self.caches_hear_creates_late = false;
        self.catch_up_caches();
    }

    /// Whether Metacontroller's caches hold or hide anything the store has moved past.
    pub fn caches_behind(&self) -> bool {
        !self.cache_holds.is_empty()
    }

    /// Whether the caches hold or hide this object ([`Sim::hold_in_caches`], a create heard of
    /// late) until they next catch up.
    pub fn holds(&self, kind: &str, namespace: &str, name: &str) -> bool {
        self.cache_holds
            .keys()
            .any(|k| k.1 == kind && k.2 == namespace && k.3 == name)
    }

    /// The caches hear of every held object as it is now, and what it concerns is synced (its
    /// parent, or itself as a parent or target), as after the informer's watch events.
    pub fn catch_up_caches(&mut self) {
        for (key, seen) in std::mem::take(&mut self.cache_holds) {
            if let Some(obj) = self.store.get(&key).cloned().or(seen) {
                self.store.changed.push(obj);
            }
        }
    }

    /// The store, and the store as Metacontroller's caches have it: each held child as last heard
    /// of, each hidden one left out.
    fn before(&self) -> Before {
        let mut cached = self.store.clone();
        for (key, seen) in &self.cache_holds {
            match seen {
                Some(obj) => cached.objects.insert(key.clone(), obj.clone()),
                None => cached.objects.remove(key),
            };
        }
        Before {
            store: self.store.clone(),
            cached,
        }
    }

    /// A parent or target to sync, as Metacontroller's caches have it (as last heard of, or as
    /// the store has it); none if not heard of yet, or gone from the API server, where its
    /// status write would meet a NotFound.
    fn parent_to_sync(&self, key: &Key) -> Option<Value> {
        let now = self.store.get(key)?;
        match self.cache_holds.get(key) {
            Some(seen) => seen.clone(),
            None => Some(now.clone()),
        }
    }

    /// Objects of one type, in one namespace or all, as Metacontroller's caches have them (one
    /// informer per type serves children and related objects alike): the store, with each held
    /// object as last heard of (one deleted since included) and each hidden one left out. The
    /// flag tells a held view, which a sync must not write back.
    fn cached(&self, api_version: &str, kind: &str, ns: Option<&str>) -> Vec<(Value, bool)> {
        let held = |k: &Key| k.0 == api_version && k.1 == kind && ns.is_none_or(|ns| k.2 == ns);
        let mut out: Vec<(Value, bool)> = self
            .store
            .list_type(api_version, kind, ns)
            .into_iter()
            .filter(|o| !self.cache_holds.contains_key(&key_of(o)))
            .map(|o| (o, false))
            .collect();
        out.extend(
            self.cache_holds
                .iter()
                .filter(|(k, _)| held(k))
                .filter_map(|(_, seen)| seen.clone().map(|o| (o, true))),
        );
        out.sort_by_key(|(o, _)| key_of(o));
        out
    }

    /// Runs the matching webhooks of one kind of admission; returns the (mutated) object. A
    /// call that fails (unreachable, or any answer but a 200 with a review) refuses the write,
    /// unless the webhook's `failurePolicy` is `Ignore`, as in the API server.
    fn admit(
        &mut self,
        admission: Admission,
        operation: &str,
        object: Option<Value>,
        old: Option<Value>,
        user: &str,
    ) -> Result<Option<Value>, String> {
        let mut object = object;
        let subject = object.clone().or_else(|| old.clone()).unwrap();
        let api_version = str_at(&subject, "/apiVersion").to_owned();
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (String::new(), api_version.clone()),
        };
        let Some(resource) = self.resource_by_kind(&api_version, str_at(&subject, "/kind")) else {
            return Ok(object);
        };
        let webhooks = self.webhooks.clone();
        let webhooks = webhooks.into_iter().filter(|(kind, _)| *kind == admission);
        for (_, config) in webhooks {
            for hook in config["webhooks"].as_array().unwrap() {
                let matches = hook["rules"].as_array().unwrap().iter().any(|r| {
                    let has = |field: &str, v: &str| {
                        r[field]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|x| x == "*" || x == v)
                    };
                    has("apiGroups", &group)
                        && has("apiVersions", &version)
                        && has("operations", operation)
                        && has("resources", &resource.plural)
                });
                if !matches {
                    continue;
                }
                let kind = json!({"group": group, "version": version, "kind": resource.kind});
                let plural =
                    json!({"group": group, "version": version, "resource": resource.plural});
                let options = match operation {
                    "CREATE" => "CreateOptions",
                    "UPDATE" => "UpdateOptions",
                    _ => "DeleteOptions",
                };
                let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "request": {"uid": format!("admission-{}", self.calls.len()),
                                "kind": kind, "resource": plural, "requestKind": kind, "requestResource": plural,
                                "name": str_at(&subject, "/metadata/name"), "namespace": str_at(&subject, "/metadata/namespace"),
                                "operation": operation, "userInfo": user_info(user),
                                "object": object, "oldObject": old, "dryRun": false,
                                "options": {"apiVersion": "meta.k8s.io/v1", "kind": options}}});
                let path = str_at(hook, "/clientConfig/service/path").to_owned();
                let ignore_failure = str_at(hook, "/failurePolicy") == "Ignore";
                if !self.webhooks_reachable {
                    if ignore_failure {
                        continue;
                    }
                    return Err(format!("failed calling webhook {path}: unreachable"));
                }
                // As the API server calls it: the webhook's timeout in the query (10 s unset).
                let timeout = hook["timeoutSeconds"].as_u64().unwrap_or(10);
                let url = format!("{path}?timeout={timeout}s");
                let reply = post_json(self.addr, &url, &review, None);
                self.calls.push(HookCall {
                    path: path.clone(),
                    status: reply.status,
                    parent: str_at(&subject, "/metadata/name").into(),
                });
                self.requests.push((path.clone(), review.clone()));
                let Some(resp) = reply.json else {
                    if ignore_failure {
                        continue;
                    }
                    return Err(format!("webhook {path} answered {}", reply.status));
                };
                let r = &resp["response"];
                assert_eq!(r["uid"], review["request"]["uid"], "{path} echoes the uid");
                if r["allowed"] != json!(true) {
                    return Err(str_at(r, "/status/message").to_owned());
                }
                if admission == Admission::Mutating {
                    if let (Some(patch), Some(obj)) = (r["patch"].as_str(), object.as_mut()) {
                        assert_eq!(r["patchType"], "JSONPatch");
                        let ops: Value = serde_json::from_slice(
                            &base64::engine::general_purpose::STANDARD
                                .decode(patch)
                                .unwrap(),
                        )
                        .unwrap();
                        apply_patch(obj, &ops).map_err(|e| format!("webhook {path}: {e}"))?;
                    }
                }
            }
        }
        Ok(object)
    }

    // ---- the fake kubelet ----

    /// Sets a Pod's `status.phase`.
    pub fn set_pod_phase(&mut self, namespace: &str, name: &str, phase: &str) {
        let mut pod = self
            .get("Pod", namespace, name)
            .unwrap_or_else(|| panic!("no Pod {namespace}/{name}"))
            .clone();
        pod["status"] = json!({"phase": phase});
        self.store.replace(pod);
    }

    /// Sets the phase of the Pod of a workload label (its only non-terminating Pod).
    pub fn set_workload_phase(&mut self, namespace: &str, workload: &str, phase: &str) {
        let name = self
            .workload_pod(namespace, workload)
            .unwrap_or_else(|| panic!("no running Pod of workload {workload}"));
        self.set_pod_phase(namespace, &name, phase);
    }

    /// The name of the non-terminating Pod labelled `metahooks.dev/workload: <workload>`.
    pub fn workload_pod(&self, namespace: &str, workload: &str) -> Option<String> {
        self.list("Pod", namespace)
            .into_iter()
            .find(|p| {
                str_at(p, "/metadata/labels/metahooks.dev~1workload") == workload
                    && p["metadata"].get("deletionTimestamp").is_none()
            })
            .map(|p| str_at(p, "/metadata/name").to_owned())
    }

    /// The kubelet finishes stopping every terminating Pod: they are removed.
    pub fn finish_terminations(&mut self) {
        let terminating: Vec<Key> = self
            .store
            .objects
            .iter()
            .filter(|(k, o)| k.1 == "Pod" && o["metadata"].get("deletionTimestamp").is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for k in terminating {
            self.store.remove(&k, self.now());
        }
    }

    // ---- Metacontroller ----

    /// Processes events until nothing is left to do: every parent at start, then every parent
    /// touched by a write (its own, its children's or attachments', its related objects'), and
    /// every resync or retry that is due on the virtual clock. Panics after `MAX_ROUNDS`.
    pub fn run_until_quiet(&mut self) -> usize {
        const MAX_ROUNDS: usize = 50;
        if !self.started {
            self.started = true;
            self.enqueue_all();
        }
        for round in 0..MAX_ROUNDS {
            self.enqueue_changed();
            let now = self.now();
            let due: Vec<(usize, Key)> = self
                .resync_at
                .iter()
                .filter(|(_, t)| **t <= now)
                .map(|(k, _)| k.clone())
                .collect();
            for d in due {
                self.resync_at.remove(&d);
                self.queue.insert(d);
            }
            assert!(
                self.silent_faults.is_empty(),
                "Metacontroller would take these silently: {:?}",
                self.silent_faults
            );
            if self.queue.is_empty() {
                return round;
            }
            let work = std::mem::take(&mut self.queue);
            for (ctrl, key) in work {
                if ctrl < DECORATOR {
                    self.sync_composite(ctrl, &key);
                } else {
                    self.sync_decorator(ctrl - DECORATOR, &key);
                }
            }
        }
        panic!(
            "did not converge in {MAX_ROUNDS} rounds; still queued: {:?}; last writes: {:?}",
            self.queue,
            self.store.events.iter().rev().take(10).collect::<Vec<_>>()
        );
    }

    fn parent_type(&self, ctrl: usize) -> Option<Resource> {
        let c = &self.composites[ctrl];
        self.resource_by_plural(
            str_at(c, "/spec/parentResource/apiVersion"),
            str_at(c, "/spec/parentResource/resource"),
        )
    }

    fn target_types(&self, ctrl: usize) -> Vec<Resource> {
        self.decorators[ctrl]["spec"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| {
                self.resource_by_plural(str_at(r, "/apiVersion"), str_at(r, "/resource"))
            })
            .collect()
    }

    fn child_types(&self, list: &Value) -> Vec<(Resource, String)> {
        list.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| {
                        let r = self
                            .resource_by_plural(str_at(c, "/apiVersion"), str_at(c, "/resource"))?;
                        let method = c
                            .pointer("/updateStrategy/method")
                            .and_then(Value::as_str)
                            .unwrap_or("OnDelete")
                            .to_owned();
                        Some((r, method))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn enqueue_all(&mut self) {
        for i in 0..self.composites.len() {
            if let Some(p) = self.parent_type(i) {
                for o in self.store.list_type(&p.api_version, &p.kind, None) {
                    self.queue.insert((i, key_of(&o)));
                }
            }
        }
        for i in 0..self.decorators.len() {
            for t in self.target_types(i) {
                for o in self.store.list_type(&t.api_version, &t.kind, None) {
                    self.queue.insert((DECORATOR + i, key_of(&o)));
                }
            }
        }
    }

    /// Informers: each changed object re-syncs its parent(s).
    fn enqueue_changed(&mut self) {
        let changed = std::mem::take(&mut self.store.changed);
        for obj in changed {
            let key = key_of(&obj);
            let owner = controller_uid(&obj);
            for i in 0..self.composites.len() {
                let Some(p) = self.parent_type(i) else {
                    continue;
                };
                if key.0 == p.api_version && key.1 == p.kind {
                    if self.store.get(&key).is_some() {
                        self.queue.insert((i, key.clone()));
                    }
                    continue;
                }
                let children = self.child_types(&self.composites[i]["spec"]["childResources"]);
                if children
                    .iter()
                    .any(|(r, _)| r.api_version == key.0 && r.kind == key.1)
                {
                    match &owner {
                        Some(uid) => {
                            if let Some(parent) = self.store.by_uid(uid) {
                                if key_of(parent).1 == p.kind {
                                    self.queue.insert((i, key_of(parent)));
                                }
                            }
                        }
                        None => {
                            for parent in
                                self.store.list_type(&p.api_version, &p.kind, Some(&key.2))
                            {
                                self.queue.insert((i, key_of(&parent)));
                            }
                        }
                    }
                }
                self.enqueue_related(i, &obj);
            }
            for i in 0..self.decorators.len() {
                let targets = self.target_types(i);
                if targets
                    .iter()
                    .any(|t| t.api_version == key.0 && t.kind == key.1)
                    && self.store.get(&key).is_some()
                {
                    self.queue.insert((DECORATOR + i, key.clone()));
                }
                if let Some(uid) = &owner {
                    if let Some(target) = self.store.by_uid(uid) {
                        let tk = key_of(target);
                        if targets
                            .iter()
                            .any(|t| t.api_version == tk.0 && t.kind == tk.1)
                        {
                            self.queue.insert((DECORATOR + i, tk));
                        }
                    }
                }
                self.enqueue_related(DECORATOR + i, &obj);
            }
        }
    }

    /// Parents whose cached customize rules select `obj` are re-synced.
    fn enqueue_related(&mut self, ctrl: usize, obj: &Value) {
        let key = key_of(obj);
        let hits: Vec<(usize, Key)> = self
            .customize_cache
            .iter()
            .filter(|((c, _, _), _)| *c == ctrl)
            .filter(|(_, rules)| rules.iter().any(|r| self.rule_selects(r, obj)))
            .filter_map(|((c, uid, _), _)| self.store.by_uid(uid).map(|p| (*c, key_of(p))))
            .collect();
        for h in hits {
            if h.1 != key {
                self.queue.insert(h);
            }
        }
    }

    fn rule_selects(&self, rule: &Value, obj: &Value) -> bool {
        let Some(r) =
            self.resource_by_plural(str_at(rule, "/apiVersion"), str_at(rule, "/resource"))
        else {
            return false;
        };
        let k = key_of(obj);
        if r.api_version != k.0 || r.kind != k.1 {
            return false;
        }
        if let Some(ns) = rule["namespace"].as_str() {
            if ns != k.2 {
                return false;
            }
        }
        if let Some(names) = rule["names"].as_array() {
            if !names.iter().any(|n| n == &json!(k.3)) {
                return false;
            }
        }
        match rule.get("labelSelector") {
            Some(sel) if !sel.is_null() => selector_matches(sel, &obj["metadata"]["labels"]),
            _ => true,
        }
    }

    /// The customize hook's rules for a parent, cached per uid and generation (contract §6.3).
    fn related(
        &mut self,
        ctrl: usize,
        controller: &Value,
        parent: &Value,
        sync_version: &str,
    ) -> Result<Value, String> {
        let Some(hook) = controller.pointer("/spec/hooks/customize").cloned() else {
            return Ok(json!({}));
        };
        let cache_key = (
            ctrl,
            str_at(parent, "/metadata/uid").to_owned(),
            parent["metadata"]["generation"].as_i64().unwrap_or(0),
        );
        let rules = match self.customize_cache.get(&cache_key) {
            Some(r) => r.clone(),
            None => {
                let resp = self.call(
                    &hook,
                    response::Shape::Customize,
                    &json!({"controller": controller, "parent": parent}),
                    parent,
                )?;
                let rules = resp["relatedResources"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                self.customize_cache
                    .retain(|(c, uid, _), _| !(*c == ctrl && *uid == cache_key.1));
                self.customize_cache.insert(cache_key, rules.clone());
                rules
            }
        };
        let parent_ns = str_at(parent, "/metadata/namespace").to_owned();
        let customize_v1 = str_at(&hook, "/version") != "v2";
        let mut related = Map::new();
        for rule in &rules {
            let Some(r) =
                self.resource_by_plural(str_at(rule, "/apiVersion"), str_at(rule, "/resource"))
            else {
                return Err(format!(
                    "customize: unknown resource {}",
                    str_at(rule, "/resource")
                ));
            };
            if rule.get("names").is_some()
                && (rule.get("labelSelector").is_some() || rule.get("namespaceSelector").is_some())
            {
                return Err("customize: names together with a selector".into());
            }
            if customize_v1 && !parent_ns.is_empty() {
                if let Some(ns) = rule["namespace"].as_str() {
                    if ns != parent_ns {
                        return Err(format!("customize v1: namespace {ns} is not the parent's"));
                    }
                }
            }
            let ns_filter = rule["namespace"]
                .as_str()
                .map(str::to_owned)
                .or_else(|| (customize_v1 && !parent_ns.is_empty()).then(|| parent_ns.clone()));
            let entry = related
                .entry(format!("{}.{}", r.kind, r.api_version))
                .or_insert_with(|| json!({}));
            for (o, _) in self.cached(&r.api_version, &r.kind, ns_filter.as_deref()) {
                if self.rule_selects(rule, &o) {
                    if let Some(k) = map_key(&o, &parent_ns, sync_version) {
                        entry[k] = o.clone();
                    }
                }
            }
        }
        Ok(Value::Object(related))
    }

    /// POSTs a hook; anything but a decodable 200 is an error (429 schedules a retry). With the
    /// hook's `webhook.etag.enabled`, the last answer's tag is sent as `If-None-Match` and a 304
    /// stands for that answer, as in Metacontroller's `webhook_etag.go`.
    /// Calls `hook` with `body` and reads its answer into `shape` as Metacontroller does; any
    /// answer but one it decodes is the `Err`.
    fn call(
        &mut self,
        hook: &Value,
        shape: response::Shape,
        body: &Value,
        parent: &Value,
    ) -> Result<Value, String> {
        let path = hook_path(hook).to_owned();
        let etag_key =
            (hook.pointer("/webhook/etag/enabled") == Some(&Value::Bool(true))).then(|| {
                let at = |p| str_at(parent, p).to_owned();
                (
                    path.clone(),
                    at("/kind"),
                    at("/metadata/namespace"),
                    at("/metadata/name"),
                )
            });
        let kept = etag_key.as_ref().and_then(|k| self.etag_cache.get(k));
        let if_none_match = kept.map(|(tag, _)| tag.clone());
        let reply = post_json(self.addr, &path, body, if_none_match.as_deref());
        self.calls.push(HookCall {
            path: path.clone(),
            status: reply.status,
            parent: str_at(parent, "/metadata/name").into(),
        });
        self.requests.push((path.clone(), body.clone()));
        let answer = match (reply.status, reply.json) {
            (200, Some(v)) => {
                if let (Some(key), Some(tag)) = (etag_key, reply.etag) {
                    self.etag_cache.insert(key, (tag, v.clone()));
                }
                v
            }
            (304, _) if if_none_match.is_some() => {
                self.etag_cache[etag_key.as_ref().unwrap()].1.clone()
            }
            (429, _) => {
                return Err(format!(
                    "429 retry-after {}",
                    reply.retry_after.unwrap_or(0)
                ))
            }
            (s, _) => return Err(format!("{path}: unsupported status code: {s}")),
        };
        response::decode(shape, response::strict(hook), &answer)
            .map_err(|e| format!("{path}: decoding the answer: {e}"))?;
        Ok(answer)
    }

    /// A failed sync: 429 is retried after its Retry-After; any other error after one virtual
    /// second (Metacontroller's back-off starts at 5 ms and doubles).
    fn record_error(&mut self, ctrl: usize, key: &Key, error: String) {
        let retry = error
            .strip_prefix("429 retry-after ")
            .and_then(|s| s.parse::<i64>().ok())
            .unwrap_or(1);
        self.retry_after(ctrl, key, retry);
        self.sync_errors
            .push(format!("{}/{}: {error}", key.2, key.3));
    }

    fn sync_composite(&mut self, ctrl: usize, key: &Key) {
        let Some(mut parent) = self.parent_to_sync(key) else {
            return;
        };
        let controller = self.composites[ctrl].clone();
        let name = str_at(&controller, "/metadata/name").to_owned();
        let spec = &controller["spec"];
        let finalizer = format!("metacontroller.io/compositecontroller-{name}");
        let matches = spec
            .pointer("/parentResource/labelSelector")
            .is_none_or(|s| selector_matches(s, &parent["metadata"]["labels"]));
        let has_finalizer = |p: &Value| has_finalizer(p, &finalizer);
        if !matches && !has_finalizer(&parent) {
            return;
        }
        let deleting = parent["metadata"].get("deletionTimestamp").is_some();
        let has_finalize_hook = spec.pointer("/hooks/finalize").is_some();
        if has_finalize_hook && !deleting && matches && !has_finalizer(&parent) {
            if let Err(e) = self.add_finalizer(key, &finalizer) {
                self.sync_errors.push(format!("adding the finalizer: {e}"));
                return self.retry(ctrl, key);
            }
            parent = self.store.get(key).cloned().unwrap();
        }
        let uid = str_at(&parent, "/metadata/uid").to_owned();
        let ns = key.2.clone();
        let selector = if spec["generateSelector"] == json!(true) {
            json!({"matchLabels": {"controller-uid": uid}})
        } else {
            let s = parent
                .pointer("/spec/selector")
                .cloned()
                .unwrap_or(Value::Null);
            if s.is_null() || selector_is_empty(&s) {
                self.sync_errors
                    .push(format!("{ns}/{}: no selector", key.3));
                return;
            }
            s
        };
        let finalizing = has_finalize_hook && (deleting || !matches);
        let hook = if finalizing {
            spec["hooks"]["finalize"].clone()
        } else {
            spec["hooks"]["sync"].clone()
        };
        let version = if str_at(&hook, "/version") == "v2" {
            "v2"
        } else {
            "v1"
        };

        // Claim children: release those that no longer match, adopt matching orphans.
        let child_types = self.child_types(&spec["childResources"]);
        let mut children = Map::new();
        let mut observed: Vec<(Value, String)> = Vec::new();
        for (r, method) in &child_types {
            let entry = children
                .entry(format!("{}.{}", r.kind, r.api_version))
                .or_insert_with(|| json!({}));
            for (mut o, held) in self.cached(&r.api_version, &r.kind, Some(&ns)) {
                if held {
                    if controller_uid(&o).as_deref() == Some(uid.as_str()) {
                        if let Some(k) = map_key(&o, &ns, version) {
                            entry[k] = o.clone();
                        }
                        observed.push((o, method.clone()));
                    }
                    continue;
                }
                let owner = controller_uid(&o);
                let selected = selector_matches(&selector, &o["metadata"]["labels"]);
                if owner.as_deref() == Some(uid.as_str()) && !selected {
                    release(&mut o, &uid);
                    self.store.replace(o);
                    continue;
                }
                if owner.is_none() && selected && !deleting {
                    let mut refs = o["metadata"]["ownerReferences"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    refs.push(owner_ref(&parent));
                    o["metadata"]["ownerReferences"] = json!(refs);
                    self.store.replace(o.clone());
                    o = self.store.get(&key_of(&o)).cloned().unwrap();
                }
                if controller_uid(&o).as_deref() == Some(uid.as_str()) {
                    if let Some(k) = map_key(&o, &ns, version) {
                        entry[k] = o.clone();
                    }
                    observed.push((o, method.clone()));
                }
            }
        }
        let related = match self.related(ctrl, &controller, &parent, version) {
            Ok(r) => r,
            Err(e) => return self.record_error(ctrl, key, e),
        };
        let request = json!({"controller": controller, "parent": parent, "children": children, "related": related, "finalizing": finalizing});
        let resp = match self.call(&hook, response::Shape::Composite, &request, &parent) {
            Ok(r) => r,
            Err(e) => return self.record_error(ctrl, key, e),
        };
        if let Some(r) = resp.get("resyncAfterSeconds").and_then(Value::as_f64) {
            if r > 0.0 {
                self.resync_at
                    .insert((ctrl, key.clone()), self.now() + r.ceil() as i64);
            }
        }
        if finalizing && resp["finalized"] == json!(true) {
            let mut p = self.store.get(key).cloned().unwrap();
            set_finalizer(&mut p, &finalizer, false);
            match self.api_write(p, METACONTROLLER) {
                Ok(()) => self.store.finish_if_released(key, self.now()),
                Err(e) => {
                    self.sync_errors
                        .push(format!("removing the finalizer: {e}"));
                    self.retry(ctrl, key);
                }
            }
        }
        // Desired children: namespace defaulted, controller-uid added, selector checked.
        let mut desired: Vec<Value> = resp["children"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|c| !c.is_null())
            .collect();
        for c in desired.iter_mut() {
            if str_at(c, "/metadata/namespace").is_empty() {
                c["metadata"]["namespace"] = json!(ns);
            }
            if spec["generateSelector"] == json!(true)
                && c.pointer("/metadata/labels/controller-uid").is_none()
            {
                c["metadata"]["labels"]["controller-uid"] = json!(uid);
            }
            if !selector_matches(&selector, &c["metadata"]["labels"]) {
                return self.record_error(
                    ctrl,
                    key,
                    format!(
                        "labels on desired child {} don't match parent selector",
                        str_at(c, "/metadata/name")
                    ),
                );
            }
        }
        let still = self.store.get(key).cloned();
        let manage = match &still {
            None => false,
            Some(p) => {
                let gc = p["metadata"]["finalizers"]
                    .as_array()
                    .is_some_and(|f| f.iter().any(|x| x == "foregroundDeletion" || x == "orphan"));
                !deleting || (has_finalizer(p) && !gc)
            }
        };
        let failed = manage
            && self.manage(
                &observed,
                &desired,
                &child_types,
                still.as_ref().unwrap(),
                None,
            );
        // AtomicStatusUpdate: the status replaces the one the parent has now, whichever the
        // request carried, with the request's generation.
        if let Some(mut p) = self.store.get(key).cloned() {
            let mut status = resp
                .get("status")
                .cloned()
                .filter(|s| !s.is_null())
                .unwrap_or_else(|| json!({}));
            status["observedGeneration"] = parent["metadata"]["generation"].clone();
            if p.get("status") != Some(&status) {
                p["status"] = status;
                if let Err(e) = self.write_parent(p) {
                    self.sync_errors.push(format!("updating the status: {e}"));
                    return self.retry(ctrl, key);
                }
            }
        }
        if failed {
            self.retry(ctrl, key);
        }
    }

    /// Syncs the parent again after one virtual second, as Metacontroller's back-off does after a
    /// failed sync (it starts at 5 ms and doubles).
    fn retry(&mut self, ctrl: usize, key: &Key) {
        self.retry_after(ctrl, key, 1);
    }

    fn retry_after(&mut self, ctrl: usize, key: &Key, seconds: i64) {
        self.resync_at
            .insert((ctrl, key.clone()), self.now() + seconds);
    }

    /// Deletes undesired children, creates missing ones, updates per strategy (contract §5.3 step
    /// 9); whether a write failed (recorded in `sync_errors`), which fails the sync (step 11).
    fn manage(
        &mut self,
        observed: &[(Value, String)],
        desired: &[Value],
        types: &[(Resource, String)],
        owner: &Value,
        decorator: Option<&str>,
    ) -> bool {
        let errors_before = self.sync_errors.len();
        let now = self.now();
        // The checks read the world as it stood when this sync's request was built.
        let checked = (!self.delete_checks.is_empty() || !self.create_checks.is_empty())
            .then(|| self.before());
        let desired_keys: BTreeSet<Key> = desired.iter().map(key_of).collect();
        let (kind, name) = (str_at(owner, "/kind"), str_at(owner, "/metadata/name"));
        if desired_keys.len() < desired.len() {
            // Metacontroller keys the answer by type and name: all but the last of each go.
            self.silent_faults
                .push(format!("{kind} {name} answers one child twice"));
        }
        for k in &desired_keys {
            if !types
                .iter()
                .any(|(r, _)| r.api_version == k.0 && r.kind == k.1)
            {
                // Created, then never observed, updated or deleted (contract §5.3).
                self.silent_faults.push(format!(
                    "{kind} {name} answers {} {} of a type its controller does not declare",
                    k.1, k.3
                ));
            }
        }
        for (o, _) in observed {
            let k = key_of(o);
            if !desired_keys.contains(&k) && o["metadata"].get("deletionTimestamp").is_none() {
                let uid = |v: &Value| str_at(v, "/metadata/uid").to_owned();
                match self.store.get(&k) {
                    Some(now) if uid(now) == uid(o) => {
                        if now["metadata"].get("deletionTimestamp").is_some() {
                            // Going already since the caches heard of it: the delete changes
                            // nothing.
                            continue;
                        }
                    }
                    // Gone since the caches heard of it: NotFound (or the UID precondition
                    // failed), which Metacontroller swallows.
                    _ => continue,
                }
                for check in self.delete_checks.iter_mut() {
                    if let Err(v) = check(checked.as_ref().unwrap(), o) {
                        self.violations.push(v);
                    }
                }
                self.store.delete(&k, now);
            }
        }
        for d in desired {
            let mut d = d.clone();
            if let Some(name) = decorator {
                d["metadata"]["annotations"]["metacontroller.k8s.io/decorator-controller"] =
                    json!(name);
            }
            let k = key_of(&d);
            let method = types
                .iter()
                .find(|(r, _)| r.api_version == k.0 && r.kind == k.1)
                .map(|(_, m)| m.clone());
            match observed.iter().find(|(o, _)| key_of(o) == k) {
                None => {
                    if self.store.get(&k).is_some() {
                        // AlreadyExists (someone else's object): swallowed.
                        continue;
                    }
                    for check in self.create_checks.iter_mut() {
                        if let Err(v) = check(checked.as_ref().unwrap(), &d) {
                            self.violations.push(v);
                        }
                    }
                    let mut c = d.clone();
                    c["metadata"]["annotations"][apply::LAST_APPLIED] = json!(d.to_string());
                    c["metadata"]["ownerReferences"] = json!([owner_ref(owner)]);
                    match self.api_write(c, METACONTROLLER) {
                        Err(e) => self.sync_errors.push(format!("create {k:?} denied: {e}")),
                        Ok(()) if self.caches_hear_creates_late => {
                            self.cache_holds.insert(k, None);
                        }
                        Ok(()) => {}
                    }
                }
                Some((o, _)) => {
                    let merged = match apply::apply_update(o, &d) {
                        Ok(merged) => merged,
                        Err(e) => {
                            self.sync_errors.push(format!("update {k:?}: {e}"));
                            continue;
                        }
                    };
                    if merged == *o || o["metadata"].get("deletionTimestamp").is_some() {
                        continue;
                    }
                    match method.as_deref().unwrap_or("OnDelete") {
                        "InPlace" | "RollingInPlace" if self.cache_holds.contains_key(&k) => {
                            // Its resourceVersion is behind: a Conflict, which Metacontroller
                            // returns as the sync's error, and so syncs again after its back-off.
                            self.sync_errors
                                .push(format!("update {k:?}: {CONFLICT_CACHES_BEHIND}"));
                        }
                        "InPlace" | "RollingInPlace" => {
                            if let Err(e) = self.api_write(merged, METACONTROLLER) {
                                self.sync_errors.push(format!("update {k:?} denied: {e}"));
                            }
                        }
                        "Recreate" | "RollingRecreate" => self.store.delete(&k, now),
                        _ => {}
                    }
                }
            }
        }
        self.sync_errors.len() > errors_before
    }

    fn sync_decorator(&mut self, ctrl: usize, key: &Key) {
        let Some(mut target) = self.parent_to_sync(key) else {
            return;
        };
        let controller = self.decorators[ctrl].clone();
        let name = str_at(&controller, "/metadata/name").to_owned();
        let spec = &controller["spec"];
        let finalizer = format!("metacontroller.io/decoratorcontroller-{name}");
        let matches = spec["resources"].as_array().unwrap().iter().any(|r| {
            str_at(r, "/resource")
                == self
                    .resource_by_kind(&key.0, &key.1)
                    .map(|x| x.plural)
                    .unwrap_or_default()
                && r.get("labelSelector")
                    .is_none_or(|s| selector_matches(s, &target["metadata"]["labels"]))
        });
        let has_finalizer = |p: &Value| has_finalizer(p, &finalizer);
        if !matches && !has_finalizer(&target) {
            return;
        }
        let deleting = target["metadata"].get("deletionTimestamp").is_some();
        let has_finalize_hook = spec.pointer("/hooks/finalize").is_some();
        if has_finalize_hook && !deleting && matches && !has_finalizer(&target) {
            if let Err(e) = self.add_finalizer(key, &finalizer) {
                self.sync_errors.push(format!("adding the finalizer: {e}"));
                return self.retry(DECORATOR + ctrl, key);
            }
            target = self.store.get(key).cloned().unwrap();
        }
        let finalizing = has_finalize_hook && (deleting || !matches);
        let hook = if finalizing {
            spec["hooks"]["finalize"].clone()
        } else {
            spec["hooks"]["sync"].clone()
        };
        let version = if str_at(&hook, "/version") == "v2" {
            "v2"
        } else {
            "v1"
        };
        let uid = str_at(&target, "/metadata/uid").to_owned();
        let ns = key.2.clone();
        let types = self.child_types(&spec["attachments"]);
        let mut attachments = Map::new();
        let mut observed = Vec::new();
        for (r, method) in &types {
            let entry = attachments
                .entry(format!("{}.{}", r.kind, r.api_version))
                .or_insert_with(|| json!({}));
            for (o, _) in self.cached(&r.api_version, &r.kind, None) {
                if controller_uid(&o).as_deref() == Some(uid.as_str())
                    && str_at(
                        &o,
                        "/metadata/annotations/metacontroller.k8s.io~1decorator-controller",
                    ) == name
                {
                    if let Some(k) = map_key(&o, &ns, version) {
                        entry[k] = o.clone();
                    }
                    observed.push((o, method.clone()));
                }
            }
        }
        let related = match self.related(DECORATOR + ctrl, &controller, &target, version) {
            Ok(r) => r,
            Err(e) => return self.record_error(DECORATOR + ctrl, key, e),
        };
        let request = json!({"controller": controller, "object": target, "attachments": attachments, "related": related, "finalizing": finalizing});
        let resp = match self.call(&hook, response::Shape::Decorator, &request, &target) {
            Ok(r) => r,
            Err(e) => return self.record_error(DECORATOR + ctrl, key, e),
        };
        if let Some(r) = resp.get("resyncAfterSeconds").and_then(Value::as_f64) {
            if r > 0.0 {
                self.resync_at.insert(
                    (DECORATOR + ctrl, key.clone()),
                    self.now() + r.ceil() as i64,
                );
            }
        }
        let mut t = target.clone();
        for field in ["labels", "annotations"] {
            if let Some(m) = resp.get(field).and_then(Value::as_object) {
                for (k, v) in m {
                    if v.is_null() {
                        if let Some(map) = t["metadata"][field].as_object_mut() {
                            map.remove(k);
                        }
                    } else {
                        t["metadata"][field][k] = v.clone();
                    }
                }
            }
        }
        if let Some(s) = resp.get("status").filter(|s| !s.is_null()) {
            t["status"] = s.clone();
        }
        if finalizing && resp["finalized"] == json!(true) {
            set_finalizer(&mut t, &finalizer, false);
        }
        // Only a change is written, with the resourceVersion the caches heard of. On a
        // Conflict Metacontroller ends the pass without an error and without managing
        // attachments, and the event it missed syncs the target again (contract §7.3 step 4).
        let rv = |o: &Value| str_at(o, "/metadata/resourceVersion").to_owned();
        if t != target {
            if self.store.get(key).map(rv) != Some(rv(&target)) {
                return;
            }
            if let Err(e) = self.write_parent(t) {
                self.sync_errors.push(format!("updating the target: {e}"));
                return self.retry(DECORATOR + ctrl, key);
            }
        }
        self.store.finish_if_released(key, self.now());
        let Some(target) = self.store.get(key).cloned() else {
            return;
        };
        let mut desired: Vec<Value> = resp["attachments"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|a| !a.is_null())
            .collect();
        for a in desired.iter_mut() {
            if str_at(a, "/metadata/namespace").is_empty() {
                a["metadata"]["namespace"] = json!(ns);
            }
        }
        if self.manage(&observed, &desired, &types, &target, Some(&name)) {
            self.retry(DECORATOR + ctrl, key);
        }
    }
}

/// A Metacontroller controller as its informer holds it, and so as hook requests carry it
/// (contract §5.1): with the metadata the API server sets and an empty status.
fn as_stored(mut controller: Value, clock: &AtomicI64) -> Value {
    let name = str_at(&controller, "/metadata/name").to_owned();
    let metadata = &mut controller["metadata"];
    metadata["uid"] = json!(format!("controller-{name}"));
    metadata["resourceVersion"] = json!("1");
    metadata["generation"] = json!(1);
    metadata["creationTimestamp"] = json!(rfc3339(clock.load(Ordering::SeqCst)));
    controller["status"] = json!({});
    controller
}

/// The path a Metacontroller hook calls: its `webhook.url`'s, `/app-discovery/sync`.
fn hook_path(hook: &Value) -> &str {
    let url = str_at(hook, "/webhook/url");
    url.split_once("://")
        .map(|(_, rest)| rest.find('/').map_or("/", |i| &rest[i..]))
        .unwrap_or(url)
}

/// An AdmissionReview's `userInfo` for a user: a service account's groups, or an
/// authenticated user's.
fn user_info(user: &str) -> Value {
    match user.strip_prefix("system:serviceaccount:") {
        Some(account) => {
            let namespace = account.split(':').next().unwrap_or_default();
            json!({"username": user, "groups": ["system:serviceaccounts",
                format!("system:serviceaccounts:{namespace}"), "system:authenticated"]})
        }
        None => json!({"username": user, "groups": ["system:authenticated"]}),
    }
}

fn has_finalizer(obj: &Value, finalizer: &str) -> bool {
    obj["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// Adds (`present`) or removes a finalizer.
fn set_finalizer(obj: &mut Value, finalizer: &str, present: bool) {
    let mut list: Vec<Value> = obj["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != finalizer)
        .collect();
    if present {
        list.push(json!(finalizer));
    }
    obj["metadata"]["finalizers"] = json!(list);
}

fn owner_ref(owner: &Value) -> Value {
    json!({"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true})
}

/// The object-map key of `o` for a parent in `parent_ns` (contract §4); `None` when v1 drops it.
fn map_key(o: &Value, parent_ns: &str, version: &str) -> Option<String> {
    let ns = str_at(o, "/metadata/namespace");
    let name = str_at(o, "/metadata/name");
    if version == "v2" {
        return Some(if ns.is_empty() {
            name.to_owned()
        } else {
            format!("{ns}/{name}")
        });
    }
    if parent_ns.is_empty() {
        return Some(if ns.is_empty() {
            name.to_owned()
        } else {
            format!("{ns}/{name}")
        });
    }
    (ns == parent_ns).then(|| name.to_owned())
}

/// Labels and annotations as the API server checks them on every kind: a label key is an
/// optional DNS-subdomain prefix and `/` before a name of at most 63 characters, a value at most
/// 63 characters, each name and non-empty value alphanumeric at both ends with `-`, `_` or `.`
/// between; annotations hold at most 256 KiB, keys and values counted.
fn validate_metadata(metadata: &Value) -> Result<(), String> {
    let name_like = |text: &str| {
        text.len() <= 63
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && text.starts_with(|c: char| c.is_ascii_alphanumeric())
            && text.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    for (key, value) in metadata["labels"].as_object().into_iter().flatten() {
        let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
        let prefix_ok = prefix.is_empty()
            || (prefix.len() <= 253 && metahooks_hooks::meta::is_dns1123_subdomain(prefix));
        if !prefix_ok || !name_like(name) {
            return Err(format!(
                "metadata.labels: Invalid value: {key:?}: a valid label key"
            ));
        }
        let value = value.as_str().unwrap_or_default();
        if value.len() > 63 {
            return Err(format!(
                "metadata.labels: Invalid value: {value:?}: must be no more than 63 characters (label {key})"
            ));
        }
        if !value.is_empty() && !name_like(value) {
            return Err(format!(
                "metadata.labels: Invalid value: {value:?}: a valid label value (label {key})"
            ));
        }
    }
    let annotations: usize = metadata["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(key, value)| key.len() + value.as_str().map_or(0, str::len))
        .sum();
    if annotations > 256 << 10 {
        return Err(format!(
            "metadata.annotations: Too long: must have at most 262144 bytes ({annotations})"
        ));
    }
    Ok(())
}

/// A custom resource against its CRD's structural schema, as the API server validates it
/// after pruning and defaulting: each value of its `type` (`nullable` letting null through,
/// `x-kubernetes-int-or-string` an integer or a string), the `required` properties, `enum`,
/// `minimum`, `maxLength`, `maxItems`, `pattern` and the keys of an `x-kubernetes-list-type:
/// map` list, each given once. `metadata` is the API server's own. The CRDs' validation rules
/// (`x-kubernetes-validations`, CEL) are not evaluated.
fn validate_schema(value: &Value, schema: &Value, at: &str) -> Result<(), String> {
    let invalid = |why: String| Err(format!("{}: {why}", if at.is_empty() { "." } else { at }));
    if value.is_null() && schema["nullable"] == json!(true) {
        return Ok(());
    }
    let int_or_string = schema["x-kubernetes-int-or-string"] == json!(true);
    let typed = match schema["type"].as_str() {
        _ if int_or_string => value.is_i64() || value.is_u64() || value.is_string(),
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        _ => true,
    };
    if !typed {
        return invalid(format!("Invalid value: must be of type {}", schema["type"]));
    }
    if let Some(options) = schema["enum"].as_array() {
        if !options.contains(value) {
            return invalid(format!("Unsupported value: {value}"));
        }
    }
    if let (Some(min), Some(n)) = (schema["minimum"].as_f64(), value.as_f64()) {
        if n < min {
            return invalid(format!(
                "Invalid value: {n}: should be greater than or equal to {min}"
            ));
        }
    }
    if let (Some(max), Some(text)) = (schema["maxLength"].as_u64(), value.as_str()) {
        if text.chars().count() as u64 > max {
            return invalid(format!("Too long: may not be more than {max} bytes"));
        }
    }
    if let (Some(max), Some(items)) = (schema["maxItems"].as_u64(), value.as_array()) {
        if items.len() as u64 > max {
            return invalid(format!(
                "Too many: {}: must have at most {max} items",
                items.len()
            ));
        }
    }
    if let (Some(pattern), Some(text)) = (schema["pattern"].as_str(), value.as_str()) {
        let pattern_matches = regex::Regex::new(pattern)
            .unwrap_or_else(|e| panic!("a CRD's pattern {pattern:?}: {e}"))
            .is_match(text);
        if !pattern_matches {
            return invalid(format!("Invalid value: {value}: should match '{pattern}'"));
        }
    }
    match value {
        Value::Object(map) => {
            for name in schema["required"].as_array().into_iter().flatten() {
                let name = name.as_str().unwrap_or_default();
                if !map.contains_key(name) {
                    return Err(format!("{at}.{name}: Required value"));
                }
            }
            for (name, child) in map {
                if at.is_empty() && name == "metadata" {
                    continue;
                }
                if let Some(child_schema) = property_schema(schema, name) {
                    validate_schema(child, child_schema, &format!("{at}.{name}"))?;
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate_schema(item, item_schema, &format!("{at}[{i}]"))?;
                }
            }
            if schema["x-kubernetes-list-type"] == json!("map") {
                let keys = schema["x-kubernetes-list-map-keys"].as_array();
                let key_of = |item: &Value| -> Vec<Value> {
                    keys.into_iter()
                        .flatten()
                        .map(|k| item[k.as_str().unwrap_or_default()].clone())
                        .collect()
                };
                let mut seen = HashSet::new();
                for (i, item) in items.iter().enumerate() {
                    let key = Value::Array(key_of(item));
                    if !seen.insert(key.to_string()) {
                        return Err(format!("{at}[{i}]: Duplicate value: {key}"));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `ConfigMap` or `Secret` for an object of one of the two core kinds that hold data, else none.
fn data_kind(obj: &Value) -> Option<&str> {
    let kind = str_at(obj, "/kind");
    (str_at(obj, "/apiVersion") == "v1" && matches!(kind, "ConfigMap" | "Secret")).then_some(kind)
}

/// What an update may not change, as the API server checks it: a Secret's `type` (`Opaque`
/// when absent), and the data of a ConfigMap or Secret marked `immutable`, or the mark itself.
fn validate_update(obj: &Value, old: &Value) -> Result<(), String> {
    let Some(kind) = data_kind(obj) else {
        return Ok(());
    };
    let secret_type = |o: &Value| o["type"].as_str().unwrap_or("Opaque").to_owned();
    if kind == "Secret" && secret_type(obj) != secret_type(old) {
        return Err(format!(
            "type: Invalid value: {:?}: field is immutable",
            secret_type(obj)
        ));
    }
    if old["immutable"] == json!(true) {
        if obj["immutable"] != json!(true) {
            return Err("immutable: Forbidden: field is immutable when `immutable` is set".into());
        }
        if obj["data"] != old["data"] || obj["binaryData"] != old["binaryData"] {
            return Err("data: Forbidden: field is immutable when `immutable` is set".into());
        }
    }
    Ok(())
}

/// A ConfigMap's `data` or a Secret's, as the API server checks them: keys of
/// `[-._a-zA-Z0-9]`, string values, base64 ones in a Secret, the two keys a `kubernetes.io/tls`
/// Secret must have, and at most 1 MiB in all.
fn validate_data(obj: &Value) -> Result<(), String> {
    let Some(kind) = data_kind(obj) else {
        return Ok(());
    };
    let empty = Map::new();
    let data = match &obj["data"] {
        Value::Null => &empty,
        Value::Object(data) => data,
        _ => return Err("data: must be a map".into()),
    };
    let mut size = 0;
    for (key, value) in data {
        let valid_key = !key.is_empty()
            && key.len() <= 253
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
        if !valid_key {
            return Err(format!("data[{key}]: Invalid value: a valid config key"));
        }
        let Some(text) = value.as_str() else {
            return Err(format!("data[{key}]: must be a string"));
        };
        size += if kind == "Secret" {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| format!("data[{key}]: illegal base64 data: {e}"))?
                .len()
        } else {
            text.len()
        };
    }
    if kind == "Secret" && str_at(obj, "/type") == "kubernetes.io/tls" {
        for key in ["tls.crt", "tls.key"] {
            if !data.contains_key(key) {
                return Err(format!("data[{key}]: Required value"));
            }
        }
    }
    if size > 1 << 20 {
        return Err(format!(
            "data: Too long: must have at most 1048576 bytes ({size})"
        ));
    }
    Ok(())
}

/// The paths of the fields `before` has and `after` has not (objects only; a list keeps its
/// places), `.a.b` style.
fn dropped_fields(before: &Value, after: &Value, at: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            for (name, value) in b {
                let path = format!("{at}.{name}");
                match a.get(name) {
                    Some(kept) => dropped_fields(value, kept, &path, out),
                    None => out.push(path),
                }
            }
        }
        (Value::Array(b), Value::Array(a)) => {
            for (i, (value, kept)) in b.iter().zip(a).enumerate() {
                dropped_fields(value, kept, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The schema of an object's property `name`: its own, or the object's `additionalProperties`.
fn property_schema<'s>(schema: &'s Value, name: &str) -> Option<&'s Value> {
    schema["properties"]
        .get(name)
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// Structural pruning as the API server does it on every write of a custom resource, status
/// included: a field its schema does not name is dropped, unless its object says
/// `x-kubernetes-preserve-unknown-fields` or gives `additionalProperties`; `apiVersion`, `kind`
/// and `metadata` stay at the root and in an embedded resource.
fn prune(obj: &mut Value, schema: &Value, root: bool) {
    match obj {
        Value::Object(map) => {
            let preserve = schema["x-kubernetes-preserve-unknown-fields"] == json!(true);
            let embedded = root || schema["x-kubernetes-embedded-resource"] == json!(true);
            map.retain(|name, value| {
                if embedded && matches!(name.as_str(), "apiVersion" | "kind" | "metadata") {
                    // ObjectMeta is the API server's own; a schema only constrains its name.
                    return true;
                }
                match property_schema(schema, name) {
                    Some(child) => {
                        prune(value, child, false);
                        true
                    }
                    None => preserve,
                }
            });
        }
        Value::Array(items) => {
            if let Some(child) = schema.get("items") {
                items.iter_mut().for_each(|item| prune(item, child, false));
            }
        }
        _ => {}
    }
}

/// Structural defaulting as the API server does it: absent properties with a `default` are set,
/// present objects are defaulted recursively.
fn apply_defaults(obj: &mut Value, schema: &Value) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    for (name, prop) in props {
        if !map.contains_key(name) {
            if let Some(d) = prop.get("default") {
                map.insert(name.clone(), d.clone());
            }
        }
        if let Some(child) = map.get_mut(name) {
            apply_defaults(child, prop);
        }
    }
}

/// Applies JSONPatch add/replace/remove operations to an object as the API server does (RFC
/// 6902): `add` needs the parent to exist, `replace` and `remove` need their target. Any other
/// operation, or one that does not apply, fails the write.
fn apply_patch(obj: &mut Value, ops: &Value) -> Result<(), String> {
    for op in ops.as_array().ok_or("the patch is not a list")? {
        let (kind, path) = (str_at(op, "/op"), str_at(op, "/path"));
        let fails = || format!("patch {kind} {path} does not apply");
        let tokens: Vec<String> = path
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        let Some((last, parents)) = tokens.split_last() else {
            match kind {
                "add" | "replace" => *obj = op["value"].clone(),
                _ => return Err(fails()),
            }
            continue;
        };
        let mut at = &mut *obj;
        for t in parents {
            at = match at {
                Value::Object(map) => map.get_mut(t),
                Value::Array(list) => t.parse().ok().and_then(|i: usize| list.get_mut(i)),
                _ => None,
            }
            .ok_or_else(fails)?;
        }
        let value = op["value"].clone();
        let index = last.parse::<usize>().ok();
        let applied = match (at, kind) {
            (Value::Object(map), "add") => {
                map.insert(last.clone(), value);
                true
            }
            (Value::Object(map), "replace") => map.get_mut(last).map(|v| *v = value).is_some(),
            (Value::Object(map), "remove") => map.remove(last).is_some(),
            (Value::Array(list), "add") if last == "-" => {
                list.push(value);
                true
            }
            (Value::Array(list), "add") => match index {
                Some(i) if i <= list.len() => {
                    list.insert(i, value);
                    true
                }
                _ => false,
            },
            (Value::Array(list), "replace") => index
                .and_then(|i| list.get_mut(i))
                .map(|v| *v = value)
                .is_some(),
            (Value::Array(list), "remove") => match index {
                Some(i) if i < list.len() => {
                    list.remove(i);
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if !applied {
            return Err(fails());
        }
    }
    Ok(())
}

/// The project's `manifests/`.
fn manifests_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

pub fn load_yaml(text: &str) -> Vec<Value> {
    use serde::Deserialize;
    serde_yaml::Deserializer::from_str(text)
        .map(|d| serde_yaml::Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .map(|v| serde_json::to_value(v).unwrap())
        .collect()
}

/// A hook's answer as the simulated Metacontroller reads it.
struct HookReply {
    status: u16,
    /// The body, when the status is 200 and it is JSON.
    json: Option<Value>,
    retry_after: Option<i64>,
    etag: Option<String>,
}

fn post_json(addr: SocketAddr, path: &str, body: &Value, if_none_match: Option<&str>) -> HookReply {
    let server = TestServer::at(addr);
    let body = serde_json::to_vec(body).unwrap();
    let headers: Vec<_> = if_none_match
        .map(|tag| ("If-None-Match", tag))
        .into_iter()
        .collect();
    let reply = post_with_headers(&server, path, &body, &headers);
    HookReply {
        status: reply.status,
        json: (reply.status == 200)
            .then(|| serde_json::from_slice(&reply.body).ok())
            .flatten(),
        retry_after: reply.header("retry-after").and_then(|v| v.parse().ok()),
        etag: reply.header("etag").map(str::to_owned),
    }
}
