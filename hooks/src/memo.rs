//! What the hooks remember between requests, shared by every request of a server. A memo saves
//! time and never changes an answer: each entry is found by SHA-256 over every input byte it was
//! made from, so an input that differs in any byte is worked out afresh.

use crate::delete_graph::plan::PlanMemo;
use crate::pki::PkiMemo;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// Every memo of a server: the certificate checks of cert-rotation and the spec plans of
/// delete-graph.
#[derive(Debug, Default)]
pub struct Memo {
    pub pki: PkiMemo,
    pub plans: PlanMemo,
}

/// The most recently used values, each found by the SHA-256 digest of what it was made from.
/// Bounded twice: at most `max_entries` values, and at most `max_bytes` of their sizes as the
/// caller counts them; the least recently used go first.
pub struct Recent<V> {
    entries: Mutex<VecDeque<Entry<V>>>,
    max_entries: usize,
    max_bytes: usize,
}

struct Entry<V> {
    digest: [u8; 32],
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

    /// The value stored under `digest`, now the most recently used.
    pub fn recall(&self, digest: &[u8; 32]) -> Option<Arc<V>> {
        let mut entries = self.lock();
        let at = entries.iter().position(|e| e.digest == *digest)?;
        let entry = entries.remove(at)?;
        let value = Arc::clone(&entry.value);
        entries.push_front(entry);
        Some(value)
    }

    /// Stores `value` under `digest` as the most recently used, unless it alone is larger than
    /// the byte bound or another request stored the same digest meanwhile; then drops the least
    /// recently used until both bounds hold.
    pub fn store(&self, digest: [u8; 32], value: Arc<V>, bytes: usize) {
        if bytes > self.max_bytes {
            return;
        }
        let mut entries = self.lock();
        if entries.iter().any(|e| e.digest == digest) {
            return;
        }
        entries.push_front(Entry {
            digest,
            value,
            bytes,
        });
        let mut total: usize = entries.iter().map(|e| e.bytes).sum();
        while entries.len() > self.max_entries || total > self.max_bytes {
            let Some(dropped) = entries.pop_back() else {
                break;
            };
            total -= dropped.bytes;
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn digest(n: u8) -> [u8; 32] {
        [n; 32]
    }

    #[test]
    fn recall_finds_what_was_stored_and_nothing_else() {
        let recent = Recent::new(4, 100);
        recent.store(digest(1), Arc::new("one"), 10);
        assert_eq!(recent.recall(&digest(1)).as_deref(), Some(&"one"));
        assert_eq!(recent.recall(&digest(2)), None);
        // A second store under the same digest keeps the first value.
        recent.store(digest(1), Arc::new("other"), 10);
        assert_eq!(recent.recall(&digest(1)).as_deref(), Some(&"one"));
        assert_eq!(recent.len(), 1);
        // Debug shows the count, never a value (a remembered CA holds its key).
        assert_eq!(format!("{recent:?}"), "Recent { len: 1 }");
    }

    #[test]
    fn the_least_recently_used_go_first_when_entries_run_out() {
        let recent = Recent::new(2, 100);
        recent.store(digest(1), Arc::new(1), 1);
        recent.store(digest(2), Arc::new(2), 1);
        // Using 1 makes 2 the least recently used.
        assert!(recent.recall(&digest(1)).is_some());
        recent.store(digest(3), Arc::new(3), 1);
        assert_eq!(recent.len(), 2);
        assert!(recent.recall(&digest(2)).is_none());
        assert!(recent.recall(&digest(1)).is_some());
        assert!(recent.recall(&digest(3)).is_some());
    }

    #[test]
    fn the_byte_bound_drops_old_values_and_refuses_one_too_large() {
        let recent = Recent::new(10, 100);
        recent.store(digest(1), Arc::new(1), 60);
        recent.store(digest(2), Arc::new(2), 30);
        recent.store(digest(3), Arc::new(3), 30);
        // 120 bytes would exceed the bound: the oldest (60) goes.
        assert!(recent.recall(&digest(1)).is_none());
        assert_eq!(recent.len(), 2);
        recent.store(digest(4), Arc::new(4), 101);
        assert!(recent.recall(&digest(4)).is_none());
        assert_eq!(recent.len(), 2);
        // The bound itself is allowed: a value of exactly 100 bytes is kept, alone.
        recent.store(digest(5), Arc::new(5), 100);
        assert!(recent.recall(&digest(5)).is_some());
        assert_eq!(recent.len(), 1);
        // And so are values that fill it exactly together.
        let recent = Recent::new(10, 100);
        recent.store(digest(1), Arc::new(1), 40);
        recent.store(digest(2), Arc::new(2), 60);
        assert_eq!(recent.len(), 2);
    }
}
