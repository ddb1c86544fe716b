#!/usr/bin/env bash
# The figures behind the accuracy tests, as they come out here: the tests hold bounds that
# survive a loaded machine; this records what they measure, run after run.
#
#   bench/accuracy.sh                  # each test 3 times
#   ROUNDS=5 bench/accuracy.sh
#
# Runs, one at a time (`--test-threads 1`) and with their output shown:
#   watched_cpu_matches_a_known_burn_within_ten_percent   a child burning 1.000 CPU-second,
#                                                          watched by pid (/proc)
#   watching_a_live_cgroup_measures_what_runs_in_it       the same burn in a cgroup the test
#                                                          makes (needs root)
#   coordinated_omission_is_corrected_to_the_analytic_percentiles
#                                                          a server stalling 200 ms of every
#                                                          second: p90 and p99 against the
#                                                          analytic 100 and 190 ms
# and keeps the lines each prints with its figures. The test binary is the debug build
# `cargo test` makes. Writes all of it to bench/results/accuracy-DATE.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh

ROUNDS=${ROUNDS:-3}
# BINARY:TEST (the timing-sensitive ones live in tests/timing.rs).
TESTS=(
  timing:watched_cpu_matches_a_known_burn_within_ten_percent
  tests:cases::cli::watching_a_live_cgroup_measures_what_runs_in_it
  timing:coordinated_omission_is_corrected_to_the_analytic_percentiles
)
cargo test --quiet --test tests --test timing --no-run 2>/dev/null
result_start accuracy "ROUNDS=$ROUNDS"
for round in $(seq 1 "$ROUNDS"); do
  for entry in "${TESTS[@]}"; do
    binary=${entry%%:*} t=${entry#*:}
    out=$(cargo test --quiet --test "$binary" -- --exact "$t" --nocapture --test-threads 1 2>&1) ||
      { echo "round $round $t: FAILED"; echo "$out" | tail -20; continue; }
    figures=$(echo "$out" | grep -E '^(watched |cgroup |stalling server:)' || echo "(printed no figures: skipped here?)")
    echo "round $round ${t##*::}: $figures"
  done
done
echo
echo "busy at end: $(busy)"
