//! The delete graph: for every `ADD_COND_RUNNING` edge "X needs D", the reverse entry D -> X with
//! the delete condition `DelCondNotPendingNorRunning` (§4). A spec's edges are worked out once
//! with its plan; a sync adds those of obsolete Pods' annotations to a copy only when they are new.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

/// The only delete condition used.
pub const NOT_PENDING_NOR_RUNNING: &str = "DelCondNotPendingNorRunning";

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DeleteGraph {
    /// (dependency, RUNNING-dependent) pairs, sorted, each once: a plan keeps its graph for as
    /// long as it is remembered, and a flat list takes a fraction of the memory of nested maps.
    edges: Vec<(String, String)>,
}

impl DeleteGraph {
    /// Whether `dependent` is recorded as needing `dependency`.
    pub fn contains(&self, dependency: &str, dependent: &str) -> bool {
        self.edges
            .binary_search_by(|(d, x)| (d.as_str(), x.as_str()).cmp(&(dependency, dependent)))
            .is_ok()
    }

    /// The workloads whose Pods hold back the deletion of `dependency`'s Pods, in name order.
    pub fn dependents<'a>(&'a self, dependency: &str) -> impl Iterator<Item = &'a str> + 'a {
        let start = self.edges.partition_point(|(d, _)| d.as_str() < dependency);
        let len = self.edges[start..].partition_point(|(d, _)| d == dependency);
        self.edges[start..start + len]
            .iter()
            .map(|(_, x)| x.as_str())
    }

    /// Strongly connected components of the graph restricted to `nodes` (Tarjan, iterative):
    /// maps each of `nodes` to a component id.
    pub fn components<'a>(&'a self, nodes: &HashSet<&'a str>) -> HashMap<&'a str, usize> {
        let succ = |n: &str| -> Vec<&'a str> {
            self.dependents(n).filter(|x| nodes.contains(x)).collect()
        };
        let mut order: Vec<&'a str> = nodes.iter().copied().collect();
        order.sort_unstable();
        let mut index: HashMap<&'a str, usize> = HashMap::new();
        let mut low: HashMap<&'a str, usize> = HashMap::new();
        let mut on_stack: HashSet<&'a str> = HashSet::new();
        let mut stack: Vec<&'a str> = Vec::new();
        let mut component: HashMap<&'a str, usize> = HashMap::new();
        let mut next_index = 0;
        let mut next_component = 0;

        for root in order {
            if index.contains_key(root) {
                continue;
            }
            // Each frame: node and its successors still to look at.
            let mut frames: Vec<(&'a str, Vec<&'a str>)> = Vec::new();
            index.insert(root, next_index);
            low.insert(root, next_index);
            next_index += 1;
            stack.push(root);
            on_stack.insert(root);
            frames.push((root, succ(root)));
            while let Some((node, pending)) = frames.last_mut() {
                let node = *node;
                if let Some(next) = pending.pop() {
                    if !index.contains_key(next) {
                        index.insert(next, next_index);
                        low.insert(next, next_index);
                        next_index += 1;
                        stack.push(next);
                        on_stack.insert(next);
                        frames.push((next, succ(next)));
                    } else if on_stack.contains(next) {
                        let l = low[node].min(index[next]);
                        low.insert(node, l);
                    }
                } else {
                    frames.pop();
                    if let Some((parent, _)) = frames.last() {
                        let l = low[*parent].min(low[node]);
                        low.insert(*parent, l);
                    }
                    if low[node] == index[node] {
                        while let Some(member) = stack.pop() {
                            on_stack.remove(member);
                            component.insert(member, next_component);
                            if member == node {
                                break;
                            }
                        }
                        next_component += 1;
                    }
                }
            }
        }
        component
    }
}

/// Records edges `(dependency, dependent)`, in any order and with repeats: `dependent` needs
/// `dependency` running, so `dependency` may go only when no Pod of `dependent` is pending or
/// running. Sorted once per call, not once per edge.
impl<'e> Extend<(&'e str, &'e str)> for DeleteGraph {
    fn extend<I: IntoIterator<Item = (&'e str, &'e str)>>(&mut self, edges: I) {
        self.edges
            .extend(edges.into_iter().map(|(d, x)| (d.to_owned(), x.to_owned())));
        self.edges.sort_unstable();
        self.edges.dedup();
    }
}

/// The graph of a spec's edges, sized to fit: a plan keeps it as long as it is remembered.
impl<'e> FromIterator<(&'e str, &'e str)> for DeleteGraph {
    fn from_iter<I: IntoIterator<Item = (&'e str, &'e str)>>(edges: I) -> Self {
        let mut graph = DeleteGraph::default();
        graph.extend(edges);
        graph.edges.shrink_to_fit();
        graph
    }
}

/// `{<dependency>: {<dependent>: DelCondNotPendingNorRunning}}`, sorted.
impl Serialize for DeleteGraph {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        /// The edges of one dependency.
        struct Dependents<'a>(&'a [(String, String)]);
        impl Serialize for Dependents<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(self.0.len()))?;
                for (_, x) in self.0 {
                    map.serialize_entry(x, NOT_PENDING_NOR_RUNNING)?;
                }
                map.end()
            }
        }
        let by_dependency = || self.edges.chunk_by(|a, b| a.0 == b.0);
        let mut map = s.serialize_map(Some(by_dependency().count()))?;
        for edges in by_dependency() {
            map.serialize_entry(&edges[0].0, &Dependents(edges))?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_4_repeated_edges_count_once_and_dependents_are_sorted() {
        let g: DeleteGraph = [
            ("db", "backend"),
            ("db", "backend"),
            ("db", "admin"),
            ("backend", "frontend"),
        ]
        .into_iter()
        .collect();
        assert_eq!(g.dependents("db").collect::<Vec<_>>(), ["admin", "backend"]);
        assert_eq!(g.dependents("frontend").count(), 0);
        assert_eq!(
            serde_json::to_value(&g).unwrap(),
            serde_json::json!({
                "backend": {"frontend": "DelCondNotPendingNorRunning"},
                "db": {"admin": "DelCondNotPendingNorRunning", "backend": "DelCondNotPendingNorRunning"}
            })
        );
    }

    /// Edges added in several goes, in any order and with repeats, make the graph that all of
    /// them collected at once make: same edges, same lookups, same JSON.
    #[test]
    fn rule_4_edges_added_in_parts_make_the_collected_graph() {
        let edges = [
            ("db", "backend"),
            ("cache", "frontend"),
            ("db", "admin"),
            ("db", "backend"),
            ("backend", "frontend"),
        ];
        let collected: DeleteGraph = edges.into_iter().collect();
        let mut extended: DeleteGraph = edges[3..].iter().copied().collect();
        extended.extend(edges[..3].iter().copied());
        extended.extend([("cache", "frontend")]);
        assert_eq!(collected, extended);
        assert!(collected.contains("db", "admin"));
        assert!(!collected.contains("admin", "db"));
        assert_eq!(
            collected.dependents("db").collect::<Vec<_>>(),
            ["admin", "backend"]
        );
        assert_eq!(collected.dependents("c").count(), 0);
        assert_eq!(
            serde_json::to_string(&collected).unwrap(),
            r#"{"backend":{"frontend":"DelCondNotPendingNorRunning"},"cache":{"frontend":"DelCondNotPendingNorRunning"},"db":{"admin":"DelCondNotPendingNorRunning","backend":"DelCondNotPendingNorRunning"}}"#
        );
    }

    #[test]
    fn rule_4_empty_graph_serializes_as_empty_object() {
        assert_eq!(
            serde_json::to_string(&DeleteGraph::default()).unwrap(),
            "{}"
        );
    }

    #[test]
    fn rule_5_components_find_loops_only_inside_the_node_set() {
        let g: DeleteGraph = [("a", "b"), ("b", "a"), ("b", "c"), ("c", "d"), ("d", "c")]
            .into_iter()
            .collect();
        let all: HashSet<&str> = ["a", "b", "c", "d"].into_iter().collect();
        let comp = g.components(&all);
        assert_eq!(comp["a"], comp["b"]);
        assert_eq!(comp["c"], comp["d"]);
        assert_ne!(comp["a"], comp["c"]);
        // Restricted to {a, c, d}: a is alone.
        let some: HashSet<&str> = ["a", "c", "d"].into_iter().collect();
        let comp = g.components(&some);
        assert_eq!(comp.len(), 3);
        assert_ne!(comp["a"], comp["c"]);
        assert_eq!(comp["c"], comp["d"]);
    }
}
