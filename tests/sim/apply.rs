//! Metacontroller's update of a child (contract §10, `--apply-strategy=dynamic-apply`): the
//! changes from the last-applied object to the desired one, merged into the observed object at
//! every depth, as its `dynamic/apply` package and `ApplyUpdate` do.
//!
//! - An object: keys the last-applied object had and the desired one has not are removed; every
//!   key the desired object has is merged again one level down. Keys no one applied stay.
//! - A list whose items are all objects sharing one of the conventional keys (`containerPort`,
//!   `port`, `mountPath`, `name`, `uid`, `ip`, `path`, in that order) is merged as a map by that
//!   key. As there, a key that two items share keeps the last of them, and the rebuilt list
//!   takes the observed items in their order (a key observed twice gives its merged item twice),
//!   then the desired items not yet in it. Any other list is replaced.
//! - Anything else takes the desired value.
//! - Then system metadata and `status` are put back as observed, and the last-applied
//!   annotation is set to the desired object.

use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::collections::BTreeSet;

pub const LAST_APPLIED: &str = "metacontroller.k8s.io/last-applied-configuration";

/// The merge keys Metacontroller guesses, highest precedence first.
const MERGE_KEYS: [&str; 7] = [
    "containerPort",
    "port",
    "mountPath",
    "name",
    "uid",
    "ip",
    "path",
];

/// Metadata a hook can never change (contract §10).
const SYSTEM_METADATA: [&str; 8] = [
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
];

/// The object Metacontroller would write for `desired` over `observed`; an `Err` is the merge
/// error that fails its sync (a desired value whose type the observed one cannot take, or a
/// last-applied annotation that is not JSON).
pub fn apply_update(observed: &Value, desired: &Value) -> Result<Value, String> {
    let annotation = observed["metadata"]["annotations"][LAST_APPLIED]
        .as_str()
        .unwrap_or_default();
    let last_applied = if annotation.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(annotation)
            .map_err(|e| format!("can't unmarshal {LAST_APPLIED:?} annotation: {e}"))?
    };
    let mut out = merge("", observed.clone(), &last_applied, desired)?;
    for field in SYSTEM_METADATA {
        revert(&mut out["metadata"], &observed["metadata"], field);
    }
    revert(&mut out, observed, "status");
    out["metadata"]["annotations"][LAST_APPLIED] = json!(desired.to_string());
    Ok(out)
}

/// `field` of `to` set as it is in `from`, or removed when `from` has none.
fn revert(to: &mut Value, from: &Value, field: &str) {
    match from.get(field) {
        Some(v) => to[field] = v.clone(),
        None => {
            if let Some(m) = to.as_object_mut() {
                m.remove(field);
            }
        }
    }
}

/// The diff from `last` to `desired` applied to `dest` (`Null` stands for absent, as Go's nil).
fn merge(path: &str, dest: Value, last: &Value, desired: &Value) -> Result<Value, String> {
    match dest {
        Value::Object(dest) => {
            let last = as_map(last).ok_or_else(|| expecting("lastApplied", path, "map"))?;
            let desired = as_map(desired).ok_or_else(|| expecting("desired", path, "map"))?;
            merge_object(path, dest, &last, &desired).map(Value::Object)
        }
        Value::Array(dest) => {
            let last = as_list(last).ok_or_else(|| expecting("lastApplied", path, "list"))?;
            let items = as_list(desired).ok_or_else(|| expecting("desired", path, "list"))?;
            match list_map_key(&[&dest, last, items]) {
                Some(key) => merge_list_map(path, key, dest, last, items),
                // Any other list is replaced (a null desired list stays null, as Go's nil).
                None => Ok(desired.clone()),
            }
        }
        _ => Ok(desired.clone()),
    }
}

fn expecting(side: &str, path: &str, what: &str) -> String {
    format!("can't merge desired changes: {side}{path}: expecting a {what}")
}

/// A JSON object's entries; `Null` reads as none, anything else as no object.
fn as_map(v: &Value) -> Option<Cow<'_, Map<String, Value>>> {
    match v {
        Value::Object(m) => Some(Cow::Borrowed(m)),
        Value::Null => Some(Cow::Owned(Map::new())),
        _ => None,
    }
}

/// A JSON array's items; `Null` reads as none, anything else as no array.
fn as_list(v: &Value) -> Option<&[Value]> {
    match v {
        Value::Array(a) => Some(a),
        Value::Null => Some(&[]),
        _ => None,
    }
}

fn merge_object(
    path: &str,
    mut dest: Map<String, Value>,
    last: &Map<String, Value>,
    desired: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    for key in last.keys() {
        if !desired.contains_key(key) {
            dest.remove(key);
        }
    }
    for (key, value) in desired {
        let current = dest.get_mut(key).map(std::mem::take).unwrap_or(Value::Null);
        let last = last.get(key).unwrap_or(&Value::Null);
        let merged = merge(&format!("{path}[{key}]"), current, last, value)?;
        dest.insert(key.clone(), merged);
    }
    Ok(dest)
}

fn merge_list_map(
    path: &str,
    key: &str,
    dest: Vec<Value>,
    last: &[Value],
    desired: &[Value],
) -> Result<Value, String> {
    let by_key = |list: &[Value]| -> Map<String, Value> {
        list.iter()
            .map(|item| (merge_key(&item[key]), item.clone()))
            .collect()
    };
    let merged = merge_object(path, by_key(&dest), &by_key(last), &by_key(desired))?;
    let mut added = BTreeSet::new();
    let mut out = Vec::with_capacity(merged.len());
    for item in &dest {
        let k = merge_key(&item[key]);
        if let Some(v) = merged.get(&k) {
            out.push(v.clone());
            added.insert(k);
        }
    }
    for item in desired {
        let k = merge_key(&item[key]);
        if added.insert(k.clone()) {
            out.push(merged[&k].clone());
        }
    }
    Ok(Value::Array(out))
}

/// The conventional key every item of these lists has, if they hold objects only.
fn list_map_key(lists: &[&[Value]]) -> Option<&'static str> {
    let mut common: Option<BTreeSet<&str>> = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let obj = item.as_object()?;
        match common.as_mut() {
            None => common = Some(obj.keys().map(String::as_str).collect()),
            Some(keys) => keys.retain(|k| obj.contains_key(*k)),
        }
    }
    let common = common?;
    MERGE_KEYS.into_iter().find(|k| common.contains(k))
}

/// A merge key as a string, as Go's `%v` prints it: a string as it is, null as `<nil>`, a number
/// or boolean as its JSON text (the same), anything else as its JSON text.
fn merge_key(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".to_owned(),
        other => other.to_string(),
    }
}
