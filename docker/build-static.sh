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
# The image holds nothing else: any shared library would be missing at run time.
if ldd "$out" 2>/dev/null | grep -q "=>"; then
  echo "build-static: $out links shared libraries:" >&2
  ldd "$out" >&2
  exit 1
fi
echo "$out"
