//! Criterion benches of every hook (the request decoded or found kept, the hook, the answer
//! encoded: the server's whole in-process cost) over generated requests of growing size, each
//! beside its floor measured in the same run: serde_json parsing the same bytes into a
//! `serde_json::Value` and serializing it back. A hook whose request holds one object of a
//! fixed shape (customize, the admission of a KeptnAppCreationRequest or an MRC) is measured
//! at that one size.
//! `scripts/bench-report.py` prints the hook/floor ratios.

mod requests;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use metahooks_hooks::cert_rotation::sync::ANNOTATION_SEAL;
use metahooks_hooks::memo::Memo;
use metahooks_hooks::registry::{find, HookContext, HOOKS};
use std::collections::BTreeSet;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::Duration;

/// The hooks benched so far in this run.
static BENCHED: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

fn floor(body: &[u8]) -> Vec<u8> {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap();
    serde_json::to_vec(&v).unwrap()
}

fn run_hook(id: &str, body: &[u8], memo: &Memo) -> Vec<u8> {
    let hook = find(id).unwrap();
    let rng = ring::rand::SystemRandom::new();
    let ctx = HookContext {
        now: requests::now(),
        rng: &rng,
        memo,
    };
    (hook.run)(body, &ctx).unwrap().body
}

/// How the memos are used: shared by every iteration, as the server shares them between resyncs
/// of a parent that has not changed (`Warm`: the request is kept the first time it comes and
/// found from then on); shared, each iteration's request differing from the kept one in a
/// child's `resourceVersion`, which no hook reads (`Nearby`: answered from the kept request once
/// that child is found to decode the same); shared, each iteration's request differing from
/// the one before in the first object's `metadata.generation`, which the hooks decode (`Read`:
/// the kept request with that object decoded anew); shared but for the decoded requests, as when
/// a request changed in its shape but not in the spec or the certificates (`Changed`: every
/// iteration decodes whole); or new for each iteration, as on the first sync after a start or
/// after a spec change (`Cold`).
#[derive(Clone, Copy)]
enum MemoUse {
    Warm,
    Nearby,
    Read,
    Changed,
    Cold,
}

/// `body` with its first `resourceVersion` (a child's: the generated requests write
/// `children` first) made each of 64 others of the same length.
fn nearby_variants(body: &[u8]) -> Vec<Vec<u8>> {
    let text = std::str::from_utf8(body).unwrap();
    let at =
        text.find(r#""resourceVersion":"184467""#).unwrap() + r#""resourceVersion":"1844"#.len();
    (0..64)
        .map(|n| {
            let mut variant = body.to_vec();
            variant[at..at + 2].copy_from_slice(format!("{n:02}").as_bytes());
            variant
        })
        .collect()
}

/// `body` with digits that make the `n`th of a million put in front of its first
/// `metadata.generation` (a child's).
fn read_variant(body: &[u8], n: usize) -> Vec<u8> {
    let text = std::str::from_utf8(body).unwrap();
    let at = text.find(r#""generation":"#).unwrap() + r#""generation":"#.len();
    [
        &body[..at],
        format!("1{:06}", n % 1_000_000).as_bytes(),
        &body[at..],
    ]
    .concat()
}

fn bench_pairs(c: &mut Criterion, group: &str, hook: &str, cases: Vec<(usize, Vec<u8>)>) {
    bench_pairs_with(c, group, hook, cases, MemoUse::Warm)
}

fn bench_pairs_with(
    c: &mut Criterion,
    group: &str,
    hook: &str,
    cases: Vec<(usize, Vec<u8>)>,
    memo: MemoUse,
) {
    BENCHED.lock().unwrap().insert(find(hook).unwrap().id);
    let mut g = c.benchmark_group(group);
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    for (n, body) in &cases {
        g.throughput(Throughput::Bytes(body.len() as u64));
        let shared = match memo {
            MemoUse::Changed => Memo::keeping_no_requests(),
            _ => Memo::default(),
        };
        g.bench_with_input(BenchmarkId::new("hook", n), body, |b, body| match memo {
            MemoUse::Warm | MemoUse::Changed => b.iter(|| run_hook(hook, black_box(body), &shared)),
            MemoUse::Nearby => {
                let variants = nearby_variants(body);
                run_hook(hook, body, &shared);
                let mut next = variants.iter().cycle();
                b.iter(|| run_hook(hook, black_box(next.next().unwrap()), &shared))
            }
            MemoUse::Read => {
                run_hook(hook, body, &shared);
                // Made outside the measured time, each new: a variant kept before would be found.
                let mut n = 0;
                let mut next = || {
                    n += 1;
                    read_variant(body, n)
                };
                b.iter_batched(
                    &mut next,
                    |v| run_hook(hook, &v, &shared),
                    BatchSize::SmallInput,
                )
            }
            MemoUse::Cold => b.iter(|| run_hook(hook, black_box(body), &Memo::default())),
        });
        g.bench_with_input(BenchmarkId::new("floor", n), body, |b, body| {
            b.iter(|| floor(black_box(body)))
        });
    }
    g.finish();
}

fn app_discovery(c: &mut Criterion) {
    let cases = [10, 100, 1000, 5000]
        .map(|n| (n, requests::app_discovery_sync(n)))
        .to_vec();
    bench_pairs(c, "app-discovery-sync", "app-discovery/sync", cases.clone());
    bench_pairs_with(
        c,
        "app-discovery-sync-nearby",
        "app-discovery/sync",
        cases.clone(),
        MemoUse::Nearby,
    );
    bench_pairs_with(
        c,
        "app-discovery-sync-read",
        "app-discovery/sync",
        cases.clone(),
        MemoUse::Read,
    );
    bench_pairs_with(
        c,
        "app-discovery-sync-changed",
        "app-discovery/sync",
        cases,
        MemoUse::Changed,
    );
}

fn delete_graph(c: &mut Criterion) {
    let cases = [10, 100, 1000, 10000]
        .map(|n| (n, requests::delete_graph_sync(n)))
        .to_vec();
    bench_pairs(c, "delete-graph-sync", "delete-graph/sync", cases.clone());
    bench_pairs_with(
        c,
        "delete-graph-sync-nearby",
        "delete-graph/sync",
        cases.clone(),
        MemoUse::Nearby,
    );
    bench_pairs_with(
        c,
        "delete-graph-sync-read",
        "delete-graph/sync",
        cases.clone(),
        MemoUse::Read,
    );
    bench_pairs_with(
        c,
        "delete-graph-sync-changed",
        "delete-graph/sync",
        cases.clone(),
        MemoUse::Changed,
    );
    bench_pairs_with(
        c,
        "delete-graph-sync-cold",
        "delete-graph/sync",
        cases,
        MemoUse::Cold,
    );
}

/// [`requests::cert_rotation_sync`] with `reuse`, its leaves without their seals: as issued
/// before leaves were sealed, or by another tool, so that a first sync verifies each signature.
fn cert_rotation_sync_unsealed(n: usize) -> Vec<u8> {
    let mut request: serde_json::Value =
        serde_json::from_slice(&requests::cert_rotation_sync(n, true)).unwrap();
    for group in ["children", "related"] {
        for leaf in request[group]["Secret.v1"]
            .as_object_mut()
            .unwrap()
            .values_mut()
        {
            if let Some(annotations) = leaf["metadata"]["annotations"].as_object_mut() {
                annotations.remove(ANNOTATION_SEAL);
            }
        }
    }
    serde_json::to_vec(&request).unwrap()
}

fn cert_rotation(c: &mut Criterion) {
    let reuse = [10, 100, 1000]
        .map(|n| (n, requests::cert_rotation_sync(n, true)))
        .to_vec();
    bench_pairs(
        c,
        "cert-rotation-sync-reuse",
        "cert-rotation/sync",
        reuse.clone(),
    );
    bench_pairs_with(
        c,
        "cert-rotation-sync-reuse-nearby",
        "cert-rotation/sync",
        reuse.clone(),
        MemoUse::Nearby,
    );
    bench_pairs_with(
        c,
        "cert-rotation-sync-reuse-read",
        "cert-rotation/sync",
        reuse.clone(),
        MemoUse::Read,
    );
    bench_pairs_with(
        c,
        "cert-rotation-sync-reuse-changed",
        "cert-rotation/sync",
        reuse.clone(),
        MemoUse::Changed,
    );
    bench_pairs_with(
        c,
        "cert-rotation-sync-reuse-cold",
        "cert-rotation/sync",
        reuse,
        MemoUse::Cold,
    );
    let unsealed = [10, 100, 1000]
        .map(|n| (n, cert_rotation_sync_unsealed(n)))
        .to_vec();
    bench_pairs_with(
        c,
        "cert-rotation-sync-unsealed-cold",
        "cert-rotation/sync",
        unsealed,
        MemoUse::Cold,
    );
    let issue = [10, 100, 1000]
        .map(|n| (n, requests::cert_rotation_sync(n, false)))
        .to_vec();
    bench_pairs(c, "cert-rotation-sync-issue", "cert-rotation/sync", issue);
}

/// Runs `hook` once on `body` and checks that its answer holds `expect`: each bench below
/// measures the path its request is made for (a denial or a missed patch would be cheaper).
fn answers_with(hook: &str, body: &[u8], expect: &str) {
    let answer = run_hook(hook, body, &Memo::default());
    let text = String::from_utf8(answer).unwrap();
    assert!(text.contains(expect), "{hook} answered {text}");
}

/// The customize, finalize, admission and decorator hooks: the requests Metacontroller and the
/// API server send them less often than a sync's. A request whose shape is fixed (one object)
/// is measured at size 1.
fn other_hooks(c: &mut Criterion) {
    type Cases = Vec<(usize, Vec<u8>)>;
    let sized = |sizes: &[usize], generate: fn(usize) -> Vec<u8>| -> Cases {
        sizes.iter().map(|&n| (n, generate(n))).collect()
    };
    let one = |body: Vec<u8>| -> Cases { vec![(1, body)] };
    // The hook, its requests, what its answer to the first holds, and whether a group with
    // empty memos follows (the first answer after a start).
    let benches: [(&str, Cases, &str, bool); 9] = [
        (
            "app-discovery/customize",
            one(requests::app_discovery_customize()),
            "keptnworkloads",
            false,
        ),
        (
            "app-discovery/mutate",
            one(requests::app_discovery_mutate()),
            r#""patch":"#,
            false,
        ),
        (
            "delete-graph/finalize",
            sized(&[10, 100, 1000, 10000], requests::delete_graph_finalize),
            r#""finalized":false"#,
            true,
        ),
        (
            "delete-graph/validate",
            sized(&[10, 100, 1000], requests::delete_graph_validate),
            r#""allowed":true}"#,
            false,
        ),
        (
            "cert-rotation/customize",
            sized(&[10, 100, 1000], requests::cert_rotation_customize),
            "meshrootcertificates",
            false,
        ),
        (
            "mesh-root-certificate/sync",
            sized(&[10, 100, 1000], requests::mesh_root_certificate_sync),
            r#""state":"active""#,
            true,
        ),
        (
            "mesh-root-certificate/customize",
            one(requests::mesh_root_certificate_customize()),
            "certificatemanagers",
            false,
        ),
        (
            "mesh-root-certificate/validate",
            one(requests::mesh_root_certificate_validate()),
            r#""allowed":true}"#,
            false,
        ),
        (
            "mesh-root-certificate/mutate",
            one(requests::mesh_root_certificate_mutate()),
            r#""patch":"#,
            false,
        ),
    ];
    for (hook, cases, expect, cold) in benches {
        answers_with(hook, &cases[0].1, expect);
        let group = hook.replace('/', "-");
        bench_pairs(c, &group, hook, cases.clone());
        if cold {
            bench_pairs_with(c, &format!("{group}-cold"), hook, cases, MemoUse::Cold);
        }
    }
}

/// Every hook of the table has a bench above: one added without a bench fails `make test`,
/// which runs each bench once (README, "Adding a hook").
fn every_hook_benched(_: &mut Criterion) {
    let benched = BENCHED.lock().unwrap();
    let missing: Vec<&str> = HOOKS
        .iter()
        .map(|h| h.id)
        .filter(|id| !benched.contains(id))
        .collect();
    assert!(missing.is_empty(), "hooks without a bench: {missing:?}");
}

criterion_group!(
    benches,
    app_discovery,
    delete_graph,
    cert_rotation,
    other_hooks,
    every_hook_benched
);
criterion_main!(benches);
