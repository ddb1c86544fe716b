# Sourced by every bench script (from the repository's root): the result file each run
# writes, so that every figure README.md and ARCHITECTURE.md quote names a file that says
# when, where and how it was measured.
#
#   result_start NAME 'VAR=value …'   # from here on stdout also goes to
#                                     # bench/results/NAME-YYYY-MM-DD[-K].txt, headed by the
#                                     # date, the exact command, the machine, the commit and
#                                     # how busy the machine was
#   result_raw FILE                   # appends FILE (the run's raw JSON lines) and the load
#                                     # average at the end
#
# A shared machine is said, not hidden: the load average and the compilers running at the
# start and at the end are in the file. Ratios against a peer measured in the same run (and
# interleaved with it) are what such a run supports; absolute rates are this machine's.

result_start() {
  local name=$1 vars=${2:-}
  mkdir -p bench/results
  local day
  day=$(date -u +%F)
  RESULT_FILE=bench/results/$name-$day.txt
  local k=2
  while [ -e "$RESULT_FILE" ]; do
    RESULT_FILE=bench/results/$name-$day-$k.txt
    k=$((k + 1))
  done
  exec > >(tee "$RESULT_FILE")
  local cpu
  cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
  local commit
  commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  git diff --quiet HEAD -- src tests bench Cargo.toml Cargo.lock 2>/dev/null || commit="$commit + uncommitted changes"
  echo "# $name, $(date -u +%FT%TZ)"
  echo "command: ${vars:+$vars }$0${BENCH_ARGS:+ $BENCH_ARGS}"
  echo "machine: $(nproc) CPUs ($cpu), kernel $(uname -r), $(systemd-detect-virt 2>/dev/null || echo 'virtualization unknown')"
  echo "commit: $commit"
  echo "busy at start: $(busy)"
  echo
}

# The load average and how many compiler processes run (other people's builds on a shared
# machine), for the result's header and footer.
busy() {
  local compilers
  compilers=$(ps -eo comm= | grep -cE '^(rustc|cc1|cc1plus|ld|ld\.lld|go|compile|link)$' || true)
  echo "load average $(cut -d' ' -f1-3 /proc/loadavg), $compilers compiler processes running"
}

result_raw() {
  echo
  echo "busy at end: $(busy)"
  echo "raw (one JSON line per measured run):"
  cat "$1"
}
