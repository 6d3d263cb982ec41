#!/usr/bin/env bash
# Builds of metahooks side by side over loopback (docs/BENCHMARKS.md, "The image's binary"):
# for each request, each build in turn serves it under wrk, then the echo and naive JSON floors
# (examples/floor.rs), ROUNDS times. A table gives, per request and build, the medians of each
# round's ratios of requests/s to the first build, to echo and to naive, the range of the p99s
# and the highest peak RSS. Over HTTP, 32 connections, 1 s of warm-up and DURATION s measured;
# pinned as bench-load.sh pins (PIN=0: not). TLS=1 sends the builds' requests to their HTTPS
# listener (the self-signed certificate made at start), as bench-load.sh does; the floors answer
# plain HTTP.
# usage: scripts/bench-builds.sh BIN...   (the others are compared with the first; the servers'
# logs go to target/load/bench-builds.log)
# REQUESTS lists route:size or route:size:VARY, of bench-load.sh's sync routes, sizes and VARY.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/bench-builds.sh BIN..." >&2; exit 2; }
for bin in "$@"; do
  [ -x "$bin" ] || { echo "bench-builds: $bin is not an executable" >&2; exit 2; }
done
REQUESTS=${REQUESTS:-app-discovery:25k delete-graph:25k cert-rotation:25k cert-rotation:1700k
  app-discovery:25k:4}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
. scripts/bench-loopback.sh
stop_if_answered 8090 8091 8092
OUT=target/load
server_url=http://127.0.0.1:8090
[ "${TLS:-0}" != 1 ] || server_url=https://127.0.0.1:8443
cargo build --release --quiet --example floor --example load_requests
./target/release/examples/load_requests "$OUT" >&2

declare -A floor_pid floor_port=([echo]=8091 [json]=8092)
for floor in echo json; do
  "${server_cpu[@]}" ./target/release/examples/floor "$floor" "127.0.0.1:${floor_port[$floor]}" &
  pids+=($!) floor_pid[$floor]=$!
done

# name pid url body vary -> "name requests/s p99-ms peak-RSS-kB" (from wrk's RESULT line, which
# scripts/post.lua prints: requests/s, p50, p99, errors)
measure() {
  local name=$1 pid=$2 url=$3 body=$4 vary=$5 rps p99 errors
  BODY=$body VARY=$vary "${client_cpu[@]}" wrk -t2 -c32 -d1s -s scripts/post.lua "$url" >/dev/null
  read -r rps p99 errors < <(BODY=$body VARY=$vary "${client_cpu[@]}" wrk -t2 -c32 \
    -d"${DURATION}s" --latency -s scripts/post.lua "$url" | awk '/^RESULT/ { print $2, $4, $5 }'
  )
  [ "$errors" = 0 ] || echo "bench-builds: $errors errors from $name on $url" >&2
  echo "$name $rps $p99 $(awk '/VmHWM/ { print $2 }' "/proc/$pid/status")"
}

results=$(mktemp)
for round in $(seq "$ROUNDS"); do
  for request in $REQUESTS; do
    IFS=: read -r route size vary <<<"$request"
    vary=${vary:-0}
    body=$OUT/$route-$size.json
    [ -f "$body" ] || { echo "bench-builds: no request $body" >&2; exit 2; }
    for bin in "$@"; do
      RUST_LOG=info "${server_cpu[@]}" "$bin" serve --listen 127.0.0.1:8090 \
        --tls-listen 127.0.0.1:8443 --tls-self-signed --max-in-flight 1024 \
        >>"$OUT/bench-builds.log" 2>&1 &
      server=$!
      pids+=("$server")
      wait_ready "$server" "$bin"
      echo "$round $request $(measure "$bin" "$server" "$server_url/$route/sync" \
        "$body" "$vary")" >>"$results"
      kill "$server"
      wait "$server" 2>/dev/null || true
    done
    for floor in echo json; do
      echo "$round $request $(measure "$floor" "${floor_pid[$floor]}" \
        "http://127.0.0.1:${floor_port[$floor]}/$route/sync" "$body" "$vary")" >>"$results"
    done
  done
  echo "round $round of $ROUNDS done" >&2
done

python3 - "$results" "$@" <<'EOF'
import os, sys, statistics
rows = [line.split() for line in open(sys.argv[1])]
builds = sys.argv[2:]
got = {}  # (request, build) -> [(round, rps, p99, peak kB)]
for round_, request, name, rps, p99, peak in rows:
    got.setdefault((request, name), []).append((int(round_), float(rps), float(p99), int(peak)))
def ratio(request, a, b):
    other = {r: rps for r, rps, _, _ in got[(request, b)]}
    return statistics.median(rps / other[r] for r, rps, _, _ in got[(request, a)])
print("| request | build | vs first build | vs echo | vs naive | p99 ms | peak RSS MiB |")
print("| --- | --- | ---: | ---: | ---: | --- | ---: |")
for request in dict.fromkeys(r[1] for r in rows):
    for i, build in enumerate(builds):
        runs = got[(request, build)]
        p99 = sorted(p for _, _, p, _ in runs)
        low, high = f"{p99[0]:.1f}", f"{p99[-1]:.1f}"
        p99 = low if low == high else f"{low}-{high}"
        print(f"| {request if i == 0 else ''} | {os.path.basename(build)} | "
              f"{ratio(request, build, builds[0]):.2f} | "
              f"{ratio(request, build, 'echo'):.2f} | "
              f"{ratio(request, build, 'json'):.2f} | {p99} | "
              f"{max(k for *_, k in runs) / 1024:.1f} |")
EOF
rm -f "$results"
