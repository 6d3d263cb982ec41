//! Structs read from a request take a JSON object and nothing else.
//!
//! serde's derived `Deserialize` for a struct also accepts a JSON array, reading its items as
//! the fields in the order they are declared. So `"parent": []` would decode as a parent with
//! every field at its default, and a sync hook would answer for an empty parent: Metacontroller
//! would then delete children. No Kubernetes object and no part of a hook request is an array
//! where the hooks expect an object, so an array there is a 400 like any other wrong type.
//!
//! A struct opts in by deriving `Deserialize` with `#[serde(remote = "Self")]`, which makes the
//! derived code an inherent `deserialize` function instead of the trait impl, and by naming its
//! type in [`map_only!`], which writes the trait impl: the derived code, handed a deserializer
//! that answers its request for a struct with a request for a map.

use serde::de::{Deserializer, Visitor};

/// A deserializer that reads a struct as a map. Derived struct code asks only for a struct, so
/// everything else is passed on unchanged.
pub struct MapOnly<D>(pub D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for MapOnly<D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Implements `Deserialize` for structs that derive it with `#[serde(remote = "Self")]`, through
/// [`MapOnly`]. Each entry gives the impl's generics, `'de` first, the type and, when the
/// derive has a `bound` or borrows, the same bounds:
///
/// ```ignore
/// map_only! {
///     impl['de, 'a] ObjectMeta<'a> where ['de: 'a];
///     impl['de, T] Wrapper<T> where [T: Deserialize<'de>];
/// }
/// ```
macro_rules! map_only {
    ($(impl[$($generics:tt)*] $ty:ty $(where [$($bound:tt)*])?;)+) => {$(
        impl<$($generics)*> serde::Deserialize<'de> for $ty $(where $($bound)*)? {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$ty>::deserialize($crate::contract::MapOnly(d))
            }
        }
    )+};
}
pub(crate) use map_only;
