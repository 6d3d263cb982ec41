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
            "labels" | "annotations" => {
                for (key, v) in typed(at, value)? {
                    if !v.is_null() {
                        string(&format!("{at}.{key}"), v)?;
                    }
                }
            }
            "relatedResources" => rules(strict, value)?,
            _ => {} // each known field has its arm above
        }
    }
    Ok(())
}

/// A list of objects, each with a non-empty `kind`, as the unstructured decoder wants them.
fn objects_with_kind(name: &str, value: &Value) -> Result<(), String> {
    let items = value.as_array().ok_or_else(|| cannot(name, value))?;
    for (i, item) in items.iter().enumerate() {
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
        if !item.is_object() || kind.is_empty() {
            return Err(format!("{name}[{i}]: Object 'Kind' is missing"));
        }
    }
    Ok(())
}

/// `relatedResources`: a list of typed rules.
fn rules(strict: bool, value: &Value) -> Result<(), String> {
    let items = value
        .as_array()
        .ok_or_else(|| cannot("relatedResources", value))?;
    for (i, rule) in items.iter().enumerate() {
        let at = format!("relatedResources[{i}]");
        let rule = typed(&at, rule)?;
        for (name, value) in rule {
            let at = format!("{at}.{name}");
            match name.as_str() {
                _ if value.is_null() => {}
                "apiVersion" | "resource" | "namespace" => string(&at, value)?,
                "names" => strings(&at, value)?,
                "labelSelector" | "namespaceSelector" => selector(strict, &at, value)?,
                _ if strict => return Err(format!("{at}: unknown field")),
                _ => {}
            }
        }
    }
    Ok(())
}

/// A `metav1.LabelSelector`.
fn selector(strict: bool, at: &str, value: &Value) -> Result<(), String> {
    for (name, value) in typed(at, value)? {
        let at = format!("{at}.{name}");
        match name.as_str() {
            _ if value.is_null() => {}
            "matchLabels" => {
                for (key, v) in typed(&at, value)? {
                    string(&format!("{at}.{key}"), v)?;
                }
            }
            "matchExpressions" => {
                let items = value.as_array().ok_or_else(|| cannot(&at, value))?;
                for (i, expr) in items.iter().enumerate() {
                    let at = format!("{at}[{i}]");
                    for (name, value) in typed(&at, expr)? {
                        let at = format!("{at}.{name}");
                        match name.as_str() {
                            _ if value.is_null() => {}
                            "key" | "operator" => string(&at, value)?,
                            "values" => strings(&at, value)?,
                            _ if strict => return Err(format!("{at}: unknown field")),
                            _ => {}
                        }
                    }
                }
            }
            _ if strict => return Err(format!("{at}: unknown field")),
            _ => {}
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
