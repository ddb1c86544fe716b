#!/usr/bin/env bash
# What merging N workers' results costs: the last step of `k8s load --in-cluster --workers N`
# (and of `archbench merge`), for N = 10, 100, 1000 synthetic 60 s worker results.
#
#   bench/merge-scale.sh                  # REQUESTS=10000 latencies recorded per worker
#   SIZES="100 1000" REQUESTS=100000 bench/merge-scale.sh
#
# Prints, per N: the results' size on disk, the merge's wall time and peak RSS (GNU time),
# and the time per worker result; the last column compares with the smallest N, so growth
# that is not linear shows. Writes it to bench/results/merge-scale-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

SIZES=${SIZES:-"10 100 1000"}
REQUESTS=${REQUESTS:-10000}
command -v /usr/bin/time >/dev/null || { echo "merge-scale: GNU time is not installed (Debian: time)" >&2; exit 2; }

cargo build --release --quiet --bin archbench --example synthetic_results
result_start merge-scale "SIZES='$SIZES' REQUESTS=$REQUESTS"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

printf '%8s %10s %12s %9s %12s %14s %10s\n' workers "input MiB" "KiB per file" "wall s" "peak RSS MiB" "ms per worker" "vs first"
first=""
for n in $SIZES; do
  dir="$WORK/$n"
  ./target/release/examples/synthetic_results "$n" "$REQUESTS" "$dir"
  input=$(du -sm "$dir" | cut -f1)
  per_file=$(( $(du -sk "$dir" | cut -f1) / n ))
  /usr/bin/time -f '%e %M' -o "$WORK/time" \
    ./target/release/archbench merge "$dir"/worker-*.json --json "$WORK/merged-$n.json" >/dev/null
  read -r wall rss_kib < "$WORK/time"
  per=$(python3 -c "print(f'{$wall * 1000 / $n:.2f}')")
  [ -n "$first" ] || first=$per
  ratio=$(python3 -c "print(f'{$per / max($first, 1e-9):.2f}x')")
  printf '%8s %10s %12s %9s %12s %14s %10s\n' "$n" "$input" "$per_file" "$wall" "$((rss_kib / 1024))" "$per" "$ratio"
done
echo; echo "busy at end: $(busy)"
