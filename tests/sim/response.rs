//! Metacontroller's decoding of a hook's 200 answer (contract §3, §5.2, §6.2, §7.2): the body
//! read into the hook's typed response, which fails the sync when a field has another type, a
//! child or attachment has no `kind`, or, in strict mode (a `v2` hook, or
//! `responseUnMarshallMode: strict`), when a field is unknown. Objects inside `children` and
//! `attachments` are free-form; the customize rules and their selectors are typed.

use crate::common;
use serde_json::{Map, Value};

/// Which typed response a hook's answer is read into.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// `CompositeHookResponse` (sync and finalize).
    Composite,
    /// `DecoratorHookResponse` (sync and finalize).
    Decorator,
    /// The customize hook's `relatedResources`.
    Customize,
}

/// Whether Metacontroller reads this hook's answers strictly (contract §2.3, §11).
pub fn strict(hook: &Value) -> bool {
    match hook
        .pointer("/webhook/responseUnMarshallMode")
        .and_then(Value::as_str)
    {
        Some(mode) => mode == "strict",
        None => hook.get("version").and_then(Value::as_str) == Some("v2"),
    }
}

/// `Ok` when Metacontroller decodes `body` as `shape`; the `Err` names the field it fails on.
pub fn decode(shape: Shape, strict: bool, body: &Value) -> Result<(), String> {
    let fields = match body {
        Value::Null => return Ok(()),
        Value::Object(fields) => fields,
        other => return Err(format!("the answer is {}, not an object", type_name(other))),
    };
    let known = match shape {
        Shape::Composite => common::COMPOSITE_ANSWER_FIELDS,
        Shape::Decorator => common::DECORATOR_ANSWER_FIELDS,
        Shape::Customize => common::CUSTOMIZE_ANSWER_FIELDS,
    };
    for (name, value) in fields {
        let at = name.as_str();
        match at {
            _ if !known.contains(&at) && strict => return Err(format!("unknown field {at:?}")),
            _ if !known.contains(&at) || value.is_null() => {}
            "status" => drop(typed(at, value)?),
            "resyncAfterSeconds" => value
                .is_number()
                .then_some(())
                .ok_or_else(|| cannot(at, value))?,
            "finalized" => value
                .is_boolean()
                .then_some(())
                .ok_or_else(|| cannot(at, value))?,
            "children" | "attachments" => objects_with_kind(at, value)?,
            "labels" | "annotations" => string_map(at, value, true)?,
            "relatedResources" => each(at, value, |at, rule| {
                struct_fields(strict, at, rule, |name, at, value| match name {
                    "apiVersion" | "resource" | "namespace" => Some(string(at, value)),
                    "names" => Some(strings(at, value)),
                    "labelSelector" | "namespaceSelector" => Some(selector(strict, at, value)),
                    _ => None,
                })
            })?,
            _ => {} // each known field has its arm above
        }
    }
    Ok(())
}

/// A list of objects, each with a non-empty `kind`, as the unstructured decoder wants them.
fn objects_with_kind(name: &str, value: &Value) -> Result<(), String> {
    each(name, value, |at, item| {
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
        if !item.is_object() || kind.is_empty() {
            return Err(format!("{at}: Object 'Kind' is missing"));
        }
        Ok(())
    })
}

/// A `metav1.LabelSelector`.
fn selector(strict: bool, at: &str, value: &Value) -> Result<(), String> {
    struct_fields(strict, at, value, |name, at, value| match name {
        "matchLabels" => Some(string_map(at, value, false)),
        "matchExpressions" => Some(each(at, value, |at, expression| {
            struct_fields(strict, at, expression, |name, at, value| match name {
                "key" | "operator" => Some(string(at, value)),
                "values" => Some(strings(at, value)),
                _ => None,
            })
        })),
        _ => None,
    })
}

/// A typed Go struct: each field that is not null checked by `field`, which answers `None` for
/// a field the struct does not have (an error in strict mode, ignored in loose mode).
fn struct_fields(
    strict: bool,
    at: &str,
    value: &Value,
    field: impl Fn(&str, &str, &Value) -> Option<Result<(), String>>,
) -> Result<(), String> {
    for (name, value) in typed(at, value)?.iter().filter(|(_, v)| !v.is_null()) {
        let at = format!("{at}.{name}");
        match field(name, &at, value) {
            Some(checked) => checked?,
            None if strict => return Err(format!("{at}: unknown field")),
            None => {}
        }
    }
    Ok(())
}

/// A list, each item checked by `item` at its place.
fn each(
    at: &str,
    value: &Value,
    item: impl Fn(&str, &Value) -> Result<(), String>,
) -> Result<(), String> {
    let items = value.as_array().ok_or_else(|| cannot(at, value))?;
    for (i, value) in items.iter().enumerate() {
        item(&format!("{at}[{i}]"), value)?;
    }
    Ok(())
}

/// A map of strings, null values allowed where `nulls` says so.
fn string_map(at: &str, value: &Value, nulls: bool) -> Result<(), String> {
    for (key, v) in typed(at, value)? {
        if !(nulls && v.is_null()) {
            string(&format!("{at}.{key}"), v)?;
        }
    }
    Ok(())
}

fn typed<'v>(at: &str, value: &'v Value) -> Result<&'v Map<String, Value>, String> {
    value.as_object().ok_or_else(|| cannot(at, value))
}

fn string(at: &str, value: &Value) -> Result<(), String> {
    value
        .is_string()
        .then_some(())
        .ok_or_else(|| cannot(at, value))
}

fn strings(at: &str, value: &Value) -> Result<(), String> {
    let items = value.as_array().ok_or_else(|| cannot(at, value))?;
    items
        .iter()
        .all(Value::is_string)
        .then_some(())
        .ok_or_else(|| cannot(at, value))
}

fn cannot(at: &str, value: &Value) -> String {
    format!("{at}: cannot decode {}", type_name(value))
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
