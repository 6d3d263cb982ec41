//! Where each object of a sync request lies in its text, whether two texts of one object (or of
//! a top-level field) decode the same, and the request with objects decoded anew. With these,
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
//!
//! A request that differs from a kept one only in which objects one map of a type key holds
//! (some taken out, others put in their place, none or more of either) is found the same way
//! ([`ObjectSpans::reshape`]): the bytes between the objects that stay are, in the new body, a
//! run of the map's entries, each value one JSON value, so the new body is JSON wherever the
//! old one was, and decodes to the old request with that type key's objects those of the run
//! in place of those taken out (see [`spliced`]).

use super::object_map::NamedSeed;
use super::{CompositeRequest, DecoratorRequest, Named, ObjectMap, Text};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;
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

/// The objects and top-level field values of a request, in the order of its text, and the maps
/// of one type key that hold its objects.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ObjectSpans {
    values: Vec<ObjectSpan>,
    maps: Vec<MapSpan>,
}

/// A map of the objects of one type key in a request (`{"<key>": object}`): where its braces
/// are, and which of the request's spans are its objects. A map whose type key is written with
/// an escape, or that is `null`, has none.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MapSpan {
    section: Section,
    key: Arc<str>,
    /// Where its `{` is.
    open: usize,
    /// Where its `}` is.
    close: usize,
    objects: Range<usize>,
}

/// A request that differs from another only inside one map of a type key, in which some
/// objects, one after the other, are taken out and others put in their place: see
/// [`ObjectSpans::reshaped`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reshape {
    /// The map, among the spans' maps.
    map: usize,
    /// The objects taken out, as places in the spans.
    pub removed: Range<usize>,
    /// Where the objects put in are in the request's text.
    pub inserted: Vec<Range<usize>>,
    /// How many bytes longer the request is (shorter when negative).
    grown: isize,
}

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
        let mut spans = ObjectSpans::default();
        let mut de = serde_json::Deserializer::from_str(text);
        let top = Top {
            sections,
            text,
            spans: &mut spans,
        };
        de.deserialize_map(top).ok()?;
        de.end().ok()?;
        Some(spans)
    }

    /// The object or field value whose text holds the bytes `start..end`, and its place.
    pub fn containing(&self, start: usize, end: usize) -> Option<(usize, &ObjectSpan)> {
        let at = self
            .values
            .partition_point(|span| span.start <= start)
            .checked_sub(1)?;
        let span = &self.values[at];
        (end <= span.end).then_some((at, span))
    }

    /// The span at `at`.
    pub fn get(&self, at: usize) -> Option<&ObjectSpan> {
        self.values.get(at)
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
        differing: (usize, usize, usize),
    ) -> Option<Vec<Change>> {
        match self.walk(kept, body, differing)? {
            (changes, None) => Some(changes),
            (_, Some(_)) => None,
        }
    }

    /// The values of `kept` that differ in `body` as [`Self::changes`] finds them, when the
    /// bytes after the last of them differ too: those changes, and where in `kept` the bytes
    /// after them are first other than in `body` (moved by the changes). `None` when nothing
    /// else differs, or no value does (the walk starts at the value the first byte that
    /// differs is in, and counts it changed).
    pub fn changes_before(
        &self,
        kept: &[u8],
        body: &[u8],
        differing: (usize, usize, usize),
    ) -> Option<(Vec<Change>, usize)> {
        match self.walk(kept, body, differing)? {
            (changes, Some(at)) => Some((changes, at)),
            (_, None) => None,
        }
    }

    /// The values that differ, walked from the first; with `Some` where the bytes after a value
    /// first differ, when they do before the common suffix or the rest is not that suffix.
    fn walk(
        &self,
        kept: &[u8],
        body: &[u8],
        (start, kept_end, body_end): (usize, usize, usize),
    ) -> Option<(Vec<Change>, Option<usize>)> {
        if let Some((at, _)) = self.containing(start, kept_end) {
            let grown = body_end as isize - kept_end as isize;
            return Some((vec![Change { at, grown }], None));
        }
        let first = self.containing(start, start)?.0;
        let mut changes = Vec::new();
        let mut shift = 0isize;
        for (at, span) in self.values.iter().enumerate().skip(first) {
            let text = &kept[span.start..span.end];
            let there = span.start.checked_add_signed(shift)?;
            if at == first || body.get(there..there + text.len()) != Some(text) {
                let grown = json_value_len(body.get(there..)?)? as isize - text.len() as isize;
                changes.push(Change { at, grown });
                shift += grown;
            }
            let end = span.end.checked_add_signed(shift)?;
            if kept_end <= span.end {
                // The rest of both bodies is their common suffix, or they differ after this
                // value (the suffix found first may hold bytes of what was put in after it).
                let rest = body.len().checked_sub(end)?;
                let suffix = end >= body_end && rest == kept.len() - span.end;
                return Some((changes, (!suffix).then_some(span.end)));
            }
            let next = self
                .values
                .get(at + 1)
                .map_or(kept.len(), |next| next.start);
            let between = &kept[span.end..next];
            if body.get(end..end + between.len()) != Some(between) {
                return Some((changes, Some(span.end)));
            }
        }
        None
    }

    /// The object at `at`, with its place among the objects of its section and type key (as
    /// [`ObjectWise::splice_group`] counts them); `None` for a top-level field's value.
    pub fn object(&self, at: usize) -> Option<(Section, &ObjectSpan, usize)> {
        let span = self.values.get(at)?;
        let section = span.section?;
        Some((section, span, self.count(section, &span.key, at)))
    }

    /// How many objects of `section` and `type_key` there are before the place `at`.
    pub fn count(&self, section: Section, type_key: &str, at: usize) -> usize {
        self.values[..at.min(self.values.len())]
            .iter()
            .filter(|s| s.section == Some(section) && *s.key == *type_key)
            .count()
    }

    /// The spans of a body that differs from this one's only inside the values `changes` (in
    /// the order of the text), whose texts there are one JSON value each.
    pub fn moved(&self, changes: &[Change]) -> Self {
        let mut values = self.values.clone();
        let mut changes = changes.iter().peekable();
        let mut shift = 0isize;
        // How much each value's end moves.
        let mut shifts = Vec::with_capacity(values.len());
        for (at, span) in values.iter_mut().enumerate() {
            span.start = span.start.saturating_add_signed(shift);
            if let Some(change) = changes.next_if(|c| c.at == at) {
                shift += change.grown;
            }
            span.end = span.end.saturating_add_signed(shift);
            shifts.push(shift);
        }
        // A map's braces move as the ends of the values before them do.
        let moved_by = |objects: usize| objects.checked_sub(1).map_or(0, |at| shifts[at]);
        let maps = self
            .maps
            .iter()
            .map(|map| MapSpan {
                open: map.open.saturating_add_signed(moved_by(map.objects.start)),
                close: map.close.saturating_add_signed(moved_by(map.objects.end)),
                ..map.clone()
            })
            .collect();
        ObjectSpans { values, maps }
    }

    /// How `body` differs from `kept` (the body of these spans), when it is `kept` with some
    /// objects of one map of a type key, one after the other, taken out and others put in
    /// their place (none, one or more of either); `None` when it is not (see [`Self::changes`]
    /// for `differing`). The text that differs is parsed in place: it must be, where it is, a
    /// run of map entries whose values are one JSON value each, so `body` is JSON wherever
    /// `kept` is.
    pub fn reshape(
        &self,
        body: &[u8],
        (start, kept_end, body_end): (usize, usize, usize),
    ) -> Option<Reshape> {
        let map = self
            .maps
            .iter()
            .position(|m| start > m.open && kept_end <= m.close)?;
        let MapSpan { open, close, .. } = self.maps[map];
        let objects = &self.values[self.maps[map].objects.clone()];
        let base = self.maps[map].objects.start;
        // The objects before the change and after it stay; those between are taken out, and
        // what is between the last of the first and the first of the second is parsed anew.
        let before = objects.partition_point(|o| o.end <= start);
        let after = before + objects[before..].partition_point(|o| o.start < kept_end);
        let from = before.checked_sub(1).map_or(open + 1, |o| objects[o].end);
        let to = objects.get(after).map_or(close, |o| o.start);
        let grown = body_end as isize - kept_end as isize;
        let text = std::str::from_utf8(body.get(from..to.checked_add_signed(grown)?)?).ok()?;
        // In the map, `text` comes after `{` or a value, and before `}` or a value: the same
        // stands in for those around it.
        let lead = if before == 0 { "{" } else { r#"{"":null"# };
        let tail = if after == objects.len() { "}" } else { "null}" };
        let entries = format!("[[{lead}{text}{tail}]]");
        let mut de = serde_json::Deserializer::from_str(&entries);
        let mut values = Unwrap(2, MapValues).deserialize(&mut de).ok()?;
        de.end().ok()?;
        // Where each value is in `text`, without those that stand in.
        let offset = entries.as_ptr() as usize + 2 + lead.len();
        if tail.len() > 1 {
            values.pop()?;
        }
        let values = values.get(usize::from(before > 0)..)?;
        let inserted = values
            .iter()
            .map(|v| {
                let at = (v.get().as_ptr() as usize).checked_sub(offset)?;
                (at + v.get().len() <= text.len()).then_some(from + at..from + at + v.get().len())
            })
            .collect::<Option<_>>()?;
        Some(Reshape {
            map,
            removed: base + before..base + after,
            inserted,
            grown,
        })
    }

    /// The spans of the body `reshape` was found in.
    pub fn reshaped(&self, reshape: &Reshape) -> Self {
        let Reshape {
            map: place,
            removed,
            inserted,
            grown,
        } = reshape;
        let map = &self.maps[*place];
        let count = inserted.len() as isize - removed.len() as isize;
        let mut values = Vec::with_capacity(self.values.len() + inserted.len());
        values.extend_from_slice(&self.values[..removed.start]);
        values.extend(inserted.iter().map(|at| ObjectSpan {
            section: Some(map.section),
            key: Arc::clone(&map.key),
            start: at.start,
            end: at.end,
        }));
        values.extend(self.values[removed.end..].iter().map(|span| ObjectSpan {
            start: span.start.saturating_add_signed(*grown),
            end: span.end.saturating_add_signed(*grown),
            ..span.clone()
        }));
        let shifted = |at: usize| at.saturating_add_signed(count);
        let maps = self
            .maps
            .iter()
            .enumerate()
            .map(|(m, map)| match m.cmp(place) {
                Ordering::Less => map.clone(),
                Ordering::Equal => MapSpan {
                    close: map.close.saturating_add_signed(*grown),
                    objects: map.objects.start..shifted(map.objects.end),
                    ..map.clone()
                },
                Ordering::Greater => MapSpan {
                    open: map.open.saturating_add_signed(*grown),
                    close: map.close.saturating_add_signed(*grown),
                    objects: shifted(map.objects.start)..shifted(map.objects.end),
                    ..map.clone()
                },
            });
        ObjectSpans {
            values,
            maps: maps.collect(),
        }
    }

    /// The section and type key of the map `reshape` is in, and the place among the objects
    /// of those of the first object it takes out (or of where it puts them).
    pub fn reshaped_group(&self, reshape: &Reshape) -> (Section, &Arc<str>, usize) {
        let map = &self.maps[reshape.map];
        let ordinal = self.count(map.section, &map.key, reshape.removed.start);
        (map.section, &map.key, ordinal)
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
    /// The request's text: a span is where its raw text starts in it.
    text: &'s str,
    spans: &'s mut ObjectSpans,
}

impl Top<'_> {
    /// Where `part`, which borrows from the text, starts in it.
    fn offset(&self, part: &str) -> usize {
        (part.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize)
    }

    fn push(&mut self, section: Option<Section>, key: &Arc<str>, raw: &RawValue) {
        let start = self.offset(raw.get());
        self.spans.values.push(ObjectSpan {
            section,
            key: Arc::clone(key),
            start,
            end: start + raw.get().len(),
        });
    }

    /// Where the next byte that is not whitespace is from `at`, if it is `byte`.
    fn find(&self, at: usize, byte: u8) -> Option<usize> {
        let found = at
            + self
                .text
                .get(at..)?
                .bytes()
                .position(|b| !b.is_ascii_whitespace())?;
        (self.text.as_bytes()[found] == byte).then_some(found)
    }

    /// The map of `type_key`, written at `key` (the key's text between its quotes), whose
    /// objects are the spans from `first` on; none when its key is not borrowed from the text
    /// (it has an escape) or it is not a map.
    fn push_map(&mut self, section: Section, key: &str, type_key: &Arc<str>, first: usize) {
        let after_key = self.offset(key) + key.len() + 1;
        let Some(open) = self
            .find(after_key, b':')
            .and_then(|colon| self.find(colon + 1, b'{'))
        else {
            return;
        };
        let last = self.spans.values[first..]
            .last()
            .map_or(open + 1, |o| o.end);
        let Some(close) = self.find(last, b'}') else {
            return;
        };
        self.spans.maps.push(MapSpan {
            section,
            key: Arc::clone(type_key),
            open,
            close,
            objects: first..self.spans.values.len(),
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
            // A key borrowed from the text (written without an escape) says where it is.
            while let Some(Text(key)) = map.next_key()? {
                let type_key = Arc::from(&*key);
                let first = self.top.spans.values.len();
                map.next_value_seed(ObjectMapSpans {
                    section: self.section,
                    type_key: Some(&type_key),
                    top: &mut *self.top,
                })?;
                if let Cow::Borrowed(key) = key {
                    self.top.push_map(self.section, key, &type_key, first);
                }
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

/// The values of a map's entries, in order.
struct MapValues;

impl<'de> DeserializeSeed<'de> for MapValues {
    type Value = Vec<&'de RawValue>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MapValues {
    type Value = Vec<&'de RawValue>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("map entries")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut values = Vec::new();
        while map.next_key::<IgnoredAny>()?.is_some() {
            values.push(map.next_value()?);
        }
        Ok(values)
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

    /// The object decoded as its request decodes it (with [`super::named`]); `None` if it does
    /// not decode, or is not one JSON value.
    pub fn decode<'a, T: Deserialize<'a> + Named>(&'a self) -> Option<T> {
        let mut de = serde_json::Deserializer::from_str(&self.text);
        let value = Unwrap(self.depth, NamedSeed(PhantomData))
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

/// The value `.1` reads, inside `.0` arrays of one value each.
struct Unwrap<S>(usize, S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Unwrap<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        match self.0 {
            0 => self.1.deserialize(d),
            _ => d.deserialize_seq(self),
        }
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Unwrap<S> {
    type Value = S::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(ONE_VALUE)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<S::Value, A::Error> {
        let value = seq
            .next_element_seed(Unwrap(self.0 - 1, self.1))?
            .ok_or_else(|| de::Error::invalid_length(0, &ONE_VALUE))?;
        match seq.next_element::<IgnoredAny>()? {
            None => Ok(value),
            Some(_) => Err(de::Error::invalid_length(2, &ONE_VALUE)),
        }
    }
}

/// What [`Unwrap`] expects of each array.
const ONE_VALUE: &str = "an array of one value";

/// A request whose objects can be decoded one at a time, as the request decodes them: to tell
/// whether an object's new text decodes to the object decoded before, or to put it in place.
pub trait ObjectWise<'a> {
    /// The request's fields that hold objects.
    const SECTIONS: Sections;
    /// Whether the text `new` of the `ordinal`th object of `section` and `type_key` (counted
    /// as for [`Self::splice_group`]) decodes to that object ([`decodes_as`]); `None` if it
    /// does not decode or there is no such object.
    fn same_object(
        &self,
        section: Section,
        type_key: &str,
        ordinal: usize,
        new: &'a Nested,
    ) -> Option<bool>;
    /// Makes the objects of `section` and `type_key` (counted in the order of the text, over
    /// every map of that type key; the parent is one) those of `slots`; `None` if one does not
    /// decode or is not there, or the request keeps no objects of that type key but there are.
    fn splice_group(&mut self, section: Section, type_key: &str, slots: &[Slot<'a>]) -> Option<()>;
    /// Whether the text `new` of the top-level field `name`, one that holds no objects,
    /// decodes as the field did in this request; `None` if it does not decode.
    fn same_field(&self, name: &str, new: &str) -> Option<bool>;
}

/// An object map of a request, as [`ObjectWise`] for the objects of one type key.
pub trait GroupWise<'a> {
    fn same_object(&self, type_key: &str, ordinal: usize, new: &'a Nested) -> Option<bool>;
    fn splice_group(&mut self, type_key: &str, slots: &[Slot<'a>]) -> Option<()>;
}

/// Where an object of a spliced group comes from: the request's object of that group at this
/// place, or a text decoded anew.
#[derive(Clone, Copy)]
pub enum Slot<'a> {
    Kept(usize),
    New(&'a Nested),
}

/// The objects of one group of a request, `kept`, made those of `slots`; `None` if one does
/// not decode, is not there or is taken twice.
pub fn spliced<'a, T: Deserialize<'a> + Named>(
    kept: &mut Vec<T>,
    slots: &[Slot<'a>],
) -> Option<()> {
    // Each object kept where it was: those decoded anew put in place.
    let in_place = slots.len() == kept.len()
        && slots.iter().enumerate().all(|(at, slot)| match *slot {
            Slot::Kept(kept) => kept == at,
            Slot::New(_) => true,
        });
    if in_place {
        for (object, slot) in kept.iter_mut().zip(slots) {
            if let Slot::New(text) = slot {
                *object = text.decode()?;
            }
        }
        return Some(());
    }
    let mut old: Vec<Option<T>> = std::mem::take(kept).into_iter().map(Some).collect();
    *kept = slots
        .iter()
        .map(|slot| match *slot {
            Slot::Kept(at) => old.get_mut(at)?.take(),
            Slot::New(text) => text.decode(),
        })
        .collect::<Option<_>>()?;
    Some(())
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

            fn splice_group(
                &mut self,
                section: Section,
                type_key: &str,
                slots: &[Slot<'a>],
            ) -> Option<()> {
                match (section, slots) {
                    (Section::Parent, [Slot::Kept(0)]) => Some(()),
                    (Section::Parent, [Slot::New(new)]) => new.decode_into(Some(&mut self.$parent)),
                    (Section::Parent, _) => None,
                    (Section::Children, _) => self.$children.splice_group(type_key, slots),
                    (Section::Related, _) => self.related.splice_group(type_key, slots),
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

    fn splice_group(&mut self, type_key: &str, slots: &[Slot<'a>]) -> Option<()> {
        spliced(self.group_mut(type_key)?, slots)
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
            .values
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
        let sections: Vec<_> = decorator.values.iter().map(|s| s.section).collect();
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
        let sections = sections_of_request();
        let kept = ObjectSpans::of(body.as_bytes(), &sections).unwrap();
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
            assert_eq!(Some(moved), ObjectSpans::of(changed.as_bytes(), &sections));
        }
    }

    #[test]
    fn a_map_of_a_type_key_is_found_with_its_braces() {
        let body = r#"{"children":{"A.v1": {"x":{"c":1}} ,"B.v1":{ },"C.v1":null,"D\u002ev1":{}},
            "related":{"A.v1":{"z":{"r":1}}}}"#;
        let spans = ObjectSpans::of(body.as_bytes(), &sections_of_request()).unwrap();
        let maps: Vec<_> = spans
            .maps
            .iter()
            .map(|m| {
                (
                    m.section,
                    &*m.key,
                    &body[m.open..=m.close],
                    m.objects.clone(),
                )
            })
            .collect();
        // `null` is no map; one whose type key has an escape is not looked for.
        assert_eq!(
            maps,
            [
                (Section::Children, "A.v1", r#"{"x":{"c":1}}"#, 0..1),
                (Section::Children, "B.v1", "{ }", 1..1),
                (Section::Related, "A.v1", r#"{"z":{"r":1}}"#, 1..2),
            ]
        );
    }

    /// `body` with `was` written `now`, and how it was reshaped, with the reshaped spans
    /// checked against those found anew.
    fn reshape(body: &str, was: &str, now: &str) -> Option<(Vec<usize>, Vec<String>)> {
        let sections = sections_of_request();
        let kept = ObjectSpans::of(body.as_bytes(), &sections).unwrap();
        assert_eq!(body.matches(was).count(), 1, "{was}");
        let changed = body.replace(was, now);
        let differ = crate::memo::differing(body.as_bytes(), changed.as_bytes());
        let reshape = kept.reshape(changed.as_bytes(), differ)?;
        let reshaped = kept.reshaped(&reshape);
        assert_eq!(
            Some(&reshaped),
            ObjectSpans::of(changed.as_bytes(), &sections).as_ref()
        );
        let inserted = reshape
            .inserted
            .iter()
            .map(|r| changed[r.clone()].to_owned());
        Some((reshape.removed.collect(), inserted.collect()))
    }

    #[test]
    fn objects_taken_out_of_a_map_and_put_in_are_found() {
        let body = r#"{"controller":{"g":1},"parent":{"p":1},"children":{"A.v1":{"x":{"c":1},"y":{"c":2}},"B.v1":{}},"related":{"A.v1":{"z":{"r":1}}},"finalizing":false}"#;
        let found = |was: &str, now: &str| reshape(body, was, now);
        let some = |removed: &[usize], inserted: &[&str]| {
            let inserted = inserted.iter().map(|s| s.to_string()).collect();
            Some((removed.to_vec(), inserted))
        };
        let (x, y) = (r#""x":{"c":1}"#, r#""y":{"c":2}"#);
        // Put in first, between, last; taken out; one in the place of two; into an empty map.
        let w = r#""w":{"c":0}"#;
        assert_eq!(found(x, &format!("{w},{x}")), some(&[], &[r#"{"c":0}"#]));
        assert_eq!(found(x, &format!("{x},{w}")), some(&[], &[r#"{"c":0}"#]));
        assert_eq!(found(y, &format!("{y}, {w} ")), some(&[], &[r#"{"c":0}"#]));
        assert_eq!(found(&format!("{x},"), ""), some(&[2], &[]));
        assert_eq!(found(&format!(",{y}"), ""), some(&[3], &[]));
        assert_eq!(found(&format!("{x},{y}"), ""), some(&[2, 3], &[]));
        assert_eq!(
            found(&format!("{x},{y}"), w),
            some(&[2, 3], &[r#"{"c":0}"#])
        );
        assert_eq!(
            found(x, r#""x1":[1],"x2":"s""#),
            some(&[2], &["[1]", r#""s""#])
        );
        assert_eq!(
            found(r#""B.v1":{}"#, r#""B.v1":{ "b": {} }"#),
            some(&[], &["{}"])
        );
        assert_eq!(found(r#""z":{"r":1}"#, ""), some(&[4], &[]));
        // A key written otherwise is no object taken out or put in (keys are not decoded).
        assert_eq!(found(r#""y":"#, r#""q":"#), some(&[], &[]));
        // Written over several lines.
        let pretty =
            serde_json::to_string_pretty(&serde_json::from_str::<Json>(body).unwrap()).unwrap();
        let w = "\"w\": {\n          \"c\": 0\n        },\n";
        let reshaped = reshape(&pretty, "\"x\": {", &format!("{w}          \"x\": {{"));
        assert_eq!(reshaped, some(&[], &["{\n          \"c\": 0\n        }"]));
        // Not one map's entries: across two maps, outside every map, not JSON there, the map's
        // own brace, in a map not looked for.
        for (was, now) in [
            (r#""A.v1":{"x""#, r#""A.v1":["x""#.to_owned()),
            (r#"{"c":2}},"B.v1":{}"#, r#"{"c":2},"B.v1":{}}"#.to_owned()),
            (r#""g":1"#, r#""g":1,"h":2"#.to_owned()),
            (x, r#""w":{"c":0} "x":{"c":1}"#.to_owned()),
            (x, r#""w":{"c":0},"x":{"c":1}"#.replace(':', " ")),
            (r#"{"x""#, r#"{"w":1,,"x""#.to_owned()),
        ] {
            assert_eq!(found(was, &now), None, "{now}");
        }
        let escaped = body.replace(r#""B.v1""#, r#""B\u002ev1""#);
        assert_eq!(reshape(&escaped, r#"{}},"#, r#"{"b":{}}},"#), None);
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
