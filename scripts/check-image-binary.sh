#!/usr/bin/env bash
# `make image-check`: runs the binary the container image ships as the image runs it, without a
# container runtime: alone in an empty root directory (chroot, so it needs root), as user 65532,
# with the Deployment's serve flags (its listen addresses on other ports, reached over IPv4
# loopback, which a dual-stack `[::]` listener must take) and a certificate from `metahooks certs`
# where the Deployment mounts it. It must get ready, answer a hook over HTTP and over HTTPS (the
# certificate checked against the caBundle under the name the API server dials), issue leaf
# certificates (the crypto in the static binary) over HTTPS under the name in cert-rotation's
# hook URL, which Metacontroller dials, and stop on SIGTERM with status 0.
# usage: scripts/check-image-binary.sh BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: scripts/check-image-binary.sh BINARY}
[ "$(id -u)" = 0 ] || { echo "image-check: chroot needs root" >&2; exit 1; }
work=target/image
root=$work/root
rm -rf "$root" "$work/certs"
mkdir -p "$root/etc/metahooks/tls"
cp "$bin" "$root/metahooks"
"$bin" certs --service metahooks --namespace metahooks-system --out "$work/certs" >/dev/null 2>&1
# A Secret volume's files: readable by everyone (defaultMode 0644), owned by root.
install -m 0644 "$work/certs/tls.crt" "$work/certs/tls.key" "$root/etc/metahooks/tls/"

# The Deployment's serve flags, the listeners' ports changed and the shutdown delay shortened to
# 1 s; the certificate paths are the Deployment's mount. The listeners keep the Deployment's
# address (`[::]`, on every interface for the few seconds of the check): 127.0.0.1 reaches them
# only if they took IPv4 as well, or fell back to it where the kernel has no IPv6.
http=127.0.0.1:18280 https=127.0.0.1:18643 host=metahooks.metahooks-system.svc
metacontroller_host=$(sed -n 's#^ *url: https://\([^/:]*\)/cert-rotation/sync$#\1#p' \
  manifests/cert-rotation/compositecontroller.yaml)
[ -n "$metacontroller_host" ] \
  || { echo "image-check: cert-rotation's sync hook has no https:// URL" >&2; exit 1; }
flags=()
while read -r flag; do
  case $flag in
    --listen=*) flags+=("${flag%:*}:${http##*:}") ;;
    --tls-listen=*) flags+=("${flag%:*}:${https##*:}") ;;
    --shutdown-delay=*) flags+=(--shutdown-delay=1s) ;;
    *) flags+=("$flag") ;;
  esac
done < <(sed -n '/^ *args:/,/^ *env:/s/^ *- \(--[^ ]*\)$/\1/p' manifests/base/deployment.yaml)
[[ " ${flags[*]} " == *" --tls-cert=/etc/metahooks/tls/tls.crt "* ]] \
  || { echo "image-check: the Deployment's flags name no /etc/metahooks/tls/tls.crt" >&2; exit 1; }
chroot --userspec=65532:65532 "$root" /metahooks serve "${flags[@]}" 2>"$work/serve.log" &
pid=$!
fail() {
  echo "image-check: $*" >&2
  sed 's/^/  serve: /' "$work/serve.log" >&2
  kill -KILL "$pid" 2>/dev/null || true
  exit 1
}
for _ in $(seq 100); do
  curl -sf "http://$http/readyz" >/dev/null && break
  kill -0 "$pid" 2>/dev/null || fail "the server exited before it was ready"
  sleep 0.1
done
curl -sf "http://$http/readyz" >/dev/null || fail "not ready after 10 s"

# POST FIXTURE ROUTE SCHEME [HOST]: the answer's body on stdout, a failure unless it is a 200.
# Over HTTPS the certificate is checked against ca.crt for HOST (the API server's by default).
post() {
  local base="http://$http" name=${4:-$host}
  [ "$3" = https ] && base="https://$name:${https##*:}"
  curl -sS --fail-with-body --cacert "$work/certs/ca.crt" --resolve "$name:${https##*:}:127.0.0.1" \
    -H 'Content-Type: application/json' --data-binary "@fixtures/$1.request.json" "$base$2" \
    || fail "POST $2 over $3 with fixtures/$1.request.json"
}
same_as_fixture() {
  python3 -c 'import json, sys; sys.exit(json.load(sys.stdin) != json.load(open(sys.argv[1])))' \
    "fixtures/$1.response.json" || fail "the answer to fixtures/$1.request.json over $2 differs"
}
for scheme in http https; do
  post delete-graph/sync-chain-database-running /delete-graph/sync $scheme \
    | same_as_fixture delete-graph/sync-chain-database-running $scheme
done
post cert-rotation/sync-step0-issues-leaves /cert-rotation/sync https "$metacontroller_host" | python3 -c '
import json, sys
leaves = [c for c in json.load(sys.stdin)["children"]
          if c["kind"] == "Secret" and "tls.crt" in c.get("data", {})]
sys.exit(not leaves)' || fail "no leaf issued for fixtures/cert-rotation/sync-step0-issues-leaves"

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" = 0 ] || fail "exit status $status after SIGTERM"
echo "image-check: $bin, alone in an empty root as 65532 with the Deployment's flags" \
  "(${flags[*]}): ready, answered over HTTP and HTTPS, issued leaves, stopped on SIGTERM"
