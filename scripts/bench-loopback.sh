# Sourced by bench-load.sh and bench-builds.sh, which run servers under a load client on
# loopback: with two cores or more every server runs on CPU 0 and the client on CPU 1
# (`server_cpu`, `client_cpu`; PIN=0 turns this off), every process put in `pids` is stopped
# when the script exits, `stop_if_answered` stops the script at once if something already
# answers on one of its ports, which would otherwise be measured in a server's place, and
# `wait_ready` waits for the metahooks server just started to answer /readyz on port 8090.
server_cpu=() client_cpu=()
if [ "${PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
  server_cpu=(taskset -c 0) client_cpu=(taskset -c 1)
fi
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
stop_if_answered() { # port...
  local port
  for port in "$@"; do
    if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
      echo "something already answers on 127.0.0.1:$port: stop it first" >&2
      exit 1
    fi
  done
}
wait_ready() { # pid name
  until curl -sf http://127.0.0.1:8090/readyz >/dev/null; do
    kill -0 "$1" 2>/dev/null || { echo "$2 exited before it was ready" >&2; exit 1; }
    sleep 0.002
  done
}
