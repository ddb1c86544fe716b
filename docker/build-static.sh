#!/usr/bin/env sh
# Builds the one file the load-worker image ships: archbench, release, statically linked
# (glibc with +crt-static), symbols stripped, for TARGET (default: this machine's). The
# Dockerfile runs it for each platform; CI runs it to prove the image's binary builds and
# needs no shared library.
set -eu
cd "$(dirname "$0")/.."
target="${1:-$(rustc -vV | sed -n 's/^host: //p')}"
RUSTFLAGS="-C target-feature=+crt-static -C strip=symbols" \
  cargo build --release --locked --target "$target" --bin archbench
out="target/$target/release/archbench"
# The image holds nothing else: a program interpreter (the dynamic loader) would be missing
# at run time. readelf reads binaries of any architecture, so cross builds are checked too.
if readelf -lW "$out" | grep -q INTERP; then
  echo "build-static: $out is dynamically linked:" >&2
  readelf -dW "$out" | grep NEEDED >&2 || true
  exit 1
fi
echo "$out"
