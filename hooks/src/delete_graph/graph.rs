//! The delete graph: for every `ADD_COND_RUNNING` edge "X needs D", the reverse entry D -> X with
//! the delete condition `DelCondNotPendingNorRunning`. Rebuilt on every call (§4).

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

/// The only delete condition used.
pub const NOT_PENDING_NOR_RUNNING: &str = "DelCondNotPendingNorRunning";

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DeleteGraph {
    /// dependency -> its RUNNING-dependents.
    edges: BTreeMap<String, BTreeSet<String>>,
}

impl DeleteGraph {
    /// Records that `dependent` needs `dependency` running: `dependency` may go only when no Pod of
    /// `dependent` is pending or running.
    pub fn insert(&mut self, dependency: &str, dependent: &str) {
        if let Some(set) = self.edges.get_mut(dependency) {
            if !set.contains(dependent) {
                set.insert(dependent.to_owned());
            }
        } else {
            self.edges.insert(
                dependency.to_owned(),
                BTreeSet::from([dependent.to_owned()]),
            );
        }
    }

    /// The workloads whose Pods hold back the deletion of `dependency`'s Pods.
    pub fn dependents<'a>(&'a self, dependency: &str) -> impl Iterator<Item = &'a str> + 'a {
        self.edges
            .get(dependency)
            .into_iter()
            .flat_map(|s| s.iter().map(String::as_str))
    }

    /// Strongly connected components of the graph restricted to `nodes` (Tarjan, iterative):
    /// maps each of `nodes` to a component id.
    pub fn components<'a>(&'a self, nodes: &HashSet<&'a str>) -> HashMap<&'a str, usize> {
        let succ = |n: &str| -> Vec<&'a str> {
            self.edges
                .get_key_value(n)
                .map(|(_, s)| {
                    s.iter()
                        .map(String::as_str)
                        .filter(|x| nodes.contains(x))
                        .collect()
                })
                .unwrap_or_default()
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

/// `{<dependency>: {<dependent>: DelCondNotPendingNorRunning}}`, sorted.
impl Serialize for DeleteGraph {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Dependents<'a>(&'a BTreeSet<String>);
        impl Serialize for Dependents<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let mut map = s.serialize_map(Some(self.0.len()))?;
                for d in self.0 {
                    map.serialize_entry(d, NOT_PENDING_NOR_RUNNING)?;
                }
                map.end()
            }
        }
        let mut map = s.serialize_map(Some(self.edges.len()))?;
        for (dep, dependents) in &self.edges {
            map.serialize_entry(dep, &Dependents(dependents))?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_4_insert_and_lookup_of_dependents() {
        let mut g = DeleteGraph::default();
        g.insert("db", "backend");
        g.insert("db", "backend");
        g.insert("db", "admin");
        g.insert("backend", "frontend");
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

    #[test]
    fn rule_4_empty_graph_serializes_as_empty_object() {
        assert_eq!(
            serde_json::to_string(&DeleteGraph::default()).unwrap(),
            "{}"
        );
    }

    #[test]
    fn rule_5_components_find_loops_only_inside_the_node_set() {
        let mut g = DeleteGraph::default();
        g.insert("a", "b");
        g.insert("b", "a");
        g.insert("b", "c");
        g.insert("c", "d");
        g.insert("d", "c");
        let all: HashSet<&str> = ["a", "b", "c", "d"].into();
        let comp = g.components(&all);
        assert_eq!(comp["a"], comp["b"]);
        assert_eq!(comp["c"], comp["d"]);
        assert_ne!(comp["a"], comp["c"]);
        // Restricted to {a, c, d}: a is alone.
        let some: HashSet<&str> = ["a", "c", "d"].into();
        let comp = g.components(&some);
        assert_eq!(comp.len(), 3);
        assert_ne!(comp["a"], comp["c"]);
        assert_eq!(comp["c"], comp["d"]);
    }
}
