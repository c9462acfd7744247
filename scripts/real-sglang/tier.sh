#!/usr/bin/env bash
# Gate of the real-SGLang test tier for `make test` / `make test-real` (docs/real-sglang.md).
#
# Sets up (or reuses) the real SGLang env with scripts/real-sglang-env.sh, then prints ONE line on stderr
# saying whether the tier runs and, if not, why, and `1` (run it) or `0` (do not) on stdout:
#   exit 0, stdout 1   the env is ready: the tier runs
#   exit 0, stdout 0   this machine cannot run it (the env script's exit 3: not root, no gcc, too little
#                      disk, ...): the tier is skipped, the line says why
#   exit 1, stdout 0   the set-up failed (pip, gcc, the import check): the caller fails the run after the
#                      other tests; the env script's last lines are on stderr
# When the tier runs, the line says whether its speculative part runs too; when the env's check of its
# pure-torch sgl_kernel CPU ops failed (cpu-spec-ops.txt), a second line says why it does not: the speculative
# tests then skip with that check's line (the last line is the one `make test` repeats at its end).
# SGLBENCH_REAL_TIER=0 in the environment turns the tier off without touching the env (one line says so).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [[ "${SGLBENCH_REAL_TIER:-}" == 0 ]]; then
  echo "real-SGLang tier: skipped (SGLBENCH_REAL_TIER=0)" >&2
  echo 0
  exit 0
fi

log="$(mktemp "${TMPDIR:-/tmp}/real-sglang-env.XXXXXX")"
trap 'rm -f "$log"' EXIT
t0=$SECONDS
# Progress lines go to the terminal and the log (a cold set-up takes ~4 min); the root is the last line.
# The env script's own "cannot set up here" line is left out: the one line below says it.
root="$("$here/../real-sglang-env.sh" 2> >(tee "$log" | grep --line-buffered -v 'cannot set up here' >&2) \
  | tail -n 1)"
rc="${PIPESTATUS[0]}"
wait  # the tee of the process substitution
case "$rc" in
  0)
    # The speculative part needs the env's pure-torch sgl_kernel ops; their check's line when it failed.
    spec="$(cat "$root/cpu-spec-ops.txt" 2>/dev/null || echo "no $root/cpu-spec-ops.txt")"
    runs="runs"
    [[ "$spec" == ok:* ]] && runs="runs, speculative part too"
    echo "real-SGLang tier: $runs (env $root, ready in $((SECONDS - t0)) s)" >&2
    [[ "$spec" == ok:* ]] || echo "real-SGLang tier: speculative part skipped: $spec" >&2
    echo 1
    ;;
  3)
    why="$(grep -m1 'cannot set up here' "$log" | sed 's/^real-sglang: cannot set up here: //')"
    echo "real-SGLang tier: skipped, this machine cannot run it: ${why:-see scripts/real-sglang-env.sh}" >&2
    echo 0
    ;;
  *)
    echo "real-SGLang tier: FAILED to set up the env (scripts/real-sglang-env.sh exit $rc; output above)" >&2
    echo 0
    exit 1
    ;;
esac
