//! What the hooks remember between requests, shared by every request of a server. A memo saves time
//! and never changes an answer: each entry is found by every input byte it was made from (a decoded
//! request, a CA Secret, a trust bundle and a spec's plan by the bytes themselves, kept and
//! compared in full; a leaf by SHA-256 over them), so an input that differs in any byte is worked
//! out afresh. The one exception is proved, not assumed: a request that differs from a kept one
//! only inside objects whose two texts decode to equal values decodes to the kept request, and one
//! whose objects decode differently to the kept request with those decoded anew
//! ([`DecodedRequests`]).
use crate::contract::{differing, Edit, Nested, ObjectSpans, ObjectWise, Section, Slot};
use crate::delete_graph::plan::PlanMemo;
use crate::pki::PkiMemo;
use crate::{app_discovery, cert_rotation, delete_graph, mesh_root_certificate, RequestError};
use serde::Deserialize;
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// Every memo of a server: the sync requests decoded before, the certificate checks and trust
/// bundles of cert-rotation and the spec plans of delete-graph.
#[derive(Debug, Default)]
pub struct Memo {
    pub requests: Requests,
    pub pki: PkiMemo,
    pub trust_bundles: cert_rotation::sync::TrustBundles,
    pub plans: PlanMemo,
}

impl Memo {
    /// Memos that keep no decoded request, so that every request is decoded whole, as when each
    /// changed at the top level or in `finalizing` (but not in the spec or the certificates):
    /// for the benches and `hook_loop`.
    pub fn keeping_no_requests() -> Self {
        Memo {
            requests: Requests::none(),
            ..Memo::default()
        }
    }
}

/// The most recently used values, each found by the [`Fingerprint`] of what it was made from.
/// Bounded twice: at most `max_entries` values, and at most `max_bytes` of their sizes as the
/// caller counts them; the least recently used go first.
pub struct Recent<V> {
    entries: Mutex<VecDeque<Entry<V>>>,
    max_entries: usize,
    max_bytes: usize,
}

struct Entry<V> {
    key: Fingerprint,
    value: Arc<V>,
    bytes: usize,
}

impl<V> Recent<V> {
    pub const fn new(max_entries: usize, max_bytes: usize) -> Self {
        Recent {
            entries: Mutex::new(VecDeque::new()),
            max_entries,
            max_bytes,
        }
    }

    /// The value stored under `key`, now the most recently used.
    pub fn recall(&self, key: &Fingerprint) -> Option<Arc<V>> {
        let mut entries = self.lock();
        let at = entries.iter().position(|e| e.key == *key)?;
        let entry = entries.remove(at)?;
        let value = Arc::clone(&entry.value);
        entries.push_front(entry);
        Some(value)
    }

    /// Stores `value` under `key` as the most recently used, unless it alone is larger than the
    /// byte bound or another request stored the same key meanwhile; then drops the least
    /// recently used until both bounds hold.
    pub fn store(&self, key: Fingerprint, value: Arc<V>, bytes: usize) {
        if bytes > self.max_bytes {
            return;
        }
        let mut entries = self.lock();
        if entries.iter().any(|e| e.key == key) {
            return;
        }
        entries.push_front(Entry { key, value, bytes });
        let mut total: usize = entries.iter().map(|e| e.bytes).sum();
        while entries.len() > self.max_entries || total > self.max_bytes {
            let Some(dropped) = entries.pop_back() else {
                break;
            };
            total -= dropped.bytes;
        }
    }

    /// The `n` most recently used values, most recent first, without using them.
    pub fn most_recent(&self, n: usize) -> Vec<Arc<V>> {
        let entries = self.lock();
        entries
            .iter()
            .take(n)
            .map(|e| Arc::clone(&e.value))
            .collect()
    }

    /// Whether a value of `bytes` (as the caller counts them) can be stored at all.
    pub fn fits(&self, bytes: usize) -> bool {
        bytes <= self.max_bytes
    }

    /// How many values are remembered.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Entry<V>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<V> std::fmt::Debug for Recent<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a value (a CA holds its key): the count only.
        f.debug_struct("Recent").field("len", &self.len()).finish()
    }
}

/// A value kept with the bytes it was made from, in a [`Recent`] found by their
/// [`Fingerprint`] (a CA Secret's check, a trust bundle, a spec's plan).
pub struct Kept<V> {
    made_from: Box<[u8]>,
    value: Arc<V>,
}

impl<V> Recent<Kept<V>> {
    /// The value made from exactly `bytes`, found by their fingerprint `key` and then compared
    /// byte for byte: another value under the same fingerprint is no match.
    fn recall_made_from(&self, key: &Fingerprint, bytes: &[u8]) -> Option<Arc<V>> {
        let kept = self.recall(key)?;
        (*kept.made_from == *bytes).then(|| Arc::clone(&kept.value))
    }

    /// Stores `value` as made from `bytes`, under their fingerprint `key` (see [`Self::store`]:
    /// not in place of a value already under that key).
    pub(crate) fn store_made_from(
        &self,
        key: Fingerprint,
        bytes: Vec<u8>,
        value: Arc<V>,
        size: usize,
    ) {
        let made_from = bytes.into_boxed_slice();
        self.store(key, Arc::new(Kept { made_from, value }), size);
    }

    /// The value made from exactly `bytes` (inputs joined as `made_from` joins them):
    /// remembered, or made by `make` and remembered, counting `size` against the bound. When
    /// `make` fails nothing is remembered.
    pub fn recall_or_make<E>(
        &self,
        bytes: Vec<u8>,
        size: usize,
        make: impl FnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        let key = fingerprint(&bytes);
        if let Some(value) = self.recall_made_from(&key, &bytes) {
            return Ok(value);
        }
        let value = Arc::new(make()?);
        self.store_made_from(key, bytes, Arc::clone(&value), size);
        Ok(value)
    }
}

/// The inputs of a [`Kept`] value as one run of bytes: each part with whether it is there and its
/// length, so that no two lists of parts give the same bytes.
pub(crate) fn made_from(parts: &[Option<&[u8]>]) -> Vec<u8> {
    let size = parts.iter().map(|p| 9 + p.map_or(0, <[u8]>::len)).sum();
    let mut bytes = Vec::with_capacity(size);
    for part in parts {
        let part_bytes = part.unwrap_or_default();
        bytes.push(u8::from(part.is_some()));
        bytes.extend_from_slice(&(part_bytes.len() as u64).to_be_bytes());
        bytes.extend_from_slice(part_bytes);
    }
    bytes
}

/// A hook's sync request decoded from bytes it keeps; `decoded_request!` declares one.
pub trait DecodedRequest: Sized + Send + Sync {
    /// The request, borrowing from the bytes it is decoded from.
    type Request<'a>: Deserialize<'a> + ObjectWise<'a> + Clone
    where
        Self: 'a;
    /// Decodes `bytes` as [`crate::contract::decode`] does, keeping them.
    fn decode(bytes: Box<[u8]>) -> Result<Self, RequestError>;
    /// The request `splice` decodes to ([`Splice::request`]); `None` if one of its objects
    /// does not decode.
    fn splice(splice: Splice<Self>) -> Option<Self>;
    /// What the request borrows from.
    fn source(&self) -> &Source<Self>;
    /// The request decoded from [`Self::bytes`].
    fn request(&self) -> &Self::Request<'_>;

    /// The bytes it was decoded from.
    fn bytes(&self) -> &[u8] {
        self.source().bytes()
    }
}

/// What a decoded request borrows from: its body, decoded whole, or a [`Splice`].
pub enum Source<R> {
    Whole(Box<[u8]>),
    Spliced(Splice<R>),
}

impl<R> Source<R> {
    /// The body of the request.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Source::Whole(bytes) => bytes,
            Source::Spliced(splice) => &splice.body,
        }
    }
}

impl<R: DecodedRequest> Source<R> {
    /// The request a splice decodes to ([`Splice::request`]); `None` for a whole body, or if
    /// one of the splice's objects does not decode.
    pub fn spliced_request(&self) -> Option<R::Request<'_>> {
        match self {
            Source::Whole(_) => None,
            Source::Spliced(splice) => splice.request(),
        }
    }
}

/// A body that differs from the one `base` was decoded from only in some of its objects: inside
/// them, each of them one JSON value in both bodies, or in which objects maps of a type key
/// hold ([`ObjectSpans::edits`]). It decodes to `base`'s request with the objects of some
/// groups (a section's objects of one type key, or the parent) made those the body has there:
/// each the base's object, unchanged, or one decoded from its text in the body. `base` was
/// decoded whole.
pub struct Splice<R> {
    base: Arc<R>,
    body: Box<[u8]>,
    groups: Vec<SplicedGroup>,
    /// The texts of the objects decoded from the body, by their places in its spans.
    objects: Vec<SplicedObject>,
}

/// The objects of one group of a [`Splice`], in the order of the text.
#[derive(Clone)]
struct SplicedGroup {
    section: Section,
    type_key: Arc<str>,
    places: Vec<Place>,
}

/// Where an object of a spliced group comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The base's object at this place among those of its group.
    Base(usize),
    /// The object at this place in the body's spans, decoded from its text.
    Body(usize),
}

/// An object of a [`Splice`], decoded from its text in the body.
struct SplicedObject {
    /// Its place in the body's spans.
    at: usize,
    text: Nested,
}

impl<R: DecodedRequest> Splice<R> {
    /// `base`'s request, cloned (its maps' objects shared, each an `Arc`), with each spliced
    /// group made what it is in the body; `None` if an object does not decode.
    pub fn request(&self) -> Option<R::Request<'_>> {
        let mut request = self.base.request().clone();
        for group in &self.groups {
            let slots = group
                .places
                .iter()
                .map(|place| match *place {
                    Place::Base(at) => Some(Slot::Kept(at)),
                    Place::Body(at) => {
                        let found = self.objects.binary_search_by_key(&at, |o| o.at).ok()?;
                        Some(Slot::New(&self.objects[found].text))
                    }
                })
                .collect::<Option<Vec<_>>>()?;
            request.splice_group(group.section, &group.type_key, &slots)?;
        }
        Some(request)
    }
}

/// Declares `$name`: a `$request` (a request type with one lifetime, borrowing from the body)
/// together with what it was decoded from, for [`DecodedRequests`].
macro_rules! decoded_request {
    ($(#[$doc:meta])* $name:ident, $request:ident) => {
        self_cell::self_cell!(
            $(#[$doc])*
            pub struct $name {
                owner: $crate::memo::Source<$name>,
                #[covariant]
                dependent: $request,
            }
        );

        impl $crate::memo::DecodedRequest for $name {
            type Request<'a> = $request<'a>;

            fn decode(bytes: Box<[u8]>) -> Result<Self, $crate::RequestError> {
                let source = $crate::memo::Source::Whole(bytes);
                Self::try_new(source, |source| $crate::contract::decode(source.bytes()))
            }

            fn splice(splice: $crate::memo::Splice<Self>) -> Option<Self> {
                let source = $crate::memo::Source::Spliced(splice);
                Self::try_new(source, |source| source.spliced_request().ok_or(())).ok()
            }

            fn source(&self) -> &$crate::memo::Source<Self> {
                self.borrow_owner()
            }

            fn request(&self) -> &$request<'_> {
                self.borrow_dependent()
            }
        }
    };
}
pub(crate) use decoded_request;

/// One hook's sync requests decoded before. Metacontroller resyncs a parent that has not changed
/// with the same bytes (its objects come from informer caches, and Go writes map keys in
/// order), so a resync skips decoding, the larger part of a hook's time. A request is found by
/// its length and a fingerprint of its bytes, then compared with the remembered one byte for
/// byte: one that differs in any byte is not that request. What the hook works out from the
/// request (and the time) is worked out on every sync.
///
/// When something of the parent changes, the next request usually differs from the last one
/// inside one object or a few only, often in nothing the hook reads (a `resourceVersion`,
/// `managedFields`, a status field); after a change to its controller's spec (Metacontroller
/// then restarts the controller and syncs every parent), each parent's next request differs
/// from its last in the `controller`, which no hook reads. Such a request is answered from the
/// kept one when each of those objects' two texts, and each top-level field's, decode to equal
/// values ([`ObjectWise`]); it is looked for among the [`Self::NEARBY`] most recently used.
/// When objects decode differently, the request is the kept one with those decoded anew
/// ([`Splice`]). After a sync that creates or deletes a child, the next request has that child
/// put in or taken out (cert-rotation's Secrets in two maps, `children` and `related`): when a
/// request differs from a kept one in which objects maps of a type key hold, beside values or
/// not, it is the kept one with the objects of those type keys spliced too. Any other request
/// is decoded whole. Each is kept.
///
/// Bounded: the [`Self::CAPACITY`] most recently used, and [`Self::BYTES`] between them, each
/// counted as twice its text (decoding keeps 0.26-0.66 times the text beside it on the load
/// run's requests), a splice as twice its text and its base's, a body answered from a kept
/// request as twice the texts of the values it writes otherwise and twice that request's; a
/// request larger than half the bound is decoded on every sync, without a fingerprint.
pub struct DecodedRequests<R> {
    kept: Recent<KeptBody<R>>,
}

/// What is kept under a body's fingerprint.
enum KeptBody<R> {
    /// The request decoded from the body (whole, or spliced from a kept one).
    Decoded(Arc<KeptRequest<R>>),
    /// A body answered with a kept request: that request's bytes with some of its values
    /// written otherwise, inside objects whose two texts decode the same. Only the values are
    /// kept, not a copy of the body.
    Answered {
        request: Arc<KeptRequest<R>>,
        values: Vec<Rewritten>,
    },
}

/// A value of a kept request's bytes as an answered body writes it.
struct Rewritten {
    /// Where the value is in the kept request's bytes.
    kept: Range<usize>,
    /// Its text in the answered body.
    text: Box<[u8]>,
}

/// A decoded request, with where its objects are once a request was compared with it.
struct KeptRequest<R> {
    decoded: Arc<R>,
    spans: OnceLock<Option<ObjectSpans>>,
}

impl<R> Default for DecodedRequests<R> {
    fn default() -> Self {
        Self::new(Self::CAPACITY, Self::BYTES)
    }
}

impl<R> DecodedRequests<R> {
    pub const CAPACITY: usize = 256;
    pub const BYTES: usize = 8 << 20;
    pub const NEARBY: usize = 4;

    /// A memo of at most `max_entries` requests and `max_bytes` (as counted above).
    pub const fn new(max_entries: usize, max_bytes: usize) -> Self {
        DecodedRequests {
            kept: Recent::new(max_entries, max_bytes),
        }
    }

    /// A memo that keeps nothing, but fingerprints, decodes and copies each request it could
    /// keep, as a request that is not near a kept one costs.
    pub const fn none() -> Self {
        Self::new(0, Self::BYTES)
    }
}

impl<R: DecodedRequest> DecodedRequests<R> {
    /// `answer` of `body` decoded, and how the request was read: the request kept from the same
    /// bytes, or from bytes that differ only in what the hook does not decode, or a kept request
    /// with the objects that differ decoded anew, or decoded now; each new one kept. A body that
    /// does not decode is an error, as from [`crate::contract::decode`].
    pub fn with_request<T>(
        &self,
        body: &[u8],
        answer: impl FnOnce(&R::Request<'_>) -> Result<T, RequestError>,
    ) -> Result<(T, Reading), RequestError> {
        if !self.kept.fits(2 * body.len()) {
            // Too large to keep: not worth a fingerprint.
            let answered = answer(&crate::contract::decode(body)?)?;
            return Ok((answered, Reading::WholeUnkept));
        }
        let key = fingerprint(body);
        if let Some(kept) = self.kept.recall(&key) {
            if kept.is(body) {
                return Ok((answer(kept.request().decoded.request())?, Reading::Kept));
            }
            // Different bytes with the same fingerprint: decoded, and not kept in place of the
            // request already under this key.
            let answered = answer(&crate::contract::decode(body)?)?;
            return Ok((answered, Reading::WholeUnkept));
        }
        // The kept request the body differs from inside values, if one of those of the most
        // recent bodies is: then older ones are not looked at.
        let mut requests: Vec<Arc<KeptRequest<R>>> = Vec::with_capacity(Self::NEARBY);
        for kept in self.kept.most_recent(Self::NEARBY) {
            if !requests.iter().any(|r| Arc::ptr_eq(r, kept.request())) {
                requests.push(Arc::clone(kept.request()));
            }
        }
        let mut nearest = None;
        for kept in requests {
            match kept.compare(body) {
                Nearby::Same(values) => {
                    // Kept under these bytes too: the parent's next sync usually sends them
                    // again, and then finds them at once.
                    let answered = Arc::new(KeptBody::answered(kept, values, body));
                    self.kept
                        .store(key, Arc::clone(&answered), answered.counted_size());
                    let answered = answer(answered.request().decoded.request())?;
                    return Ok((answered, Reading::KeptEqual));
                }
                Nearby::Apart => {}
                nearby => {
                    nearest = Some((kept, nearby));
                    break;
                }
            }
        }
        // Then where the body's objects are follows from where the kept request's are, and
        // the body is the kept request with the objects that differ decoded anew.
        let (spliced, spans) = match nearest {
            Some((kept, nearby)) => kept.spliced(body, nearby),
            None => (None, None),
        };
        let spans = spans.map_or_else(OnceLock::new, |spans| OnceLock::from(Some(spans)));
        let (decoded, reading) = match spliced {
            Some(decoded) => (decoded, Reading::Spliced),
            None => (R::decode(body.into())?, Reading::Whole),
        };
        let kept = Arc::new(KeptBody::Decoded(Arc::new(KeptRequest {
            decoded: Arc::new(decoded),
            spans,
        })));
        self.kept.store(key, Arc::clone(&kept), kept.counted_size());
        Ok((answer(kept.request().decoded.request())?, reading))
    }
}

/// How a sync request was read, counted in `/metrics` by route: from memory, or by decoding
/// it whole (see [`DecodedRequests::with_request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reading {
    /// The bytes of a request kept before: nothing decoded.
    Kept,
    /// A kept request's bytes but inside objects whose two texts decode the same: those
    /// objects decoded, and the kept request answers.
    KeptEqual,
    /// A kept request with the objects that differ from its own decoded anew.
    Spliced,
    /// Decoded whole, and kept.
    Whole,
    /// Decoded whole, and not kept: larger than half the memo's bound (or, seldom, bytes of a
    /// kept request's fingerprint).
    WholeUnkept,
}

impl Reading {
    /// Every reading, in the order `/metrics` writes them.
    pub const ALL: [Reading; 5] = [
        Reading::Kept,
        Reading::KeptEqual,
        Reading::Spliced,
        Reading::Whole,
        Reading::WholeUnkept,
    ];

    /// Its label value in `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reading::Kept => "kept",
            Reading::KeptEqual => "kept_equal",
            Reading::Spliced => "spliced",
            Reading::Whole => "whole",
            Reading::WholeUnkept => "whole_unkept",
        }
    }
}

impl<R: DecodedRequest> KeptBody<R> {
    /// `body`, answered with `request`, from which it differs only in `values` (each where it
    /// is in the request's bytes and where in `body`).
    fn answered(
        request: Arc<KeptRequest<R>>,
        values: Vec<(Range<usize>, Range<usize>)>,
        body: &[u8],
    ) -> Self {
        let values = values
            .into_iter()
            .map(|(kept, now)| Rewritten {
                kept,
                text: body[now].into(),
            })
            .collect();
        KeptBody::Answered { request, values }
    }

    /// The kept request that answers the body.
    fn request(&self) -> &Arc<KeptRequest<R>> {
        match self {
            KeptBody::Decoded(request) | KeptBody::Answered { request, .. } => request,
        }
    }

    /// Whether `body` is the body kept.
    fn is(&self, body: &[u8]) -> bool {
        let kept = self.request().decoded.bytes();
        let KeptBody::Answered { values, .. } = self else {
            return kept == body;
        };
        let (mut at, mut rest) = (0, body);
        for value in values {
            let same = &kept[at..value.kept.start];
            let Some((before, after)) = rest.split_at_checked(same.len()) else {
                return false;
            };
            let Some((text, after)) = after.split_at_checked(value.text.len()) else {
                return false;
            };
            if before != same || text != &*value.text {
                return false;
            }
            (at, rest) = (value.kept.end, after);
        }
        rest == &kept[at..]
    }

    /// What it counts for against the bound: twice the request's text, for a splice twice its
    /// base's too (kept for as long as the splice is, even once dropped from the memo), and
    /// for an answered body twice its values' texts besides (with the request it keeps).
    fn counted_size(&self) -> usize {
        let decoded = &self.request().decoded;
        let base = match decoded.source() {
            Source::Whole(_) => 0,
            Source::Spliced(splice) => splice.base.bytes().len(),
        };
        let values = match self {
            KeptBody::Decoded(_) => 0,
            KeptBody::Answered { values, .. } => values.iter().map(|v| v.text.len()).sum(),
        };
        2 * (decoded.bytes().len() + base + values)
    }
}

/// How a request compares with a kept one.
enum Nearby {
    /// It decodes to the kept request: it differs from it only in these values, each given
    /// as where it is in the kept request's bytes and where in the request's.
    Same(Vec<(Range<usize>, Range<usize>)>),
    /// It differs from the kept request inside values of its spans, each one JSON value in it
    /// too, or in which objects maps of a type key hold, and decodes differently.
    Moved(Moved),
    /// Anything else.
    Apart,
}

/// How a request that differs from a kept one inside values of its spans, or in which objects
/// maps hold, decodes differently.
struct Moved {
    /// Where it differs, in the order of the text.
    edits: Vec<Edit>,
    /// The places of the objects that decode differently.
    objects: Vec<usize>,
    /// Whether a top-level field's value decodes differently (`finalizing`).
    field: bool,
}

impl<R: DecodedRequest> KeptRequest<R> {
    /// Where this request's objects are; found the first time they are asked for.
    fn spans(&self) -> Option<&ObjectSpans> {
        let sections = <R::Request<'_> as ObjectWise<'_>>::SECTIONS;
        let bytes = self.decoded.bytes();
        self.spans
            .get_or_init(|| ObjectSpans::of(bytes, &sections))
            .as_ref()
    }

    /// How `body`, which differs from this request's bytes, compares with it. Bodies whose
    /// bytes from the first that differs to the last make up more than three quarters of this
    /// request are apart without a look at their objects: two parents' requests differ from
    /// the parent's name, near the start, to their last objects; one parent's requests in a
    /// few places, which may lie far apart (a Secret put in `children` and in `related`).
    fn compare(&self, body: &[u8]) -> Nearby {
        let kept = self.decoded.bytes();
        let differ = differing(kept, body);
        let (start, kept_end, body_end) = differ;
        if 4 * (kept_end - start).max(body_end - start) > 3 * kept.len() {
            return Nearby::Apart;
        }
        let Some(spans) = self.spans() else {
            return Nearby::Apart;
        };
        // Found quickly first, then by reading each value's new text where it ends (see
        // `ObjectSpans::edits`).
        let compared = |strict| {
            let edits = spans.edits(kept, body, differ, strict)?;
            self.compare_edits(body, spans, edits)
        };
        compared(false)
            .or_else(|| compared(true))
            .unwrap_or(Nearby::Apart)
    }

    /// How `body` compares with this request when it differs from it as `edits` of `spans`
    /// (this request's) say; `None` when a value that differs does not decode, or one is of a
    /// type key whose objects a map took out or put in before it (its place among them is
    /// another then, and so for a second map of that type key).
    fn compare_edits(&self, body: &[u8], spans: &ObjectSpans, edits: Vec<Edit>) -> Option<Nearby> {
        let (mut values, mut objects, mut field) = (Vec::new(), Vec::new(), false);
        let mut reshaped: Vec<(Section, &str)> = Vec::new();
        // Where the values start in `body`: moved by what the edits before them grow.
        let mut shift = 0isize;
        for edit in &edits {
            let change = match edit {
                Edit::Value(change) => change,
                Edit::Map(reshape) => {
                    let (section, type_key, _) = spans.reshaped_group(reshape);
                    if reshaped.contains(&(section, type_key)) {
                        return None;
                    }
                    reshaped.push((section, type_key));
                    shift += edit.grown();
                    continue;
                }
            };
            let span = spans.get(change.at)?;
            let start = span.start.checked_add_signed(shift)?;
            shift += change.grown;
            let end = span.end.checked_add_signed(shift)?;
            let now = std::str::from_utf8(body.get(start..end)?).ok()?;
            values.push((span.start..span.end, start..end));
            // Borrowed for this value alone: `same_object` ties the new text's borrow to it.
            let kept = self.decoded.request();
            let Some((section, span, ordinal)) = spans.object(change.at) else {
                // A top-level field's value: the `controller`, which no hook reads, or one
                // that is read (`finalizing`).
                field |= !kept.same_field(&span.key, now)?;
                continue;
            };
            if reshaped.contains(&(section, &*span.key)) {
                return None;
            }
            let now = Nested::new(section, now);
            if !kept.same_object(section, &span.key, ordinal, &now)? {
                objects.push(change.at);
            }
        }
        if objects.is_empty() && !field && reshaped.is_empty() {
            return Some(Nearby::Same(values));
        }
        Some(Nearby::Moved(Moved {
            edits,
            objects,
            field,
        }))
    }

    /// The request of `body`, which is `nearby` this one, when it can be spliced from this
    /// one, and where the objects of `body` are.
    fn spliced(&self, body: &[u8], nearby: Nearby) -> (Option<R>, Option<ObjectSpans>) {
        let (Some(kept), Nearby::Moved(moved)) = (self.spans(), nearby) else {
            return (None, None);
        };
        let spans = kept.edited(&moved.edits);
        // A top-level field read by the hook (`finalizing`) is not spliced.
        if moved.field {
            return (None, Some(spans));
        }
        (self.splice(body, &spans, &moved), Some(spans))
    }

    /// The request of `body`, whose objects are where `spans` says, and which differs from
    /// this request as `moved` says: the request this one was spliced from (or this one) with
    /// the groups of the objects that differ, and of those spliced before, made what they are
    /// in `body`. `None` when an object does not decode, or the texts of those decoded make up
    /// more than half the body.
    fn splice(&self, body: &[u8], spans: &ObjectSpans, moved: &Moved) -> Option<R> {
        let kept = self.spans()?;
        let (base, mut groups) = match self.decoded.source() {
            Source::Whole(_) => (Arc::clone(&self.decoded), Vec::new()),
            Source::Spliced(splice) => (Arc::clone(&splice.base), splice.groups.clone()),
        };
        // The places of a group as this request has them: a group not spliced yet is the
        // base's, as many objects as this request has there.
        let group = |groups: &mut Vec<SplicedGroup>, section, type_key: &Arc<str>| {
            let found = groups
                .iter()
                .position(|g| g.section == section && g.type_key == *type_key);
            found.unwrap_or_else(|| {
                let count = kept.count(section, type_key, usize::MAX);
                groups.push(SplicedGroup {
                    section,
                    type_key: Arc::clone(type_key),
                    places: (0..count).map(Place::Base).collect(),
                });
                groups.len() - 1
            })
        };
        // The edits in the order of the text; a place in this request's spans is one in
        // `spans` moved by as many as the maps before it put in beyond what they took out.
        let mut objects = moved.objects.iter().peekable();
        let mut put_in = 0isize;
        for edit in &moved.edits {
            match edit {
                Edit::Value(change) => {
                    if objects.next_if(|&&at| at == change.at).is_none() {
                        continue;
                    }
                    let (section, span, ordinal) = kept.object(change.at)?;
                    let g = group(&mut groups, section, &span.key);
                    let at = change.at.checked_add_signed(put_in)?;
                    *groups[g].places.get_mut(ordinal)? = Place::Body(at);
                }
                Edit::Map(reshape) => {
                    // The objects after those taken out move by as many places as are put in
                    // beyond those taken out.
                    let removed = reshape.removed.start.checked_add_signed(put_in)?
                        ..reshape.removed.end.checked_add_signed(put_in)?;
                    let inserted = reshape.inserted.len();
                    for place in groups.iter_mut().flat_map(|g| &mut g.places) {
                        if let Place::Body(at) = place {
                            if *at >= removed.end {
                                *at = *at - removed.len() + inserted;
                            }
                        }
                    }
                    let (section, type_key, ordinal) = kept.reshaped_group(reshape);
                    let g = group(&mut groups, section, type_key);
                    let new = (removed.start..removed.start + inserted).map(Place::Body);
                    let (places, taken_out) =
                        (&mut groups[g].places, ordinal..ordinal + removed.len());
                    // Out of the group's bounds, no splice (`Vec::splice` would panic).
                    places.get(taken_out.clone())?;
                    places.splice(taken_out, new);
                    put_in += inserted as isize - removed.len() as isize;
                }
            }
        }
        let mut places: Vec<usize> = groups
            .iter()
            .flat_map(|g| &g.places)
            .filter_map(|place| match *place {
                Place::Body(at) => Some(at),
                Place::Base(_) => None,
            })
            .collect();
        places.sort_unstable();
        let spliced_bytes: usize = places
            .iter()
            .map(|&at| spans.get(at).map_or(0, |span| span.end - span.start))
            .sum();
        if 2 * spliced_bytes > body.len() {
            return None;
        }
        let objects = places
            .into_iter()
            .map(|at| {
                let span = spans.get(at)?;
                let text = std::str::from_utf8(body.get(span.start..span.end)?).ok()?;
                Some(SplicedObject {
                    at,
                    text: Nested::new(span.section?, text),
                })
            })
            .collect::<Option<_>>()?;
        R::splice(Splice {
            base,
            body: body.into(),
            groups,
            objects,
        })
    }
}

impl<R> std::fmt::Debug for DecodedRequests<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A request may hold Secret values: the count only.
        f.debug_struct("DecodedRequests")
            .field("kept", &self.kept)
            .finish()
    }
}

/// The sync requests each hook decoded before (delete-graph's sync and finalize share theirs).
#[derive(Debug, Default)]
pub struct Requests {
    pub app_discovery: DecodedRequests<app_discovery::DecodedSync>,
    pub delete_graph: DecodedRequests<delete_graph::DecodedSync>,
    pub cert_rotation: DecodedRequests<cert_rotation::DecodedSync>,
    pub mesh_root_certificate: DecodedRequests<mesh_root_certificate::DecodedSync>,
}

impl Requests {
    /// Keeps no request: every sync decodes its body, as a request not near a kept one does.
    pub const fn none() -> Self {
        Requests {
            app_discovery: DecodedRequests::none(),
            delete_graph: DecodedRequests::none(),
            cert_rotation: DecodedRequests::none(),
            mesh_root_certificate: DecodedRequests::none(),
        }
    }
}

/// What finds an entry made from bytes kept beside it (a decoded request, a CA Secret, a spec's
/// plan): their length and a 64-bit hash of them. Not a digest: a match is confirmed by
/// comparing the bytes.
pub type Fingerprint = (usize, u64);

/// The [`Fingerprint`] of `bytes`: foldhash, the hooks' hash maps' hash, with a fixed seed. On
/// long inputs it folds 16 bytes at a time through 128-bit multiplies in independent lanes, so
/// that it runs at nearly memory speed.
pub(crate) fn fingerprint(bytes: &[u8]) -> Fingerprint {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = foldhash::fast::FixedState::with_seed(0x9e37_79b9_7f4a_7c15).build_hasher();
    hasher.write(bytes);
    (bytes.len(), hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{CompositeRequest, NameMeta, Object, ObjectMap, Text};
    use serde::de::IgnoredAny;

    /// A key for the tests of `Recent`.
    fn key(n: u8) -> Fingerprint {
        (usize::from(n), u64::from(n))
    }

    /// A request type for the tests: a parent and children whose `spec` string is all a hook
    /// reads of them, borrowed from the body.
    type Specs<'a> = CompositeRequest<
        Object<'a>,
        ObjectMap<Object<'a, Option<Text<'a>>, IgnoredAny, NameMeta<'a>>>,
    >;

    decoded_request!(
        /// A request of specs with the bytes it was decoded from.
        DecodedSpecs,
        Specs
    );

    /// The request `memo` keeps for `body`, which it answered.
    fn kept_of<R: DecodedRequest>(memo: &DecodedRequests<R>, body: &[u8]) -> Arc<KeptRequest<R>> {
        Arc::clone(memo.kept.recall(&fingerprint(body)).unwrap().request())
    }

    /// What `memo` decoded for `body`, which it answered.
    fn decoded_of<R: DecodedRequest>(memo: &DecodedRequests<R>, body: &[u8]) -> Arc<R> {
        Arc::clone(&kept_of(memo, body).decoded)
    }

    /// A request of children `a` and `b`, with their specs and resourceVersions.
    fn request(a: (&str, u32), b: (&str, u32)) -> Vec<u8> {
        let child = |name: &str, (spec, version): (&str, u32)| {
            format!(
                r#""{name}":{{"metadata":{{"name":"{name}","resourceVersion":"{version}"}},"spec":"{spec}"}}"#
            )
        };
        format!(
            r#"{{"parent":{{"metadata":{{"name":"p","namespace":"n"}}}},"children":{{"T.v1":{{{},{}}}}},"finalizing":false}}"#,
            child("a", a),
            child("b", b)
        )
        .into_bytes()
    }

    /// The children's specs `memo` answers `body` with, and where the request it read them from
    /// lives.
    fn specs(memo: &DecodedRequests<DecodedSpecs>, body: &[u8]) -> (Vec<String>, usize) {
        memo.with_request(body, |req| {
            let read = req
                .children
                .get("T.v1")
                .iter()
                .map(|c| c.spec.as_deref().unwrap_or_default().to_owned())
                .collect();
            Ok((read, req as *const Specs as usize))
        })
        .unwrap()
        .0
    }

    /// How `memo` read `body` to answer it.
    fn reading(memo: &DecodedRequests<DecodedSpecs>, body: &[u8]) -> Reading {
        memo.with_request(body, |_| Ok(())).unwrap().1
    }

    #[test]
    fn each_answer_says_how_its_request_was_read() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = request(("x", 1), ("y", 1));
        assert_eq!(reading(&memo, &body), Reading::Whole);
        assert_eq!(reading(&memo, &body), Reading::Kept);
        // A resourceVersion, which the hook does not read; then those bytes are kept too.
        let equal = request(("x", 2), ("y", 1));
        assert_eq!(reading(&memo, &equal), Reading::KeptEqual);
        assert_eq!(reading(&memo, &equal), Reading::Kept);
        // A spec, which it reads, in one object.
        assert_eq!(
            reading(&memo, &request(("z", 1), ("y", 1))),
            Reading::Spliced
        );
        // A field outside every object.
        let text = String::from_utf8(body.clone()).unwrap();
        let finalizing = text.replace("false}", "true}");
        assert_eq!(reading(&memo, finalizing.as_bytes()), Reading::Whole);
        // Other bytes under a kept request's fingerprint.
        let other = request(("w", 1), ("w", 1));
        let kept = memo.kept.recall(&fingerprint(&body)).unwrap();
        memo.kept.store(fingerprint(&other), kept, 0);
        assert_eq!(reading(&memo, &other), Reading::WholeUnkept);
        // Larger than half the bound, each time.
        let small = DecodedRequests::<DecodedSpecs>::new(4, 2 * body.len() - 1);
        for _ in 0..2 {
            assert_eq!(reading(&small, &body), Reading::WholeUnkept);
        }
        assert_eq!(small.kept.len(), 0);
        let labels = Reading::ALL.map(Reading::as_str);
        assert_eq!(
            labels,
            ["kept", "kept_equal", "spliced", "whole", "whole_unkept"]
        );
    }

    #[test]
    fn a_request_is_kept_and_one_that_differs_is_decoded_afresh() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = request(("x", 1), ("y", 1));
        let (read, first) = specs(&memo, &body);
        assert_eq!(read, ["x", "y"]);
        assert_eq!(memo.kept.len(), 1);
        let kept = kept_of(&memo, &body);
        assert_eq!(first, kept.decoded.request() as *const Specs as usize);
        // The second time it is the kept request that answers.
        assert_eq!(specs(&memo, &body), (read, first));
        // A spec the hook reads differs: a new request (spliced from the kept one), kept.
        let (read, other) = specs(&memo, &request(("z", 1), ("y", 1)));
        assert_eq!(read, ["z", "y"]);
        assert_ne!(other, first);
        assert_eq!(memo.kept.len(), 2);
        // A body that does not decode is the decoder's error, and is not kept.
        for _ in 0..2 {
            let err = memo
                .with_request(br#"{"parent":[]}"#, |_| Ok(()))
                .unwrap_err();
            assert_eq!(err.path, "parent");
        }
        assert_eq!(memo.kept.len(), 2);
        // Debug never shows a request (it may hold Secret values).
        assert_eq!(
            format!("{memo:?}"),
            "DecodedRequests { kept: Recent { len: 2 } }"
        );
    }

    #[test]
    fn a_request_that_differs_only_in_what_is_not_decoded_is_answered_from_the_kept_one() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = request(("x", 1), ("y", 1));
        let (_, kept) = specs(&memo, &body);
        // One child's resourceVersion, which no hook reads, in the first object and the last,
        // and one that changes the body's length: the kept request answers, and is kept under
        // those bytes too, so that the parent's next sync with them finds it at once.
        for changed in [
            request(("x", 2), ("y", 1)),
            request(("x", 1), ("y", 9)),
            request(("x", 1), ("y", 1234)),
        ] {
            assert_eq!(specs(&memo, &changed), (vec!["x".into(), "y".into()], kept));
            let found = memo.kept.recall(&fingerprint(&changed)).unwrap();
            assert!(found.is(&changed) && !found.is(&body));
            let longer = [&changed[..], b" "].concat();
            let other = request(("x", 3), ("y", 1));
            for not in [&longer, &changed[..changed.len() - 1], &other] {
                assert!(!found.is(not));
            }
            assert_eq!(
                found.request().decoded.request() as *const Specs as usize,
                kept
            );
        }
        assert_eq!(memo.kept.len(), 4);
        // Whitespace inside an object, and a string written with an escape that decodes to the
        // same text.
        let text = String::from_utf8(body.clone()).unwrap();
        for changed in [
            text.replace(r#""spec":"y""#, r#""spec" : "y""#),
            text.replace(r#""spec":"y""#, r#""spec":"\u0079""#),
        ] {
            assert_eq!(specs(&memo, changed.as_bytes()).1, kept);
        }
        // Changes the kept request cannot answer for, each a new request: a spec in one
        // object, two objects, a field outside any object, an object's key.
        for (changed, read) in [
            (request(("x", 1), ("w", 1)), ["x", "w"]),
            (request(("x", 2), ("y", 2)), ["x", "y"]),
            (text.replace("false}", "true}").into_bytes(), ["x", "y"]),
            (
                text.replace(r#""a":{"#, r#""c":{"#).into_bytes(),
                ["x", "y"],
            ),
        ] {
            let (got, from) = specs(&memo, &changed);
            assert_eq!(got, read);
            assert_ne!(from, kept);
        }
    }

    /// `body` (a `request`) with a `controller` last, near the children.
    fn with_controller(body: &[u8], controller: &str) -> Vec<u8> {
        let open = &body[..body.len() - 1];
        [open, b",\"controller\":", controller.as_bytes(), b"}"].concat()
    }

    #[test]
    fn a_request_that_differs_in_its_controller_is_answered_from_the_kept_one() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let generation = |n: &str| format!(r#"{{"metadata":{{"generation":{n}}},"spec":{{}}}}"#);
        let body = padded(request(("x", 1), ("y", 1)));
        let first = with_controller(&body, &generation("1"));
        let (_, kept) = specs(&memo, &first);
        // The controller is skipped however deep it nests, in a whole request as here
        // (serde_json refuses 128 nested values it decodes).
        let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
        for controller in [generation("2"), generation("12345"), "null".into(), deep] {
            let changed = with_controller(&body, &controller);
            assert!(crate::contract::decode::<Specs>(&changed).is_ok());
            assert_eq!(
                specs(&memo, &changed),
                (vec!["x".into(), "y".into()], kept),
                "{controller}"
            );
        }
        // With a child's spec too: the kept request with that child decoded anew.
        let base = decoded_of(&memo, &first);
        let both = with_controller(&padded(request(("x", 1), ("z", 1))), &generation("3"));
        assert_eq!(specs(&memo, &both).0, ["x", "z"]);
        assert_eq!(spliced(&memo, &both, &base), Some(vec![2]));
        // A controller that is not one JSON value is the decoder's error.
        let broken = with_controller(&body, r#"{"metadata":}"#);
        let err = memo.with_request(&broken, |_| Ok(())).unwrap_err();
        assert_eq!(err.path, "controller");
    }

    /// The top-level fields that hold no objects are the controller, skipped, and
    /// `finalizing`: a field the requests come to read needs its case in `same_field`.
    #[test]
    fn the_fields_that_hold_no_objects_are_the_controller_and_finalizing() {
        let body = request(("x", 1), ("y", 1));
        let request = crate::contract::decode::<Specs>(&body).unwrap();
        let same = |name: &str, new: &str| request.same_field(name, new);
        assert_eq!(same("controller", r#"{"spec":{"a":[1]}}"#), Some(true));
        assert_eq!(same("unknown", "12"), Some(true));
        assert_eq!(same("finalizing", "false"), Some(true));
        assert_eq!(same("finalizing", "true"), Some(false));
        for broken in ["null", "0", r#""false""#, "{"] {
            assert_eq!(same("finalizing", broken), None, "{broken}");
        }
        assert_eq!(same("controller", "{"), None);
        // The field names serde's derived code knows each request type by, besides the
        // objects'.
        struct Fields(Vec<&'static str>);
        impl<'de> serde::Deserializer<'de> for &mut Fields {
            type Error = serde::de::value::Error;
            fn deserialize_any<V: serde::de::Visitor<'de>>(
                self,
                _: V,
            ) -> Result<V::Value, Self::Error> {
                Err(serde::de::Error::custom("fields only"))
            }
            fn deserialize_struct<V: serde::de::Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                self.0.extend(fields);
                Err(serde::de::Error::custom("fields only"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
                identifier ignored_any
            }
        }
        fn besides_objects(
            sections: [(&'static str, Section); 3],
            ask: impl FnOnce(&mut Fields),
        ) -> Vec<&'static str> {
            let mut fields = Fields(Vec::new());
            ask(&mut fields);
            let sections = sections.map(|(name, _)| name);
            fields.0.retain(|name| !sections.contains(name));
            fields.0
        }
        // The derived code's own `deserialize` (`remote = "Self"`), which names the fields.
        let composite = besides_objects(<Specs as ObjectWise>::SECTIONS, |d| {
            let _ = Specs::deserialize(d);
        });
        type Decorator<'a> = crate::contract::DecoratorRequest<Object<'a>>;
        let decorator = besides_objects(<Decorator as ObjectWise>::SECTIONS, |d| {
            let _ = Decorator::deserialize(d);
        });
        for fields in [composite, decorator] {
            assert_eq!(fields, ["controller", "finalizing"]);
        }
    }

    #[test]
    fn a_request_decoded_after_a_change_inside_one_value_knows_where_its_objects_are() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = request(("x", 1), ("y", 1));
        specs(&memo, &body);
        // A spec the hook reads, then the finalizing field: each decoded, and kept with the
        // spans of the request it was compared with, moved: where its objects are.
        let text = String::from_utf8(body.clone()).unwrap();
        for changed in [
            request(("x", 1), ("longer", 1)),
            text.replace("false}", "true}").into_bytes(),
        ] {
            specs(&memo, &changed);
            let kept = kept_of(&memo, &changed);
            let moved = kept.spans.get().expect("spans moved, not looked for");
            let sections = <Specs as ObjectWise>::SECTIONS;
            assert_eq!(moved, &ObjectSpans::of(&changed, &sections));
        }
        // Another parent's request differs in more than half its bytes: apart, without
        // looking for the kept request's objects.
        let memo = DecodedRequests::<DecodedSpecs>::default();
        specs(&memo, &body);
        specs(
            &memo,
            br#"{"parent":{"metadata":{"name":"q"}},"children":{}}"#,
        );
        let first = kept_of(&memo, &body);
        assert!(first.spans.get().is_none());
    }

    /// The places of the objects decoded anew in the request `memo` keeps for `body`, whose
    /// base is `base`; `None` if it was decoded whole.
    fn spliced(
        memo: &DecodedRequests<DecodedSpecs>,
        body: &[u8],
        base: &Arc<DecodedSpecs>,
    ) -> Option<Vec<usize>> {
        let kept = kept_of(memo, body);
        let plain = crate::contract::decode::<Specs>(body).unwrap();
        assert_eq!(kept.decoded.request(), &plain);
        let Source::Spliced(splice) = kept.decoded.source() else {
            return None;
        };
        assert!(Arc::ptr_eq(&splice.base, base));
        // The children kept from the base are the base's own objects, shared, not copies.
        let request = kept.decoded.request();
        let children = splice
            .groups
            .iter()
            .filter(|g| g.section == Section::Children);
        for group in children {
            let (now, before) = (
                request.children.get(&group.type_key),
                base.request().children.get(&group.type_key),
            );
            for (object, place) in now.iter().zip(&group.places) {
                if let Place::Base(at) = *place {
                    assert!(Arc::ptr_eq(object, &before[at]));
                }
            }
        }
        Some(splice.objects.iter().map(|o| o.at).collect())
    }

    /// `body` (a `request`) with its parent padded, so that both children make up less than
    /// half of it.
    fn padded(body: Vec<u8>) -> Vec<u8> {
        let pad = format!(r#""namespace":"n","pad":"{}""#, "p".repeat(300));
        let text = String::from_utf8(body).unwrap();
        text.replace(r#""namespace":"n""#, &pad).into_bytes()
    }

    #[test]
    fn a_request_that_differs_inside_objects_is_the_kept_one_with_those_decoded_anew() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = padded(request(("x", 1), ("y", 1)));
        specs(&memo, &body);
        let base = decoded_of(&memo, &body);
        // Child b (place 2, after the parent and a), then a, then b again: each request is the
        // first one with the children changed since decoded anew from the new body.
        for (a, b, places) in [
            (("x", 1), ("longer", 1), [2].as_slice()),
            (("w", 1), ("longer", 1), &[1, 2]),
            (("w", 1), ("v", 2), &[1, 2]),
        ] {
            let changed = padded(request(a, b));
            assert_eq!(specs(&memo, &changed).0, [a.0, b.0]);
            assert_eq!(spliced(&memo, &changed, &base).as_deref(), Some(places));
        }
        // Without the padding the two children are more than half the body: the second
        // request is decoded whole, and the next one spliced from it.
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = request(("x", 1), ("y", 1));
        specs(&memo, &body);
        let base = decoded_of(&memo, &body);
        let one = request(("x", 1), ("z", 1));
        specs(&memo, &one);
        assert_eq!(spliced(&memo, &one, &base), Some(vec![2]));
        let two = request(("w", 1), ("z", 1));
        assert_eq!(specs(&memo, &two).0, ["w", "z"]);
        assert_eq!(spliced(&memo, &two, &base), None);
        // A top-level field's value is no object: decoded whole.
        let text = String::from_utf8(two.clone()).unwrap();
        let finalizing = text.replace("false}", "true}").into_bytes();
        let base = decoded_of(&memo, &two);
        specs(&memo, &finalizing);
        assert_eq!(spliced(&memo, &finalizing, &base), None);
    }

    #[test]
    fn a_request_with_objects_taken_out_or_put_in_is_the_kept_one_with_their_group_spliced() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = String::from_utf8(padded(request(("x", 1), ("y", 1)))).unwrap();
        specs(&memo, body.as_bytes());
        let base = decoded_of(&memo, body.as_bytes());
        // Each request is the one before with a child put in, changed or taken out: spliced
        // from the first, with the children decoded anew from it since, at their places now
        // (the parent is the first).
        let c = r#""c":{"metadata":{"name":"c"},"spec":"z"}"#;
        let a = r#""a":{"metadata":{"name":"a","resourceVersion":"1"},"spec":"x"},"#;
        let three = body.replace(r#","b":{"#, &format!(",{c},\"b\":{{"));
        let changed = three.replace(r#""spec":"y""#, r#""spec":"w""#);
        let without_a = changed.replace(a, "");
        let only_c = without_a.replace(
            r#","b":{"metadata":{"name":"b","resourceVersion":"1"},"spec":"w"}"#,
            "",
        );
        let none = only_c.replace(c, "");
        for (body, read, places) in [
            (&three, ["x", "z", "y"].as_slice(), [2].as_slice()),
            (&changed, &["x", "z", "w"], &[2, 3]),
            (&without_a, &["z", "w"], &[1, 2]),
            (&only_c, &["z"], &[1]),
            (&none, &[], &[]),
        ] {
            assert_eq!(specs(&memo, body.as_bytes()).0, read, "{body}");
            assert_eq!(
                spliced(&memo, body.as_bytes(), &base).as_deref(),
                Some(places)
            );
        }
        // The parent changed, longer, and a child put in after it, in one request (as the
        // parent's status written back after the sync that created the child): spliced from
        // the first, with both decoded anew (a controller no hook reads makes them less than
        // half the body).
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let pad = format!(r#"{{"controller":{{"pad":"{}"}},"parent""#, "p".repeat(300));
        let body = String::from_utf8(request(("x", 1), ("y", 1))).unwrap();
        let body = body.replace(r#"{"parent""#, &pad);
        specs(&memo, body.as_bytes());
        let first = decoded_of(&memo, body.as_bytes());
        let both = body
            .replace(r#""namespace":"n""#, r#""namespace":"nn""#)
            .replace(r#","b":{"#, &format!(",{c},\"b\":{{"));
        assert_eq!(specs(&memo, both.as_bytes()).0, ["x", "z", "y"]);
        assert_eq!(
            spliced(&memo, both.as_bytes(), &first).as_deref(),
            Some([1, 3].as_slice())
        );
        // Children put in two maps at once (as a Secret a sync created comes back in children
        // and in related), one put in and another changed in a map after it, then one taken
        // out and another put in a map after it (with the change undone): spliced from the
        // first, each map in turn.
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let child = |name: &str, spec: &str| {
            format!(r#""{name}":{{"metadata":{{"name":"{name}"}},"spec":"{spec}"}}"#)
        };
        let two_maps = |t: &str, u: &str| {
            let maps = format!(r#""}}}},"U.v1":{{{u}}}}},"finalizing""#);
            let body = String::from_utf8(padded(request(("x", 1), ("y", 1)))).unwrap();
            body.replace(r#""}}},"finalizing""#, &maps)
                .replace(r#","b":{"#, &format!(",{t}\"b\":{{"))
        };
        let (u, v) = (child("u", "s"), child("v", "t"));
        let body = two_maps("", &u);
        specs(&memo, body.as_bytes());
        let first = decoded_of(&memo, body.as_bytes());
        let c = format!("{},", child("c", "z"));
        for (body, read, places) in [
            (
                two_maps(&c, &format!("{u},{v}")),
                ["x", "z", "y"].as_slice(),
                [2, 5].as_slice(),
            ),
            (two_maps(&c, &child("u", "r")), &["x", "z", "y"], &[2, 4]),
            (
                two_maps("", &format!("{v},{u}")).replace(a, ""),
                &["y"],
                &[2, 3],
            ),
        ] {
            assert_eq!(specs(&memo, body.as_bytes()).0, read, "{body}");
            assert_eq!(
                spliced(&memo, body.as_bytes(), &first).as_deref(),
                Some(places),
                "{body}"
            );
        }
        // Against the first: an object put in a map, and one changed in a map after it (its new
        // text where the object put in before it moves it).
        let memo = DecodedRequests::<DecodedSpecs>::default();
        specs(&memo, body.as_bytes());
        let first = decoded_of(&memo, body.as_bytes());
        let changed = two_maps(&c, &child("u", "r"));
        assert_eq!(specs(&memo, changed.as_bytes()).0, ["x", "z", "y"]);
        assert_eq!(
            spliced(&memo, changed.as_bytes(), &first).as_deref(),
            Some([2, 4].as_slice())
        );
        // Farther apart: spliced while the bytes from the first change to the last make up at
        // most three quarters of the request, else decoded whole without a look.
        for (pad, places) in [(600, Some(vec![2, 6])), (2000, None)] {
            let padding = format!(
                r#""P.v1":{{"p":{{"metadata":{{"name":"p"}},"spec":"{}"}}}},"U.v1""#,
                "p".repeat(pad)
            );
            let body = two_maps("", &u).replace(r#""U.v1""#, &padding);
            let memo = DecodedRequests::<DecodedSpecs>::default();
            specs(&memo, body.as_bytes());
            let first = decoded_of(&memo, body.as_bytes());
            let changed = two_maps(&c, &format!("{u},{v}")).replace(r#""U.v1""#, &padding);
            let differ = differing(body.as_bytes(), changed.as_bytes());
            let apart = (differ.1 - differ.0) as f64 / body.len() as f64;
            assert_eq!(
                (apart > 0.5, apart > 0.75),
                (true, places.is_none()),
                "{apart}"
            );
            assert_eq!(specs(&memo, changed.as_bytes()).0, ["x", "z", "y"]);
            assert_eq!(spliced(&memo, changed.as_bytes(), &first), places);
        }
        // Two maps of one type key (a key written twice): an object put in the first moves
        // those of the second among their group's, so a change in the second is not spliced,
        // but decoded whole.
        let twice = body.replace(r#""U.v1":"#, r#""T.v1":"#);
        let memo = DecodedRequests::<DecodedSpecs>::default();
        specs(&memo, twice.as_bytes());
        let changed = twice
            .replace(r#","b":{"#, &format!(",{c}\"b\":{{"))
            .replace(r#""spec":"s""#, r#""spec":"q""#);
        assert_eq!(specs(&memo, changed.as_bytes()).0, ["x", "z", "y", "q"]);
        assert_eq!(spliced(&memo, changed.as_bytes(), &first), None);
        // Nor an object put in each.
        let memo = DecodedRequests::<DecodedSpecs>::default();
        specs(&memo, twice.as_bytes());
        let changed = twice
            .replace(r#","b":{"#, &format!(",{c}\"b\":{{"))
            .replace(&u, &format!("{v},{u}"));
        assert_eq!(
            specs(&memo, changed.as_bytes()).0,
            ["x", "z", "y", "t", "s"]
        );
        assert_eq!(spliced(&memo, changed.as_bytes(), &first), None);
        // A child put in that does not decode: the decoder's error.
        let unnamed = none.replace(r#""T.v1":{}"#, r#""T.v1":{"d":{"spec":"v"}}"#);
        let plain = crate::contract::decode::<Specs>(unnamed.as_bytes()).unwrap_err();
        let err = memo
            .with_request(unnamed.as_bytes(), |_| Ok(()))
            .unwrap_err();
        assert_eq!((&err.path, &err.message), (&plain.path, &plain.message));
    }

    #[test]
    fn several_values_that_differ_at_once_are_looked_at_one_by_one() {
        let body = padded(request(("x", 1), ("y", 1)));
        // A memo that keeps `body`, and the request it decoded from it.
        let keeping_body = || {
            let memo = DecodedRequests::<DecodedSpecs>::default();
            specs(&memo, &body);
            let base = decoded_of(&memo, &body);
            (memo, base)
        };
        // Both children's resourceVersions, one longer: answered from the kept request.
        let (memo, base) = keeping_body();
        let unread = padded(request(("x", 22), ("y", 3)));
        assert_eq!(
            specs(&memo, &unread).1,
            base.request() as *const Specs as usize
        );
        assert_eq!(memo.kept.len(), 2);
        // Both specs; one spec and the other's resourceVersion; a spec and the key of the object
        // after it (the map of their type key reshaped: the first taken out and put in again):
        // spliced, with the children that decode differently. A spec and the finalizing field:
        // decoded whole.
        let text = String::from_utf8(padded(request(("v", 1), ("y", 1)))).unwrap();
        for (changed, read, places) in [
            (
                padded(request(("long", 1), ("w", 1))),
                ["long", "w"],
                Some(vec![1, 2]),
            ),
            (
                padded(request(("w", 1), ("y", 7))),
                ["w", "y"],
                Some(vec![1]),
            ),
            (
                text.replace("false}", "true}").into_bytes(),
                ["v", "y"],
                None,
            ),
            (
                text.replace(r#""b":{"#, r#""c":{"#).into_bytes(),
                ["v", "y"],
                Some(vec![1]),
            ),
        ] {
            let (memo, base) = keeping_body();
            assert_eq!(specs(&memo, &changed).0, read);
            assert_eq!(spliced(&memo, &changed, &base), places);
        }
    }

    /// `body` with one byte changed, added or taken out (`edit` 0, 1, 2 at `at`, within it).
    fn edited(body: &[u8], at: usize, edit: u8, byte: u8) -> Vec<u8> {
        let mut changed = body.to_vec();
        let at = at % changed.len();
        match edit {
            0 => changed[at] = byte,
            1 => changed.insert(at, byte),
            _ => drop(changed.remove(at)),
        }
        changed
    }

    /// `body` decoded whole, as the memo keeps it.
    fn whole<R: DecodedRequest>(body: &[u8]) -> KeptRequest<R> {
        KeptRequest {
            decoded: Arc::new(R::decode(body.into()).unwrap()),
            spans: OnceLock::new(),
        }
    }

    /// What a kept request works out for a body that differs from it, checked: a body it
    /// answers decodes to it; where the objects of a body it moves are, equal to where they are
    /// found afresh; and a request spliced from it, equal to the body decoded whole. Returns the
    /// splice, if there is one (a body it answers is kept as its values, checked here).
    fn checked<R>(kept: KeptRequest<R>, changed: &[u8]) -> Option<KeptRequest<R>>
    where
        R: DecodedRequest,
        for<'a> R::Request<'a>: PartialEq + std::fmt::Debug,
    {
        let decoded_whole = || R::decode(changed.into()).expect("a body the memo reads decodes");
        let sections = <R::Request<'_> as ObjectWise<'_>>::SECTIONS;
        let nearby = match kept.compare(changed) {
            Nearby::Apart => return None,
            Nearby::Same(values) => {
                assert_eq!(kept.decoded.request(), decoded_whole().request());
                let answered = KeptBody::answered(Arc::new(kept), values, changed);
                // Kept as its values: what they make is the body, and only the body.
                let kept = answered.request().decoded.bytes();
                assert!(answered.is(changed));
                assert_eq!(answered.is(kept), kept == changed);
                return None;
            }
            nearby => nearby,
        };
        let (spliced, spans) = kept.spliced(changed, nearby);
        let spans = spans.expect("a kept request compared has spans");
        assert_eq!(Some(&spans), ObjectSpans::of(changed, &sections).as_ref());
        let spliced = spliced?;
        assert_eq!(spliced.request(), decoded_whole().request());
        Some(KeptRequest {
            decoded: Arc::new(spliced),
            spans: OnceLock::from(Some(spans)),
        })
    }

    /// A fixture edited once, then again: both edits against the fixture, and the second
    /// against what the first leaves (a splice, when it is one).
    fn edited_twice<R>(body: &[u8], first: (usize, u8, u8), second: (usize, u8, u8))
    where
        R: DecodedRequest,
        for<'a> R::Request<'a>: PartialEq + std::fmt::Debug,
    {
        let once = edited(body, first.0, first.1, first.2);
        let twice = edited(&once, second.0, second.1, second.2);
        checked(whole::<R>(body), &twice);
        if let Some(kept) = checked(whole::<R>(body), &once) {
            checked(kept, &twice);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A request answered from a kept one decodes to it, spans moved from a kept request's
        /// are those of the changed request, found afresh, and a request spliced from a kept
        /// one (itself a splice after a second edit) is the changed request decoded whole.
        #[test]
        fn moved_spans_and_splices_are_what_decoding_finds(
            which in 0..4usize,
            first in (0..usize::MAX, 0..3u8, proptest::sample::select(EDIT_BYTES.to_vec())),
            second in (0..usize::MAX, 0..3u8, proptest::sample::select(EDIT_BYTES.to_vec())),
        ) {
            let body = fixture(FIXTURES[which].1);
            match FIXTURES[which].0 {
                "delete-graph" => edited_twice::<delete_graph::DecodedSync>(&body, first, second),
                "app-discovery" => edited_twice::<app_discovery::DecodedSync>(&body, first, second),
                "cert-rotation" => edited_twice::<cert_rotation::DecodedSync>(&body, first, second),
                _ => edited_twice::<mesh_root_certificate::DecodedSync>(&body, first, second),
            }
        }
    }

    /// A sync fixture of each hook that keeps requests, for the edits of the tests above.
    const FIXTURES: [(&str, &str); 4] = [
        (
            "delete-graph",
            "delete-graph/sync-chain-all-running.request.json",
        ),
        (
            "app-discovery",
            "app-discovery/sync-multi-service-due-creates-app.request.json",
        ),
        (
            "cert-rotation",
            "cert-rotation/sync-step1-reuses-leaves-byte-identical.request.json",
        ),
        (
            "mesh-root-certificate",
            "mesh-root-certificate/sync-active-signing.request.json",
        ),
    ];

    fn fixture(path: &str) -> Vec<u8> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        std::fs::read(root.join(path)).unwrap()
    }

    /// A map of a type key in a request: where its `{` is, and where each of its entries' key
    /// starts and its value ends.
    type MapEntries = (usize, Vec<(usize, usize)>);

    /// The maps of type keys in a request's `children`, `attachments` and `related`, in the
    /// order of the text: where each one's `{` is, and where each of its entries' key starts
    /// and its value ends. `None` when the body is not such a request.
    fn maps_of(body: &[u8]) -> Option<Vec<MapEntries>> {
        use serde_json::value::RawValue;
        use std::collections::BTreeMap;
        type Map<'a> = BTreeMap<String, &'a RawValue>;
        let offset = |raw: &RawValue| raw.get().as_ptr() as usize - body.as_ptr() as usize;
        let before = |at: usize| body[..at].iter().rposition(|b| !b.is_ascii_whitespace());
        // Where the key of the value at `at` starts: before it are its `:` and the key, which
        // in the fixtures has no escape.
        let key_start = |at: usize| {
            let colon = before(at).filter(|&c| body[c] == b':')?;
            let close = before(colon)?;
            body[..close].iter().rposition(|&b| b == b'"')
        };
        let top: Map = serde_json::from_slice(body).ok()?;
        let mut maps = Vec::new();
        for section in ["children", "attachments", "related"] {
            let Some(types) = top.get(section) else {
                continue;
            };
            for map in serde_json::from_str::<Map>(types.get()).ok()?.values() {
                let Ok(objects) = serde_json::from_str::<Map>(map.get()) else {
                    continue;
                };
                let mut entries = objects
                    .values()
                    .map(|v| Some((key_start(offset(v))?, offset(v) + v.get().len())))
                    .collect::<Option<Vec<_>>>()?;
                entries.sort_unstable();
                maps.push((offset(map), entries));
            }
        }
        maps.sort_unstable();
        Some(maps)
    }

    /// `body` with an entry of one of its maps of type keys taken out (`copy_to` `None`) or
    /// copied, under another key and name, to the place `copy_to` in that map; `None` when
    /// the body has no such map, or no entry to take out or copy.
    fn reshaped(body: &[u8], map: usize, entry: usize, copy_to: Option<usize>) -> Option<Vec<u8>> {
        let maps = maps_of(body)?;
        let (open, entries) = maps.get(map % maps.len().max(1))?;
        let (key, end) = *entries.get(entry % entries.len().max(1))?;
        let at = entry % entries.len();
        let Some(to) = copy_to else {
            // With the comma after it, or else the one before it.
            let range = match (entries.get(at + 1), at.checked_sub(1)) {
                (Some(&(next, _)), _) => key..next,
                (None, Some(before)) => entries[before].1..end,
                (None, None) => key..end,
            };
            return Some([&body[..range.start], &body[range.end..]].concat());
        };
        let value_start = key + body[key..].iter().position(|&b| b == b':')? + 1;
        let mut object: serde_json::Value = serde_json::from_slice(&body[value_start..end]).ok()?;
        let name = format!("copy-{to}-{}", body.len());
        *object.pointer_mut("/metadata/name")? = name.clone().into();
        let copied = format!(r#""{name}":{object}"#);
        let to = to % (entries.len() + 1);
        let (at, text) = match entries.get(to) {
            Some(&(next, _)) => (next, format!("{copied},")),
            None if to > 0 => (entries[to - 1].1, format!(",{copied}")),
            None => (open + 1, copied),
        };
        Some([&body[..at], text.as_bytes(), &body[at..]].concat())
    }

    /// An edit of [`edited_in_turn`]: an entry of a map (0: taken out, 1: copied to a place),
    /// a byte (2), an entry copied and a byte edited (3), or an entry copied and one of the next
    /// map taken out or copied (4), as [`reshaped`] and [`edited`] take them.
    type Step = (u8, usize, usize, (usize, u8, u8));

    /// A fixture edited a few times in turn (an entry taken out or copied, or a byte edited),
    /// each edit checked against the request the one before left: a splice, when it was one,
    /// else the body decoded whole.
    fn edited_in_turn<R>(mut body: Vec<u8>, edits: &[Step])
    where
        R: DecodedRequest,
        for<'a> R::Request<'a>: PartialEq + std::fmt::Debug,
    {
        let mut kept = whole::<R>(&body);
        for &(kind, map, entry, byte) in edits {
            let next = match kind {
                0 => reshaped(&body, map, entry, None),
                1 => reshaped(&body, map, entry, Some(byte.0)),
                2 => Some(edited(&body, byte.0, byte.1, byte.2)),
                3 => reshaped(&body, map, entry, Some(byte.0))
                    .map(|copied| edited(&copied, byte.0, byte.1, byte.2)),
                _ => reshaped(&body, map, entry, Some(byte.0)).and_then(|copied| {
                    let copy_to = (byte.1 > 0).then_some(byte.0);
                    reshaped(&copied, map + 1, entry, copy_to)
                }),
            };
            let Some(next) = next else { continue };
            kept = match checked(kept, &next) {
                Some(spliced) => spliced,
                None => match R::decode(next.clone().into()) {
                    Ok(decoded) => KeptRequest {
                        decoded: Arc::new(decoded),
                        spans: OnceLock::new(),
                    },
                    Err(_) => return,
                },
            };
            body = next;
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// A request with objects taken out of a map of a type key or put in, in turn with
        /// other edits or with one at once, each checked as above: its spans are those found
        /// afresh, and its splice is the request decoded whole.
        #[test]
        fn reshaped_spans_and_splices_are_what_decoding_finds(
            which in 0..4usize,
            edits in proptest::collection::vec(
                (
                    0..5u8,
                    0..usize::MAX,
                    0..usize::MAX,
                    (0..usize::MAX, 0..3u8, proptest::sample::select(EDIT_BYTES.to_vec())),
                ),
                1..5,
            ),
        ) {
            let body = fixture(FIXTURES[which].1);
            match FIXTURES[which].0 {
                "delete-graph" => edited_in_turn::<delete_graph::DecodedSync>(body, &edits),
                "app-discovery" => edited_in_turn::<app_discovery::DecodedSync>(body, &edits),
                "cert-rotation" => edited_in_turn::<cert_rotation::DecodedSync>(body, &edits),
                _ => edited_in_turn::<mesh_root_certificate::DecodedSync>(body, &edits),
            }
        }
    }

    /// The bytes an edit puts in: digits and letters that change a value, and JSON's
    /// punctuation that changes the structure.
    const EDIT_BYTES: &[u8] = b"0a\" {}[],:\\x";

    #[test]
    fn a_body_that_grew_or_shrank_by_more_than_half_is_apart_without_looking() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = request(("x", 1), ("y", 1));
        specs(&memo, &body);
        // One spec, grown by more than the whole request: decoded, and the kept request's
        // objects are not looked for.
        let long = "z".repeat(body.len());
        assert_eq!(
            specs(&memo, &request(("x", 1), (&long, 1))).0,
            ["x", long.as_str()]
        );
        let kept = kept_of(&memo, &body);
        assert!(kept.spans.get().is_none());
        // Compared with the long one, the short one shrank by more than half: the same.
        specs(&memo, &request(("x", 1), ("w", 1)));
        let kept = kept_of(&memo, &request(("x", 1), (&long, 1)));
        assert!(kept.spans.get().is_none());
    }

    #[test]
    fn memos_keeping_no_requests_keep_none() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
        let body =
            std::fs::read(root.join("app-discovery/sync-new-rollout-updates-app.request.json"));
        let body = body.unwrap();
        for (memo, kept) in [(Memo::keeping_no_requests(), 0), (Memo::default(), 1)] {
            let requests = &memo.requests.app_discovery;
            requests.with_request(&body, |_| Ok(())).unwrap();
            assert_eq!(requests.kept.len(), kept);
        }
    }

    #[test]
    fn a_nearby_request_that_does_not_decode_is_the_decoders_error() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = String::from_utf8(request(("x", 1), ("y", 1))).unwrap();
        specs(&memo, body.as_bytes());
        for changed in [
            // Not JSON inside the object, a value where the object ends, an object no longer
            // named.
            body.replace(r#""resourceVersion":"1"}"#, r#""resourceVersion":1"1"}"#),
            body.replace(r#""spec":"y"}"#, r#""spec":"y"},"c":1"#),
            body.replace(r#""name":"b""#, r#""name":"""#),
        ] {
            let plain = crate::contract::decode::<Specs>(changed.as_bytes()).unwrap_err();
            let err = memo
                .with_request(changed.as_bytes(), |_| Ok(()))
                .unwrap_err();
            assert_eq!((&err.path, &err.message), (&plain.path, &plain.message));
        }
        assert_eq!(memo.kept.len(), 1);
    }

    #[test]
    fn only_the_most_recently_used_are_looked_at_for_a_nearby_request() {
        let body = request(("x", 1), ("y", 1));
        let others = DecodedRequests::<DecodedSpecs>::NEARBY;
        // Another parent's request: apart from the ones of `body`'s parent (they differ in
        // more than three quarters of their bytes).
        let long = "o".repeat(2 * body.len());
        let other = |n: usize| request((&long, 1), (&n.to_string(), 1));
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let (_, kept) = specs(&memo, &body);
        for n in 0..others {
            specs(&memo, &other(n));
        }
        assert_ne!(specs(&memo, &request(("x", 2), ("y", 1))).1, kept);
        // Used again, it is among them.
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let (_, kept) = specs(&memo, &body);
        for n in 0..others {
            specs(&memo, &other(n));
            specs(&memo, &body);
        }
        assert_eq!(specs(&memo, &request(("x", 2), ("y", 1))).1, kept);
        // Answering a nearby request uses it too.
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let (_, kept) = specs(&memo, &body);
        for n in 0..=others {
            specs(&memo, &other(n));
            let version = u32::try_from(n).unwrap() + 2;
            assert_eq!(specs(&memo, &request(("x", version), ("y", 1))).1, kept);
        }
    }

    #[test]
    fn a_kept_request_under_the_same_fingerprint_is_compared_not_trusted() {
        let memo = DecodedRequests::<DecodedSpecs>::default();
        let body = request(("b", 1), ("y", 1));
        let key = fingerprint(&body);
        // Another request of the same length kept under body's key, as a fingerprint collision
        // would leave it.
        let collided = Arc::new(KeptBody::Decoded(Arc::new(KeptRequest {
            decoded: Arc::new(DecodedSpecs::decode(request(("a", 1), ("y", 1)).into()).unwrap()),
            spans: OnceLock::new(),
        })));
        memo.kept.store(key, Arc::clone(&collided), 10);
        for _ in 0..3 {
            assert_eq!(specs(&memo, &body).0, ["b", "y"]);
        }
        // The one already under the key stays.
        assert!(Arc::ptr_eq(&memo.kept.recall(&key).unwrap(), &collided));
    }

    #[test]
    fn decoded_requests_are_bounded_by_twice_their_text() {
        let body = request(("x", 1), ("y", 1));
        let size = 2 * body.len();
        let none = DecodedRequests::<DecodedSpecs>::new(0, 0);
        for _ in 0..3 {
            assert_eq!(specs(&none, &body).0, ["x", "y"]);
        }
        assert_eq!(none.kept.len(), 0);
        // Room for two requests as counted, not three (each decoded whole: both objects differ).
        let two = DecodedRequests::<DecodedSpecs>::new(10, 2 * size);
        for spec in ["a", "b", "c"] {
            specs(&two, &request((spec, 1), (spec, 1)));
        }
        assert_eq!(two.kept.len(), 2);
        assert!(two
            .kept
            .recall(&fingerprint(&request(("a", 1), ("a", 1))))
            .is_none());
        // A splice counts its base's text as well; a body answered from a kept request (one
        // child's resourceVersion) that request's text and the text of the object that differs.
        // Room for a request and one of them as counted, and not one byte less.
        let answered = request(("x", 2), ("y", 1));
        let object = r#"{"metadata":{"name":"a","resourceVersion":"2"},"spec":"x"}"#;
        assert!(String::from_utf8_lossy(&answered).contains(object));
        let as_counted = [
            (request(("z", 1), ("y", 1)), 2 * size),
            (answered, size + 2 * object.len()),
        ];
        for (other, counted) in as_counted {
            for (room, kept) in [(size + counted, 2), (size + counted - 1, 1)] {
                let memo = DecodedRequests::<DecodedSpecs>::new(10, room);
                specs(&memo, &body);
                specs(&memo, &other);
                assert_eq!(memo.kept.len(), kept);
            }
        }
        // A request larger than half the bound is decoded and not kept.
        let small = DecodedRequests::<DecodedSpecs>::new(10, size - 1);
        for _ in 0..2 {
            assert_eq!(specs(&small, &body).0, ["x", "y"]);
        }
        assert_eq!(small.kept.len(), 0);
    }

    #[test]
    fn the_fingerprint_reads_every_byte() {
        // Long enough for the hash's lanes over long inputs, and a tail after them.
        let body = vec![b' '; 301];
        let base = fingerprint(&body);
        for at in 0..body.len() {
            let mut changed = body.clone();
            changed[at] = b'\t';
            assert_ne!(fingerprint(&changed), base, "byte {at}");
        }
    }

    #[test]
    fn recall_finds_what_was_stored_and_nothing_else() {
        let recent = Recent::new(4, 100);
        recent.store(key(1), Arc::new("one"), 10);
        assert_eq!(recent.recall(&key(1)).as_deref(), Some(&"one"));
        assert_eq!(recent.recall(&key(2)), None);
        // A second store under the same key keeps the first value.
        recent.store(key(1), Arc::new("other"), 10);
        assert_eq!(recent.recall(&key(1)).as_deref(), Some(&"one"));
        assert_eq!(recent.len(), 1);
        // Debug shows the count, never a value (a remembered CA holds its key).
        assert_eq!(format!("{recent:?}"), "Recent { len: 1 }");
    }

    #[test]
    fn the_least_recently_used_go_first_when_entries_run_out() {
        let recent = Recent::new(2, 100);
        recent.store(key(1), Arc::new(1), 1);
        recent.store(key(2), Arc::new(2), 1);
        // Using 1 makes 2 the least recently used.
        assert!(recent.recall(&key(1)).is_some());
        recent.store(key(3), Arc::new(3), 1);
        assert_eq!(recent.len(), 2);
        assert!(recent.recall(&key(2)).is_none());
        assert!(recent.recall(&key(1)).is_some());
        assert!(recent.recall(&key(3)).is_some());
    }

    #[test]
    fn the_byte_bound_drops_old_values_and_refuses_one_too_large() {
        let recent = Recent::new(10, 100);
        recent.store(key(1), Arc::new(1), 60);
        recent.store(key(2), Arc::new(2), 30);
        recent.store(key(3), Arc::new(3), 30);
        // 120 bytes would exceed the bound: the oldest (60) goes.
        assert!(recent.recall(&key(1)).is_none());
        assert_eq!(recent.len(), 2);
        recent.store(key(4), Arc::new(4), 101);
        assert!(recent.recall(&key(4)).is_none());
        assert_eq!(recent.len(), 2);
        // The bound itself is allowed: a value of exactly 100 bytes is kept, alone.
        recent.store(key(5), Arc::new(5), 100);
        assert!(recent.recall(&key(5)).is_some());
        assert_eq!(recent.len(), 1);
        // And so are values that fill it exactly together.
        let recent = Recent::new(10, 100);
        recent.store(key(1), Arc::new(1), 40);
        recent.store(key(2), Arc::new(2), 60);
        assert_eq!(recent.len(), 2);
    }
}
