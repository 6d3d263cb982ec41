//! The parts of a Kubernetes object the hooks read. Fields a hook interprets leniently (a spec
//! value that may have the wrong type and must be reported, not rejected) use [`Lenient`].

use super::map_only;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// An object with a typed `spec`, `status` and `metadata`; everything else (managedFields, ...)
/// is skipped. `metadata` is [`ObjectMeta`] unless only the object's name and namespace are
/// read ([`NameMeta`]). Objects compare as what was decoded of them (see [`super::ObjectWise`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[serde(bound(deserialize = "'de: 'a, Spec: Deserialize<'de> + Default, \
    Status: Deserialize<'de> + Default, Meta: Deserialize<'de> + Default"))]
pub struct Object<'a, Spec = IgnoredAny, Status = IgnoredAny, Meta = ObjectMeta<'a>> {
    #[serde(default, borrow)]
    pub api_version: Text<'a>,
    #[serde(default, borrow)]
    pub kind: Text<'a>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: Meta,
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: Spec,
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: Status,
}

/// `metadata` as the hooks read it, its strings borrowed from the request. Absent and `null`
/// maps are empty. Of `ownerReferences` a hook reads what `Owners` decodes ([`ControllerRef`]);
/// by default they are skipped unread.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
#[serde(bound(deserialize = "'de: 'a, Owners: Deserialize<'de> + Default"))]
pub struct ObjectMeta<'a, Owners = IgnoredAny> {
    #[serde(default, borrow)]
    pub name: Text<'a>,
    /// Absent for cluster-scoped objects; hooks treat an absent namespace as the parent's.
    #[serde(default, borrow)]
    pub namespace: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub uid: Option<Text<'a>>,
    /// Bumped by the API server on every spec change.
    #[serde(default)]
    pub generation: Option<i64>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    pub labels: Strings<'a>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    pub annotations: Strings<'a>,
    /// RFC 3339; kept as text because a hook must report, not reject, one it cannot parse.
    #[serde(default, borrow, deserialize_with = "lenient_string")]
    pub creation_timestamp: Option<Text<'a>>,
    /// Set while the object is being deleted.
    #[serde(default)]
    pub deletion_timestamp: Option<IgnoredAny>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub owner_references: Owners,
}

/// Of an object's `ownerReferences`, the one with `controller: true`, if any: the object that
/// controls it. Metacontroller adopts only objects that no other object controls, so a child
/// that another object controls is not one a hook can write (its create meets `AlreadyExists`,
/// which Metacontroller swallows).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControllerRef<'a>(pub Option<OwnerReference<'a>>);

/// One entry of `ownerReferences`: what names the owner, and whether it is the controller.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct OwnerReference<'a> {
    #[serde(default, borrow)]
    pub kind: Text<'a>,
    #[serde(default, borrow)]
    pub name: Text<'a>,
    #[serde(default, borrow)]
    pub uid: Text<'a>,
    #[serde(default)]
    pub controller: Option<bool>,
}

impl<'de: 'a, 'a> Deserialize<'de> for ControllerRef<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ControllerVisitor<'a>(std::marker::PhantomData<ControllerRef<'a>>);
        impl<'de: 'a, 'a> Visitor<'de> for ControllerVisitor<'a> {
            type Value = ControllerRef<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of owner references")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut controller = None;
                while let Some(owner) = seq.next_element::<OwnerReference<'a>>()? {
                    if controller.is_none() && owner.controller == Some(true) {
                        controller = Some(owner);
                    }
                }
                Ok(ControllerRef(controller))
            }
        }
        d.deserialize_seq(ControllerVisitor(std::marker::PhantomData))
    }
}

/// `metadata` of an object whose name and namespace are all a hook reads of it: its labels,
/// annotations and the rest are skipped, not decoded.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(remote = "Self")]
pub struct NameMeta<'a> {
    #[serde(default, borrow)]
    pub name: Text<'a>,
    #[serde(default, borrow)]
    pub namespace: Option<Text<'a>>,
}

map_only! {
    impl['de, 'a, Spec, Status, Meta] Object<'a, Spec, Status, Meta> where ['de: 'a,
        Spec: Deserialize<'de> + Default, Status: Deserialize<'de> + Default,
        Meta: Deserialize<'de> + Default];
    impl['de, 'a, Owners] ObjectMeta<'a, Owners> where ['de: 'a, Owners: Deserialize<'de> + Default];
    impl['de, 'a] OwnerReference<'a> where ['de: 'a];
    impl['de, 'a] NameMeta<'a> where ['de: 'a];
}

/// An object whose name a hook's answer depends on: the parent of a sync, and each observed
/// child or related object. Metacontroller only sends objects that have a name, and a hook
/// writes back the children it keeps by name, so a child without one could only be left out
/// of the answer, and Metacontroller would delete it. Such a request is refused (see [`named`]).
pub trait Named {
    /// `metadata.name`; `None` for an object the hook does not decode.
    fn name(&self) -> Option<&str>;
}

impl<Spec, Status, Owners> Named for Object<'_, Spec, Status, ObjectMeta<'_, Owners>> {
    fn name(&self) -> Option<&str> {
        Some(&self.metadata.name)
    }
}

impl<Spec, Status> Named for Object<'_, Spec, Status, NameMeta<'_>> {
    fn name(&self) -> Option<&str> {
        Some(&self.metadata.name)
    }
}

impl Named for IgnoredAny {
    fn name(&self) -> Option<&str> {
        None
    }
}

/// Decodes an object that must have a name: one without (absent or empty) is an error, put in
/// the path as a missing `metadata.name`.
pub fn named<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Named,
{
    let object = T::deserialize(d)?;
    if object.name() == Some("") {
        return Err(de::Error::missing_field("metadata.name"));
    }
    Ok(object)
}

/// A map of strings (labels, annotations) as `ObjectMeta` holds it.
pub type Strings<'a> = BTreeMap<Text<'a>, Text<'a>>;

/// The metadata of an object in a response (name, namespace, labels, annotations; empty maps
/// left out). For an object written back as observed, all of it is borrowed from the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetaOut<'a> {
    pub name: Cow<'a, str>,
    pub namespace: Cow<'a, str>,
    #[serde(skip_serializing_if = "is_empty")]
    pub labels: Cow<'a, Strings<'a>>,
    #[serde(skip_serializing_if = "is_empty")]
    pub annotations: Cow<'a, Strings<'a>>,
}

fn is_empty(map: &Strings) -> bool {
    map.is_empty()
}

impl<'a> MetaOut<'a> {
    /// An observed object's name, namespace (`namespace` when it has none), labels and
    /// annotations but those `dropped` names.
    pub fn observed<Owners>(
        meta: &'a ObjectMeta<'a, Owners>,
        namespace: &'a str,
        dropped: impl Fn(&str) -> bool,
    ) -> Self {
        MetaOut {
            name: Cow::Borrowed(meta.name.as_str()),
            namespace: Cow::Borrowed(meta.namespace_or(namespace)),
            labels: Cow::Borrowed(&meta.labels),
            annotations: without(&meta.annotations, dropped),
        }
    }
}

/// `map` without the keys `dropped` names; borrowed as it is when it has none of them.
pub fn without<'a>(map: &'a Strings<'a>, dropped: impl Fn(&str) -> bool) -> Cow<'a, Strings<'a>> {
    if !map.keys().any(|k| dropped(k)) {
        return Cow::Borrowed(map);
    }
    Cow::Owned(
        map.iter()
            .filter(|(k, _)| !dropped(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// A JSON string of the request: borrowed when it has no escapes, copied (unescaped) when it
/// has. Compares, orders and hashes as the `str` it holds, so maps keyed by it are looked up
/// with a `&str`.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Text<'a>(pub Cow<'a, str>);

impl Text<'_> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<&str> for Text<'_> {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for Text<'_> {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl fmt::Debug for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(text: &'a str) -> Self {
        Text(Cow::Borrowed(text))
    }
}

impl From<String> for Text<'_> {
    fn from(text: String) -> Self {
        Text(Cow::Owned(text))
    }
}

impl Serialize for Text<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TextVisitor<'a>(std::marker::PhantomData<Text<'a>>);
        impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(TextVisitor(std::marker::PhantomData))
    }
}

/// `namespace`, or `default_ns` when it is absent or empty.
fn namespace_or<'a>(namespace: &'a Option<Text>, default_ns: &'a str) -> &'a str {
    match namespace.as_deref() {
        Some(ns) if !ns.is_empty() => ns,
        _ => default_ns,
    }
}

/// The namespace of a hook's parent (`at` is `parent`, or `object` for a decorator), whose kind
/// is namespaced: Metacontroller always sends it. Without it a sync would look for the
/// parent's objects in no namespace and miss them all, and a customize rule without a
/// namespace selects every namespace, so its absence (or an empty one) is a bad request.
pub fn parent_namespace<'n>(
    namespace: &'n Option<Text>,
    at: &str,
    kind: &str,
) -> Result<&'n str, crate::RequestError> {
    match namespace.as_deref() {
        Some(ns) if !ns.is_empty() => Ok(ns),
        _ => Err(crate::RequestError::new(
            format_args!("{at}.metadata.namespace"),
            format_args!("missing: {kind} is a namespaced kind"),
        )),
    }
}

impl NameMeta<'_> {
    /// The object's namespace, or `default_ns` when it has none.
    pub fn namespace_or<'a>(&'a self, default_ns: &'a str) -> &'a str {
        namespace_or(&self.namespace, default_ns)
    }
}

impl<Owners> ObjectMeta<'_, Owners> {
    /// The object's namespace, or `default_ns` when it has none.
    pub fn namespace_or<'a>(&'a self, default_ns: &'a str) -> &'a str {
        namespace_or(&self.namespace, default_ns)
    }

    pub fn is_terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }
}

/// Deserializes `null` as the type's default.
pub fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A value that should be a string but may be anything: `Str` when it is one (borrowed from the
/// request, as [`Text`]), `Other` when it is present with another JSON type, `Absent` when it is
/// missing or null.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Lenient<'a> {
    #[default]
    Absent,
    Str(Text<'a>),
    Other,
}

impl Lenient<'_> {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Lenient::Str(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Lenient<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LenientVisitor(std::marker::PhantomData))
    }
}

/// For `Option<Text>` fields that must not fail on another JSON type: anything but a string is
/// `None`.
pub fn lenient_string<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Text<'a>>, D::Error> {
    Ok(match Lenient::deserialize(d)? {
        Lenient::Str(s) => Some(s),
        _ => None,
    })
}

struct LenientVisitor<'a>(std::marker::PhantomData<Lenient<'a>>);

impl<'de: 'a, 'a> Visitor<'de> for LenientVisitor<'a> {
    type Value = Lenient<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Lenient<'a>, E> {
        Ok(Lenient::Str(v.into()))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Lenient<'a>, E> {
        Ok(Lenient::Str(v.to_owned().into()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Lenient<'a>, E> {
        Ok(Lenient::Absent)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Lenient<'a>, E> {
        Ok(Lenient::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Lenient<'a>, E> {
        Ok(Lenient::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Lenient<'a>, E> {
        Ok(Lenient::Other)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Lenient<'a>, E> {
        Ok(Lenient::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Lenient<'a>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Lenient::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Lenient<'a>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Lenient::Other)
    }
}

/// A JSON string kept as its JSON text (quotes and escapes included) and written out byte for
/// byte. Secret and ConfigMap values read from a request borrow the request's text: they pass
/// through a hook without being copied, unescaped or escaped again. A value the hook makes once
/// and writes into many objects, or many responses ([`RawString::written`]), is escaped once and
/// shared: a copy is a reference count. Anything but a string is refused when decoding. `Debug`
/// shows the length only: the text may be Secret data.
#[derive(Clone)]
pub struct RawString<'a>(RawText<'a>);

/// Where the text of a [`RawString`] lives.
#[derive(Clone)]
enum RawText<'a> {
    /// In the request.
    Borrowed(&'a RawValue),
    /// Written by the hook.
    Shared(Arc<RawValue>),
}

impl RawString<'_> {
    /// The JSON text.
    fn json(&self) -> &str {
        match &self.0 {
            RawText::Borrowed(raw) => raw.get(),
            RawText::Shared(raw) => raw.get(),
        }
    }
}

/// Equal when their JSON texts are: the same string written with other escapes differs, which
/// only ever makes two objects compare as different.
impl PartialEq for RawString<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl fmt::Debug for RawString<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawString({} bytes)", self.json().len())
    }
}

impl RawString<'static> {
    /// `text` written as a JSON string; `None` only if serde_json could not write a string,
    /// which it always can.
    pub fn written(text: &str) -> Option<Self> {
        super::encode_raw(text)
            .ok()
            .map(|raw| RawString(RawText::Shared(Arc::from(raw))))
    }
}

impl RawString<'_> {
    /// The string's value.
    pub fn text(&self) -> Cow<'_, str> {
        let raw = self.json();
        let inner = &raw[1..raw.len() - 1];
        if inner.contains('\\') {
            // Already checked to be a JSON string by the parser: this cannot fail.
            Cow::Owned(serde_json::from_str(raw).unwrap_or_default())
        } else {
            Cow::Borrowed(inner)
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawString<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&'a RawValue>::deserialize(d)?;
        let unexpected = match raw.get().as_bytes().first() {
            Some(b'"') => return Ok(RawString(RawText::Borrowed(raw))),
            Some(b'{') => Unexpected::Map,
            Some(b'[') => Unexpected::Seq,
            Some(b'n') => Unexpected::Unit,
            Some(b't' | b'f') => Unexpected::Other("boolean"),
            _ => Unexpected::Other("number"),
        };
        Err(de::Error::invalid_type(unexpected, &"a string"))
    }
}

impl Serialize for RawString<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            RawText::Borrowed(raw) => raw.serialize(s),
            RawText::Shared(raw) => raw.serialize(s),
        }
    }
}

/// Any JSON value kept as its text, borrowed from the request and written back byte for byte
/// (a Pod's spec, a WorkloadSet's spec and status parts). Equal when the texts are.
#[derive(Debug, Clone, Copy)]
pub struct RawJson<'a>(pub &'a RawValue);

impl PartialEq for RawJson<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawJson<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(d).map(RawJson)
    }
}
