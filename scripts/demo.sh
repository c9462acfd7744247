#!/usr/bin/env bash
# The embedded default: run the campaign's TP1 phase on the sim host container and show the result.
#   1. start the sim host (real systemd, sshd + the SGLang stand-in) from the image `make image` built;
#      Ansible reaches it over SSH (SGLBENCH_SIMHOST_NAME names another container, e.g. to run two demos)
#   2. ansible-playbook bench.yml -i inventory/sim -e tp=1   (plan -> stop -> start -> health -> probe -> bench -> stop),
#      then TP8 of the 27B baseline and DFlash in the same run (TP scaling; SGLBENCH_DEMO_TP_SCALING=0 skips it)
#   3. print the per-config table (and each config's overhead outside server start and load), write the HTML report
# With SGLBENCH_DEMO_HOSTS=2: one campaign on two sim host containers at once (inventory/simpair), the TP1
# phase of a few configs (SGLBENCH_DEMO_PAIR_CONFIGS) through `sglbench run`, each host under its own
# lock; one summary and one report with the host as a dimension.
# The stand-in runs at time scale SGLBENCH_DEMO_TIME_SCALE (default 0.2: 5x faster than a real server, half the
# streamed chunks per second of the inventory's 0.1), so the demo's busiest point leaves a 2-core machine room
# for the client (inventory/sim/group_vars/sglang_gpu/host.yml says why; each point still covers 20 s at
# real-world speed). Everything here is SIMULATED: no GPU is involved.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
run_id="${SGLBENCH_RUN_ID:-demo-$(date -u +%Y%m%d-%H%M%S)}"
results="${SGLBENCH_RESULTS_DIR:-$root/results}"
host="${SGLBENCH_SIMHOST_NAME:-sglbench-simhost}"
scale="${SGLBENCH_DEMO_TIME_SCALE:-0.2}"
started=$(date +%s)

report() {
  sglbench report "$results/$run_id" -o "$results/$run_id/report.html"
  echo
  echo "records: $results/$run_id/"
  echo "report:  $results/$run_id/report.html"
  echo "demo wall time: $(( $(date +%s) - started )) s ($1)"
}

case "${SGLBENCH_DEMO_HOSTS:-1}" in
  1) ;;
  2)
    # The containers inventory/simpair/hosts.yml names.
    echo "== two sim hosts"
    for host in a b; do SGLBENCH_SIMHOST_NAME="sglbench-simhost-$host" scripts/simhost.sh up; done
    configs="${SGLBENCH_DEMO_PAIR_CONFIGS:-qwen3-8b-ar,qwen3-8b-dflash,qwen27b-dflash-mrr8}"
    echo "== sglbench run --inventory inventory/simpair --tp 1 --configs $configs   (run $run_id)"
    echo "   SIMULATED: numbers come from the SGLang stand-in, not a GPU"
    # exit 1: some config was skipped or some point invalid (the mission's config is skipped on purpose)
    run_rc=0
    sglbench run --project-dir "$root" --inventory "$root/inventory/simpair" --tp 1 --configs "$configs" \
      --run-id "$run_id" --results "$results" -e sglbench_sim_time_scale="$scale" || run_rc=$?
    [ "$run_rc" -le 1 ] || { echo "demo: sglbench run failed (exit $run_rc)" >&2; exit "$run_rc"; }
    report "sglbench run exit $run_rc"
    exit 0
    ;;
  *) echo "demo: SGLBENCH_DEMO_HOSTS must be 1 or 2, got ${SGLBENCH_DEMO_HOSTS}" >&2; exit 2 ;;
esac

echo "== sim host"
scripts/simhost.sh up

echo "== ansible-playbook bench.yml -i inventory/sim -e tp=1 -e sglbench_sim_time_scale=$scale   (run $run_id)"
set +e
ansible-playbook bench.yml -i inventory/sim -e tp=1 -e sglbench_sim_time_scale="$scale" -e sglbench_run_id="$run_id" \
  -e sglbench_results_dir="$results" -e ansible_host="$host"
playbook_rc=$?
# TP scaling: TP8 of the 27B baseline and DFlash, added to the same run.
if [ "${SGLBENCH_DEMO_TP_SCALING:-1}" != 0 ]; then
  echo "== ansible-playbook bench.yml -i inventory/sim -e tp=8, configs qwen27b-ar + qwen27b-dflash   (run $run_id)"
  ansible-playbook bench.yml -i inventory/sim -e tp=8 -e sglbench_sim_time_scale="$scale" -e sglbench_run_id="$run_id" \
    -e sglbench_results_dir="$results" -e ansible_host="$host" \
    -e '{"sglang_cycle_configs": ["qwen27b-ar", "qwen27b-dflash"]}'
  rc=$?; [ "$playbook_rc" -ne 0 ] || playbook_rc=$rc
fi
set -e

echo
echo "== summary (SIMULATED: numbers come from the SGLang stand-in, not a GPU)"
# summarize exits 1 when some attempt was not ok (the mission's config is skipped on purpose).
summary_rc=0
sglbench summarize "$results/$run_id" --format md --overhead || summary_rc=$?
[ "$summary_rc" -le 1 ] || { echo "demo: sglbench summarize failed (exit $summary_rc)" >&2; exit "$summary_rc"; }
report "playbook exit $playbook_rc"
