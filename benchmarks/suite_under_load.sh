#!/usr/bin/env bash
# `make test` from a fresh clone, optionally beside busy loops: the figures of "a test suite that holds on a
# busy machine" (wall time, each lane's time and CPU seconds, pass or fail), one run after another.
#
#   bash benchmarks/suite_under_load.sh [--loops N] [--runs R] [--rev REV] [--keep]
#
#   --loops N   N processes `python3 -c 'while True: pass'` beside each run (default 0: a quiet machine)
#   --runs R    R consecutive runs (default 1), each from its own fresh clone of REV (default HEAD)
#   --keep      keep the clones (default: removed after a passing run; a failing one is kept to read)
#
# Each run: `git clone` of this checkout at REV into a new directory under ${TMPDIR:-/tmp}, then
# `CI=true bash .ci/run` there, as CI runs it. The busy loops are started just before and killed just after
# it (each bounded by `timeout`, so none outlives a killed script). The clone shares this machine's caches
# (the sim host image in podman's storage, the real-SGLang env under /var/cache/sglbench): a cold machine
# adds their set-up (~1 min for the image, ~12 min for the real-SGLang env on a 2-core machine).
# Prints one block per run (the suite's own closing lines) and a last line per run:
#   run K/R: passed|FAILED in S s beside N busy loops (load average at the end: L), log FILE
set -uo pipefail
loops=0 runs=1 rev=HEAD keep=0
while (($#)); do
  case "$1" in
    --loops) loops="${2:?--loops takes a number}"; shift 2 ;;
    --runs) runs="${2:?--runs takes a number}"; shift 2 ;;
    --rev) rev="${2:?--rev takes a revision}"; shift 2 ;;
    --keep) keep=1; shift ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "suite_under_load.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$loops" =~ ^[0-9]+$ && "$runs" =~ ^[1-9][0-9]*$ ]] || {
  echo "suite_under_load.sh: --loops takes a whole number >= 0 and --runs one >= 1" >&2
  exit 2
}
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sha="$(git -C "$src" rev-parse --verify "$rev^{commit}")" || exit 2

busy=()
stop_loops() {
  ((${#busy[@]})) && kill "${busy[@]}" 2>/dev/null
  busy=()
}
trap stop_loops EXIT

summary=()
status=0
for ((k = 1; k <= runs; k++)); do
  dir="$(mktemp -d "${TMPDIR:-/tmp}/sglbench-suite.XXXXXX")"
  git clone -q "$src" "$dir/repo" && git -C "$dir/repo" checkout -q "$sha" || exit 1
  for ((i = 0; i < loops; i++)); do
    timeout 7200 python3 -c 'while True: pass' &
    busy+=($!)
  done
  echo "run $k/$runs: $sha in $dir/repo beside $loops busy loops"
  t0=$SECONDS
  (cd "$dir/repo" && CI=true bash .ci/run) >"$dir/ci.log" 2>&1
  rc=$?
  secs=$((SECONDS - t0))
  load="$(cut -d' ' -f1 /proc/loadavg)"
  stop_loops
  grep -E '^(lane |make test:|real-SGLang tier)' "$dir/ci.log"
  verdict=passed
  ((rc == 0)) || { verdict=FAILED; status=1; }
  summary+=("run $k/$runs: $verdict in $secs s beside $loops busy loops (load average at the end: $load), log $dir/ci.log")
  if ((rc == 0 && !keep)); then
    cp "$dir/ci.log" "${TMPDIR:-/tmp}/sglbench-suite-run$k.log"
    rm -rf "$dir"
    summary[-1]="${summary[-1]/log $dir\/ci.log/log ${TMPDIR:-/tmp}/sglbench-suite-run$k.log}"
  fi
done
printf '%s\n' "${summary[@]}"
exit "$status"
