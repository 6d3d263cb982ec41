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
//! follows from where they are in the old one ([`ObjectSpans::edited`]), also when that one
//! value decodes differently or is the value of a top-level field that holds no objects (the
//! `controller`).
//!
//! A request that differs from a kept one in which objects a map of a type key holds (some
//! taken out, others put in their place, none or more of either) is found the same way: the
//! bytes between the objects that stay are, in the new body, a run of the map's entries, each
//! value one JSON value, so the new body is JSON wherever the old one was, and decodes to the
//! old request with that type key's objects those of the run in place of those taken out (see
//! [`spliced`]). When a body differs in several values and maps, with every byte between them
//! the same ([`ObjectSpans::edits`]), all of this holds edit by edit.

use super::object_map::NamedSeed;
use super::{CompositeRequest, DecoratorRequest, Named, ObjectMap, Text};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
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

/// Where a body differs from the kept body of a request's spans, as those spans see it: see
/// [`ObjectSpans::edits`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// A value whose text is another JSON value.
    Value(Change),
    /// Objects of a map of a type key, one after the other, taken out and others put in their
    /// place.
    Map(Reshape),
}

impl Edit {
    /// How many bytes longer it makes the body (shorter when negative).
    pub fn grown(&self) -> isize {
        match self {
            Edit::Value(change) => change.grown,
            Edit::Map(reshape) => reshape.grown,
        }
    }
}

/// A value of a request whose text is another in a second body: its place in the spans, and how
/// many bytes longer its text is there (shorter when negative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub at: usize,
    pub grown: isize,
}

/// Objects of a map of a type key taken out, one after the other, and others put in their place
/// (none, one or more of either).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reshape {
    /// The map, among the spans' maps.
    map: usize,
    /// The objects taken out, as places in the spans.
    pub removed: Range<usize>,
    /// Where the objects put in are in the new body.
    pub inserted: Vec<Range<usize>>,
    /// Where in the kept text the map's text is another: from the end of the last object that
    /// stays before those taken out (or the map's `{`) to the first that stays after them (or
    /// the map's `}`).
    from: usize,
    to: usize,
    /// How many bytes longer the body is for it (shorter when negative).
    grown: isize,
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

    /// The value whose text holds the byte at `at`, by its place.
    fn value_at(&self, at: usize) -> Option<usize> {
        let place = self
            .values
            .partition_point(|span| span.start <= at)
            .checked_sub(1)?;
        (at < self.values[place].end).then_some(place)
    }

    /// The span at `at`.
    pub fn get(&self, at: usize) -> Option<&ObjectSpan> {
        self.values.get(at)
    }

    /// How `body` differs from `kept` (the body of these spans), in the order of the text:
    /// values whose text is another JSON value there, and maps of a type key that hold other
    /// objects (some taken out, others put in their place); `None` when it differs otherwise (in
    /// its top-level fields, a map's own braces, or where it is not JSON). `differing` is where
    /// the two differ (as `differing` finds it). Each edit is the value or map that holds
    /// the first byte that differs after the edit before it, and ends where the text is the
    /// kept one again: a map where the objects that stay begin, found by reading its entries
    /// in `body`, and a value where its new text ends, found by reading it when `strict`, or
    /// else, when the common suffix begins inside it, from that suffix. The suffix is quicker,
    /// but an object put in right after a changed one shares its last bytes, and is then taken
    /// for a part of it (which does not decode: try again with `strict`).
    pub fn edits(
        &self,
        kept: &[u8],
        body: &[u8],
        differing: (usize, usize, usize),
        strict: bool,
    ) -> Option<Vec<Edit>> {
        let (start, kept_end, body_end) = differing;
        let suffix = Suffix {
            kept_end,
            grown: body_end as isize - kept_end as isize,
        };
        let mut edits = Vec::new();
        // The first byte that differs, in `kept`, and how much longer `body` is before it.
        let (mut at, mut shift) = (start, 0isize);
        // Each edit is of a value or a map after the last one's, so there are no more edits
        // than those: the walk ends, whatever the bodies.
        for _ in 0..=self.values.len() + self.maps.len() {
            let (edit, end) = match self.value_at(at) {
                Some(place) => self.value_edit(place, body, shift, suffix, strict)?,
                None => self.map_edit(at, kept, body, shift, suffix)?,
            };
            shift += edit.grown();
            edits.push(edit);
            // The rest of both bodies is their common suffix, or they differ after this edit
            // (were the rest alike, the common suffix would begin at `end` or before it).
            if end >= kept_end && shift == suffix.grown {
                return Some(edits);
            }
            let rest = body.get(end.checked_add_signed(shift)?..)?;
            at = end + common_prefix(kept.get(end..)?, rest);
        }
        None
    }

    /// The value at `place` written otherwise in `body`, where the bytes before it are `shift`
    /// bytes further on, and where the edit ends in the kept text.
    fn value_edit(
        &self,
        place: usize,
        body: &[u8],
        shift: isize,
        suffix: Suffix,
        strict: bool,
    ) -> Option<(Edit, usize)> {
        let span = &self.values[place];
        let there = span.start.checked_add_signed(shift)?;
        let len = if !strict && suffix.kept_end <= span.end {
            let text = body.get(there..span.end.checked_add_signed(suffix.grown)?)?;
            // Whitespace around it would make it more than the value, which its decoding
            // finds it to be or not.
            if text.first().is_none_or(|&b| is_whitespace(b))
                || text.last().is_some_and(|&b| is_whitespace(b))
            {
                return None;
            }
            text.len()
        } else {
            json_value_len(body.get(there..)?)?
        };
        let grown = len as isize - (span.end - span.start) as isize;
        Some((Edit::Value(Change { at: place, grown }), span.end))
    }

    /// The map of a type key whose text holds the byte at `at` (between its objects), with
    /// other objects in `body` (see [`Self::value_edit`]), and where the edit ends in the kept
    /// text. The objects before `at` stay, and so do those after it that the common suffix
    /// holds, or else those from where the rest of the map's text in `body`, after the entries
    /// read so far, is the kept text ([`Self::rest_of_map`]), or else, in the map's entries
    /// read from `body` to its `}`, the last ones that are the kept text.
    fn map_edit(
        &self,
        at: usize,
        kept: &[u8],
        body: &[u8],
        shift: isize,
        suffix: Suffix,
    ) -> Option<(Edit, usize)> {
        let place = self
            .maps
            .iter()
            .position(|m| at > m.open && at <= m.close)?;
        let map = &self.maps[place];
        let objects = &self.values[map.objects.clone()];
        let before = objects.partition_point(|o| o.end <= at);
        let from = self.after_objects(map, before);
        let there = from.checked_add_signed(shift)?;
        let (after, to, inserted, grown) = if suffix.kept_end <= map.close {
            // The rest of the map, from the first object the suffix holds, is the suffix.
            let after = before + objects[before..].partition_point(|o| o.start < suffix.kept_end);
            let to = objects.get(after).map_or(map.close, |o| o.start);
            let until = to.checked_add_signed(suffix.grown)?;
            let (inserted, ends) = map_entries(body, there, before > 0, Some(until), |_, _| false)?;
            (ends == until).then_some((after, to, inserted, suffix.grown - shift))?
        } else {
            let mut rest = None;
            let (mut inserted, close) = map_entries(body, there, before > 0, None, |at, read| {
                rest = self.rest_of_map(map, kept, body, before, at, read > 0 || before > 0);
                rest.is_some()
            })?;
            let (after, to, now) = match rest {
                Some(found) => found,
                // The objects that stay, from the last: those whose text up to the next (or
                // to the map's `}`) is the kept text.
                None => {
                    let (mut after, mut to, mut now) = (objects.len(), map.close, close);
                    while let (Some(last), Some(value)) =
                        ((before..after).next_back(), inserted.last())
                    {
                        let object = &objects[last];
                        if kept.get(object.start..to)? != body.get(value.start..now)? {
                            break;
                        }
                        (after, to, now) = (last, object.start, value.start);
                        inserted.pop();
                    }
                    (after, to, now)
                }
            };
            (after, to, inserted, now as isize - to as isize - shift)
        };
        let base = map.objects.start;
        let reshape = Reshape {
            map: place,
            removed: base + before..base + after,
            inserted,
            from,
            to,
            grown,
        };
        Some((Edit::Map(reshape), to))
    }

    /// Where the text of `map` in `body` from `at` is the kept text of the map's rest, from the
    /// end of the objects before `before` that stay, or of up to [`TAKEN_OUT_LOOKED_FOR`] taken
    /// out after them, to its `}`: the first object that stays (its place among the map's
    /// objects, or their count when none does), where its text begins in the kept text (or the
    /// map's `}`), and where that is in `body`; `None` when the text there is not that. `at` is
    /// where `body` has the entries put in, read so far, and `after_value` whether a value is
    /// right before it (an entry read, or an object that stays): a comma is then there or in the
    /// kept text, or a comma between the two is left out, as a map's first entry has none;
    /// whitespace around it may differ.
    fn rest_of_map(
        &self,
        map: &MapSpan,
        kept: &[u8],
        body: &[u8],
        before: usize,
        at: usize,
        after_value: bool,
    ) -> Option<(usize, usize, usize)> {
        let objects = &self.values[map.objects.clone()];
        let last = objects.len().min(before + TAKEN_OUT_LOOKED_FOR);
        let here = after_whitespace(body, at);
        (before..=last).find_map(|after| {
            // Where the kept text is read from: after the objects taken out, or the `{`.
            let next = after_whitespace(kept, self.after_objects(map, after));
            let (kept_from, body_from) = match (after > 0, after_value, kept.get(next)?) {
                (true, true, _) | (false, false, _) | (_, _, b'}') => (next, here),
                // After the `{`, and after a value in `body`: a comma between them.
                (false, true, _) => {
                    let comma = body.get(here) == Some(&b',');
                    (next, comma.then(|| after_whitespace(body, here + 1))?)
                }
                // After a value in the kept text, and after the `{` in `body`: its comma left out.
                (true, false, b',') => (after_whitespace(kept, next + 1), here),
                (true, false, _) => return None,
            };
            let kept_rest = kept.get(kept_from..=map.close)?;
            body.get(body_from..)?.starts_with(kept_rest).then(|| {
                let to = objects.get(after).map_or(map.close, |o| o.start);
                (after, to, body_from + (to - kept_from))
            })
        })
    }

    /// Where the text of `map` goes on after its first `count` objects: at the end of the last
    /// of them, or right after its `{`.
    fn after_objects(&self, map: &MapSpan, count: usize) -> usize {
        count
            .checked_sub(1)
            .map_or(map.open + 1, |o| self.values[map.objects.start + o].end)
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

    /// The spans of the body that differs from this one's (the kept body) as `edits` say.
    pub fn edited(&self, edits: &[Edit]) -> Self {
        // Where each edit is in the kept text, and what it and those before it grow the text.
        let mut shift = 0;
        let edges: Vec<(Range<usize>, isize)> = edits
            .iter()
            .map(|edit| {
                shift += edit.grown();
                let kept = match edit {
                    Edit::Value(change) => self.values[change.at].start..self.values[change.at].end,
                    Edit::Map(reshape) => reshape.from..reshape.to,
                };
                (kept, shift)
            })
            .collect();
        let grown = |edits: usize| edits.checked_sub(1).map_or(0, |e| edges[e].1);
        // A value's start, a map's braces move as the edits that end before them, or there,
        // grow the text; a value's end as those that begin before it (not a map's that
        // begins there, after it).
        let moved = |at: usize| {
            at.saturating_add_signed(grown(edges.partition_point(|(e, _)| e.end <= at)))
        };
        let moved_end = |at: usize| {
            at.saturating_add_signed(grown(edges.partition_point(|(e, _)| e.start < at)))
        };
        let reshapes = || {
            edits.iter().filter_map(|edit| match edit {
                Edit::Map(reshape) => Some(reshape),
                Edit::Value(_) => None,
            })
        };
        let inserted: usize = reshapes().map(|r| r.inserted.len()).sum();
        let mut values = Vec::with_capacity(self.values.len() + inserted);
        let mut pending = reshapes().peekable();
        let mut removed_until = 0;
        for at in 0..=self.values.len() {
            // Maps whose objects taken out begin here (two when one puts its objects in at
            // its end and the next takes out its first), in the order of the text.
            while let Some(reshape) = pending.next_if(|r| r.removed.start == at) {
                let map = &self.maps[reshape.map];
                values.extend(reshape.inserted.iter().map(|text| ObjectSpan {
                    section: Some(map.section),
                    key: Arc::clone(&map.key),
                    start: text.start,
                    end: text.end,
                }));
                removed_until = reshape.removed.end;
            }
            match self.values.get(at) {
                Some(_) if at < removed_until => {}
                Some(span) => values.push(ObjectSpan {
                    start: moved(span.start),
                    end: moved_end(span.end),
                    ..span.clone()
                }),
                None => break,
            }
        }
        let mut pending = reshapes().peekable();
        let mut net = 0isize;
        let maps = self.maps.iter().enumerate().map(|(place, map)| {
            let first = map.objects.start.saturating_add_signed(net);
            if let Some(reshape) = pending.next_if(|r| r.map == place) {
                net += reshape.inserted.len() as isize - reshape.removed.len() as isize;
            }
            MapSpan {
                open: moved(map.open),
                close: moved(map.close),
                objects: first..map.objects.end.saturating_add_signed(net),
                ..map.clone()
            }
        });
        ObjectSpans {
            maps: maps.collect(),
            values,
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

/// How many objects taken out of a map at one place the walk looks for where the map's text in
/// a body is the kept text again ([`ObjectSpans::rest_of_map`]): more taken out are found by
/// reading the map's entries to its `}`.
const TAKEN_OUT_LOOKED_FOR: usize = 4;

/// Where two bodies' common suffix begins in the kept one, and how much longer the other is.
#[derive(Clone, Copy)]
struct Suffix {
    kept_end: usize,
    grown: isize,
}

/// The values of a run of a map's entries in `text` from `at`, which is right after the map's
/// `{` or, when `after_value`, after an entry's value: where each value is, and where the run
/// ends, at the map's `}` or, with `until`, where a value begins there that the run does not
/// hold, or where `stop`, asked with where the run is and how many values it has read before
/// each entry (right after the last value, or at `at`), says it ends. `None` when that is not
/// what the text is.
fn map_entries(
    text: &[u8],
    mut at: usize,
    mut after_value: bool,
    until: Option<usize>,
    mut stop: impl FnMut(usize, usize) -> bool,
) -> Option<(Vec<Range<usize>>, usize)> {
    let mut values = Vec::new();
    loop {
        if stop(at, values.len()) {
            return Some((values, at));
        }
        at = after_whitespace(text, at);
        match *text.get(at)? {
            b'}' => return Some((values, at)),
            b',' if after_value => at = after_whitespace(text, at + 1),
            _ if !after_value => {}
            _ => return None,
        }
        if text.get(at) != Some(&b'"') {
            return None;
        }
        at = after_whitespace(text, at + json_value_len(&text[at..])?);
        if text.get(at) != Some(&b':') {
            return None;
        }
        at = after_whitespace(text, at + 1);
        if until.is_some_and(|until| at >= until) {
            return Some((values, at));
        }
        let end = at + json_value_len(&text[at..])?;
        values.push(at..end);
        (at, after_value) = (end, true);
    }
}

/// Where the first byte from `at` is that is not JSON's whitespace.
fn after_whitespace(text: &[u8], at: usize) -> usize {
    let rest = text.get(at..).unwrap_or_default();
    at + rest.iter().take_while(|&&b| is_whitespace(b)).count()
}

/// Whether `byte` is whitespace in JSON (not every ASCII whitespace is).
fn is_whitespace(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// Where `a` and `b` differ: the length of their common prefix, then the ends in each of what
/// lies between it and their common suffix (which does not overlap the prefix).
pub(crate) fn differing(a: &[u8], b: &[u8]) -> (usize, usize, usize) {
    let prefix = common_prefix(a, b);
    let suffix = common_suffix(&a[prefix..], &b[prefix..]);
    (prefix, a.len() - suffix, b.len() - suffix)
}

/// Bytes compared a run at a time (one `memcmp`) before the run that differs is looked into.
const RUN: usize = 256;

/// How many bytes `a` and `b` start with alike.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let runs = a.chunks_exact(RUN).zip(b.chunks_exact(RUN));
    let alike = runs.take_while(|(x, y)| x == y).count() * RUN;
    alike
        + a[alike..]
            .iter()
            .zip(&b[alike..])
            .take_while(|(x, y)| x == y)
            .count()
}

/// How many bytes `a` and `b` end with alike.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let runs = a.rchunks_exact(RUN).zip(b.rchunks_exact(RUN));
    let alike = runs.take_while(|(x, y)| x == y).count() * RUN;
    let (a, b) = (&a[..a.len() - alike], &b[..b.len() - alike]);
    alike
        + a.iter()
            .rev()
            .zip(b.iter().rev())
            .take_while(|(x, y)| x == y)
            .count()
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
    kept: &mut Vec<Arc<T>>,
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
                *object = Arc::new(text.decode()?);
            }
        }
        return Some(());
    }
    let mut old: Vec<Option<Arc<T>>> = std::mem::take(kept).into_iter().map(Some).collect();
    *kept = slots
        .iter()
        .map(|slot| match *slot {
            Slot::Kept(at) => old.get_mut(at)?.take(),
            Slot::New(text) => text.decode().map(Arc::new),
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
        decodes_as(&**self.get(type_key).get(ordinal)?, new)
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
    fn the_value_at_a_byte_is_the_one_whose_text_holds_it() {
        let body = r#"{"parent":{"p":1},"children":{"A.v1":{"x":{"c":1},"y":{"c":2}}}}"#;
        let spans = ObjectSpans::of(body.as_bytes(), &sections_of_request()).unwrap();
        let x = body.find(r#"{"c":1}"#).unwrap();
        let y = body.find(r#"{"c":2}"#).unwrap();
        let found = |at| spans.value_at(at);
        assert_eq!(found(x), Some(1));
        assert_eq!(found(x + 6), Some(1));
        assert_eq!(found(y + 1), Some(2));
        assert_eq!(found(10), Some(0));
        // Right after a value, between two, before the first.
        assert_eq!(found(x + 7), None);
        assert_eq!(found(y - 1), None);
        assert_eq!(found(0), None);
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
            let moved = kept.edited(&[Edit::Value(Change { at, grown })]);
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

    /// How `changed` differs from `body`, each value's new text found where it ends, with the
    /// edited spans checked against those found anew.
    fn edits(body: &str, changed: &str) -> Option<Vec<Edit>> {
        let sections = sections_of_request();
        let kept = ObjectSpans::of(body.as_bytes(), &sections).unwrap();
        let differ = differing(body.as_bytes(), changed.as_bytes());
        let edits = kept.edits(body.as_bytes(), changed.as_bytes(), differ, true)?;
        let found = ObjectSpans::of(changed.as_bytes(), &sections);
        assert_eq!(Some(kept.edited(&edits)), found, "{changed}");
        Some(edits)
    }

    /// A request with maps of objects in `children` and `related` (one empty), and values
    /// around them, for the tests of edits.
    const MAPS_REQUEST: &str = r#"{"controller":{"g":1},"parent":{"p":1},"children":{"A.v1":{"x":{"c":1},"y":{"c":2}},"B.v1":{}},"related":{"A.v1":{"z":{"r":1}}},"finalizing":false}"#;

    /// `body` with the objects `x` and `y` of its first map in place of seven, `o0` to `o6`,
    /// and the texts of those seven entries.
    fn with_seven_objects(body: &str) -> (String, Vec<String>) {
        let seven: Vec<String> = (0..7).map(|i| format!(r#""o{i}":{{"c":{i}}}"#)).collect();
        (
            body.replace(r#""x":{"c":1},"y":{"c":2}"#, &seven.join(",")),
            seven,
        )
    }

    /// What a map took out and put in, each as `edits` finds it: the places taken out, and the
    /// texts put in.
    fn reshapes(changed: &str, edits: &[Edit]) -> Vec<(Vec<usize>, Vec<String>)> {
        let reshapes = edits.iter().filter_map(|edit| match edit {
            Edit::Map(reshape) => Some(reshape),
            Edit::Value(_) => None,
        });
        let put_in = |r: &Reshape| -> Vec<String> {
            r.inserted
                .iter()
                .map(|at| changed[at.clone()].to_owned())
                .collect()
        };
        reshapes
            .map(|r| (r.removed.clone().collect(), put_in(r)))
            .collect()
    }

    /// `body` with `was` written `now`, and how its one map was reshaped.
    fn reshape(body: &str, was: &str, now: &str) -> Option<(Vec<usize>, Vec<String>)> {
        assert_eq!(body.matches(was).count(), 1, "{was}");
        let changed = body.replace(was, now);
        match &edits(body, &changed)?[..] {
            [edit @ Edit::Map(_)] => reshapes(&changed, std::slice::from_ref(edit)).pop(),
            _ => None,
        }
    }

    #[test]
    fn objects_taken_out_of_a_map_and_put_in_are_found() {
        let body = MAPS_REQUEST;
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
        // Not one map's entries: the map's own brace, across two maps, outside every map, not
        // JSON there (no comma, no colons, two commas, a comma first); in a map not looked for.
        for (was, now) in [
            (r#""A.v1":{"x""#, r#""A.v1":["x""#.to_owned()),
            (r#"{"c":2}},"B.v1":{}"#, r#"{"c":2},"B.v1":{}}"#.to_owned()),
            (r#""g":1"#, r#""g":1,"h":2"#.to_owned()),
            (x, r#""w":{"c":0} "x":{"c":1}"#.to_owned()),
            (x, r#""w":{"c":0},"x":{"c":1}"#.replace(':', " ")),
            (r#"{"x""#, r#"{"w":1,,"x""#.to_owned()),
            (r#""B.v1":{}"#, r#""B.v1":{,"b":{}}"#.to_owned()),
        ] {
            assert_eq!(found(was, &now), None, "{now}");
        }
        let escaped = body.replace(r#""B.v1""#, r#""B\u002ev1""#);
        assert_eq!(reshape(&escaped, r#"{}},"#, r#"{"b":{}}},"#), None);
    }

    #[test]
    fn values_that_differ_are_edits_of_those_values() {
        let body = r#"{"controller":{"g":1},"parent":{"p":1},"children":{"A.v1":{"x":{"c":1},"y":{"c":2}}},"finalizing":false}"#;
        let kept = ObjectSpans::of(body.as_bytes(), &sections_of_request()).unwrap();
        let change = |at, grown| Edit::Value(Change { at, grown });
        // One value, two, three with one unchanged between them.
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
            assert_eq!(edits(body, &changed), Some(expected.clone()), "{changed}");
            // Found from the common suffix alike.
            let differ = differing(body.as_bytes(), changed.as_bytes());
            let quick = kept.edits(body.as_bytes(), changed.as_bytes(), differ, false);
            assert_eq!(quick, Some(expected), "{changed}");
        }
        // Values alone in a request without maps: each an edit.
        let bare = r#"{"controller":{"g":1},"parent":{"p":1},"finalizing":false}"#;
        let changed = bare.replace("1", "22").replace("false", "true");
        let expected = vec![change(0, 1), change(1, 1), change(2, -1)];
        assert_eq!(edits(bare, &changed), Some(expected));
        // A value that is not one JSON value, one written with whitespace before it, a
        // top-level field's key: not values or a map's objects.
        for changed in [
            body.replace(r#""p":1"#, r#""p":2"#)
                .replace(r#""c":2}"#, r#""c":2}}"#),
            body.replace(r#""g":1"#, r#""g":2"#)
                .replace(r#""parent":{"#, r#""parent": {"#),
            body.replace(r#""parent":{"#, r#""parent": {"#),
            body.replace(r#""p":1}"#, r#""p":2} "#),
            body.replace(r#""g":1"#, r#""g":2"#)
                .replace(r#""children":"#, r#""kids":"#),
        ] {
            assert_eq!(edits(body, &changed), None, "{changed}");
            let differ = differing(body.as_bytes(), changed.as_bytes());
            let quick = kept.edits(body.as_bytes(), changed.as_bytes(), differ, false);
            assert_eq!(quick, None, "{changed}");
        }
    }

    #[test]
    fn values_and_maps_that_differ_are_edits_in_the_order_of_the_text() {
        let body = MAPS_REQUEST;
        let found = |changed: &str| {
            let edits = edits(body, changed)?;
            let values: Vec<usize> = edits
                .iter()
                .filter_map(|edit| match edit {
                    Edit::Value(change) => Some(change.at),
                    Edit::Map(_) => None,
                })
                .collect();
            Some((values, reshapes(changed, &edits)))
        };
        let (w, z) = (r#""w":{"c":0}"#, r#""z":{"r":1}"#);
        let put_in = |text: &str| (vec![], vec![text.to_owned()]);
        // An object put in two maps at once (a Secret a hook creates, in its children and, as
        // it relates every Secret, in its related objects).
        let twice = body
            .replace(r#""B.v1":{}"#, &format!(r#""B.v1":{{{w}}}"#))
            .replace(z, &format!("{w},{z}"));
        let c0 = r#"{"c":0}"#;
        assert_eq!(found(&twice), Some((vec![], vec![put_in(c0), put_in(c0)])));
        // A value after a map, and before it: the parent, x and the finalizing flag.
        let around = body
            .replace(r#""p":1"#, r#""p":2"#)
            .replace(r#""c":1"#, r#""c":11"#)
            .replace(r#""B.v1":{}"#, &format!(r#""B.v1":{{{w}}}"#))
            .replace("false", "true");
        assert_eq!(found(&around), Some((vec![1, 2, 5], vec![put_in(c0)])));
        // Taken out of one map, put in another; taken out of two.
        let moved = body
            .replace(r#""y":{"c":2}"#, r#""q":{"c":3}"#)
            .replace(&format!("{{{z}}}"), "{}");
        let taken_out = (vec![4], vec![]);
        assert_eq!(
            found(&moved),
            Some((
                vec![],
                vec![(vec![3], vec![r#"{"c":3}"#.to_owned()]), taken_out]
            ))
        );
        // A changed object with another put in right after it: it and the object put in end
        // alike, so the common suffix holds the changed object's end, and the edit it says is
        // one value whose new text is two. Reading the new text finds it, and the map.
        let after = body.replace(r#""y":{"c":2}"#, r#""y":{"c":3},"y2":{"c":2}"#);
        assert_eq!(found(&after), Some((vec![3], vec![put_in(r#"{"c":2}"#)])));
        let kept = ObjectSpans::of(body.as_bytes(), &sections_of_request()).unwrap();
        let differ = differing(body.as_bytes(), after.as_bytes());
        let quick = kept.edits(body.as_bytes(), after.as_bytes(), differ, false);
        assert_eq!(quick, Some(vec![Edit::Value(Change { at: 3, grown: 13 })]));
        // An object put in after a map's last, where the common suffix begins before the
        // map's end: read up to the map's `}`, in the kept text and the new one.
        let last = body.replace(r#""y":{"c":2}"#, r#""y":{"c":2},"v":{"c":2}"#);
        assert_eq!(found(&last), Some((vec![], vec![put_in(r#"{"c":2}"#)])));
        // Not a map's entries where the first map differs: not edits.
        let broken = twice.replace(r#""B.v1":{"w""#, r#""B.v1":{"w" "#);
        assert_eq!(found(&broken.replace(r#""w" :"#, r#""w" "#)), None);
    }

    /// Where `rest_of_map` finds the kept text of the rest of the map at `map` of `body` again
    /// in `changed`, asked right after the first `read` in it (or, when `read` is empty, where
    /// `changed` has the kept text's end of the object before `before`, or its map's `{`): the
    /// first object that stays, and the first bytes there in both.
    fn rest_found(
        body: &str,
        changed: &str,
        map: usize,
        before: usize,
        read: &str,
    ) -> Option<(usize, String, String)> {
        let kept = ObjectSpans::of(body.as_bytes(), &sections_of_request()).unwrap();
        let map = &kept.maps[map];
        let at = match read {
            "" => kept.after_objects(map, before),
            _ => changed.find(read).unwrap() + read.len(),
        };
        let after_value = !read.is_empty() || before > 0;
        let (after, to, now) = kept.rest_of_map(
            map,
            body.as_bytes(),
            changed.as_bytes(),
            before,
            at,
            after_value,
        )?;
        let first = |text: &str, at: usize| text[at..].chars().take(7).collect();
        Some((after, first(body, to), first(changed, now)))
    }

    #[test]
    fn the_rest_of_a_map_is_found_where_its_kept_text_begins_again() {
        let body = MAPS_REQUEST;
        let (x, y, w) = (r#""x":{"c":1}"#, r#""y":{"c":2}"#, r#""w":{"c":0}"#);
        let found = |was: &str, now: &str, map, before, read| {
            rest_found(body, &body.replace(was, now), map, before, read)
        };
        let at = |after, text: &str| Some((after, text.to_owned(), text.to_owned()));
        let (at_x, at_y, close) = (r#"{"c":1}"#, r#"{"c":2}"#, "},\"B.v1");
        // Put in first (a comma between it and the kept text), between, last.
        assert_eq!(found(x, &format!("{w},{x}"), 0, 0, w), at(0, at_x));
        assert_eq!(found(x, &format!("{x},{w}"), 0, 1, w), at(1, at_y));
        assert_eq!(found(y, &format!("{y},{w}"), 0, 2, w), at(2, close));
        // Taken out first (the kept comma after it left out), all, one in the place of one.
        assert_eq!(found(&format!("{x},"), "", 0, 0, ""), at(1, at_y));
        assert_eq!(found(&format!("{x},{y}"), "", 0, 0, ""), at(2, close));
        assert_eq!(found(x, w, 0, 0, w), at(1, at_y));
        // Put in an empty map.
        let empty = (0, "}},\"rel".to_owned(), "}},\"rel".to_owned());
        assert_eq!(
            found(r#""B.v1":{}"#, r#""B.v1":{"b":{}}"#, 1, 0, r#""b":{}"#),
            Some(empty)
        );
        // Not yet the kept text, or not JSON with it: no comma, or two.
        assert_eq!(found(x, &format!("{w},{x}"), 0, 0, ""), None);
        assert_eq!(found(x, &format!("{w}{x}"), 0, 0, w), None);
        assert_eq!(found(y, &format!("{w},,{y}"), 0, 1, w), None);
        // Objects taken out at one place: up to `TAKEN_OUT_LOOKED_FOR` are looked for.
        let (body, many) = with_seven_objects(body);
        let taken_out = |n: usize| {
            let was = many[1..=n].join(",") + ",";
            rest_found(&body, &body.replacen(&was, "", 1), 0, 1, "")
        };
        let at_o = |i: usize| format!(r#"{{"c":{i}}}"#);
        assert_eq!(taken_out(TAKEN_OUT_LOOKED_FOR), at(5, &at_o(5)));
        assert_eq!(taken_out(TAKEN_OUT_LOOKED_FOR + 1), None);
    }

    #[test]
    fn objects_put_in_and_taken_out_before_other_edits_are_found() {
        let body = MAPS_REQUEST;
        // The common suffix begins after the map, at the flag that changed after it.
        let found = |was: &str, now: &str| {
            let changed = body.replace(was, now).replace("false", "true");
            let edits = edits(body, &changed)?;
            let flag = Edit::Value(Change { at: 5, grown: -1 });
            assert_eq!(edits.last(), Some(&flag), "{changed}");
            Some(reshapes(&changed, &edits))
        };
        let (x, y, w) = (r#""x":{"c":1}"#, r#""y":{"c":2}"#, r#""w":{"c":0}"#);
        let c0 = || vec![r#"{"c":0}"#.to_owned()];
        assert_eq!(found(x, &format!("{w},{x}")), Some(vec![(vec![], c0())]));
        assert_eq!(found(x, &format!("{x},{w}")), Some(vec![(vec![], c0())]));
        assert_eq!(found(y, &format!("{y},{w}")), Some(vec![(vec![], c0())]));
        assert_eq!(found(&format!("{x},"), ""), Some(vec![(vec![2], vec![])]));
        assert_eq!(
            found(&format!("{x},{y}"), ""),
            Some(vec![(vec![2, 3], vec![])])
        );
        assert_eq!(found(y, w), Some(vec![(vec![3], c0())]));
        let into_empty = Some(vec![(vec![], vec!["{}".to_owned()])]);
        assert_eq!(found(r#""B.v1":{}"#, r#""B.v1":{"b":{}}"#), into_empty);
        // With other whitespace around the comma.
        assert_eq!(found(x, &format!("{w}, {x}")), Some(vec![(vec![], c0())]));
        // Taken out after an object that stays, nothing put in: the kept rest is found at once
        // (a comma is before it, the one after the object that stays).
        let (body, many) = with_seven_objects(body);
        let changed = body
            .replacen(&format!(",{}", many[1]), "", 1)
            .replace("false", "true");
        let one_out = edits(&body, &changed).unwrap();
        assert_eq!(reshapes(&changed, &one_out), vec![(vec![3], vec![])]);
        // More taken out at one place than are looked for, the same way.
        let was = many[1..=TAKEN_OUT_LOOKED_FOR + 1].join(",") + ",";
        let changed = body.replacen(&was, "", 1).replace("false", "true");
        let edits = edits(&body, &changed).unwrap();
        assert_eq!(reshapes(&changed, &edits), vec![((3..8).collect(), vec![])]);
    }

    #[test]
    fn differing_finds_the_bytes_between_the_common_prefix_and_suffix() {
        assert_eq!(differing(b"abcXdef", b"abcYYdef"), (3, 4, 5));
        assert_eq!(differing(b"abc", b"abc"), (3, 3, 3));
        // The suffix does not overlap the prefix.
        assert_eq!(differing(b"aa", b"aaa"), (2, 2, 3));
        assert_eq!(differing(b"aXa", b"a"), (1, 3, 1));
        // Past whole chunks on both sides.
        let long: Vec<u8> = (0..2000).map(|i| (i % 251) as u8).collect();
        let mut changed = long.clone();
        changed[1000] = 255;
        assert_eq!(differing(&long, &changed), (1000, 1001, 1001));
        changed.insert(300, 7);
        assert_eq!(differing(&long, &changed), (300, 1001, 1002));
        // Different at both ends: the last run differs too.
        let mut ends = long.clone();
        ends[0] = 255;
        ends[1999] = 255;
        assert_eq!(differing(&long, &ends), (0, 2000, 2000));
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
