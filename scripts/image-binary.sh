#!/usr/bin/env bash
# The binary the container image ships (Dockerfile, `make image-check`): the release metahooks
# linked statically against glibc, so that it runs on an empty (`scratch`) image and keeps
# glibc's memcmp, memcpy and malloc. A musl build, the other way to a static binary, answered a
# kept 25 KB request at a quarter to a third of the rate (musl's byte-at-a-time memcmp compares
# the body with the kept one; docs/BENCHMARKS.md, "The image's binary").
# usage: scripts/image-binary.sh OUT   (FEATURES=mimalloc as for `make bench-load`)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/image-binary.sh OUT}
target=$(rustc -vV | sed -n 's/^host: //p')
case $target in
  *-linux-gnu) ;;
  *) echo "image-binary: needs a glibc (linux-gnu) Rust toolchain; this one builds for $target" >&2
     exit 1 ;;
esac
# With --target, the static build has its own directory (target/$target) and leaves the
# ordinary release build alone.
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" cargo build --release --locked \
  --bin metahooks --target "$target" ${FEATURES:+--features "$FEATURES"}
bin=target/$target/release/metahooks
if readelf --program-headers "$bin" | grep -q INTERP; then
  echo "image-binary: $bin asks for a dynamic loader, which an empty image does not have" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
cp "$bin" "$out"
