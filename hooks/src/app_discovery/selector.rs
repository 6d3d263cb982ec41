//! The AppDiscovery's `spec.selector` as Metacontroller reads it (a metav1.LabelSelector): the
//! children it adopts and the desired children it lets through. Metacontroller fails a whole
//! sync when a desired child's labels do not match it (contract §5, step 8) and writes no
//! status then, so the hook checks the labels of what it would write against it first. It also
//! adopts every orphan the selector selects, so the hook checks that it selects only objects
//! labelled `managed-by: keptn`, never the KeptnApps users made.

use crate::contract::{Strings, Text};
use crate::json::Json;
use crate::meta::LABEL_MANAGED_BY;

/// One `matchExpressions` entry.
#[derive(Debug)]
struct Expression<'a> {
    key: &'a str,
    operator: Operator,
    values: Vec<&'a str>,
}

#[derive(Debug, Clone, Copy)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

/// A selector read whole: its `matchLabels` and `matchExpressions`, each as written.
#[derive(Debug, Default)]
pub struct Selector<'a> {
    match_labels: Vec<(&'a str, &'a str)>,
    expressions: Vec<Expression<'a>>,
}

impl<'a> Selector<'a> {
    /// Reads `spec.selector`; null or absent is the CRD's default, which the API server stores
    /// for it (`matchLabels: {app.kubernetes.io/managed-by: keptn}`), as an absent
    /// `timeoutSeconds` is read as its default. The error names the field Metacontroller could
    /// not read as a label selector.
    pub fn parse(selector: &'a Json<'a>) -> Result<Self, String> {
        let selector = match selector {
            Json::Null => {
                return Ok(Selector {
                    match_labels: vec![(LABEL_MANAGED_BY, "keptn")],
                    expressions: Vec::new(),
                })
            }
            Json::Object(selector) => selector,
            _ => return Err("spec.selector must be an object".into()),
        };
        let mut parsed = Selector::default();
        match selector.get("matchLabels") {
            None | Some(Json::Null) => {}
            Some(Json::Object(labels)) => {
                for (key, value) in labels.iter() {
                    let Some(value) = value.as_str() else {
                        return Err(format!("spec.selector.matchLabels.{key} must be a string"));
                    };
                    parsed.match_labels.push((key, value));
                }
            }
            Some(_) => return Err("spec.selector.matchLabels must be an object".into()),
        }
        match selector.get("matchExpressions") {
            None | Some(Json::Null) => {}
            Some(Json::Array(expressions)) => {
                for (i, expression) in expressions.iter().enumerate() {
                    parsed.expressions.push(expression_of(expression, i)?);
                }
            }
            Some(_) => return Err("spec.selector.matchExpressions must be a list".into()),
        }
        Ok(parsed)
    }

    /// The labels of a KeptnApp the hook makes (§4.3): the selector's `matchLabels` and
    /// `app.kubernetes.io/managed-by: keptn`, which wins a conflict.
    pub fn made_labels(&self) -> Strings<'a> {
        let mut labels: Strings = self
            .match_labels
            .iter()
            .map(|&(k, v)| (Text::from(k), Text::from(v)))
            .collect();
        labels.insert(LABEL_MANAGED_BY.into(), "keptn".into());
        labels
    }

    /// As [`Selector::miss`] for the labels of a KeptnApp the hook makes, without making them.
    pub fn misses_made_apps(&self) -> Option<String> {
        self.miss_by(|key| {
            if key == LABEL_MANAGED_BY {
                return Some("keptn");
            }
            self.match_labels
                .iter()
                .find(|&&(k, _)| k == key)
                .map(|&(_, v)| v)
        })
    }

    /// Whether the selector selects only objects labelled `managed-by: keptn`, through
    /// `matchLabels` or an `In` expression of that value alone. Any other also selects the
    /// KeptnApps users made themselves (no label, or another value), and Metacontroller adopts
    /// what a parent's selector selects.
    pub fn selects_only_generated(&self) -> bool {
        self.match_labels
            .iter()
            .any(|&(key, value)| key == LABEL_MANAGED_BY && value == "keptn")
            || self.expressions.iter().any(|e| {
                e.key == LABEL_MANAGED_BY
                    && matches!(e.operator, Operator::In)
                    && e.values.iter().all(|&v| v == "keptn")
            })
    }

    /// The first part of the selector that `labels` fail, as a field path; `None` when the
    /// selector selects them.
    pub fn miss(&self, labels: &Strings) -> Option<String> {
        self.miss_by(|key| labels.get(key).map(Text::as_str))
    }

    /// [`Selector::miss`] for the labels `label` gives by key.
    fn miss_by<'l>(&self, label: impl Fn(&str) -> Option<&'l str>) -> Option<String> {
        if let Some((key, _)) = self
            .match_labels
            .iter()
            .find(|&&(key, value)| label(key) != Some(value))
        {
            return Some(format!("spec.selector.matchLabels.{key}"));
        }
        self.expressions
            .iter()
            .position(|e| {
                let value = label(e.key);
                let listed = value.is_some_and(|v| e.values.contains(&v));
                match e.operator {
                    Operator::In => !listed,
                    Operator::NotIn => listed,
                    Operator::Exists => value.is_none(),
                    Operator::DoesNotExist => value.is_some(),
                }
            })
            .map(|i| format!("spec.selector.matchExpressions[{i}]"))
    }
}

/// The `i`th `matchExpressions` entry, with the checks Metacontroller's reading of it makes:
/// a known operator, values for `In` and `NotIn` and none for the others.
fn expression_of<'a>(expression: &'a Json<'a>, i: usize) -> Result<Expression<'a>, String> {
    let at = format!("spec.selector.matchExpressions[{i}]");
    let key = expression
        .get("key")
        .and_then(Json::as_str)
        .ok_or_else(|| format!("{at}.key must be a string"))?;
    let operator = match expression.get("operator").and_then(Json::as_str) {
        Some("In") => Operator::In,
        Some("NotIn") => Operator::NotIn,
        Some("Exists") => Operator::Exists,
        Some("DoesNotExist") => Operator::DoesNotExist,
        _ => {
            return Err(format!(
                "{at}.operator must be In, NotIn, Exists or DoesNotExist"
            ))
        }
    };
    let values: Vec<&str> = match expression.get("values") {
        None | Some(Json::Null) => Vec::new(),
        Some(Json::Array(values)) => values
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| format!("{at}.values must be strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(format!("{at}.values must be a list")),
    };
    match (operator, values.is_empty()) {
        (Operator::In | Operator::NotIn, true) => {
            Err(format!("{at}.values must not be empty for In and NotIn"))
        }
        (Operator::Exists | Operator::DoesNotExist, false) => Err(format!(
            "{at}.values must be empty for Exists and DoesNotExist"
        )),
        _ => Ok(Expression {
            key,
            operator,
            values,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&'static str, &'static str)]) -> Strings<'static> {
        pairs
            .iter()
            .map(|&(k, v)| (Text::from(k), Text::from(v)))
            .collect()
    }

    #[test]
    fn a_selector_selects_as_a_label_selector_does() {
        let selector = Json::from(json!({"matchLabels": {"tier": "web"}, "matchExpressions": [
            {"key": "team", "operator": "In", "values": ["a", "b"]},
            {"key": "stage", "operator": "NotIn", "values": ["test"]},
            {"key": "owner", "operator": "Exists"},
            {"key": "legacy", "operator": "DoesNotExist", "values": null}]}));
        let selector = Selector::parse(&selector).unwrap();
        let all = [("tier", "web"), ("team", "b"), ("owner", "x")];
        assert_eq!(selector.miss(&labels(&all)), None);
        assert_eq!(
            selector.miss(&labels(&[
                ("stage", "prod"),
                ("tier", "web"),
                ("team", "a"),
                ("owner", "")
            ])),
            None
        );
        for (changed, miss) in [
            (("tier", "db"), "spec.selector.matchLabels.tier"),
            (("team", "c"), "spec.selector.matchExpressions[0]"),
            (("stage", "test"), "spec.selector.matchExpressions[1]"),
            (("legacy", "yes"), "spec.selector.matchExpressions[3]"),
        ] {
            let mut l = labels(&all);
            l.insert(changed.0.into(), changed.1.into());
            assert_eq!(selector.miss(&l).as_deref(), Some(miss), "{changed:?}");
        }
        let mut no_owner = labels(&all);
        no_owner.remove("owner");
        assert_eq!(
            selector.miss(&no_owner).as_deref(),
            Some("spec.selector.matchExpressions[2]")
        );
        // Empty selects everything; null or absent is the CRD's default.
        for empty in [
            json!({}),
            json!({"matchLabels": null, "matchExpressions": []}),
        ] {
            let empty = Json::from(empty);
            assert_eq!(Selector::parse(&empty).unwrap().miss(&labels(&[])), None);
        }
        let absent = Json::Null;
        let default = Selector::parse(&absent).unwrap();
        assert_eq!(
            default.miss(&labels(&[])).as_deref(),
            Some("spec.selector.matchLabels.app.kubernetes.io/managed-by")
        );
        assert_eq!(default.miss(&labels(&[(LABEL_MANAGED_BY, "keptn")])), None);
    }

    #[test]
    fn made_labels_are_the_match_labels_and_managed_by_keptn() {
        let selector = Json::from(json!({"matchLabels": {"team": "a", LABEL_MANAGED_BY: "helm"}}));
        let selector = Selector::parse(&selector).unwrap();
        let made = selector.made_labels();
        assert_eq!(made, labels(&[(LABEL_MANAGED_BY, "keptn"), ("team", "a")]));
        let miss = "spec.selector.matchLabels.app.kubernetes.io/managed-by";
        assert_eq!(selector.miss(&made).as_deref(), Some(miss));
        assert_eq!(selector.misses_made_apps().as_deref(), Some(miss));
        let fine = Json::from(json!({"matchLabels": {"team": "a"}, "matchExpressions": [
            {"key": "team", "operator": "In", "values": ["a"]},
            {"key": LABEL_MANAGED_BY, "operator": "Exists"}]}));
        assert_eq!(Selector::parse(&fine).unwrap().misses_made_apps(), None);
    }

    #[test]
    fn a_selector_selects_only_generated_objects_through_managed_by_keptn_alone() {
        let in_values = |values: serde_json::Value| {
            json!({"matchExpressions": [{"key": "team", "operator": "Exists"},
                {"key": LABEL_MANAGED_BY, "operator": "In", "values": values}]})
        };
        for (selector, only) in [
            (json!({"matchLabels": {LABEL_MANAGED_BY: "keptn"}}), true),
            (
                json!({"matchLabels": {"team": "a", LABEL_MANAGED_BY: "keptn"}}),
                true,
            ),
            (in_values(json!(["keptn"])), true),
            (in_values(json!(["keptn", "keptn"])), true),
            (json!(null), true),
            (json!({}), false),
            (json!({"matchLabels": {"team": "a"}}), false),
            (json!({"matchLabels": {LABEL_MANAGED_BY: "klt"}}), false),
            (json!({"matchLabels": {"managed-by": "keptn"}}), false),
            (in_values(json!(["keptn", "klt"])), false),
            (
                json!({"matchExpressions": [{"key": LABEL_MANAGED_BY, "operator": "Exists"}]}),
                false,
            ),
            (
                json!({"matchExpressions": [
                    {"key": LABEL_MANAGED_BY, "operator": "NotIn", "values": ["helm"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["keptn"]}]}),
                false,
            ),
        ] {
            let json = Json::from(selector.clone());
            let parsed = Selector::parse(&json).unwrap();
            assert_eq!(parsed.selects_only_generated(), only, "{selector}");
        }
    }

    #[test]
    fn a_selector_metacontroller_cannot_read_names_its_field() {
        for (selector, problem) in [
            (json!("x"), "spec.selector must be an object"),
            (json!({"matchLabels": []}), "spec.selector.matchLabels must be an object"),
            (json!({"matchLabels": {"a": 1}}), "spec.selector.matchLabels.a must be a string"),
            (json!({"matchExpressions": {}}), "spec.selector.matchExpressions must be a list"),
            (
                json!({"matchExpressions": [{"operator": "Exists"}]}),
                "spec.selector.matchExpressions[0].key must be a string",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "a", "operator": "in", "values": ["x"]}]}),
                "spec.selector.matchExpressions[1].operator must be In, NotIn, Exists or DoesNotExist",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}]}),
                "spec.selector.matchExpressions[0].values must be a list",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}),
                "spec.selector.matchExpressions[0].values must be strings",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": []}]}),
                "spec.selector.matchExpressions[0].values must not be empty for In and NotIn",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]}),
                "spec.selector.matchExpressions[0].values must be empty for Exists and DoesNotExist",
            ),
        ] {
            let selector = Json::from(selector);
            assert_eq!(Selector::parse(&selector).unwrap_err(), problem);
        }
    }
}
