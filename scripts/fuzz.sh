#!/usr/bin/env bash
# Fuzzes every hook entry point (`make fuzz`, FUZZ_SECONDS per run, default 60), seeded from
# fixtures/: each request file becomes a corpus entry prefixed with its hook's index in the
# registry. cargo fuzz needs nightly features; the stable toolchain provides them with
# RUSTC_BOOTSTRAP=1. Crashes land in fuzz/artifacts/hooks/ and fail the run.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_RUN=${FUZZ_SECONDS:-60}
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
cargo build --quiet --bin metahooks
mkdir -p fuzz/corpus/hooks
index=0
while read -r id _; do
  controller=${id%%/*}; hook=${id##*/}
  for f in fixtures/"$controller"/"$hook"-*.request.json; do
    [ -e "$f" ] || continue
    { printf "\\x$(printf %02x "$index")"; cat "$f"; } > "fuzz/corpus/hooks/seed-$(basename "$f")-$index"
  done
  index=$((index + 1))
done < <(./target/debug/metahooks list | tail -n +2)
export RUSTC_BOOTSTRAP=1
cargo fuzz run hooks fuzz/corpus/hooks -- -max_total_time="$SECONDS_PER_RUN" -max_len=262144 -rss_limit_mb=2048
