//! A JSON document whose strings stay in the request: what delete-graph reads the WorkloadSet
//! spec into, cert-rotation the CertificateManager spec and app-discovery the specs of KeptnApps
//! and their creation requests. It describes any shape, as `serde_json::Value` does, but a
//! string or key without escapes is borrowed instead of copied, and an object is one sorted
//! vector instead of a tree.
//!
//! It reads and writes exactly as `Value` would: numbers go through `serde_json::Number`,
//! objects are sorted by key bytes, and of a key given twice the last value counts. Its
//! canonical form (what Pod names hash) is therefore byte for byte the one `Value` gave.

use crate::contract::Text;
use crate::meta::write_json_str;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Number;
use std::borrow::Cow;
use std::fmt;

#[derive(Debug, Clone, Default, PartialEq)]
pub enum Json<'a> {
    #[default]
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(JsonObject<'a>),
}

/// An object's members, sorted by key bytes, each key once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JsonObject<'a>(Vec<(Cow<'a, str>, Json<'a>)>);

pub static NULL: Json<'static> = Json::Null;

impl<'a> Json<'a> {
    /// The member `key` of an object; `None` for anything else.
    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.as_object()?.get(key)
    }

    pub fn as_object(&self) -> Option<&JsonObject<'a>> {
        match self {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json<'a>]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Json::Null)
    }

    /// An object of these members, sorted by key; of a key given twice the last value counts.
    pub fn object(members: Vec<(Cow<'a, str>, Json<'a>)>) -> Self {
        Json::Object(JsonObject::from_members(members))
    }

    /// Appends the canonical form: no whitespace, keys sorted by byte order at every level,
    /// strings escaped and numbers printed as serde_json prints them.
    pub fn write_canonical(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => {
                use std::fmt::Write;
                let _ = write!(out, "{n}");
            }
            Json::String(s) => write_json_str(s, out),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_canonical(out);
                }
                out.push(']');
            }
            Json::Object(object) => {
                out.push('{');
                for (i, (key, item)) in object.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_json_str(key, out);
                    out.push(':');
                    item.write_canonical(out);
                }
                out.push('}');
            }
        }
    }

    /// The canonical form as a string (see [`Json::write_canonical`]); the hooks append to
    /// their own buffer, the tests compare whole strings.
    #[cfg(test)]
    pub fn canonical(&self) -> String {
        let mut out = String::new();
        self.write_canonical(&mut out);
        out
    }
}

impl<'a> JsonObject<'a> {
    /// Members in any order; sorted here, and of a repeated key the last value kept.
    fn from_members(mut members: Vec<(Cow<'a, str>, Json<'a>)>) -> Self {
        // A stable sort keeps repeated keys in the order given.
        members.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        members.dedup_by(|later, kept| {
            let repeated = later.0 == kept.0;
            if repeated {
                std::mem::swap(&mut later.1, &mut kept.1);
            }
            repeated
        });
        JsonObject(members)
    }

    pub fn get(&self, key: &str) -> Option<&Json<'a>> {
        self.0
            .binary_search_by(|(k, _)| k.as_bytes().cmp(key.as_bytes()))
            .ok()
            .map(|i| &self.0[i].1)
    }

    /// Sets `key` to `value`, in its place in key order.
    pub fn insert(&mut self, key: Cow<'a, str>, value: Json<'a>) {
        match self
            .0
            .binary_search_by(|(k, _)| k.as_bytes().cmp(key.as_bytes()))
        {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (key, value)),
        }
    }

    /// The members in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Json<'a>)> {
        self.0.iter().map(|(k, v)| (k.as_ref(), v))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Json<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor(std::marker::PhantomData))
    }
}

struct JsonVisitor<'a>(std::marker::PhantomData<Json<'a>>);

impl<'de: 'a, 'a> Visitor<'de> for JsonVisitor<'a> {
    type Value = Json<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json<'a>, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json<'a>, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json<'a>, E> {
        Ok(Json::Number(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json<'a>, E> {
        // As serde_json's Value: a float JSON cannot carry is null.
        Ok(Number::from_f64(v).map_or(Json::Null, Json::Number))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Json<'a>, E> {
        Ok(Json::String(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json<'a>, E> {
        Ok(Json::String(Cow::Owned(v.to_owned())))
    }
    fn visit_unit<E>(self) -> Result<Json<'a>, E> {
        Ok(Json::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'a>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'a>, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(Text(key)) = map.next_key()? {
            members.push((key, map.next_value()?));
        }
        Ok(Json::Object(JsonObject::from_members(members)))
    }
}

impl Serialize for Json<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(text) => s.serialize_str(text),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(object) => {
                let mut map = s.serialize_map(Some(object.0.len()))?;
                for (key, item) in object.iter() {
                    map.serialize_entry(key, item)?;
                }
                map.end()
            }
        }
    }
}

/// An owned copy of a `serde_json::Value`, for tests that build specs with `json!`.
#[cfg(test)]
impl From<serde_json::Value> for Json<'static> {
    fn from(value: serde_json::Value) -> Self {
        use serde_json::Value;
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(b),
            Value::Number(n) => Json::Number(n),
            Value::String(s) => Json::String(Cow::Owned(s)),
            Value::Array(items) => Json::Array(items.into_iter().map(Json::from).collect()),
            Value::Object(map) => Json::Object(JsonObject::from_members(
                map.into_iter()
                    .map(|(k, v)| (Cow::Owned(k), Json::from(v)))
                    .collect(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const SAMPLES: &[&str] = &[
        r#"{"b": [1, -2, 3.5, 1e3, 12345678901234567890, -0.0], "a": {"z": null, "y": true, "x": false}}"#,
        r#"{"k": "a\"b\\c\n\t\u0001é\/", "k\u00e9y": {}, "": []}"#,
        r#"{"dup": 1, "other": 0, "dup": {"inner": 2}, "dup": "last"}"#,
        r#"[{"spec": {"containers": [{"name": "c", "image": "x:1", "ports": [{"containerPort": 80}]}]}}]"#,
        r#""just a string""#,
        "1.5e-7",
    ];

    #[test]
    fn reads_and_writes_as_serde_json_value_does() {
        for text in SAMPLES {
            let value: Value = serde_json::from_str(text).unwrap();
            let json: Json = serde_json::from_str(text).unwrap();
            assert_eq!(
                serde_json::to_string(&json).unwrap(),
                serde_json::to_string(&value).unwrap(),
                "{text}"
            );
            assert_eq!(Json::from(value.clone()), json, "{text}");
            // serde_json's map is sorted (no preserve_order), so its compact output is the
            // canonical form the Value-based writer gave before this type.
            assert_eq!(json.canonical(), value.to_string(), "{text}");
        }
    }

    #[test]
    fn built_objects_keep_key_order_as_value_does() {
        let mut object = Json::object(vec![
            (Cow::Borrowed("version"), Json::String("1".into())),
            (Cow::Borrowed("name"), Json::Null),
            (Cow::Borrowed("version"), Json::String("2".into())),
        ]);
        assert_eq!(object.canonical(), r#"{"name":null,"version":"2"}"#);
        let Json::Object(members) = &mut object else {
            unreachable!("an object was built")
        };
        members.insert(Cow::Borrowed("name"), Json::String("web".into()));
        members.insert(Cow::Borrowed("a"), Json::Bool(true));
        members.insert(Cow::Borrowed("z"), Json::Array(vec![]));
        let mut value = serde_json::json!({"name": null, "version": "2"});
        value["name"] = "web".into();
        value["a"] = true.into();
        value["z"] = serde_json::json!([]);
        assert_eq!(
            serde_json::to_string(&object).unwrap(),
            serde_json::to_string(&value).unwrap()
        );
    }

    #[test]
    fn canonical_form_is_pythons_sorted_compact_dump() {
        // python3: json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        let json: Json =
            serde_json::from_str(r#"{"b": [{"z": 1, "a": "é\n"}], "a": null, "B": 2.5}"#).unwrap();
        assert_eq!(
            json.canonical(),
            r#"{"B":2.5,"a":null,"b":[{"a":"é\n","z":1}]}"#
        );
    }

    #[test]
    fn canonical_form_sorts_keys_keeps_the_last_repeat_and_borrows_plain_strings() {
        let text =
            r#"{"b": {"y": 1, "x": [true, null]}, "a": "q\"", "b2": 2.50, "b": {"z": "last"}}"#;
        let json: Json = serde_json::from_str(text).unwrap();
        assert_eq!(json.canonical(), r#"{"a":"q\"","b":{"z":"last"},"b2":2.5}"#);
        assert_eq!(
            json.get("b")
                .and_then(|b| b.get("z"))
                .and_then(Json::as_str),
            Some("last")
        );
        assert!(json.get("missing").is_none() && NULL.get("a").is_none());
        let plain: Json = serde_json::from_str(r#"{"key": "plain"}"#).unwrap();
        assert!(matches!(
            plain.get("key"),
            Some(Json::String(Cow::Borrowed("plain")))
        ));
    }
}
