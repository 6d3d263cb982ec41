//! The WorkloadSet admission webhook: invalid specs and dependency cycles denied, dependencies
//! that wait forever warned of (../shared/spec/delete-graph.md §9).

use super::spec::{self, validate};
use super::KIND;
use crate::contract::{decode, AdmissionResponse, AdmissionReview, Text};
use crate::json::{Json, NULL};
use crate::registry::{HookContext, HookOutput};
use crate::RequestError;
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::fmt;
use std::marker::PhantomData;

/// `POST /delete-graph/validate`: denies invalid specs and dependency cycles on CREATE and
/// UPDATE, warns about dependencies that wait forever; everything else is allowed.
pub fn validate_hook(body: &[u8], _ctx: &HookContext) -> Result<HookOutput, RequestError> {
    let review: AdmissionReview<Picked<Admitted<Json>>, Picked<Admitted<&RawValue>>> =
        decode(body)?;
    let req = &review.request;
    let response = admit(
        req.operation.as_str(),
        req.object.as_ref().and_then(|o| o.0.as_ref()),
        req.old_object.as_ref().and_then(|o| o.0.as_ref()),
        &req.kind.kind,
        &req.uid,
    )?;
    HookOutput::admission(&review, response)
}

/// What the webhook reads of an object under admission, each as any JSON, as a JSON tree of the
/// object gives them (of a key given twice, the last): its kind, its name and its spec, the spec
/// as `S`: a tree for the object, its text for the old object, which is read only when the new
/// spec is invalid. The rest, managedFields above all, is skipped unread.
#[derive(Debug)]
struct Admitted<'a, S> {
    kind: Option<Json<'a>>,
    /// The name, when the metadata is an object that has one.
    name: Option<Json<'a>>,
    spec: Option<S>,
}

impl<S> Default for Admitted<'_, S> {
    fn default() -> Self {
        Admitted {
            kind: None,
            name: None,
            spec: None,
        }
    }
}

impl<'de, S: Deserialize<'de>> Members<'de> for Admitted<'de, S> {
    fn read<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "kind" => self.kind = Some(map.next_value()?),
            "metadata" => self.name = map.next_value::<Picked<Named>>()?.0.and_then(|m| m.0),
            "spec" => self.spec = Some(map.next_value()?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}

impl<'a> Admitted<'a, &'a RawValue> {
    /// The old object's spec read from its text, null when there is none.
    fn old_spec(&self) -> Result<Json<'a>, RequestError> {
        match self.spec {
            Some(raw) => {
                decode(raw.get().as_bytes()).map_err(|e| e.within("request.oldObject.spec"))
            }
            None => Ok(Json::Null),
        }
    }
}

/// Of metadata, its name.
#[derive(Debug, Default)]
struct Named<'a>(Option<Json<'a>>);

impl<'de> Members<'de> for Named<'de> {
    fn read<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        if key != "name" {
            return Ok(false);
        }
        self.0 = Some(map.next_value()?);
        Ok(true)
    }
}

/// The members of a JSON object that a [`Members`] type reads; `None` for anything but an
/// object. The members it does not read, and anything but an object, are skipped unread.
#[derive(Debug)]
struct Picked<P>(Option<P>);

trait Members<'de>: Default {
    /// Reads the value of `key` when this type keeps it, in place of any read before; `false`
    /// leaves the value to be skipped.
    fn read<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error>;
}

impl<'de, P: Members<'de>> Deserialize<'de> for Picked<P> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PickedVisitor(PhantomData))
    }
}

struct PickedVisitor<P>(PhantomData<P>);

impl<'de, P: Members<'de>> Visitor<'de> for PickedVisitor<P> {
    type Value = Picked<P>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Picked(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Picked(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Picked(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Picked(None))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Picked(None))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Picked(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Picked(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = P::default();
        while let Some(Text(key)) = map.next_key()? {
            if !members.read(&key, &mut map)? {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Picked(Some(members)))
    }
}

/// The answer to a review of `object` (`None`: missing or no JSON object). Fails only on an old
/// spec that does not decode (a number out of range), read when the new one is invalid.
fn admit(
    operation: &str,
    object: Option<&Admitted<Json>>,
    old_object: Option<&Admitted<&RawValue>>,
    kind: &str,
    uid: &str,
) -> Result<AdmissionResponse, RequestError> {
    if operation != "CREATE" && operation != "UPDATE" {
        return Ok(AdmissionResponse::allow(uid));
    }
    let Some(object) = object else {
        return Ok(AdmissionResponse::allow(uid)
            .with_warnings(vec!["no object to validate; allowed".into()]));
    };
    let object_kind = object.kind.as_ref().and_then(Json::as_str).unwrap_or(kind);
    if object_kind != KIND {
        return Ok(AdmissionResponse::allow(uid).with_warnings(vec![format!(
            "object is a '{object_kind}', not a WorkloadSet; allowed without validation"
        )]));
    }
    let name = object.name.as_ref().and_then(Json::as_str).unwrap_or("");
    let spec = object.spec.as_ref().unwrap_or(&NULL);
    let validated = validate(spec, name);
    let by_name: foldhash::HashMap<&str, &spec::Workload> =
        validated.workloads.iter().map(|w| (w.name, w)).collect();
    let mut warnings = Vec::new();
    for w in &validated.workloads {
        for (dep, cond) in &w.dependencies {
            match by_name.get(dep) {
                None => warnings.push(format!(
                    "workload '{}' depends on '{dep}', which is not part of this WorkloadSet; it waits until such a workload exists",
                    w.name
                )),
                Some(d) if !d.restart_policy.can_reach(*cond) => warnings.push(format!(
                    "workload '{}': condition {} on '{dep}' can never hold with restartPolicy {}",
                    w.name,
                    cond.as_str(),
                    d.restart_policy.as_str()
                )),
                Some(_) => {}
            }
        }
    }
    let unchanged = || -> Result<bool, RequestError> {
        match old_object {
            Some(old) if operation == "UPDATE" => Ok(old.old_spec()? == *spec),
            _ => Ok(false),
        }
    };
    let response = match validated.invalid {
        None => AdmissionResponse::allow(uid),
        // An update that leaves an invalid spec as it was (a label, an annotation, the finalizer
        // Metacontroller adds and removes) is let through: such a set exists when it was written
        // before this webhook or under fewer rules, sync freezes it, and refusing its metadata
        // would keep it from ever being deleted.
        Some(invalid) if unchanged()? => {
            warnings.push(format!(
                "the spec is invalid and this update leaves it so: {}",
                invalid.message
            ));
            AdmissionResponse::allow(uid)
        }
        Some(invalid) => AdmissionResponse::deny(uid, 403, invalid.message),
    };
    Ok(response.with_warnings(warnings))
}
