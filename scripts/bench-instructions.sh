#!/usr/bin/env bash
# Instruction counts (`make bench-instructions`): every sync hook and delete-graph's finalize
# (scripts/bench-routes.sh) against its floor (serde_json parse into a Value and serialize back) and
# against the scan floor (serde_json walking the body into IgnoredAny, keeping nothing) on the load
# run's requests of about 25 KB, 200 KB and 1.7 MB, counted by valgrind's callgrind. Unlike times,
# the counts are the same from run to run on a shared machine, so two builds can be compared one
# change apart. Each figure is the cost of one more request after the first two: (count for 2 + RUNS
# requests - count for 2) / RUNS, so that start-up and the memo work of the first syncs
# (cert-rotation's certificate checks, delete-graph's spec plan, the request decoded and kept the
# first time it comes; the memos are then warm, as on a resync) are left out. "read" counts requests
# that each differ from the last in the first object's generation, which the hooks decode, so that
# each is the kept request with that object decoded anew (`hook_loop ... read`; the count includes
# making each request, a copy of the body); "put in" counts requests that each have another object
# put in a map of a type key, so that each is the kept request with the object put in before taken
# out and the new one decoded into it (`hook_loop ... put-in` on the body load_requests writes with
# it), "twice" the same in two maps at once (on the `.put-in-twice.json` body; delete-graph's
# requests have one map); "changed" counts the same request decoded whole on every sync, as when it
# changed at the top level of its shape, but not in the spec or the certificates (`hook_loop ...
# changed`). Instructions are not time: cache misses and system calls are not in them, and SHA-256
# (the leaf memo's key) runs without the CPU's SHA instructions under valgrind, so it weighs more
# here than in time. Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-routes.sh
RUNS=${RUNS:-3}
ROUTES=${ROUTES:-$BENCH_ROUTES}
SIZES=${SIZES:-25k 200k 1700k}
OUT=target/load

cargo build --release --quiet -p metahooks-hooks --example hook_loop
cargo build --release --quiet --example load_requests
./target/release/examples/load_requests "$OUT" >&2

count() { # id body runs [read | put-in | changed] -> instructions
  valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    ./target/release/examples/hook_loop "$@" 2>&1 >/dev/null |
    awk '/ refs:/ {gsub(",", "", $NF); print $NF}'
}
per_request() { # id body [read | put-in | changed] -> instructions of one more request
  local two more
  two=$(count "$1" "$2" 2 "${@:3}")
  more=$(count "$1" "$2" $((RUNS + 2)) "${@:3}")
  echo $(((more - two) / RUNS))
}
ratio() { printf '%.2f' "$(echo "$1 / $2" | bc -l)"; }

echo "| route | size | hook instructions | read | put in | twice | changed | floor instructions | hook/floor | read/floor | put in/floor | twice/floor | changed/floor | scan instructions | changed/scan |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for route in $ROUTES; do
  for size in $SIZES; do
    body="$OUT/$route-$size.json"
    id=$(hook_of "$route")
    hook=$(per_request "$id" "$body")
    read=$(per_request "$id" "$body" read)
    put_in=$(per_request "$id" "$OUT/$route-$size.put-in.json" put-in)
    twice=-
    if [ -e "$OUT/$route-$size.put-in-twice.json" ]; then
      twice=$(per_request "$id" "$OUT/$route-$size.put-in-twice.json" put-in)
    fi
    changed=$(per_request "$id" "$body" changed)
    floor=$(per_request floor "$body")
    scan=$(per_request scan "$body")
    echo "| $id | $size | $hook | $read | $put_in | $twice | $changed | $floor |" \
      "$(ratio "$hook" "$floor") | $(ratio "$read" "$floor") | $(ratio "$put_in" "$floor") |" \
      "$([ "$twice" = - ] && echo - || ratio "$twice" "$floor") | $(ratio "$changed" "$floor") | $scan |" \
      "$(ratio "$changed" "$scan") |"
  done
done
