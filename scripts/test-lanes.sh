#!/usr/bin/env bash
# `make test`: every test, in parallel lanes, each its own pytest session.
#
#   scripts/test-lanes.sh PYTHON
#
# Most of the suite's wall time is spent waiting on containers (Molecule, the sim host campaigns) and on
# the real SGLang's CPU engine, not computing; one pytest session would run them one after another. The
# lanes below run at once, each on its own containers, results and lock directories (every sim host test
# names its container after its own pid). Meanwhile the real-SGLang gate (scripts/real-sglang/tier.sh)
# sets up or reuses its environment; the real lane (contract suite and real tier) starts once it has answered.
#
# Each lane prints its slowest tests (where CI time goes). Its whole output goes to build/test/<lane>.log
# and is printed when the lane ends; the last lines are one line per lane and the total. Exit 0 only when every lane passed and the real tier either
# ran or was skipped for a reason its gate printed.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
PY="${1:?usage: $0 PYTHON}"
out="$root/build/test"
rm -rf "$out"
mkdir -p "$out"
export SGLBENCH_SIMHOST_IMAGE="${SGLBENCH_SIMHOST_IMAGE:-$(tail -n 1 build/simhost-image.txt)}"

# lane name -> pytest selection: the sim host tests (and Molecule) each lane runs. The split keeps the lanes'
# ends close: the machine's two cores are busy throughout, so a lane that ends early leaves them to the
# others. Measured on a 2-core machine: quiet, the campaigns lane took 1137 s while it also ran the SSH and
# pair tests (the others 670-970 s); beside three busy loops the unit lane alone took 1450 s, the sim host
# lanes 1245-1300 s.
declare -A mark=([molecule]='molecule or simhost' [campaigns]=simhost [faults]=simhost)
declare -A sel=(
  [molecule]='tests/molecule tests/python/test_pair_simhost.py'
  [campaigns]='tests/python/test_kill_resume.py tests/python/test_runner.py tests/python/test_telemetry_simhost.py tests/python/test_sessions_simhost.py tests/python/test_workloads_simhost.py'
  [faults]='tests/python/test_faults_simhost.py tests/python/test_secrets_simhost.py tests/python/test_search_simhost.py tests/python/test_ssh_simhost.py'
)
order=(units real molecule campaigns faults)

t0=$SECONDS
# The gate: `1` in real-tier.txt when the tier runs; its one line (why not, or how long) in real-tier.log.
(scripts/real-sglang/tier.sh >"$out/real-tier.txt" 2>"$out/real-tier.log"; echo $? >"$out/real-tier.rc") &

# Each lane runs in a subshell that ends by writing its CPU seconds (user + system of the lane's own process
# tree; the containers' processes are not in it) to build/test/<lane>.cpu.
# (`times`, not `$(times)`: a command substitution's subshell has no children of its own.)
cpu_of_children() {
  times >"$1.times"
  tail -n 1 "$1.times" | awk '{ for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += t[1] * 60 + t[2] } }
    END { printf "%.0f\n", s }' >"$1"
  rm -f "$1.times"
}

declare -A pid
for lane in molecule campaigns faults; do
  (
    # shellcheck disable=SC2086  # the selection is words
    SGLBENCH_REAL_TIER=0 "$PY" -m pytest -p no:cacheprovider --durations=8 -m "${mark[$lane]}" ${sel[$lane]}
    rc=$?
    cpu_of_children "$out/$lane.cpu"
    exit "$rc"
  ) >"$out/$lane.log" 2>&1 &
  pid[$lane]=$!
done
# The unit lane: everything without a container.
(
  "$PY" -m pytest -p no:cacheprovider --durations=8 -m "not molecule and not simhost" \
    --ignore=tests/contract --ignore=tests/real
  rc=$?
  cpu_of_children "$out/units.cpu"
  exit "$rc"
) >"$out/units.log" 2>&1 &
pid[units]=$!
# The real lane, once the gate has answered: the contract suite (both sides when the tier runs, else the
# stand-in against the recording) and the real tier.
(
  while [[ ! -f "$out/real-tier.rc" ]]; do sleep 1; done
  cat "$out/real-tier.log"
  tier="$(cat "$out/real-tier.txt")"
  SGLBENCH_REAL_TIER="${tier:-0}" "$PY" -m pytest -p no:cacheprovider --durations=8 tests/contract tests/real
  rc=$?
  cpu_of_children "$out/real.cpu"
  exit "$rc"
) >"$out/real.log" 2>&1 &
pid[real]=$!

declare -A rc secs
left=${#order[@]}
while ((left > 0)); do
  for lane in "${order[@]}"; do
    [[ -n "${rc[$lane]:-}" ]] && continue
    if ! kill -0 "${pid[$lane]}" 2>/dev/null; then
      wait "${pid[$lane]}"
      rc[$lane]=$?
      secs[$lane]=$((SECONDS - t0))
      left=$((left - 1))
      echo "=================== lane $lane ended after ${secs[$lane]} s (exit ${rc[$lane]}) ==================="
      cat "$out/$lane.log"
    fi
  done
  ((left > 0)) && sleep 2
done

# One line per lane: its pytest closing lines, then the total.
echo
status=0
for lane in "${order[@]}"; do
  closing="$(grep -E '^=+ .*(passed|failed|error|skipped|deselected|no tests ran).* =+$' "$out/$lane.log" \
    | sed -E 's/^=+ (.*) =+$/\1/' | paste -sd ';' -)"
  cpu="$(cat "$out/$lane.cpu" 2>/dev/null || echo '?')"
  echo "lane $lane (${secs[$lane]} s, ${cpu} CPU-s, exit ${rc[$lane]}): ${closing:-no pytest summary, see build/test/$lane.log}"
  ((rc[$lane] == 0)) || status=1
done
gate_rc="$(cat "$out/real-tier.rc" 2>/dev/null || echo 1)"
if [[ "$gate_rc" != 0 ]]; then
  echo "make test: the real-SGLang tier could not be set up (build/test/real-tier.log)" >&2
  status=1
fi
echo "make test: $([[ $status == 0 ]] && echo passed || echo FAILED) in $((SECONDS - t0)) s ($(cat "$out/real-tier.log" | tail -n 1))"
exit "$status"
