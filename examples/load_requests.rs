//! Writes the load-bench requests: for each sync route and delete-graph's finalize route
//! (`scripts/bench-routes.sh` names them), requests of about 25 KB, 200 KB and 1.7 MB (objects
//! of about 1.5 KB with managedFields), into the directory given. Uses the same
//! generators as the criterion benches. Beside each, `<route>-<size>.put-in.json`: the request
//! with an object put in, a copy of the first one of its first map of a type key that holds any,
//! whose key and name are `@@` (`make bench-load`'s `VARY=5` and `hook_loop ... put-in` write
//! a name that counts up there); and, for a request with two such maps,
//! `<route>-<size>.put-in-twice.json`, with a copy put so in its last such map and in the first
//! one of that type key (as a Secret cert-rotation creates comes back in its children and its
//! related objects), or else the first. For each admission route, `<route>-review.json`: the
//! AdmissionReview the criterion benches send it (delete-graph's of a WorkloadSet of ten
//! workloads, the smallest they measure), of a fixed size.

use serde_json::value::RawValue;
use std::collections::BTreeMap;

// The generators of the criterion benches; this example writes the load routes' requests only.
#[allow(dead_code)]
#[path = "../hooks/benches/requests.rs"]
mod requests;

/// A generator of the criterion benches: the request of so many objects.
type Gen = fn(usize) -> Vec<u8>;

fn main() {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/load".into()),
    );
    std::fs::create_dir_all(&dir).unwrap();
    let gens: [(&str, Gen); 5] = [
        ("app-discovery", requests::app_discovery_sync),
        ("delete-graph", requests::delete_graph_sync),
        ("cert-rotation", |n| requests::cert_rotation_sync(n, true)),
        (
            "mesh-root-certificate",
            requests::mesh_root_certificate_sync,
        ),
        ("delete-graph-finalize", requests::delete_graph_finalize),
    ];
    for (route, generate) in gens {
        for (label, target) in [
            ("25k", 25_000usize),
            ("200k", 200_000),
            ("1700k", 1_700_000),
        ] {
            let (n, body) = grown(generate, target);
            let path = dir.join(format!("{route}-{label}.json"));
            std::fs::write(&path, &body).unwrap();
            for (suffix, maps) in [("put-in", 1), ("put-in-twice", 2)] {
                if let Some(put_in) = with_objects_put_in(&body, maps) {
                    let path = dir.join(format!("{route}-{label}.{suffix}.json"));
                    std::fs::write(&path, put_in).unwrap();
                }
            }
            println!("{} {} objects {} bytes", path.display(), n, body.len());
        }
    }
    let reviews = [
        ("app-discovery-mutate", requests::app_discovery_mutate()),
        ("delete-graph-validate", requests::delete_graph_validate(10)),
        (
            "mesh-root-certificate-validate",
            requests::mesh_root_certificate_validate(),
        ),
        (
            "mesh-root-certificate-mutate",
            requests::mesh_root_certificate_mutate(),
        ),
    ];
    for (route, body) in reviews {
        let path = dir.join(format!("{route}-review.json"));
        std::fs::write(&path, &body).unwrap();
        println!("{} {} bytes", path.display(), body.len());
    }
}

/// The request of `generate` with the fewest objects that reaches `target` bytes, and their count.
fn grown(generate: Gen, target: usize) -> (usize, Vec<u8>) {
    let mut n = 1;
    let mut body = generate(n);
    while body.len() < target {
        n = (n * target / body.len().max(1)).max(n + 1);
        body = generate(n);
    }
    (n, body)
}

/// `body` with a copy of the first object of its first map of a type key that holds any (in the
/// order of the text) put first in that map, its key and `metadata.name` `@@`; with `maps` 2, the
/// same in the last such map and in the first one of its type key before it, or else the first
/// (`None` when there is one such map).
fn with_objects_put_in(body: &[u8], maps: usize) -> Option<Vec<u8>> {
    type Map<'a> = BTreeMap<&'a str, &'a RawValue>;
    let offset = |raw: &RawValue| raw.get().as_ptr() as usize - body.as_ptr() as usize;
    let request: Map = serde_json::from_slice(body).unwrap();
    // Each map of a type key that holds objects: its type key, the map and its first object.
    let mut holding: Vec<(&str, &RawValue, &RawValue)> = ["children", "related"]
        .into_iter()
        .filter_map(|section| request.get(section))
        .flat_map(|types| serde_json::from_str::<Map>(types.get()).unwrap())
        .filter_map(|(type_key, map)| {
            let objects: Map = serde_json::from_str(map.get()).ok()?;
            Some((
                type_key,
                map,
                objects.into_values().min_by_key(|o| offset(o))?,
            ))
        })
        .collect();
    holding.sort_by_key(|(_, map, _)| offset(map));
    let chosen = match maps {
        1 => vec![*holding.first()?],
        _ => {
            let (last, others) = holding.split_last()?;
            let same_key = others.iter().find(|(key, ..)| key == &last.0);
            vec![*same_key.or(others.first())?, *last]
        }
    };
    let mut changed = body.to_vec();
    // The last first, so that the offsets before it still hold.
    for (_, map, first) in chosen.iter().rev() {
        let mut copy: serde_json::Value = serde_json::from_str(first.get()).unwrap();
        copy["metadata"]["name"] = "@@".into();
        let at = offset(map) + 1;
        let entry = format!(r#""@@":{copy},"#);
        changed.splice(at..at, entry.into_bytes());
    }
    Some(changed)
}
