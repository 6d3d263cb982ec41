//! The two-level object maps of the contract: `{"<Kind>.<apiVersion>": {"<key>": object}}`.
//! The inner keys differ between hook versions (v1 `name` or `ns/name`, v2 `ns/name`), so they are
//! dropped on decode: names and namespaces are read from the objects themselves. Each object
//! must have a name ([`Named`]), and a map of the objects a hook answers for may hold no object
//! of a type the hook does not keep ([`other_type`]).
//! Each object is held in an `Arc`: a request spliced from a kept one (`crate::memo::Splice`)
//! shares the objects it keeps with it, so that making one copies pointers, not objects.

use super::object::{named, Named};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// Every type key of an object map, each object decoded as a `T`. For the objects a hook
/// answers for (`children`, `attachments`) use an `object_maps!` `kept struct` instead: a hook
/// that reads some type keys of an `ObjectMap` leaves the objects of the others out of its answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectMap<T> {
    groups: BTreeMap<String, Vec<Arc<T>>>,
}

impl<T> Default for ObjectMap<T> {
    fn default() -> Self {
        ObjectMap {
            groups: BTreeMap::new(),
        }
    }
}

impl<T> ObjectMap<T> {
    /// The objects of one type key such as `Pod.v1` or `KeptnApp.lifecycle.keptn.sh/v1`, in the
    /// order of the request; empty when the key is absent.
    pub fn get(&self, type_key: &str) -> &[Arc<T>] {
        self.groups.get(type_key).map_or(&[], Vec::as_slice)
    }

    /// The objects of one type key, when it is there.
    pub(super) fn group_mut(&mut self, type_key: &str) -> Option<&mut Vec<Arc<T>>> {
        self.groups.get_mut(type_key)
    }

    pub fn len(&self) -> usize {
        self.groups.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `null` is empty. A type key given twice keeps the objects of both: were the first left out,
/// the hook would not see them, and its answer would have Metacontroller delete them.
impl<'de, T: Deserialize<'de> + Named> Deserialize<'de> for ObjectMap<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_option(ObjectMapVisitor(PhantomData))
    }
}

struct ObjectMapVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de> + Named> Visitor<'de> for ObjectMapVisitor<T> {
    type Value = ObjectMap<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map from type key to objects")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(ObjectMap::default())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = ObjectMap::default();
        while let Some(type_key) = map.next_key::<String>()? {
            let objects = map.next_value::<Objects<T>>()?.0;
            out.groups.entry(type_key).or_default().extend(objects);
        }
        Ok(out)
    }
}

/// One inner map, keys dropped, values kept in request order; `null` is empty. Hooks whose maps
/// hold several types decode each type key with its own `Objects<T>`.
pub struct Objects<T>(pub Vec<Arc<T>>);

impl<'de, T: Deserialize<'de> + Named> Deserialize<'de> for Objects<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_option(ObjectsVisitor(PhantomData))
    }
}

struct ObjectsVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de> + Named> Visitor<'de> for ObjectsVisitor<T> {
    type Value = Objects<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a map from object key to object")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Objects(Vec::new()))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some(IgnoredAny) = map.next_key()? {
            out.push(Arc::new(map.next_value_seed(NamedSeed(PhantomData))?));
        }
        Ok(Objects(out))
    }
}

/// One object of a map, decoded with [`named`] so that an error names the object's key.
pub(super) struct NamedSeed<T>(pub(super) PhantomData<T>);

impl<'de, T: Deserialize<'de> + Named> DeserializeSeed<'de> for NamedSeed<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        named(d)
    }
}

/// Reads the objects of a type key that a hook does not read. In a map of the objects the hook
/// answers for (`answered`: `children`, `attachments`), any object there fails the request:
/// the answer could only leave it out, and Metacontroller would delete it. That happens when
/// the controller declares a type the hook does not keep (`kept_keys`), or a kind it keeps in
/// another version (a different type key).
pub fn other_type<'de, A: MapAccess<'de>>(
    map: &mut A,
    answered: bool,
    kept_keys: &[&str],
) -> Result<(), A::Error> {
    if answered {
        map.next_value_seed(Unkept(kept_keys))
    } else {
        map.next_value::<IgnoredAny>().map(|_| ())
    }
}

/// The objects of a type key a hook does not keep, which must be none.
struct Unkept<'k>(&'k [&'k str]);

impl<'de> DeserializeSeed<'de> for Unkept<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        let objects = Objects::<IgnoredAny>::deserialize(d)?.0;
        if objects.is_empty() {
            return Ok(());
        }
        Err(serde::de::Error::custom(format!(
            "{} object(s) of a type this hook does not keep (it keeps {}), so its answer would \
             delete them: declare only those types, in those versions, in the controller",
            objects.len(),
            self.0.join(", ")
        )))
    }
}

/// Declares a struct that decodes an object map holding several types, each type key into its own
/// typed list, in one pass (one given twice keeps both, as in [`ObjectMap`]). Other type keys
/// are skipped, except in a map of the objects a hook answers for (`children`, `attachments`),
/// declared `kept struct`: there, see [`other_type`].
///
/// ```ignore
/// object_maps! {
///     pub struct Related {
///         workloads: KeptnWorkload = "KeptnWorkload.lifecycle.keptn.sh/v1",
///         apps: KeptnObject = "KeptnApp.lifecycle.keptn.sh/v1",
///     }
/// }
/// object_maps! {
///     pub kept struct Children {
///         pods: Pod = "Pod.v1",
///     }
/// }
/// ```
macro_rules! object_maps {
    ($(#[$meta:meta])* $vis:vis kept struct $($rest:tt)*) => {
        $crate::contract::object_maps!(@define true, $(#[$meta])* $vis struct $($rest)*);
    };
    ($(#[$meta:meta])* $vis:vis struct $($rest:tt)*) => {
        $crate::contract::object_maps!(@define false, $(#[$meta])* $vis struct $($rest)*);
    };
    (@define $answered:literal, $(#[$meta:meta])* $vis:vis struct $name:ident $(<$lt:lifetime>)? {
        $($field:ident : $ty:ty = $key:expr),* $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq)]
        $vis struct $name $(<$lt>)? {
            $(pub $field: Vec<std::sync::Arc<$ty>>,)*
        }

        impl<'de $(: $lt, $lt)?> serde::Deserialize<'de> for $name $(<$lt>)? {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct MapsVisitor<T>(std::marker::PhantomData<T>);
                impl<'de $(: $lt, $lt)?> serde::de::Visitor<'de> for MapsVisitor<$name $(<$lt>)?> {
                    type Value = $name $(<$lt>)?;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("a map from type key to objects")
                    }
                    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                        Ok($name::default())
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<Self::Value, A::Error> {
                        let mut out = $name::default();
                        while let Some(key) = map.next_key::<String>()? {
                            $(
                                if key == $key {
                                    out.$field.extend(
                                        map.next_value::<$crate::contract::Objects<$ty>>()?.0,
                                    );
                                    continue;
                                }
                            )*
                            $crate::contract::other_type(&mut map, $answered, &[$($key),*])?;
                        }
                        Ok(out)
                    }
                }
                d.deserialize_any(MapsVisitor(std::marker::PhantomData))
            }
        }

        impl<'de $(: $lt, $lt)?> $crate::contract::GroupWise<'de> for $name $(<$lt>)? {
            fn same_object(
                &self,
                type_key: &str,
                ordinal: usize,
                new: &'de $crate::contract::Nested,
            ) -> Option<bool> {
                $(
                    if type_key == $key {
                        return $crate::contract::decodes_as(&**self.$field.get(ordinal)?, new);
                    }
                )*
                // Another type key: skipped, or in a map the hook answers for refused (so no
                // request kept has an object there).
                if $answered {
                    return None;
                }
                new.decode::<serde::de::IgnoredAny>().map(|_| true)
            }

            fn splice_group(
                &mut self,
                type_key: &str,
                slots: &[$crate::contract::Slot<'de>],
            ) -> Option<()> {
                $(
                    if type_key == $key {
                        return $crate::contract::spliced(&mut self.$field, slots);
                    }
                )*
                // Another type key: nothing of its objects is kept (see `same_object`), but
                // each must be one JSON value.
                if $answered && !slots.is_empty() {
                    return None;
                }
                slots
                    .iter()
                    .all(|slot| match slot {
                        $crate::contract::Slot::Kept(_) => true,
                        $crate::contract::Slot::New(new) => {
                            new.decode::<serde::de::IgnoredAny>().is_some()
                        }
                    })
                    .then_some(())
            }
        }
    };
}
pub(crate) use object_maps;
