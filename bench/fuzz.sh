#!/usr/bin/env bash
# Runs every cargo-fuzz target for a bounded time (FUZZ_SECONDS each, default 300).
#
#   bench/fuzz.sh                     # all targets, 5 minutes each
#   FUZZ_SECONDS=60 bench/fuzz.sh response_framing
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). The toolchain here is stable, so the
# sanitizer flags cargo-fuzz passes are enabled with RUSTC_BOOTSTRAP=1. Crashes land in
# fuzz/artifacts/<target>/; keep each as a regression test (see src/http/response.rs tests).
# Writes what libFuzzer said at the end of each target (inputs run, corpus, any failure) to
# bench/results/fuzz-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
SECONDS_EACH=${FUZZ_SECONDS:-300}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(response_framing h2_frames wrk_args ab_args)
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || { echo "fuzz: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2; exit 2; }
BENCH_ARGS="${TARGETS[*]}" result_start fuzz "FUZZ_SECONDS=$SECONDS_EACH"
echo "tools: $(cargo fuzz --version), $(rustc --version)"
for t in "${TARGETS[@]}"; do
  mkdir -p "fuzz/corpus/$t"
  echo "== $t: ${SECONDS_EACH}s"
  cargo fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 2>&1 \
    | grep -E '^(#[0-9]+ +DONE|Done|==[0-9]+==|SUMMARY|artifact_prefix|Test unit written)' || true
done
echo; echo "busy at end: $(busy)"
