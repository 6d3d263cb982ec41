//! What the hooks remember between requests, shared by every request of a server. A memo saves
//! time and never changes an answer: each entry is found by every input byte it was made from
//! (a decoded request, a CA Secret and a spec's plan by the bytes themselves, kept and compared
//! in full; a leaf by SHA-256 over them), so an input that differs in any byte is worked out
//! afresh.

use crate::delete_graph::plan::PlanMemo;
use crate::pki::PkiMemo;
use crate::{app_discovery, cert_rotation, delete_graph, mesh_root_certificate, RequestError};
use serde::Deserialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Every memo of a server: the sync requests decoded before, the certificate checks of
/// cert-rotation and the spec plans of delete-graph.
#[derive(Debug, Default)]
pub struct Memo {
    pub requests: Requests,
    pub pki: PkiMemo,
    pub plans: PlanMemo,
}

impl Memo {
    /// Memos that keep no decoded request, as when every request changed (in something other
    /// than the spec or the certificates): for the benches and `hook_loop`.
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
/// [`Fingerprint`] (a CA Secret's check, a spec's plan).
pub struct Kept<V> {
    made_from: Box<[u8]>,
    value: Arc<V>,
}

impl<V> Recent<Kept<V>> {
    /// The value made from exactly `bytes`, found by their fingerprint `key` and then compared
    /// byte for byte: another value under the same fingerprint is no match.
    pub fn recall_made_from(&self, key: &Fingerprint, bytes: &[u8]) -> Option<Arc<V>> {
        let kept = self.recall(key)?;
        (*kept.made_from == *bytes).then(|| Arc::clone(&kept.value))
    }

    /// Stores `value` as made from `bytes`, under their fingerprint `key` (see [`Self::store`]:
    /// not in place of a value already under that key).
    pub fn store_made_from(&self, key: Fingerprint, bytes: Vec<u8>, value: Arc<V>, size: usize) {
        let made_from = bytes.into_boxed_slice();
        self.store(key, Arc::new(Kept { made_from, value }), size);
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

/// A hook's sync request decoded from bytes it keeps; [`decoded_request!`] declares one.
pub trait DecodedRequest: Sized + Send + Sync {
    /// The request, borrowing from the bytes it is decoded from.
    type Request<'a>: Deserialize<'a>
    where
        Self: 'a;
    /// Decodes `bytes` as [`crate::contract::decode`] does, keeping them.
    fn decode(bytes: Box<[u8]>) -> Result<Self, RequestError>;
    /// The bytes it was decoded from.
    fn bytes(&self) -> &[u8];
    /// The request decoded from [`Self::bytes`].
    fn request(&self) -> &Self::Request<'_>;
}

/// Declares `$name`: a `$request` (a request type with one lifetime, borrowing from the body)
/// together with the bytes it was decoded from, for [`DecodedRequests`].
macro_rules! decoded_request {
    ($(#[$doc:meta])* $name:ident, $request:ident) => {
        self_cell::self_cell!(
            $(#[$doc])*
            pub struct $name {
                owner: Box<[u8]>,
                #[covariant]
                dependent: $request,
            }
        );

        impl $crate::memo::DecodedRequest for $name {
            type Request<'a> = $request<'a>;

            fn decode(bytes: Box<[u8]>) -> Result<Self, $crate::RequestError> {
                Self::try_new(bytes, |bytes| $crate::contract::decode(bytes))
            }

            fn bytes(&self) -> &[u8] {
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
/// byte: one that differs in any byte is decoded afresh. What the hook works out from the
/// request (and the time) is worked out on every sync.
///
/// A request is kept decoded the second time its fingerprint comes among the last
/// [`Self::CAPACITY`] seen: requests that change on every sync are not kept at all, which would
/// only cost memory and cache. Bounded: the [`Self::CAPACITY`] most recently used, and
/// [`Self::BYTES`] between them, each counted as twice its text (decoding keeps 0.26-0.66 times
/// the text beside it on the load run's requests); a request larger than half the bound is
/// decoded on every sync, without a fingerprint.
pub struct DecodedRequests<R> {
    kept: Recent<R>,
    /// The fingerprints of the requests seen last, kept or not.
    seen: Recent<()>,
}

impl<R> Default for DecodedRequests<R> {
    fn default() -> Self {
        Self::new(Self::CAPACITY, Self::BYTES)
    }
}

impl<R> DecodedRequests<R> {
    pub const CAPACITY: usize = 256;
    pub const BYTES: usize = 8 << 20;

    /// A memo of at most `max_entries` requests and `max_bytes` (as counted above).
    pub const fn new(max_entries: usize, max_bytes: usize) -> Self {
        DecodedRequests {
            kept: Recent::new(max_entries, max_bytes),
            seen: Recent::new(max_entries, max_bytes),
        }
    }

    /// A memo that keeps nothing, but fingerprints each request it could keep, as a request
    /// not seen before costs.
    pub const fn none() -> Self {
        Self::new(0, Self::BYTES)
    }
}

impl<R: DecodedRequest> DecodedRequests<R> {
    /// `answer` of `body` decoded: the request kept from the same bytes, or decoded now (and
    /// kept if its fingerprint was seen before). A body that does not decode is an error, as
    /// from [`crate::contract::decode`].
    pub fn with_request<T>(
        &self,
        body: &[u8],
        answer: impl FnOnce(&R::Request<'_>) -> Result<T, RequestError>,
    ) -> Result<T, RequestError> {
        if !self.kept.fits(2 * body.len()) {
            // Too large to keep: not worth a fingerprint and a place among those seen.
            return answer(&crate::contract::decode(body)?);
        }
        let key = fingerprint(body);
        if let Some(kept) = self.kept.recall(&key) {
            if kept.bytes() == body {
                return answer(kept.request());
            }
            // Different bytes with the same fingerprint: decoded, and not kept in place of the
            // request already under this key.
            return answer(&crate::contract::decode(body)?);
        }
        if self.seen.recall(&key).is_some() {
            let kept = Arc::new(R::decode(body.into())?);
            self.kept.store(key, Arc::clone(&kept), 2 * body.len());
            return answer(kept.request());
        }
        let request = crate::contract::decode(body)?;
        self.seen.store(key, Arc::new(()), 0);
        answer(&request)
    }
}

impl<R> std::fmt::Debug for DecodedRequests<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A request may hold Secret values: the counts only.
        f.debug_struct("DecodedRequests")
            .field("kept", &self.kept)
            .field("seen", &self.seen)
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
    /// Keeps no request: every sync decodes its body, as a request not seen before does.
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

/// The [`Fingerprint`] of `bytes`: four independent multiply-and-rotate lanes over 8-byte words,
/// so that it runs at memory speed rather than at one multiply's latency a word.
pub(crate) fn fingerprint(bytes: &[u8]) -> Fingerprint {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lanes = [1u64, 2, 3, 4];
    let mut blocks = bytes.chunks_exact(32);
    for block in &mut blocks {
        for (lane, word) in lanes.iter_mut().zip(block.chunks_exact(8)) {
            let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
            *lane = (*lane ^ word).wrapping_mul(K).rotate_left(29);
        }
    }
    let mut hash = bytes.len() as u64;
    for value in lanes
        .into_iter()
        .chain(blocks.remainder().iter().map(|&b| u64::from(b)))
    {
        hash = (hash ^ value).wrapping_mul(K).rotate_left(31);
    }
    (bytes.len(), hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key for the tests of `Recent`.
    fn key(n: u8) -> Fingerprint {
        (usize::from(n), u64::from(n))
    }

    /// A request type for the tests: strings borrowed from the body.
    type Words<'a> = Vec<&'a str>;

    decoded_request!(
        /// A list of words with the bytes it was decoded from.
        DecodedWords,
        Words
    );

    /// The words `memo` answers `body` with, and where the request it read them from lives.
    fn words(memo: &DecodedRequests<DecodedWords>, body: &[u8]) -> (Vec<String>, usize) {
        memo.with_request(body, |words| {
            let read = words.iter().map(|w| w.to_string()).collect();
            Ok((read, words as *const Words as usize))
        })
        .unwrap()
    }

    #[test]
    fn a_request_seen_twice_is_kept_and_one_that_differs_is_decoded_afresh() {
        let memo = DecodedRequests::<DecodedWords>::default();
        let body: &[u8] = br#"["a","b"]"#;
        assert_eq!(words(&memo, body).0, ["a", "b"]);
        // Seen once: not kept yet.
        assert_eq!((memo.kept.len(), memo.seen.len()), (0, 1));
        let (read, second) = words(&memo, body);
        assert_eq!(read, ["a", "b"]);
        assert_eq!(memo.kept.len(), 1);
        let kept = memo.kept.recall(&fingerprint(body)).unwrap();
        assert_eq!(second, kept.request() as *const Words as usize);
        // The third time it is the kept request that answers.
        assert_eq!(words(&memo, body), (read, second));
        // One byte differs: decoded afresh, and kept once seen twice.
        assert_eq!(words(&memo, br#"["a","c"]"#).0, ["a", "c"]);
        assert_eq!(memo.kept.len(), 1);
        assert_eq!(words(&memo, br#"["a","c"]"#).0, ["a", "c"]);
        assert_eq!(memo.kept.len(), 2);
        // A body that does not decode is the decoder's error, and is neither kept nor seen.
        for _ in 0..2 {
            let err = memo.with_request(br#"["a",1]"#, |_| Ok(())).unwrap_err();
            assert_eq!(err.path, "[1]");
        }
        assert_eq!((memo.kept.len(), memo.seen.len()), (2, 2));
        // Debug never shows a request (it may hold Secret values).
        assert_eq!(
            format!("{memo:?}"),
            "DecodedRequests { kept: Recent { len: 2 }, seen: Recent { len: 2 } }"
        );
    }

    #[test]
    fn a_kept_request_under_the_same_fingerprint_is_compared_not_trusted() {
        let memo = DecodedRequests::<DecodedWords>::default();
        let body: &[u8] = br#"["b"]"#;
        let key = fingerprint(body);
        // Another request of the same length kept under body's key, as a fingerprint collision
        // would leave it.
        let collided = Arc::new(DecodedWords::decode(br#"["a"]"#.to_vec().into()).unwrap());
        memo.kept.store(key, Arc::clone(&collided), 10);
        for _ in 0..3 {
            assert_eq!(words(&memo, body).0, ["b"]);
        }
        // The one already under the key stays.
        assert!(Arc::ptr_eq(&memo.kept.recall(&key).unwrap(), &collided));
    }

    #[test]
    fn decoded_requests_are_bounded_by_twice_their_text() {
        let none = DecodedRequests::<DecodedWords>::new(0, 0);
        for _ in 0..3 {
            assert_eq!(words(&none, br#"["a"]"#).0, ["a"]);
        }
        assert_eq!((none.kept.len(), none.seen.len()), (0, 0));
        // Room for two 5-byte requests (10 bytes each as counted), not three.
        let two = DecodedRequests::<DecodedWords>::new(10, 20);
        for body in [br#"["a"]"#, br#"["b"]"#, br#"["c"]"#] {
            words(&two, body);
            words(&two, body);
        }
        assert_eq!(two.kept.len(), 2);
        assert!(two.kept.recall(&fingerprint(br#"["a"]"#)).is_none());
        // A request larger than half the bound is decoded, neither kept nor seen.
        for _ in 0..2 {
            assert_eq!(words(&two, br#"["abcdefgh"]"#).0, ["abcdefgh"]);
        }
        assert_eq!((two.kept.len(), two.seen.len()), (2, 3));
    }

    #[test]
    fn the_fingerprint_reads_every_byte() {
        let body = vec![b' '; 100];
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
