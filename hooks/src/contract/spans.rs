//! Where each object of a sync request lies in its text, whether two texts of one object (or of
//! a top-level field) decode the same, and the request with one object decoded anew. With these,
//! a request that differs from a kept one only inside objects, and there only in what the hook
//! does not decode (a `resourceVersion`, `managedFields`, a status field no hook reads), or in
//! the `controller`, which no hook reads, is answered from the kept request, and one that
//! differs in what the hook decodes is the kept request with those objects decoded from their
//! new texts: see [`crate::memo::DecodedRequests`].
//!
//! That is exact, not a guess: the two bodies are the same bytes before and after the object,
//! and the new object's text is one JSON value, so the new body is JSON wherever the old one
//! was, with the same value in every place but that one; and there it decodes, at the depth it
//! has in the request (serde_json limits nesting), to a value equal to the old object's (or,
//! put in the old object's place, to the new request: the objects of a request decode one by
//! one, each into its own place). For the same reason, where the objects of such a body are
//! follows from where they are in the old one ([`ObjectSpans::moved`]), also when that one
//! value decodes differently or is the value of a top-level field that holds no objects (the
//! `controller`). When several values differ, with every byte between them the same
//! ([`ObjectSpans::changes`]), all of this holds value by value.

use super::{named, CompositeRequest, DecoratorRequest, Named, ObjectMap};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// The part of a request an object is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// A composite request's `parent`, a decorator's `object`.
    Parent,
    /// `children`, or a decorator's `attachments`.
    Children,
    Related,
}

impl Section {
    /// How many JSON values hold an object of this section in a request: the request itself,
    /// and for an object map the map and its type key's map.
    fn depth(self) -> usize {
        match self {
            Section::Parent => 1,
            Section::Children | Section::Related => 3,
        }
    }
}

/// The fields of a request that hold objects, with their sections.
pub type Sections = [(&'static str, Section); 3];

/// One object of a request, or the value of a top-level field that holds none: where it is,
/// the bytes of its text, and what names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectSpan {
    /// `None` for a top-level field's value.
    pub section: Option<Section>,
    /// An object's type key (`Pod.v1`), a top-level field's name; empty for the parent.
    pub key: Arc<str>,
    pub start: usize,
    pub end: usize,
}

/// The objects and top-level field values of a request, in the order of its text.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ObjectSpans(Vec<ObjectSpan>);

/// A value of a request whose text is another in a second body: its place in the spans, and how
/// many bytes longer its text is there (shorter when negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub at: usize,
    pub grown: isize,
}

impl ObjectSpans {
    /// The objects of `body`, a request whose fields `sections` hold objects; `None` for a body
    /// that is not UTF-8 or not a map of object maps there.
    pub fn of(body: &[u8], sections: &Sections) -> Option<Self> {
        let text = std::str::from_utf8(body).ok()?;
        let mut spans = Vec::new();
        let mut de = serde_json::Deserializer::from_str(text);
        let top = Top {
            sections,
            base: text.as_ptr() as usize,
            spans: &mut spans,
        };
        de.deserialize_map(top).ok()?;
        de.end().ok()?;
        Some(ObjectSpans(spans))
    }

    /// The object or field value whose text holds the bytes `start..end`, and its place.
    pub fn containing(&self, start: usize, end: usize) -> Option<(usize, &ObjectSpan)> {
        let at = self
            .0
            .partition_point(|span| span.start <= start)
            .checked_sub(1)?;
        let span = &self.0[at];
        (end <= span.end).then_some((at, span))
    }

    /// The span at `at`.
    pub fn get(&self, at: usize) -> Option<&ObjectSpan> {
        self.0.get(at)
    }

    /// The values of `kept` (the body of these spans) whose texts differ in `body`, when
    /// nothing else does: `differing` is where the two differ (from [`crate::memo`]: the end of
    /// their common prefix, then the start of their common suffix in each). Every byte between
    /// two values, and every value in between that did not change, must be the same in both,
    /// and each changed value's text in `body` one JSON value (its decoding checks that again);
    /// else `None`.
    pub fn changes(
        &self,
        kept: &[u8],
        body: &[u8],
        (start, kept_end, body_end): (usize, usize, usize),
    ) -> Option<Vec<Change>> {
        if let Some((at, _)) = self.containing(start, kept_end) {
            let grown = body_end as isize - kept_end as isize;
            return Some(vec![Change { at, grown }]);
        }
        let first = self.containing(start, start)?.0;
        let mut changes = Vec::new();
        let mut shift = 0isize;
        for (at, span) in self.0.iter().enumerate().skip(first) {
            let text = &kept[span.start..span.end];
            let there = span.start.checked_add_signed(shift)?;
            if at == first || body.get(there..there + text.len()) != Some(text) {
                let grown = json_value_len(body.get(there..)?)? as isize - text.len() as isize;
                changes.push(Change { at, grown });
                shift += grown;
            }
            let end = span.end.checked_add_signed(shift)?;
            if kept_end <= span.end {
                // The rest of both bodies is their common suffix.
                let rest = body.len().checked_sub(end)?;
                return (end >= body_end && rest == kept.len() - span.end).then_some(changes);
            }
            let between = &kept[span.end..self.0.get(at + 1)?.start];
            if body.get(end..end + between.len()) != Some(between) {
                return None;
            }
        }
        None
    }

    /// The object at `at`, with its place among the objects of its section and type key (as
    /// [`ObjectWise::replace_object`] counts them); `None` for a top-level field's value.
    pub fn object(&self, at: usize) -> Option<(Section, &ObjectSpan, usize)> {
        let span = self.0.get(at)?;
        let section = span.section?;
        let ordinal = self.0[..at]
            .iter()
            .filter(|s| s.section == span.section && s.key == span.key)
            .count();
        Some((section, span, ordinal))
    }

    /// The spans of a body that differs from this one's only inside the values `changes` (in
    /// the order of the text), whose texts there are one JSON value each.
    pub fn moved(&self, changes: &[Change]) -> Self {
        let mut spans = self.0.clone();
        let mut changes = changes.iter().peekable();
        let mut shift = 0isize;
        for (at, span) in spans.iter_mut().enumerate() {
            span.start = span.start.saturating_add_signed(shift);
            if let Some(change) = changes.next_if(|c| c.at == at) {
                shift += change.grown;
            }
            span.end = span.end.saturating_add_signed(shift);
        }
        ObjectSpans(spans)
    }
}

/// The length of the one JSON value `text` starts with, without whitespace before it.
fn json_value_len(text: &[u8]) -> Option<usize> {
    let mut de = serde_json::Deserializer::from_slice(text);
    let raw = <&RawValue>::deserialize(&mut de).ok()?;
    (raw.get().as_ptr() == text.as_ptr()).then_some(raw.get().len())
}

/// Collects the spans of one request's objects and top-level field values.
struct Top<'s> {
    sections: &'s Sections,
    /// Where the request's text starts in memory: a span is where its raw text starts from it.
    base: usize,
    spans: &'s mut Vec<ObjectSpan>,
}

impl Top<'_> {
    fn push(&mut self, section: Option<Section>, key: &Arc<str>, raw: &RawValue) {
        let start = (raw.get().as_ptr() as usize).wrapping_sub(self.base);
        self.spans.push(ObjectSpan {
            section,
            key: Arc::clone(key),
            start,
            end: start + raw.get().len(),
        });
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a hook request")
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(field) = map.next_key::<Cow<str>>()? {
            match self.sections.iter().find(|(name, _)| *name == field) {
                Some(&(_, Section::Parent)) => {
                    let raw: &RawValue = map.next_value()?;
                    self.push(Some(Section::Parent), &Arc::from(""), raw);
                }
                Some(&(_, section)) => map.next_value_seed(ObjectMapSpans {
                    section,
                    type_key: None,
                    top: &mut self,
                })?,
                None => {
                    let raw: &RawValue = map.next_value()?;
                    self.push(None, &Arc::from(field), raw);
                }
            }
        }
        Ok(())
    }
}

/// An object map, `{"<type key>": {"<key>": object}}` (`type_key` `None`), or the objects of
/// one type key in it; a `null` map is empty.
struct ObjectMapSpans<'k, 't, 's> {
    section: Section,
    type_key: Option<&'k Arc<str>>,
    top: &'t mut Top<'s>,
}

impl<'de> DeserializeSeed<'de> for ObjectMapSpans<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for ObjectMapSpans<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object map")
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some(type_key) = self.type_key else {
            while let Some(type_key) = map.next_key::<Cow<str>>()? {
                map.next_value_seed(ObjectMapSpans {
                    section: self.section,
                    type_key: Some(&Arc::from(type_key)),
                    top: &mut *self.top,
                })?;
            }
            return Ok(());
        };
        while map.next_key::<IgnoredAny>()?.is_some() {
            let raw: &RawValue = map.next_value()?;
            self.top.push(Some(self.section), type_key, raw);
        }
        Ok(())
    }
}

/// An object's text inside as many JSON arrays as values hold it in its request, so that it is
/// decoded at the depth it has there: serde_json refuses values nested too deep.
pub struct Nested {
    text: String,
    depth: usize,
}

impl Nested {
    pub fn new(section: Section, object: &str) -> Self {
        let depth = section.depth();
        let mut text = String::with_capacity(object.len() + 2 * depth);
        text.extend(std::iter::repeat_n('[', depth));
        text.push_str(object);
        text.extend(std::iter::repeat_n(']', depth));
        Nested { text, depth }
    }

    /// The object decoded as its request decodes it (with [`named`]); `None` if it does not
    /// decode, or is not one JSON value.
    pub fn decode<'a, T: Deserialize<'a> + Named>(&'a self) -> Option<T> {
        let mut de = serde_json::Deserializer::from_str(&self.text);
        let value = Unwrap::<T>(self.depth, PhantomData)
            .deserialize(&mut de)
            .ok()?;
        de.end().ok()?;
        Some(value)
    }

    /// The object decoded into `place`; `None` if there is no place or it does not decode.
    pub fn decode_into<'a, T: Deserialize<'a> + Named>(
        &'a self,
        place: Option<&mut T>,
    ) -> Option<()> {
        *place? = self.decode()?;
        Some(())
    }
}

/// Whether an object's text `new` decodes, as its request decodes it, to a value equal to
/// `kept`; `None` if it does not decode.
pub fn decodes_as<'a, T>(kept: &T, new: &'a Nested) -> Option<bool>
where
    T: Deserialize<'a> + Named + PartialEq,
{
    Some(new.decode::<T>()? == *kept)
}

/// The one value inside `.0` arrays of one value each.
struct Unwrap<T>(usize, PhantomData<T>);

impl<'de, T: Deserialize<'de> + Named> DeserializeSeed<'de> for Unwrap<T> {
    type Value = T;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        match self.0 {
            0 => named(d),
            _ => d.deserialize_seq(self),
        }
    }
}

impl<'de, T: Deserialize<'de> + Named> Visitor<'de> for Unwrap<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of one value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        let inner = Unwrap::<T>(self.0 - 1, PhantomData);
        let value = seq
            .next_element_seed(inner)?
            .ok_or_else(|| de::Error::invalid_length(0, &self))?;
        match seq.next_element::<IgnoredAny>()? {
            None => Ok(value),
            Some(_) => Err(de::Error::invalid_length(2, &self)),
        }
    }
}

/// A request whose objects can be decoded one at a time, as the request decodes them: to tell
/// whether an object's new text decodes to the object decoded before, or to put it in place.
pub trait ObjectWise<'a> {
    /// The request's fields that hold objects.
    const SECTIONS: Sections;
    /// Whether the text `new` of the `ordinal`th object of `section` and `type_key` (counted
    /// as for [`Self::replace_object`]) decodes to that object ([`decodes_as`]); `None` if it
    /// does not decode or there is no such object.
    fn same_object(
        &self,
        section: Section,
        type_key: &str,
        ordinal: usize,
        new: &'a Nested,
    ) -> Option<bool>;
    /// Puts the object decoded from `new` in place of the `ordinal`th object of `section` and
    /// `type_key` (counted in the order of the text, over every map of that type key); `None`
    /// if `new` does not decode or there is no such object.
    fn replace_object(
        &mut self,
        section: Section,
        type_key: &str,
        ordinal: usize,
        new: &'a Nested,
    ) -> Option<()>;
    /// Whether the text `new` of the top-level field `name`, one that holds no objects,
    /// decodes as the field did in this request; `None` if it does not decode.
    fn same_field(&self, name: &str, new: &str) -> Option<bool>;
}

/// An object map of a request, as [`ObjectWise`] for the objects of one type key.
pub trait GroupWise<'a> {
    fn same_object(&self, type_key: &str, ordinal: usize, new: &'a Nested) -> Option<bool>;
    fn replace_object(&mut self, type_key: &str, ordinal: usize, new: &'a Nested) -> Option<()>;
}

/// Implements [`ObjectWise`] for a request type with a parent (or target) `P` in the field
/// `$parent`, children (or attachments) `C` in `$children`, and related objects `R`.
macro_rules! object_wise {
    ($request:ident, $parent:ident, $children:ident) => {
        impl<'a, P, C, R> ObjectWise<'a> for $request<P, C, R>
        where
            P: Deserialize<'a> + Named + PartialEq,
            C: GroupWise<'a>,
            R: GroupWise<'a>,
        {
            const SECTIONS: Sections = [
                (stringify!($parent), Section::Parent),
                (stringify!($children), Section::Children),
                ("related", Section::Related),
            ];

            fn same_object(
                &self,
                section: Section,
                type_key: &str,
                ordinal: usize,
                new: &'a Nested,
            ) -> Option<bool> {
                match section {
                    Section::Parent => decodes_as(&self.$parent, new),
                    Section::Children => self.$children.same_object(type_key, ordinal, new),
                    Section::Related => self.related.same_object(type_key, ordinal, new),
                }
            }

            fn replace_object(
                &mut self,
                section: Section,
                type_key: &str,
                ordinal: usize,
                new: &'a Nested,
            ) -> Option<()> {
                match section {
                    Section::Parent => new.decode_into(Some(&mut self.$parent)),
                    Section::Children => self.$children.replace_object(type_key, ordinal, new),
                    Section::Related => self.related.replace_object(type_key, ordinal, new),
                }
            }

            fn same_field(&self, name: &str, new: &str) -> Option<bool> {
                match name {
                    "finalizing" => {
                        Some(serde_json::from_str::<bool>(new).ok()? == self.finalizing)
                    }
                    // The `controller`, which no hook reads, and any field the request does not
                    // name are skipped: one JSON value is all that is asked of them, at any
                    // depth (serde_json skips a value without counting how deep it nests).
                    _ => serde_json::from_str::<IgnoredAny>(new).ok().map(|_| true),
                }
            }
        }
    };
}

object_wise!(CompositeRequest, parent, children);
object_wise!(DecoratorRequest, object, attachments);

/// Every object of an [`ObjectMap`] is a `T`.
impl<'a, T: Deserialize<'a> + Named + PartialEq> GroupWise<'a> for ObjectMap<T> {
    fn same_object(&self, type_key: &str, ordinal: usize, new: &'a Nested) -> Option<bool> {
        decodes_as(self.get(type_key).get(ordinal)?, new)
    }

    fn replace_object(&mut self, type_key: &str, ordinal: usize, new: &'a Nested) -> Option<()> {
        new.decode_into(self.get_mut(type_key, ordinal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::Object;
    use crate::json::Json;

    type Request<'a> = CompositeRequest<Object<'a>>;

    fn sections_of_request() -> Sections {
        <Request as ObjectWise>::SECTIONS
    }

    /// Each span of `body`: its section, key and text.
    fn spans(body: &str) -> Option<Vec<(Option<Section>, String, String)>> {
        let spans = ObjectSpans::of(body.as_bytes(), &sections_of_request())?;
        Some(texts(body, &spans))
    }

    fn texts(body: &str, spans: &ObjectSpans) -> Vec<(Option<Section>, String, String)> {
        spans
            .0
            .iter()
            .map(|s| {
                let text = body[s.start..s.end].to_owned();
                (s.section, s.key.to_string(), text)
            })
            .collect()
    }

    #[test]
    fn every_object_and_field_value_is_found_with_its_section_and_key() {
        let body = r#"{"controller":{"a":{"b":1}}, "parent": {"p":1},
            "children":{"A.v1":{"x":{"c":1},"y":{"c":2}},"B.v1":null},
            "related":{"A.v1":{"z": {"r":1} }, "A.v1":{"w":[]}}, "finalizing":false}"#;
        let found = spans(body).unwrap();
        let want = [
            (None, "controller", r#"{"a":{"b":1}}"#),
            (Some(Section::Parent), "", r#"{"p":1}"#),
            (Some(Section::Children), "A.v1", r#"{"c":1}"#),
            (Some(Section::Children), "A.v1", r#"{"c":2}"#),
            (Some(Section::Related), "A.v1", r#"{"r":1}"#),
            (Some(Section::Related), "A.v1", "[]"),
            (None, "finalizing", "false"),
        ];
        let found: Vec<_> = found
            .iter()
            .map(|(s, k, t)| (*s, k.as_str(), t.as_str()))
            .collect();
        assert_eq!(found, want);
        // A decorator's: its object and attachments, a composite's parent and children are
        // fields.
        let body = r#"{"object":{"o":1},"attachments":{"S.v1":{"s":{}}},"parent":{}}"#;
        let sections = <DecoratorRequest<Object> as ObjectWise>::SECTIONS;
        let decorator = ObjectSpans::of(body.as_bytes(), &sections).unwrap();
        let sections: Vec<_> = decorator.0.iter().map(|s| s.section).collect();
        assert_eq!(
            sections,
            [Some(Section::Parent), Some(Section::Children), None]
        );
        // Not a request of object maps, not JSON, not UTF-8: none.
        assert!(spans(r#"{"children":[1]}"#).is_none());
        assert!(spans(r#"{"parent":{}"#).is_none());
        assert!(ObjectSpans::of(b"{\"parent\":\"\xff\"}", &sections_of_request()).is_none());
    }

    #[test]
    fn the_containing_value_holds_the_whole_range() {
        let body = r#"{"parent":{"p":1},"children":{"A.v1":{"x":{"c":1},"y":{"c":2}}}}"#;
        let spans = ObjectSpans::of(body.as_bytes(), &sections_of_request()).unwrap();
        let x = body.find(r#"{"c":1}"#).unwrap();
        let y = body.find(r#"{"c":2}"#).unwrap();
        let found = |start, end| spans.containing(start, end).map(|(at, s)| (at, s.start));
        assert_eq!(found(x, x + 7), Some((1, x)));
        assert_eq!(found(x + 5, x + 6), Some((1, x)));
        assert_eq!(found(y + 1, y + 7), Some((2, y)));
        assert_eq!(found(10, 11), Some((0, 10)));
        // Past its end, across two objects, before the first.
        assert_eq!(found(x + 5, x + 8), None);
        assert_eq!(found(x + 5, y + 1), None);
        assert_eq!(found(0, 1), None);
    }

    #[test]
    fn moved_spans_are_those_of_the_changed_body() {
        let body = r#"{"controller":{"g":1},"parent":{"p":1},"children":{"A.v1":{"x":{"c":1},"y":{"c":2}}}}"#;
        let kept = ObjectSpans::of(body.as_bytes(), &sections_of_request()).unwrap();
        for (was, now, at) in [
            (r#"{"g":1}"#, r#"{"g":1234}"#, 0),
            (r#"{"c":1}"#, r#"{ "c" : [1, 2] }"#, 2),
            (r#"{"c":2}"#, r#"{}"#, 3),
            (r#"{"p":1}"#, r#"{"p":{"q":"r"}}"#, 1),
        ] {
            let changed = body.replace(was, now);
            let grown = now.len() as isize - was.len() as isize;
            let moved = kept.moved(&[Change { at, grown }]);
            assert_eq!(texts(&changed, &moved), spans(&changed).unwrap());
        }
    }

    #[test]
    fn changes_are_the_values_that_differ_when_nothing_else_does() {
        let body = r#"{"controller":{"g":1},"parent":{"p":1},"children":{"A.v1":{"x":{"c":1},"y":{"c":2}}},"finalizing":false}"#;
        let kept = ObjectSpans::of(body.as_bytes(), &sections_of_request()).unwrap();
        let changes = |changed: &str| {
            let differ = crate::memo::differing(body.as_bytes(), changed.as_bytes());
            kept.changes(body.as_bytes(), changed.as_bytes(), differ)
        };
        let change = |at, grown| Change { at, grown };
        // One value, two, three with one unchanged between them; the moved spans are those of
        // the changed body.
        for (changed, expected) in [
            (body.replace(r#""p":1"#, r#""p":12"#), vec![change(1, 1)]),
            (
                body.replace(r#""g":1"#, r#""g":[]"#)
                    .replace(r#""c":2"#, "\"c\":2,\"d\":3"),
                vec![change(0, 1), change(3, 6)],
            ),
            (
                body.replace(r#""p":1"#, "")
                    .replace(r#""c":2"#, r#""c":"2""#)
                    .replace("false", "true"),
                vec![change(1, -5), change(3, 2), change(4, -1)],
            ),
        ] {
            assert_eq!(changes(&changed).as_ref(), Some(&expected), "{changed}");
            let moved = kept.moved(&expected);
            assert_eq!(texts(&changed, &moved), spans(&changed).unwrap());
        }
        // A key between two values that differ, a value that is not one JSON value, a value
        // written with whitespace before it: not values alone.
        for changed in [
            body.replace(r#""p":1"#, r#""p":2"#)
                .replace(r#""y":"#, r#""z":"#),
            body.replace(r#""p":1"#, r#""p":2"#)
                .replace(r#""c":2}"#, r#""c":2}}"#),
            body.replace(r#""g":1"#, r#""g":2"#)
                .replace(r#""parent":{"#, r#""parent": {"#),
        ] {
            assert_eq!(changes(&changed), None, "{changed}");
        }
    }

    #[test]
    fn an_object_is_decoded_at_the_depth_it_has_in_its_request() {
        // serde_json refuses 128 nested values. A child is the fourth value in, so a spec of
        // 123 nested arrays decodes there and one of 124 does not, though alone it would.
        let nested = |n: usize| {
            let (open, close) = ("[".repeat(n), "]".repeat(n));
            format!(r#"{{"metadata":{{"name":"a"}},"spec":{open}1{close}}}"#)
        };
        type Child<'a> = Object<'a, Json<'a>>;
        let decodes_in = |section, n| Nested::new(section, &nested(n)).decode::<Child>().is_some();
        assert!(decodes_in(Section::Children, 123));
        assert!(!decodes_in(Section::Children, 124));
        let deep = nested(124);
        let alone: Child = serde_json::from_str(&deep).unwrap();
        assert!(alone.spec.as_array().is_some());
        // The same in a whole request.
        let request = |n: usize| {
            let child = nested(n);
            format!(
                r#"{{"parent":{{"metadata":{{"name":"p"}}}},"children":{{"A.v1":{{"a":{child}}}}}}}"#
            )
        };
        type WithChildren<'a> = CompositeRequest<Object<'a>, crate::contract::ObjectMap<Child<'a>>>;
        assert!(serde_json::from_str::<WithChildren>(&request(123)).is_ok());
        assert!(serde_json::from_str::<WithChildren>(&request(124)).is_err());
        // A parent is the second.
        assert!(decodes_in(Section::Parent, 125));
        assert!(!decodes_in(Section::Parent, 126));
    }

    #[test]
    fn two_texts_decode_the_same_when_what_is_read_of_them_is_equal() {
        let same = |old: &str, new: &str| {
            let (old, new) = (
                Nested::new(Section::Children, old),
                Nested::new(Section::Children, new),
            );
            decodes_as(&old.decode::<Object>()?, &new)
        };
        let a = r#"{"metadata":{"name":"a","resourceVersion":"1"},"spec":{"x":1}}"#;
        assert_eq!(same(a, a), Some(true));
        assert_eq!(same(a, &a.replace(r#""1""#, r#""2""#)), Some(true));
        assert_eq!(same(a, &format!(" {a}\n")), Some(true));
        assert_eq!(
            same(a, &a.replace(r#""name":"a""#, r#""name":"b""#)),
            Some(false)
        );
        // Not one value, not JSON, without a name: they do not decode.
        assert_eq!(same(a, &format!("{a},{a}")), None);
        assert_eq!(same(a, &a.replace('}', "")), None);
        assert_eq!(same(a, &a.replace(r#""name":"a""#, r#""name":"""#)), None);
    }

    #[test]
    fn raw_values_compare_by_their_text() {
        use crate::contract::{RawJson, RawString, Text};
        type Raw<'a> =
            Object<'a, Option<RawJson<'a>>, std::collections::BTreeMap<Text<'a>, RawString<'a>>>;
        let same = |old: &str, new: &str| {
            let (old, new) = (
                Nested::new(Section::Children, old),
                Nested::new(Section::Children, new),
            );
            decodes_as(&old.decode::<Raw>()?, &new)
        };
        let a = r#"{"metadata":{"name":"a"},"spec":{"x":[1]},"status":{"k":"djE="}}"#;
        assert_eq!(same(a, &a.replace("\"name\"", " \"name\"")), Some(true));
        assert_eq!(same(a, &a.replace("[1]", "[2]")), Some(false));
        assert_eq!(same(a, &a.replace("djE=", "djI=")), Some(false));
        // The same value written otherwise is another text.
        assert_eq!(same(a, &a.replace("[1]", "[ 1 ]")), Some(false));
        assert_eq!(same(a, &a.replace("djE=", "dj\\u0045=")), Some(false));
    }
}
