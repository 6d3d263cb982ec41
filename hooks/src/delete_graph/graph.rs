//! The delete graph: for every `ADD_COND_RUNNING` edge "X needs D", the reverse entry D -> X with
//! the delete condition `DelCondNotPendingNorRunning` (§4). A spec's edges are worked out once
//! with its plan; a sync adds those of obsolete Pods' annotations to a copy only when they are new.

use std::ops::Range;

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

    /// Strongly connected components of the graph restricted to the nodes of `set` (Tarjan,
    /// iterative, over the nodes' places in their sorted list rather than hash maps of names).
    pub fn components<'a>(&self, set: impl IntoIterator<Item = &'a str>) -> Components<'a> {
        let set = set.into_iter();
        let mut nodes: Vec<&'a str> = Vec::with_capacity(set.size_hint().1.unwrap_or(0));
        nodes.extend(set);
        if nodes.is_empty() {
            return Components::default();
        }
        nodes.sort_unstable();
        nodes.dedup();
        let n = nodes.len();
        // The successors of node `v` inside the set: `targets[starts[v]..starts[v + 1]]`.
        let mut starts = Vec::with_capacity(n + 1);
        let mut targets = Vec::with_capacity(n);
        for &node in &nodes {
            starts.push(targets.len());
            targets.extend(
                self.dependents(node)
                    .filter_map(|x| nodes.binary_search(&x).ok()),
            );
        }
        starts.push(targets.len());

        // The order each node was reached in, once it has been.
        let mut index: Vec<Option<usize>> = vec![None; n];
        let mut low = vec![0; n];
        let mut on_stack = vec![false; n];
        let mut ids = vec![0; n];
        let mut stack = Vec::with_capacity(n);
        // Each frame: a node and the places in `targets` of the successors it has yet to look at.
        let mut frames: Vec<(usize, Range<usize>)> = Vec::with_capacity(n);
        let mut next_index = 0;
        let mut next_id = 0;
        for root in 0..n {
            if index[root].is_some() {
                continue;
            }
            let mut entering = Some(root);
            loop {
                if let Some(v) = entering.take() {
                    index[v] = Some(next_index);
                    low[v] = next_index;
                    next_index += 1;
                    stack.push(v);
                    on_stack[v] = true;
                    frames.push((v, starts[v]..starts[v + 1]));
                }
                let Some((v, successors)) = frames.last_mut() else {
                    break;
                };
                let v = *v;
                if let Some(place) = successors.next() {
                    let w = targets[place];
                    match index[w] {
                        None => entering = Some(w),
                        Some(reached) if on_stack[w] => low[v] = low[v].min(reached),
                        Some(_) => {}
                    }
                    continue;
                }
                frames.pop();
                if let Some(&(parent, _)) = frames.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if index[v] == Some(low[v]) {
                    while let Some(member) = stack.pop() {
                        on_stack[member] = false;
                        ids[member] = next_id;
                        if member == v {
                            break;
                        }
                    }
                    next_id += 1;
                }
            }
        }
        Components { nodes, ids }
    }
}

/// The strongly connected components of a graph restricted to a set of nodes: which of them lie
/// on one loop of edges inside the set.
#[derive(Debug, Default)]
pub struct Components<'a> {
    /// The set's nodes, sorted, each once.
    nodes: Vec<&'a str>,
    /// The component of each node, by its place in `nodes`.
    ids: Vec<usize>,
}

impl Components<'_> {
    /// Whether `a` and `b` are both in the set and in one component.
    pub fn same(&self, a: &str, b: &str) -> bool {
        let id = |x: &str| self.nodes.binary_search(&x).ok().map(|i| self.ids[i]);
        matches!((id(a), id(b)), (Some(a), Some(b)) if a == b)
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
        let all = g.components(["a", "b", "c", "d"]);
        assert!(all.same("a", "b"));
        assert!(all.same("c", "d"));
        assert!(!all.same("a", "c"));
        assert!(!all.same("b", "d"));
        assert!(
            !all.same("a", "e"),
            "a node outside the set is in no component"
        );
        // Restricted to {a, c, d}: a is alone, b in no component.
        let some = g.components(["d", "a", "c", "c"]);
        assert!(some.same("a", "a"));
        assert!(!some.same("a", "b"));
        assert!(!some.same("b", "b"));
        assert!(!some.same("a", "c"));
        assert!(some.same("c", "d"));
    }

    /// On graphs made at random, two nodes of the set share a component exactly when each
    /// reaches the other through nodes of the set.
    #[test]
    fn rule_5_components_are_the_sets_of_mutually_reachable_nodes() {
        let names: Vec<String> = (0..9).map(|i| format!("w-{i}")).collect();
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..200 {
            let edges: Vec<(&str, &str)> = (0..(next() % 20))
                .map(|_| {
                    let d = &names[(next() % 9) as usize];
                    let x = &names[(next() % 9) as usize];
                    (d.as_str(), x.as_str())
                })
                .collect();
            let graph: DeleteGraph = edges.iter().copied().collect();
            let set: Vec<&str> = names
                .iter()
                .filter(|_| next() % 4 != 0)
                .map(String::as_str)
                .collect();
            // Reachability inside the set, by closing the edge relation.
            let place = |x: &str| set.iter().position(|&n| n == x);
            let mut reach = vec![vec![false; set.len()]; set.len()];
            for (i, row) in reach.iter_mut().enumerate() {
                row[i] = true;
            }
            for &(d, x) in &edges {
                if let (Some(d), Some(x)) = (place(d), place(x)) {
                    reach[d][x] = true;
                }
            }
            for k in 0..set.len() {
                for i in 0..set.len() {
                    for j in 0..set.len() {
                        reach[i][j] |= reach[i][k] && reach[k][j];
                    }
                }
            }
            let components = graph.components(set.iter().copied());
            for (i, a) in set.iter().enumerate() {
                for (j, b) in set.iter().enumerate() {
                    assert_eq!(
                        components.same(a, b),
                        reach[i][j] && reach[j][i],
                        "round {round}: {a} and {b} in {edges:?} restricted to {set:?}"
                    );
                }
            }
        }
    }
}
