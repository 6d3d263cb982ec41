//! Runs one hook on one request file a given number of times, as the server does (registry lookup,
//! real clock, OS randomness, one set of memos shared between the runs), and prints the total size
//! of the answers. The request is kept decoded the first time it comes, so from the second run on
//! it is found kept, as on a resync of a parent that has not changed. After the count: with
//! `nearby` each run's request differs from the first in a child's `resourceVersion`, which no hook
//! reads, and is answered from the kept one (`make bench-load`'s `VARY=1`); with `settled` the
//! first run's request is the file's and every later one the same other request, one child's
//! `resourceVersion` away from it, so that it is answered from the kept one the first time and then
//! found at once, as on the resyncs of a parent after a change in what no hook reads; with
//! `outside` each differs from the one before outside every object, in the controller (a generation
//! in it), which no hook reads, so it is answered from the kept one (`VARY=2`); with `shape` each
//! differs from the one before in its shape (a top-level field whose name counts up), so it is
//! decoded whole and kept (`VARY=4`); with `put-in` the file is a request with an object put in
//! whose key and name are `@@` (as `make bench-load` writes them), or one in each of two maps, and
//! each run's request has another name there, so that each is the one before with those objects
//! taken out and others put in, spliced from it (`VARY=5`); with `read` each differs from the one
//! before in the first object's `metadata.generation`, which the hooks decode, so it is the kept
//! request with that object decoded anew (`VARY=3`); with `read2` each differs so in the
//! generations of the first two objects that have one, each decoded anew when read; with `changed`
//! every run decodes it whole and keeps nothing, as for a request that changed in its shape (the
//! other memos still shared); with `cold` every run starts with empty memos, as the first sync
//! after a start (cert-rotation then checks its CAs and every leaf). With `floor` instead of a hook
//! id it runs the benches' floor on the same bytes: parse into `serde_json::Value` and serialize it
//! back; with `scan`, serde_json walking the bytes and keeping nothing. Meant for `valgrind
//! --tool=callgrind`, whose instruction count is the same from run to run on a noisy machine, and
//! for perf; docs/BENCHMARKS.md gives the commands.
//!
//! Usage: hook_loop <hook id, e.g. delete-graph/sync, or floor, or scan> <request.json> <runs>
//! [nearby | settled | outside | shape | put-in | read | read2 | changed | cold]

use metahooks_hooks::memo::Memo;
use metahooks_hooks::registry::{find, HookContext};

/// How the runs use the memos.
#[derive(PartialEq)]
enum Memos {
    /// One set for every run.
    Shared,
    /// One set, each run's request another child's `resourceVersion` away from the first.
    Nearby,
    /// One set, the first run's request the file's, every later one the same request one
    /// child's `resourceVersion` away from it.
    Settled,
    /// One set, each run's request another controller generation away from the one before.
    Outside,
    /// One set, each run's request with another top-level field than the one before.
    Shape,
    /// One set, each run's request with another name for the object put in.
    PutIn,
    /// One set, each run's request another generation of the first object away from the one
    /// before.
    Read,
    /// The same in the generations of the first two objects that have one.
    Read2,
    /// One set, but no request kept decoded.
    Changed,
    /// A new set for each run.
    Cold,
}

/// The request of run `run` (under 1,000), as `memos` has it differ from `body`.
fn request_of(body: &[u8], run: usize, memos: &Memos) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    let (marker, insert) = match memos {
        Memos::Nearby => (r#""resourceVersion":""#, format!("{run:03}")),
        Memos::Settled if run > 0 => (r#""resourceVersion":""#, "1".to_owned()),
        Memos::Outside => (r#""controller":{"#, format!(r#""generation":{run},"#)),
        Memos::Shape => ("{", format!(r#""shape{run}":0,"#)),
        // Digits put in front of the generation's: a number that starts with 1.
        Memos::Read | Memos::Read2 => (r#""generation":"#, format!("1{run:03}")),
        _ => return Ok(body.to_vec()),
    };
    if *memos == Memos::Read2 {
        let second = text
            .match_indices(marker)
            .nth(1)
            .ok_or_else(|| format!("the request has one {marker} at most"))?
            .0
            + marker.len();
        let body = [&body[..second], insert.as_bytes(), &body[second..]].concat();
        return request_of(&body, run, &Memos::Read);
    }
    let at = text
        .find(marker)
        .ok_or_else(|| format!("the request has no {marker}"))?
        + marker.len();
    Ok([&body[..at], insert.as_bytes(), &body[at..]].concat())
}

/// The requests of `runs` runs with `put-in`: `body` with another name for the key and the name
/// of each object put in, found once (a search of the whole body on each run would cost a
/// request more than the hook's work on it).
fn put_in_requests(body: &[u8], runs: usize) -> Result<Vec<Vec<u8>>, String> {
    let text = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    let parts: Vec<&str> = text.split("@@").collect();
    if parts.len() < 3 {
        return Err("the request has no object named @@".into());
    }
    let named = |run: usize| parts.join(&format!("put-in-{run:03}")).into_bytes();
    Ok((0..runs).map(named).collect())
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (id, path, runs, memos) = match args.as_slice() {
        [id, path, runs] => (id, path, runs, Memos::Shared),
        [id, path, runs, memos] if memos == "nearby" => (id, path, runs, Memos::Nearby),
        [id, path, runs, memos] if memos == "settled" => (id, path, runs, Memos::Settled),
        [id, path, runs, memos] if memos == "outside" => (id, path, runs, Memos::Outside),
        [id, path, runs, memos] if memos == "shape" => (id, path, runs, Memos::Shape),
        [id, path, runs, memos] if memos == "put-in" => (id, path, runs, Memos::PutIn),
        [id, path, runs, memos] if memos == "read" => (id, path, runs, Memos::Read),
        [id, path, runs, memos] if memos == "read2" => (id, path, runs, Memos::Read2),
        [id, path, runs, memos] if memos == "changed" => (id, path, runs, Memos::Changed),
        [id, path, runs, memos] if memos == "cold" => (id, path, runs, Memos::Cold),
        _ => {
            return Err(
                "usage: hook_loop <hook id | floor | scan> <request.json> <runs> \
                 [nearby | settled | outside | shape | put-in | read | read2 | changed | cold]"
                    .into(),
            )
        }
    };
    let body = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let runs: usize = runs.parse().map_err(|e| format!("runs: {e}"))?;
    let mut answered = 0;
    if id == "scan" {
        for _ in 0..runs {
            serde_json::from_slice::<serde::de::IgnoredAny>(&body).map_err(|e| e.to_string())?;
        }
    } else if id == "floor" {
        for _ in 0..runs {
            let value: serde_json::Value =
                serde_json::from_slice(&body).map_err(|e| e.to_string())?;
            answered += serde_json::to_vec(&value).map_err(|e| e.to_string())?.len();
        }
    } else {
        let hook = find(id).ok_or_else(|| format!("no hook {id}"))?;
        let shared = if memos == Memos::Changed {
            Memo::keeping_no_requests()
        } else {
            Memo::default()
        };
        let rng = ring::rand::SystemRandom::new();
        // At most 1,000 requests, taken in turn: the 256 kept are long gone when one comes again.
        let requests = match memos {
            Memos::PutIn => put_in_requests(&body, runs.min(1000))?,
            _ => (0..runs.min(1000))
                .map(|run| request_of(&body, run, &memos))
                .collect::<Result<Vec<_>, _>>()?,
        };
        for body in requests.iter().cycle().take(runs) {
            let fresh = (memos == Memos::Cold).then(Memo::default);
            let memo = fresh.as_ref().unwrap_or(&shared);
            let ctx = HookContext {
                now: time::OffsetDateTime::now_utc(),
                rng: &rng,
                memo,
            };
            let output =
                (hook.run)(body, &ctx).map_err(|e| format!("{}: {}", e.path, e.message))?;
            answered += output.body.len();
        }
    }
    println!("{answered} bytes answered");
    Ok(())
}
