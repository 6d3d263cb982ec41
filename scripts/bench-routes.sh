# Sourced by bench-load.sh, bench-instructions.sh and bench-server-instructions.sh: the routes
# whose load requests examples/load_requests.rs writes (target/load/<route>-<size>.json), and the
# hook each one calls.
# `<controller>-finalize` is that controller's finalize hook, on the sync's requests with the
# parent deleted (the teardown's first step, every Pod still running); `<controller>` its sync.
BENCH_ROUTES="app-discovery delete-graph cert-rotation mesh-root-certificate delete-graph-finalize"
# The admission routes, `<controller>-validate` and `<controller>-mutate`, as the API server calls
# them: one AdmissionReview each (target/load/<route>-review.json), the same as the criterion
# benches'. bench-load.sh and bench-server-instructions.sh run them too; bench-instructions.sh only
# the routes above.
ADMISSION_ROUTES="app-discovery-mutate delete-graph-validate mesh-root-certificate-validate mesh-root-certificate-mutate"

hook_of() { # route -> hook id
  case "$1" in
    *-finalize | *-validate | *-mutate) echo "${1%-*}/${1##*-}" ;;
    *) echo "$1/sync" ;;
  esac
}

is_admission() { # route -> whether it is one of ADMISSION_ROUTES
  [[ " $ADMISSION_ROUTES " == *" $1 "* ]]
}
