//! The WorkloadSet spec: validation in the order of delete-graph.md §9, the cycle check ported
//! step for step, and the typed workloads a valid spec yields.

use crate::json::{Json, JsonObject, NULL};
use crate::meta::{is_dns1123_label, write_json_str};
use foldhash::HashMap;

/// An add condition: what a dependency's state must be before the dependent starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddCondition {
    Running,
    Succeeded,
    Failed,
}

impl AddCondition {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ADD_COND_RUNNING" => Some(AddCondition::Running),
            "ADD_COND_SUCCEEDED" => Some(AddCondition::Succeeded),
            "ADD_COND_FAILED" => Some(AddCondition::Failed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AddCondition::Running => "ADD_COND_RUNNING",
            AddCondition::Succeeded => "ADD_COND_SUCCEEDED",
            AddCondition::Failed => "ADD_COND_FAILED",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    Never,
    OnFailure,
    Always,
}

impl RestartPolicy {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "NEVER" => Some(RestartPolicy::Never),
            "ON_FAILURE" => Some(RestartPolicy::OnFailure),
            "ALWAYS" => Some(RestartPolicy::Always),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RestartPolicy::Never => "NEVER",
            RestartPolicy::OnFailure => "ON_FAILURE",
            RestartPolicy::Always => "ALWAYS",
        }
    }

    /// The Pod's `spec.restartPolicy`.
    pub fn pod_value(self) -> &'static str {
        match self {
            RestartPolicy::Never => "Never",
            RestartPolicy::OnFailure => "OnFailure",
            RestartPolicy::Always => "Always",
        }
    }

    /// Whether a dependency with this policy can ever meet `cond` (§6.4).
    pub fn can_reach(self, cond: AddCondition) -> bool {
        !matches!(
            (self, cond),
            (RestartPolicy::Always, AddCondition::Succeeded)
                | (RestartPolicy::Always, AddCondition::Failed)
                | (RestartPolicy::OnFailure, AddCondition::Failed)
        )
    }
}

/// One workload of a valid spec.
#[derive(Debug)]
pub struct Workload<'a> {
    pub name: &'a str,
    /// Sorted by dependency name.
    pub dependencies: Vec<(&'a str, AddCondition)>,
    pub restart_policy: RestartPolicy,
    pub template: &'a JsonObject<'a>,
}

impl Workload<'_> {
    /// Canonical JSON of the dependencies as written in the spec (`{}` when none): the value of
    /// the `metahooks.dev/dependencies` annotation.
    pub fn dependencies_annotation(&self) -> String {
        // Already sorted by name, each name once (they are the keys of an object).
        let mut out = String::from("{");
        for (i, (dep, cond)) in self.dependencies.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_json_str(dep, &mut out);
            out.push(':');
            write_json_str(cond.as_str(), &mut out);
        }
        out.push('}');
        out
    }
}

/// Why a spec is invalid: the reason of the `Valid` condition and the denial message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub cycle: bool,
    pub message: String,
}

impl Invalid {
    pub fn reason(&self) -> &'static str {
        if self.cycle {
            "CycleInDependencies"
        } else {
            "InvalidSpec"
        }
    }
}

/// The outcome of validating a spec.
#[derive(Debug)]
pub struct Validated<'a> {
    /// Sorted by name; complete only when `invalid` is `None`.
    pub workloads: Vec<Workload<'a>>,
    pub invalid: Option<Invalid>,
}

/// Validates `spec` (the WorkloadSet's `spec` value) for a set named `set_name`.
pub fn validate<'a>(spec: &'a Json<'a>, set_name: &str) -> Validated<'a> {
    let mut problems = Vec::new();
    // A spec that is neither an object nor null stands in for its `workloads`: not an object.
    let workloads_value = match spec {
        Json::Object(spec) => spec.get("workloads").unwrap_or(&NULL),
        other => other,
    };
    // An object's members come sorted by name.
    let entries: Vec<(&'a str, &'a Json<'a>)> = match workloads_value {
        Json::Null => Vec::new(),
        Json::Object(map) => map.iter().collect(),
        _ => {
            return Validated {
                workloads: Vec::new(),
                invalid: Some(Invalid {
                    cycle: false,
                    message: "spec.workloads must be an object".into(),
                }),
            }
        }
    };

    let mut workloads = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        if !is_dns1123_label(name) {
            problems.push(format!("workload name '{name}' is not a DNS-1123 label"));
        }
        let field = |key: &str| value.get(key).filter(|v| !v.is_null());

        let mut dependencies = Vec::new();
        match field("dependencies") {
            None => {}
            Some(Json::Object(deps)) => {
                for (dep, cond) in deps.iter() {
                    if !is_dns1123_label(dep) {
                        problems.push(format!(
                            "workload '{name}': dependency name '{dep}' is not a DNS-1123 label"
                        ));
                    }
                    match cond.as_str().and_then(AddCondition::parse) {
                        Some(c) => dependencies.push((dep, c)),
                        None => problems.push(format!(
                            "workload '{name}': dependency '{dep}' has unknown condition '{}' (expected ADD_COND_RUNNING, ADD_COND_SUCCEEDED or ADD_COND_FAILED)",
                            text_of(cond)
                        )),
                    }
                }
            }
            Some(_) => problems.push(format!("workload '{name}': dependencies must be an object")),
        }

        let restart_policy = match field("restartPolicy") {
            None => RestartPolicy::Never,
            Some(v) => match v.as_str().and_then(RestartPolicy::parse) {
                Some(p) => p,
                None => {
                    problems.push(format!(
                        "workload '{name}': unknown restartPolicy '{}' (expected NEVER, ON_FAILURE or ALWAYS)",
                        text_of(v)
                    ));
                    RestartPolicy::Never
                }
            },
        };

        match field("template") {
            Some(Json::Object(template)) => {
                let containers = template
                    .get("spec")
                    .and_then(|s| s.get("containers"))
                    .and_then(Json::as_array);
                if containers.is_none_or(|c| c.is_empty()) {
                    problems.push(format!(
                        "workload '{name}': template.spec.containers must be a non-empty list"
                    ));
                }
                if set_name.len() + name.len() + 12 > 253 {
                    problems.push(format!(
                        "workload '{name}': Pod name would exceed 253 characters"
                    ));
                }
                workloads.push(Workload {
                    name,
                    dependencies,
                    restart_policy,
                    template,
                });
            }
            _ => problems.push(format!("workload '{name}': template is missing")),
        }
    }

    let invalid = if !problems.is_empty() {
        Some(Invalid {
            cycle: false,
            message: problems.join("; "),
        })
    } else {
        find_cycle(&workloads).map(|name| Invalid {
            cycle: true,
            message: format!("workload dependency '{name}' is part of a cycle."),
        })
    };
    Validated { workloads, invalid }
}

/// A string as itself, anything else as its JSON text.
fn text_of(v: &Json) -> String {
    match v {
        Json::String(s) => s.to_string(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// The cycle check of §9, step for step: a depth-first walk from every workload in ascending
/// order with a shared visited set and path; returns the name the procedure reports.
pub fn find_cycle(workloads: &[Workload]) -> Option<String> {
    let index: HashMap<&str, usize> = workloads
        .iter()
        .enumerate()
        .map(|(i, w)| (w.name, i))
        .collect();
    let mut visited = vec![false; workloads.len()];
    let mut on_path = vec![false; workloads.len()];
    let mut path: Vec<usize> = Vec::new();
    let mut start_order: Vec<usize> = (0..workloads.len()).collect();
    start_order.sort_unstable_by(|a, b| workloads[*a].name.cmp(workloads[*b].name));

    for start in start_order {
        if visited[start] {
            continue;
        }
        // Stack entries are names: a dangling edge puts a name that is no workload on the stack.
        let mut stack: Vec<&str> = vec![workloads[start].name];
        while let Some(&top) = stack.last() {
            let Some(&h) = index.get(top) else {
                stack.pop();
                continue;
            };
            if !visited[h] {
                visited[h] = true;
                path.push(h);
                on_path[h] = true;
            } else {
                if let Some(last) = path.pop() {
                    on_path[last] = false;
                }
                stack.pop();
            }
            for (dep, _) in &workloads[h].dependencies {
                match index.get(dep) {
                    Some(&d) if visited[d] => {
                        if on_path[d] {
                            return Some((*dep).to_owned());
                        }
                    }
                    _ => stack.push(dep),
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Map, Value};

    fn container() -> Value {
        json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    }

    fn spec(deps: &[(&str, &[(&str, &str)])]) -> Json<'static> {
        let mut workloads = Map::new();
        for (name, d) in deps {
            let d: Map<String, Value> = d.iter().map(|(k, v)| ((*k).into(), json!(v))).collect();
            workloads.insert(
                (*name).into(),
                json!({"dependencies": d, "template": container()}),
            );
        }
        Json::from(json!({ "workloads": workloads }))
    }

    #[test]
    fn rule_9_acyclic_chain_is_valid() {
        let s = spec(&[
            ("a", &[("b", "ADD_COND_RUNNING")]),
            ("b", &[("c", "ADD_COND_SUCCEEDED")]),
            ("c", &[]),
        ]);
        let v = validate(&s, "set");
        assert_eq!(v.invalid, None);
        assert_eq!(v.workloads.len(), 3);
    }

    #[test]
    fn rule_9_self_dependency_reports_itself() {
        let s = spec(&[("a", &[("a", "ADD_COND_RUNNING")])]);
        let v = validate(&s, "set");
        assert_eq!(
            v.invalid.unwrap().message,
            "workload dependency 'a' is part of a cycle."
        );
    }

    #[test]
    fn rule_9_cycle_reports_the_dependency_closing_it() {
        // a -> b -> c -> a: the walk from a reaches c, whose dependency a is on the path.
        let s = spec(&[
            ("a", &[("b", "ADD_COND_RUNNING")]),
            ("b", &[("c", "ADD_COND_FAILED")]),
            ("c", &[("a", "ADD_COND_SUCCEEDED")]),
        ]);
        let invalid = validate(&s, "set").invalid.unwrap();
        assert!(invalid.cycle);
        assert_eq!(
            invalid.message,
            "workload dependency 'a' is part of a cycle."
        );
    }

    #[test]
    fn rule_9_cycle_not_through_the_start_node() {
        // a -> b, b -> c, c -> b: reported name is b.
        let s = spec(&[
            ("a", &[("b", "ADD_COND_RUNNING")]),
            ("b", &[("c", "ADD_COND_RUNNING")]),
            ("c", &[("b", "ADD_COND_RUNNING")]),
        ]);
        assert_eq!(
            validate(&s, "set").invalid.unwrap().message,
            "workload dependency 'b' is part of a cycle."
        );
    }

    #[test]
    fn rule_9_dangling_edge_is_no_cycle() {
        let s = spec(&[("a", &[("ghost", "ADD_COND_RUNNING")])]);
        assert_eq!(validate(&s, "set").invalid, None);
    }

    #[test]
    fn rule_9_diamond_is_no_cycle() {
        let s = spec(&[
            ("a", &[("b", "ADD_COND_RUNNING"), ("c", "ADD_COND_RUNNING")]),
            ("b", &[("d", "ADD_COND_RUNNING")]),
            ("c", &[("d", "ADD_COND_RUNNING")]),
            ("d", &[]),
        ]);
        assert_eq!(validate(&s, "set").invalid, None);
    }

    #[test]
    fn rule_9_problems_in_order_joined() {
        let s = Json::from(json!({"workloads": {
            "b": {"dependencies": {"X": "ADD_COND_NOPE"}, "restartPolicy": "SOMETIMES", "template": {"spec": {"containers": []}}},
            "A": {"template": "x"},
        }}));
        let invalid = validate(&s, "set").invalid.unwrap();
        assert!(!invalid.cycle);
        assert_eq!(
            invalid.message,
            "workload name 'A' is not a DNS-1123 label; \
             workload 'A': template is missing; \
             workload 'b': dependency name 'X' is not a DNS-1123 label; \
             workload 'b': dependency 'X' has unknown condition 'ADD_COND_NOPE' (expected ADD_COND_RUNNING, ADD_COND_SUCCEEDED or ADD_COND_FAILED); \
             workload 'b': unknown restartPolicy 'SOMETIMES' (expected NEVER, ON_FAILURE or ALWAYS); \
             workload 'b': template.spec.containers must be a non-empty list"
        );
    }

    #[test]
    fn rule_9_workloads_not_an_object_and_deps_not_an_object() {
        let s = Json::from(json!({"workloads": []}));
        let v = validate(&s, "s");
        assert_eq!(
            v.invalid.unwrap().message,
            "spec.workloads must be an object"
        );
        let s =
            Json::from(json!({"workloads": {"a": {"dependencies": [], "template": container()}}}));
        let v = validate(&s, "s");
        assert_eq!(
            v.invalid.unwrap().message,
            "workload 'a': dependencies must be an object"
        );
    }

    #[test]
    fn rule_9_pod_name_length() {
        let long = "s".repeat(242);
        let s = spec(&[("a", &[])]);
        let v = validate(&s, &long);
        assert_eq!(
            v.invalid.unwrap().message,
            "workload 'a': Pod name would exceed 253 characters"
        );
        // `<set>-<workload>-<10 hex>` of exactly 253 characters is allowed, one more is not.
        let s = spec(&[("ab", &[])]);
        assert!(validate(&s, &"s".repeat(239)).invalid.is_none());
        assert!(validate(&s, &"s".repeat(240)).invalid.is_some());
    }

    #[test]
    fn rule_3_dependencies_annotation_lists_each_dependency_once_in_name_order() {
        let s = Json::from(json!({"workloads": {"c": {"template": container(),
            "dependencies": {"b": "ADD_COND_RUNNING", "a": "ADD_COND_FAILED"}}}}));
        let v = validate(&s, "s");
        assert_eq!(
            v.workloads[0].dependencies_annotation(),
            r#"{"a":"ADD_COND_FAILED","b":"ADD_COND_RUNNING"}"#
        );
    }

    #[test]
    fn rule_2_missing_workloads_means_none() {
        let s = Json::from(json!({}));
        let v = validate(&s, "s");
        assert!(v.invalid.is_none() && v.workloads.is_empty());
    }
}
