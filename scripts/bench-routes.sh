# Sourced by bench-load.sh and bench-instructions.sh: the routes whose load requests
# examples/load_requests.rs writes (target/load/<route>-<size>.json), and the hook each one calls.
# `<controller>-finalize` is that controller's finalize hook, on the sync's requests with the
# parent deleted (the teardown's first step, every Pod still running); `<controller>` its sync.
BENCH_ROUTES="app-discovery delete-graph cert-rotation mesh-root-certificate delete-graph-finalize"

hook_of() { # route -> hook id
  case "$1" in
    *-finalize) echo "${1%-finalize}/finalize" ;;
    *) echo "$1/sync" ;;
  esac
}
