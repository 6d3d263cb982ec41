#!/usr/bin/env bash
# The server's instructions a request (`make bench-server-instructions`): the release server,
# and the echo floor beside it, each run under valgrind's callgrind while `wrk -t1 -c1` sends one
# route's request over and over for DURATION seconds (10), less what the same program counts
# when it starts, idles as long and stops, over the requests answered. Where `make
# bench-instructions` counts a hook in process, this counts everything the server does for a
# request: hyper's connection, the routes, the request's policy (places, body, timeout, span,
# metrics) and the hook, so that a change around the hooks can be compared one build to the
# next (`SERVER=path/to/metahooks` counts another build, a worktree's say, on this tree's
# requests). The echo floor's count is its whole request, reading the body and answering a fixed
# one: what HTTP costs under the same `wrk`. Routes: `GET /healthz` (the server's path alone), each
# admission route's review and each route of scripts/bench-routes.sh at SIZE (25k). Counts move by
# a few thousand between runs on the hook routes (more on cert-rotation's); `GET /healthz` moves by
# about a hundred. Prints a markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-routes.sh
DURATION=${DURATION:-10}
SIZE=${SIZE:-25k}
ROUTES=${ROUTES:-healthz $ADMISSION_ROUTES $BENCH_ROUTES}
OUT=target/load
PORT=8094

if [ -z "${SERVER:-}" ]; then
  cargo build --release --quiet --bin metahooks
  SERVER=./target/release/metahooks
fi
cargo build --release --quiet --example floor --example load_requests
./target/release/examples/load_requests "$OUT" >&2

if curl -s "http://127.0.0.1:$PORT/" >/dev/null; then
  echo "something already answers on 127.0.0.1:$PORT: stop it first" >&2
  exit 1
fi

# program path body -> "requests instructions": the program (`metahooks` or `echo`) under
# callgrind, with `wrk` on path (none: idle) for DURATION seconds.
count() {
  local out=$OUT/callgrind.out cmd pid requests=0
  if [ "$1" = metahooks ]; then cmd=("$SERVER" serve --listen "127.0.0.1:$PORT"); else
    cmd=(./target/release/examples/floor echo "127.0.0.1:$PORT"); fi
  valgrind --tool=callgrind --callgrind-out-file="$out" "${cmd[@]}" >/dev/null 2>&1 &
  pid=$!
  until curl -s -o /dev/null "http://127.0.0.1:$PORT/healthz"; do
    kill -0 "$pid" 2>/dev/null || { echo "$1 exited before it answered" >&2; exit 1; }
    sleep 0.2
  done
  if [ "$2" = none ]; then
    sleep "$DURATION"
  elif [ "$2" = /healthz ]; then
    requests=$(wrk -t1 -c1 -d"${DURATION}s" "http://127.0.0.1:$PORT$2" | awk '/requests in/ {print $1}')
  else
    requests=$(BODY="$3" VARY=0 wrk -t1 -c1 -d"${DURATION}s" -s scripts/post.lua \
      "http://127.0.0.1:$PORT$2" | awk '/requests in/ {print $1}')
  fi
  kill -TERM "$pid"
  wait "$pid" || true
  echo "$requests $(awk '/^totals:/ {print $2}' "$out")"
  rm -f "$out"
}
per_request() { # "requests instructions" idle-instructions -> instructions a request
  set -- $1 "$2"
  echo $((($2 - $3) / $1))
}

read -r _ idle_server < <(count metahooks none)
read -r _ idle_echo < <(count echo none)
echo "| route | request | metahooks instructions | echo instructions | metahooks / echo |"
echo "| --- | --- | ---: | ---: | ---: |"
for route in $ROUTES; do
  if [ "$route" = healthz ]; then
    path=/healthz body=- request="GET"
  else
    path=/$(hook_of "$route")
    if is_admission "$route"; then body=$OUT/$route-review.json; else body=$OUT/$route-$SIZE.json; fi
    request="$(wc -c <"$body") bytes"
  fi
  server=$(per_request "$(count metahooks "$path" "$body")" "$idle_server")
  echo_=$(per_request "$(count echo "$path" "$body")" "$idle_echo")
  printf '| %s | %s | %s | %s | %.2f |\n' "${path#/}" "$request" "$server" "$echo_" \
    "$(echo "$server / $echo_" | bc -l)"
done
