//! Round trips of the contract's wire types: both key styles decode, responses carry exactly the
//! contract's field names.

use metahooks_hooks::contract::{
    decode, AdmissionResponse, AdmissionReview, CompositeRequest, CompositeResponse,
    CustomizeResponse, DecoratorRequest, DecoratorResponse, Object, ObjectMap, PatchOp,
    RelatedResourceRule, ReviewVersion, MAX_RESYNC_AFTER_SECONDS,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;

type Request<'a> = CompositeRequest<Object<'a>, ObjectMap<Object<'a>>, ObjectMap<Object<'a>>>;

fn cm(ns: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}})
}

#[test]
fn composite_request_decodes_v1_and_v2_keys_alike() {
    let v1 = json!({"controller": {}, "parent": {"metadata": {"name": "p", "namespace": "a"}},
        "children": {"ConfigMap.v1": {"c1": cm("a", "c1")}, "Deployment.apps/v1": {}},
        "related": {"Secret.v1": {"s": cm("a", "s")}}, "finalizing": true});
    let v2 = json!({"controller": {}, "parent": {"metadata": {"name": "p", "namespace": "a"}},
        "children": {"ConfigMap.v1": {"a/c1": cm("a", "c1")}, "Deployment.apps/v1": {}},
        "related": {"Secret.v1": {"a/s": cm("a", "s")}}, "finalizing": true});
    for body in [v1, v2] {
        let bytes = serde_json::to_vec(&body).unwrap();
        let req: Request = decode(&bytes).unwrap();
        assert_eq!(req.children.get("ConfigMap.v1")[0].metadata.name, "c1");
        assert_eq!(
            req.children.get("ConfigMap.v1")[0]
                .metadata
                .namespace
                .as_deref(),
            Some("a")
        );
        assert!(req.children.get("Deployment.apps/v1").is_empty());
        assert!(req.children.get("Missing.v1").is_empty());
        assert_eq!(req.related.get("Secret.v1").len(), 1);
        assert_eq!((req.children.len(), req.related.len()), (1, 1));
        assert!(!req.children.is_empty() && !req.related.is_empty());
        assert!(req.finalizing);
    }
}

#[test]
fn absent_and_null_maps_are_empty() {
    let req: Request =
        decode(br#"{"parent": {"metadata": {"name": "p"}}, "children": null}"#).unwrap();
    assert!(req.children.is_empty() && req.related.is_empty() && !req.finalizing);
    let req: Request =
        decode(br#"{"parent": {"metadata": {"name": "p"}}, "children": {"Pod.v1": null}}"#)
            .unwrap();
    assert!(req.children.get("Pod.v1").is_empty());
}

/// A map of the wrong JSON type is named with what was expected there.
#[test]
fn object_maps_of_the_wrong_type_say_what_belongs_there() {
    let parent = r#""parent": {"metadata": {"name": "p", "namespace": "ns"}}"#;
    for (children, expected) in [
        ("7", "expected a map from type key to objects"),
        (
            r#"{"Pod.v1": []}"#,
            "expected a map from object key to object",
        ),
    ] {
        let body = format!(r#"{{{parent}, "children": {children}}}"#);
        let e = decode::<Request>(body.as_bytes()).unwrap_err();
        assert!(e.message.contains(expected), "{}", e.message);
    }
}

/// A type key given twice (Go never writes one, but JSON allows it) keeps the objects of both:
/// the hook must see every observed child, or its answer would have Metacontroller delete one.
#[test]
fn a_type_key_given_twice_keeps_the_objects_of_both() {
    let body = format!(
        r#"{{"parent": {{"metadata": {{"name": "p"}}}}, "children": {{"ConfigMap.v1": {{"a/c1": {}}},
            "Secret.v1": {{}}, "ConfigMap.v1": {{"a/c2": {}}}}}}}"#,
        cm("a", "c1"),
        cm("a", "c2")
    );
    let req: Request = decode(body.as_bytes()).unwrap();
    let names: Vec<&str> = req
        .children
        .get("ConfigMap.v1")
        .iter()
        .map(|c| c.metadata.name.as_str())
        .collect();
    assert_eq!(names, ["c1", "c2"]);
}

/// A hook keeps a child by writing it back under its name: a parent or an observed object
/// without one is refused, naming where, rather than answered without it.
#[test]
fn objects_without_a_name_are_refused_naming_where() {
    let parent = r#""parent": {"metadata": {"name": "p", "namespace": "ns"}}"#;
    let composite = [
        (r#"{"parent": {}}"#.to_owned(), "parent.metadata.name"),
        (
            r#"{"parent": {"metadata": {"name": ""}}}"#.to_owned(),
            "parent.metadata.name",
        ),
        (
            format!(r#"{{{parent}, "children": {{"Pod.v1": {{"ns/a": {{"metadata": {{}}}}}}}}}}"#),
            "children.Pod.v1.ns/a.metadata.name",
        ),
        (
            format!(
                r#"{{{parent}, "related": {{"Secret.v1": {{"ns/s": {{"kind": "Secret"}}}}}}}}"#
            ),
            "related.Secret.v1.ns/s.metadata.name",
        ),
    ];
    for (body, path) in composite {
        let e = decode::<Request>(body.as_bytes()).unwrap_err();
        assert_eq!(e.path, path, "{body}");
    }
    let e = decode::<DecoratorRequest<Object>>(br#"{"object": {"metadata": {}}}"#).unwrap_err();
    assert_eq!(e.path, "object.metadata.name");
    // Objects a hook does not decode are not looked at.
    let body = format!(r#"{{{parent}, "children": {{"Pod.v1": {{"ns/a": {{}}}}}}}}"#);
    let req: CompositeRequest<Object> = decode(body.as_bytes()).unwrap();
    assert_eq!(req.parent.metadata.name, "p");
}

#[test]
fn decorator_request_reads_object_and_attachments() {
    let body = json!({"controller": {}, "object": {"metadata": {"name": "t"}},
        "attachments": {"Secret.v1": {"ns/s": cm("ns", "s")}}});
    let bytes = serde_json::to_vec(&body).unwrap();
    let req: DecoratorRequest<Object, ObjectMap<Object>> = decode(&bytes).unwrap();
    assert_eq!(req.object.metadata.name, "t");
    assert_eq!(req.attachments.get("Secret.v1").len(), 1);
}

#[test]
fn composite_response_has_exactly_the_contract_fields() {
    let full = CompositeResponse {
        status: json!({"a": 1}),
        children: vec![cm("a", "c")],
        resync_after_seconds: Some(5),
        finalized: Some(true),
    };
    assert_eq!(
        serde_json::to_value(&full).unwrap(),
        json!({"status": {"a": 1}, "children": [cm("a", "c")], "resyncAfterSeconds": 5, "finalized": true})
    );
    let bare: CompositeResponse<Value, Value> = CompositeResponse {
        status: json!({}),
        children: vec![],
        resync_after_seconds: None,
        finalized: None,
    };
    assert_eq!(
        serde_json::to_string(&bare).unwrap(),
        r#"{"status":{},"children":[]}"#
    );
}

#[test]
fn decorator_response_has_exactly_the_contract_fields() {
    let labels: BTreeMap<String, Option<String>> = [
        ("a".to_owned(), Some("1".to_owned())),
        ("b".to_owned(), None),
    ]
    .into();
    let r = DecoratorResponse {
        labels: Some(labels),
        annotations: None,
        status: Some(json!({"s": 1})),
        attachments: vec![json!({})],
        resync_after_seconds: Some(3),
        finalized: None,
    };
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        json!({"labels": {"a": "1", "b": null}, "status": {"s": 1}, "attachments": [{}], "resyncAfterSeconds": 3})
    );
    let keep: DecoratorResponse<Value, Value> = DecoratorResponse {
        labels: None,
        annotations: None,
        status: None,
        attachments: vec![],
        resync_after_seconds: None,
        finalized: None,
    };
    assert_eq!(
        serde_json::to_string(&keep).unwrap(),
        r#"{"attachments":[]}"#
    );
}

/// A resync further away than 100 years is asked for in 100 years: a delay Metacontroller's Go
/// `time.Duration` cannot hold (over about 292 years) would come out negative and loop.
#[test]
fn resync_after_seconds_is_at_most_a_century() {
    let composite: CompositeResponse<Value, Value> = CompositeResponse {
        status: json!({}),
        children: vec![],
        resync_after_seconds: Some(251_621_985_600),
        finalized: None,
    };
    assert_eq!(
        serde_json::to_value(&composite).unwrap()["resyncAfterSeconds"],
        MAX_RESYNC_AFTER_SECONDS
    );
    assert_eq!(MAX_RESYNC_AFTER_SECONDS, 3_153_600_000);
    let decorator: DecoratorResponse<Value, Value> = DecoratorResponse {
        labels: None,
        annotations: None,
        status: None,
        attachments: vec![],
        resync_after_seconds: Some(3_153_600_001),
        finalized: None,
    };
    assert_eq!(
        serde_json::to_value(&decorator).unwrap()["resyncAfterSeconds"],
        3_153_600_000u64
    );
    // Ten years, the longest a valid spec leads to, is written as it is.
    let ten_years: DecoratorResponse<Value, Value> = DecoratorResponse {
        resync_after_seconds: Some(315_360_000),
        ..decorator
    };
    assert_eq!(
        serde_json::to_value(&ten_years).unwrap()["resyncAfterSeconds"],
        315_360_000
    );
}

#[test]
fn customize_response_field_names() {
    let r = CustomizeResponse {
        related_resources: vec![RelatedResourceRule::in_namespace("v1", "secrets", "ns")],
    };
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        json!({"relatedResources": [{"apiVersion": "v1", "resource": "secrets", "namespace": "ns"}]})
    );
}

#[test]
fn admission_response_shapes() {
    let allowed = AdmissionResponse::allow("u").into_review(ReviewVersion::V1);
    assert_eq!(
        serde_json::to_value(&allowed).unwrap(),
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "u", "allowed": true}})
    );
    let denied = AdmissionResponse::deny("u", 403, "no")
        .with_warnings(vec!["w".into()])
        .into_review(ReviewVersion::V1);
    assert_eq!(
        serde_json::to_value(&denied).unwrap()["response"],
        json!({"uid": "u", "allowed": false, "status": {"code": 403, "message": "no"}, "warnings": ["w"]})
    );
    let patched = AdmissionResponse::allow("u")
        .with_patch(&[PatchOp::add("/a~1b", json!(1))])
        .into_review(ReviewVersion::V1);
    let v = serde_json::to_value(&patched).unwrap();
    assert_eq!(v["response"]["patchType"], "JSONPatch");
    use base64::Engine;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(v["response"]["patch"].as_str().unwrap())
        .unwrap();
    assert_eq!(
        serde_json::from_slice::<Value>(&patch).unwrap(),
        json!([{"op": "add", "path": "/a~1b", "value": 1}])
    );
    assert!(AdmissionResponse::allow("u")
        .with_patch(&[])
        .patch
        .is_none());
}

/// The API server refuses an answer in another version than its request's: a v1beta1 review
/// (a webhook configuration that lists v1beta1 first) is answered in v1beta1; no apiVersion is
/// v1; any other is a 400 at `apiVersion` that does not quote it.
#[test]
fn admission_reviews_are_answered_in_their_own_version() {
    let version = |review: Value| {
        decode::<AdmissionReview<Value>>(review.to_string().as_bytes()).map(|r| r.version)
    };
    let request = json!({"uid": "u"});
    for (api_version, expected) in [
        ("admission.k8s.io/v1", ReviewVersion::V1),
        ("admission.k8s.io/v1beta1", ReviewVersion::V1beta1),
    ] {
        let review =
            json!({"apiVersion": api_version, "kind": "AdmissionReview", "request": request});
        assert_eq!(version(review).unwrap(), expected);
        let answer = AdmissionResponse::allow("u").into_review(expected);
        assert_eq!(
            serde_json::to_value(&answer).unwrap()["apiVersion"],
            api_version
        );
    }
    assert_eq!(
        version(json!({"request": request})).unwrap(),
        ReviewVersion::V1
    );
    let err = version(json!({"apiVersion": "admission.k8s.io/v9-s3cret", "request": request}))
        .unwrap_err();
    assert_eq!(err.path, "apiVersion");
    assert!(
        err.message.starts_with("an AdmissionReview of another version than admission.k8s.io/v1 or admission.k8s.io/v1beta1")
            && !err.message.contains("s3cret"),
        "{}",
        err.message
    );
    let err = version(json!({"apiVersion": 1, "request": request})).unwrap_err();
    assert_eq!(
        (err.path.as_str(), err.message.as_str()),
        (
            "apiVersion",
            "invalid type: integer `1`, expected admission.k8s.io/v1 or admission.k8s.io/v1beta1 at line 1 column 15"
        )
    );
}
