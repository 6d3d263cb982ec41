#!/usr/bin/env bash
# Loopback load run (`make bench-load`): every sync route and delete-graph's finalize route
# (scripts/bench-routes.sh) at about 25 KB, 200 KB and 1.7 MB, and the four admission routes on
# one AdmissionReview each, against the release metahooks and three floors built in the same run:
# an echo server (reads the body, fixed answer), a scan server (serde_json checks the body is
# JSON, keeping nothing, then the same fixed answer) and a naive JSON server (parses into
# serde_json::Value, writes `related` back, or an AdmissionReview's object). Bounded: DURATION
# seconds per run (default 3; with 3 rounds, 19 rows about 12 minutes) on 127.0.0.1 only.
# Prints a markdown table, and last which of the performance issue's loopback, memory and
# start-up targets this run met; the issue sets its loopback targets on the sync routes, so the
# finalize and admission rows are reported beside them.
# ROUTES and SIZES narrow the run; FEATURES=mimalloc builds the server with mimalloc; IMAGE=1
# measures the container image's binary (scripts/image-binary.sh: static, glibc) instead of the
# ordinary release build. TLS=1 sends metahooks' requests to its HTTPS listener (the self-signed
# certificate made at start, TLS 1.3), as Metacontroller calls cert-rotation's hooks in the
# manifests and the API server every admission webhook; the floors stay on plain HTTP, so the
# ratios include what TLS costs. wrk's OpenSSL offers AES-256-GCM first; TLS_CIPHERSUITES (an
# OpenSSL TLS 1.3 list, e.g. TLS_AES_128_GCM_SHA256, which Go's clients choose on a CPU with AES
# instructions) makes it offer those suites only, through an OPENSSL_CONF written for wrk.
# H2=1 sends every server's requests with h2load over HTTP/2 in place of wrk over HTTP/1.1 (h2c
# with prior knowledge on plain HTTP, ALPN h2 with TLS=1; h2load offers AES-128-GCM first): the
# CONNECTIONS requests at a time as streams of one connection, as the API server calls a webhook,
# or of H2_CONNECTIONS connections; p50 and p99 from its log of every request. h2load sends one
# body, so H2=1 takes no VARY.
# By default wrk sends one body over and over, as Metacontroller resyncs a parent that has not
# changed, so metahooks decodes it once (its memo of decoded requests). VARY=1 makes every request
# differ in a child's resourceVersion (the first in the body), as when something changed in a child
# that the hook does not read: metahooks answers it from the kept request once it has checked that
# the child decodes the same. VARY=2 makes every request differ outside every object, in the
# controller (a generation put in it counts up), which no hook reads: metahooks answers it from the
# kept request too. VARY=3 makes every request differ in a field the hooks decode, the first
# object's metadata.generation (digits put in front of it count up), as when something a hook reads
# changed in one object: metahooks decodes that object anew into a copy of the kept request. VARY=4
# makes every request differ in its shape (a top-level field whose name counts up put first), as
# when an object was added or taken out at the top level: metahooks decodes every one in full.
# VARY=5 makes every request differ in which objects a map of a type key holds: each has an object
# put in, a copy of the first of the first map that holds any, under a name that counts up
# (load_requests writes the bodies with it), as when the last sync created a child and the next one
# sees it: metahooks takes the one put in the request before out of the kept request and decodes the
# new one into it. VARY=6 puts it in two maps (the `.put-in-twice.json` bodies: the last map that
# holds objects and the first of its type key, or else the first), as a Secret that cert-rotation
# created comes back in its children and its related objects: metahooks splices both maps.
# delete-graph's requests have one such map, so VARY=6 leaves its routes out; the admission hooks
# keep no request to answer from, so any VARY leaves theirs out. With any VARY, each of
# wrk's threads builds its bodies before the run, each with its thread and a count where the text
# above says, and sends them in turn; there are more than the memo can keep. The floors get the same
# requests.
# Each (metahooks, echo, scan, naive) set runs ROUNDS times back to back; the table gives the median
# of each figure and the median of the per-round ratios, so that a noisy moment of a shared
# machine moves one round, not the result. Errors are summed over the rounds.
# With two cores or more, every server under test runs on CPU 0 and the client (wrk or h2load)
# on CPU 1 (PIN=0 turns this off), so that the load generator does not take CPU time from the
# server it measures. A second table gives what each server spent per request (user + system CPU
# time, from /proc/<pid>/stat, over the requests the client counted) and the CPU the client itself
# used, in cores: a floor whose run keeps the client busy on all the CPU it has measures the
# client, not itself.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-routes.sh
. scripts/bench-loopback.sh
DURATION=${DURATION:-3}
ROUTES=${ROUTES:-$BENCH_ROUTES $ADMISSION_ROUTES}
SIZES=${SIZES:-25k 200k 1700k}
FEATURES=${FEATURES:-}
CONNECTIONS=${CONNECTIONS:-32}
ROUNDS=${ROUNDS:-3}
H2=${H2:-0}
H2_CONNECTIONS=${H2_CONNECTIONS:-1}
client=wrk # the load client, as the tables name it
[ "$H2" != 1 ] || client=h2load
OUT=target/load
mkdir -p "$OUT"
if [ "${VARY:-0}" = 6 ]; then
  echo "VARY=6: delete-graph's requests have one map, so its routes are left out" >&2
  ROUTES=$(printf '%s\n' $ROUTES | { grep -v '^delete-graph' || true; } | tr '\n' ' ')
fi
if [ "${VARY:-0}" != 0 ]; then
  for route in $ROUTES; do
    is_admission "$route" && echo "VARY: the admission hooks keep no request, $route is left out" >&2
  done
  ROUTES=$(for route in $ROUTES; do is_admission "$route" || echo "$route"; done | tr '\n' ' ')
fi
[ -n "${ROUTES// /}" ] || { echo "VARY=${VARY:-0}: no route left to run" >&2; exit 1; }
if [ "$H2" = 1 ]; then
  [ "${VARY:-0}" = 0 ] || { echo "H2=1 sends one body: it takes no VARY" >&2; exit 1; }
  [ $((CONNECTIONS % H2_CONNECTIONS)) = 0 ] ||
    { echo "H2_CONNECTIONS ($H2_CONNECTIONS) must divide CONNECTIONS ($CONNECTIONS)" >&2; exit 1; }
fi
[ -z "${TLS_CIPHERSUITES:-}" ] || [ "${TLS:-0}" = 1 ] || { echo "TLS_CIPHERSUITES needs TLS=1" >&2; exit 1; }
wrk_env=() # what wrk alone gets in its environment
if [ -n "${TLS_CIPHERSUITES:-}" ] && [ "$H2" != 1 ]; then
  printf '%s\n' 'openssl_conf = conf' '[conf]' 'ssl_conf = ssl' '[ssl]' 'system_default = suites' \
    '[suites]' "Ciphersuites = $TLS_CIPHERSUITES" >"$OUT/wrk-openssl.cnf"
  wrk_env=(OPENSSL_CONF="$OUT/wrk-openssl.cnf")
fi

server_bin=./target/release/metahooks
if [ "${IMAGE:-0}" = 1 ]; then
  server_bin=$OUT/metahooks-image
  scripts/image-binary.sh "$server_bin" >&2
else
  cargo build --release --quiet --bin metahooks ${FEATURES:+--features "$FEATURES"}
fi
cargo build --release --quiet --example floor --example load_requests
./target/release/examples/load_requests "$OUT" >&2

# Start to ready, with a self-signed certificate made at start; then idle RSS. Logs at the
# level the manifests deploy (info). curl and sleep run once before the clock starts, so that
# it does not count loading the probe's own programs from disk on a fresh machine (37-63 ms
# here with the page cache dropped, against the server's 7-40 ms); that first curl also checks
# that nothing else answers on the ports.
stop_if_answered 8090 8091 8092 8093
sleep 0
start=$(date +%s%N)
RUST_LOG=info "${server_cpu[@]}" "$server_bin" serve --listen 127.0.0.1:8090 --tls-listen 127.0.0.1:8443 --tls-self-signed --max-in-flight 1024 &
pids+=($!); server=$!
declare -A server_pid=([8090]=$server)
wait_ready "$server" metahooks
ready_ms=$(( ($(date +%s%N) - start) / 1000000 ))
sleep 1
idle_kb=$(awk '/VmRSS/ {print $2}' /proc/$server/status)
for floor in echo:8091 json:8092 scan:8093; do
  "${server_cpu[@]}" ./target/release/examples/floor "${floor%:*}" "127.0.0.1:${floor#*:}" &
  pids+=($!) server_pid[${floor#*:}]=$!
done
sleep 0.5

ticks_per_s=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; } # user, system, in clock ticks

# The address wrk sends to for a server's port: metahooks' HTTPS listener with TLS=1.
base_url() {
  if [ "$1" = 8090 ] && [ "${TLS:-0}" = 1 ]; then echo https://127.0.0.1:8443; else echo "http://127.0.0.1:$1"; fi
}

# url body output: the load client's run, its output in the file output (h2load's log of every
# request beside it, in output.log)
load() {
  if [ "$H2" = 1 ]; then
    : >"$3.log" # h2load appends to its log
    "${client_cpu[@]}" h2load -t1 -c"$H2_CONNECTIONS" -m$((CONNECTIONS / H2_CONNECTIONS)) \
      -D "$DURATION" -d "$2" -H 'content-type: application/json' --log-file="$3.log" \
      ${TLS_CIPHERSUITES:+--tls13-ciphers="$TLS_CIPHERSUITES"} "$1" >"$3"
  else
    BODY="$2" "${client_cpu[@]}" env "${wrk_env[@]}" wrk -t2 -c"$CONNECTIONS" -d"${DURATION}s" \
      --latency -s scripts/post.lua "$1" >"$3"
  fi
}

# output -> the run's "RESULT rps p50-ms p99-ms errors": scripts/post.lua prints it for wrk; for
# h2load, its rate and failed requests (a 4xx or 5xx answer counts as failed) and the
# percentiles of the durations in output.log (µs, third column).
load_result() {
  if [ "$H2" = 1 ]; then
    local rate errors
    rate=$(awk '/^finished in/ { print $4 }' "$1")
    errors=$(awk '/^requests:/ { print $10 }' "$1")
    cut -f3 "$1.log" | sort -n | awk -v r="$rate" -v e="$errors" '
      { v[NR] = $1 }
      END { printf "RESULT %s %.3f %.3f %d\n", r, v[int((NR + 1) / 2)] / 1000,
        v[int((NR * 99 + 99) / 100)] / 1000, e }'
  else
    grep '^RESULT' "$1"
  fi
}

# port path body -> "rps p50 p99 errors server-µs-per-request server-system-µs client-cores"
run() {
  local before after times
  before=$(cpu_ticks "${server_pid[$1]}")
  times=$( { TIMEFORMAT='%U %S'; time load "$(base_url "$1")/$2" "$3" "$OUT/client-$1.out"; } 2>&1)
  after=$(cpu_ticks "${server_pid[$1]}")
  times=${times##*$'\n'} # the last line is `time`'s, after anything the client wrote to stderr
  load_result "$OUT/client-$1.out" |
    awk -v b="$before" -v a="$after" -v hz="$ticks_per_s" -v d="$DURATION" -v t="$times" '
      { split(b, x, " "); split(a, y, " "); split(t, c, " "); us = 1e6 / hz / ($2 * d)
        printf "%s %s %s %s %.1f %.1f %.2f\n", $2, $3, $4, $5, (y[1] + y[2] - x[1] - x[2]) * us,
          (y[2] - x[2]) * us, (c[1] + c[2]) / d }'
}

sizes_of() { # route -> the sizes it runs at: its one AdmissionReview for an admission route
  if is_admission "$1"; then echo review; else echo "$SIZES"; fi
}
size_label() { # size body -> the table's size column, with an AdmissionReview's bytes
  if [ "$1" = review ]; then
    printf 'review, %.1f KB' "$(echo "$(stat -c %s "$2") / 1000" | bc -l)"
  else
    echo "$1"
  fi
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
verdict() { [ "$(echo "$1" | bc -l)" = 1 ] && echo met || echo "not met"; } # a bc condition

cpu_rows=""
naive_low="" naive_low_row="" # the lowest "vs naive" of the run but the admission rows', and its row
echo_rows=""                   # the 25 KB rows against the echo target
admission_rows=""              # the admission rows, reported beside the targets
echo "| route | size | metahooks req/s | p50 ms | p99 ms | errors | echo req/s | scan req/s | naive JSON req/s | vs echo | vs scan | vs naive |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for route in $ROUTES; do
  for size in $(sizes_of "$route"); do
    body="$OUT/$route-$size.json" id=$(hook_of "$route")
    label=$(size_label "$size" "$body")
    m_rps=() m_p50=() m_p99=() e_rps=() s_rps=() n_rps=() vs_e=() vs_s=() vs_n=() errors=0
    m_us=() e_us=() s_us=() n_us=() us_e=() m_client=() e_client=() s_client=() n_client=()
    m_sys=() e_sys=() s_sys=() n_sys=()
    for ((round = 1; round <= ROUNDS; round++)); do
      read -r m p50 p99 err mu ms mw < <(run 8090 "$id" "$body")
      read -r e _ _ _ eu es ew < <(run 8091 "" "$body")
      read -r s _ _ _ su ss sw < <(run 8093 "" "$body")
      read -r n _ _ _ nu ns nw < <(run 8092 "" "$body")
      m_rps+=("$m") m_p50+=("$p50") m_p99+=("$p99") e_rps+=("$e") s_rps+=("$s") n_rps+=("$n")
      vs_e+=("$(echo "$m / $e" | bc -l)") vs_s+=("$(echo "$m / $s" | bc -l)") vs_n+=("$(echo "$m / $n" | bc -l)")
      m_us+=("$mu") e_us+=("$eu") s_us+=("$su") n_us+=("$nu") us_e+=("$(echo "$eu / $mu" | bc -l)")
      m_sys+=("$ms") e_sys+=("$es") s_sys+=("$ss") n_sys+=("$ns")
      m_client+=("$mw") e_client+=("$ew") s_client+=("$sw") n_client+=("$nw")
      errors=$((errors + err))
    done
    vn=$(median "${vs_n[@]}") ve=$(median "${vs_e[@]}") p99=$(median "${m_p99[@]}")
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %.2f |\n" "$id" "$label" \
      "$(median "${m_rps[@]}")" "$(median "${m_p50[@]}")" "$p99" "$errors" \
      "$(median "${e_rps[@]}")" "$(median "${s_rps[@]}")" "$(median "${n_rps[@]}")" \
      "$ve" "$(median "${vs_s[@]}")" "$vn"
    if is_admission "$route"; then
      admission_rows+=$(printf -- "  - %s (%s): %.2f of echo, %.2f of naive, p99 %s ms" "$id" \
        "$label" "$ve" "$vn" "$p99")$'\n'
    elif [ -z "$naive_low" ] || [ "$(echo "$vn < $naive_low" | bc -l)" = 1 ]; then
      naive_low=$vn naive_low_row="$id $size"
    fi
    if [ "$size" = 25k ]; then
      echo_rows+=$(printf -- "  - %s: %.2f of echo, p99 %s ms: %s%s" "$id" "$ve" "$p99" \
        "$(verdict "$ve >= 0.30 && $p99 < 5")" \
        "$([[ $id == */sync ]] || echo " (no sync route: reported beside the targets)")")$'\n'
    fi
    cpu_rows+=$(printf "| %s | %s | %s (%s) | %s (%s) | %s (%s) | %s (%s) | %.2f | %s | %s | %s | %s |" \
      "$id" "$label" "$(median "${m_us[@]}")" "$(median "${m_sys[@]}")" \
      "$(median "${e_us[@]}")" "$(median "${e_sys[@]}")" "$(median "${s_us[@]}")" \
      "$(median "${s_sys[@]}")" "$(median "${n_us[@]}")" "$(median "${n_sys[@]}")" \
      "$(median "${us_e[@]}")" "$(median "${m_client[@]}")" "$(median "${e_client[@]}")" \
      "$(median "${s_client[@]}")" "$(median "${n_client[@]}")")$'\n'
  done
done
echo
echo "Server CPU time per request (user + system µs, the system part in brackets) and the CPU $client used (cores):"
echo
echo "| route | size | metahooks µs | echo µs | scan µs | naive JSON µs | echo µs / metahooks µs | $client cores: metahooks | echo | scan | naive JSON |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s' "$cpu_rows"
peak_kb=$(awk '/VmHWM/ {print $2}' /proc/$server/status)
echo
echo "start to ready (self-signed TLS included): ${ready_ms} ms; idle RSS: $((idle_kb / 1024)) MiB; peak RSS under load: $((peak_kb / 1024)) MiB"
echo "metahooks: $server_bin${FEATURES:+ (features: $FEATURES)}, over $(base_url 8090 | cut -d: -f1)${TLS_CIPHERSUITES:+ ($client offering $TLS_CIPHERSUITES only)}"
if [ "$H2" = 1 ]; then
  echo "client: h2load, HTTP/2, $H2_CONNECTIONS connection$([ "$H2_CONNECTIONS" = 1 ] || echo s) of $((CONNECTIONS / H2_CONNECTIONS)) streams$(
    awk '/^Cipher:/ { printf ", %s", $2 }' "$OUT/client-8090.out")"
else
  echo "client: wrk, HTTP/1.1, $CONNECTIONS connections"
fi
echo "servers pinned: ${server_cpu[*]:-no}; $client pinned: ${client_cpu[*]:-no}; ${ROUNDS} rounds of ${DURATION} s per server, medians"
case "${VARY:-0}" in
  1) echo "requests: every one differs in a child's resourceVersion (VARY=1), which no hook reads;" ;;
  2) echo "requests: every one differs in the controller (VARY=2), which no hook reads;" ;;
  3) echo "requests: every one differs in the first object's generation (VARY=3), which the hooks decode;" ;;
  4) echo "requests: every one differs in its shape (VARY=4), so metahooks decodes every one;" ;;
  5) echo "requests: every one has another object put in (VARY=5), spliced into the kept request;" ;;
  6) echo "requests: every one has another object put in two maps (VARY=6), spliced into the kept request;" ;;
  *) echo "requests: the same body over and over, as on resyncs of a parent that has not changed (VARY=1 to 6 for changing ones)" ;;
esac
if [ "${VARY:-0}" != 0 ]; then
  echo "wrk sends bodies it built before the run, each thread its own in turn, more than the memo keeps"
fi
# How idle CPUs wait: in a virtual machine whose idle vCPUs halt at once, every answer that
# wakes wrk on the other CPU costs the server an interrupt (docs/BENCHMARKS.md).
idle_driver=$(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo unknown)
halt_poll=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || true)
echo "cpuidle driver: ${idle_driver}${halt_poll:+; haltpoll guest_halt_poll_ns: $halt_poll}"
echo
echo "Targets of the performance issue, in this run (docs/BENCHMARKS.md, \"Where it stands\"):"
if [ -n "$naive_low" ]; then
  printf -- "- at least 1.5 times the naive JSON floor on every row: %s (lowest %.2f, %s)\n" \
    "$(verdict "$naive_low >= 1.5")" "$naive_low" "$naive_low_row"
fi
if [ -n "$echo_rows" ]; then
  echo "- at 25 KB, at least 30 % of the echo floor's requests/s with p99 under 5 ms:"
  printf '%s' "$echo_rows"
fi
if [ -n "$admission_rows" ]; then
  echo "- the admission routes (none of the targets: the issue sets them on the sync routes):"
  printf '%s' "$admission_rows"
fi
printf -- "- idle RSS under 15 MB: %s; peak RSS under 200 MB: %s%s; start to ready under 100 ms: %s\n" \
  "$(verdict "$idle_kb * 1024 < 15000000")" "$(verdict "$peak_kb * 1024 < 200000000")" \
  "$([[ " $SIZES " == *" 1700k "* ]] || echo " (no 1.7 MB rows in this run; they set the peak)")" \
  "$(verdict "$ready_ms < 100")"
