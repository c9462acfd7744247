#!/usr/bin/env bash
# Start the real SGLang (from scripts/real-sglang-env.sh) on the CPU, wait until it is ready.
# --max-total-tokens 16384 is a default here: without it the CPU engine sizes the KV cache from the
# machine's free RAM (31M tokens, 15 GB, 19 s to zero it, ~19 GB RSS). EXTRA args come last and win.
#
#   scripts/real-sglang/serve.sh [--port 30000] [--model tiny-qwen2|DIR] [--timeout 900]
#                                [--log FILE] [--grace 20] [-- EXTRA SGLANG ARGS...]
#
# Runs in the foreground. Once the server answers, prints one line on stdout:
#   READY url=http://127.0.0.1:PORT pid=PID pgid=PGID log=FILE seconds=S
# then stays until the server exits (its exit code becomes ours) or until it gets SIGTERM/SIGINT,
# which it passes to the server (SGLang's launcher, in its own process group) and, after --grace
# seconds, follows with SIGKILL to the whole group. The server's output goes to --log
# (default ${TMPDIR:-/tmp}/real-sglang-PORT.log).
#
# Speculative decoding: with --speculative-algorithm among the EXTRA args (NGRAM, EAGLE, EAGLE3,
# STANDALONE; DFLASH is refused by SGLang's CPU platform), serve.sh adds
# --prefill-attention-backend intel_amx --decode-attention-backend intel_amx beside
# --attention-backend torch_native (SGLang's CPU backend with a verify path; torch_native has none),
# and the env's pure-torch sgl_kernel CPU ops serve the kernels the PyPI wheel lacks. If the env's
# check of those ops failed (cpu-spec-ops.txt), it exits 3 with that one line instead. e.g.
#   serve.sh --model tiny-qwen2 -- --speculative-algorithm EAGLE --speculative-draft-model-path \
#     tiny-eagle-qwen2 --speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3
# (a draft model given by name is looked up under the env's models/ like --model).
#
# Exit codes: 3 the env is missing (run `make real-sglang`) or cannot serve the speculative flags given;
# 1 the server died or never got ready (last log lines on stderr); otherwise the server's own exit code.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION="$(sed -n 's/^SGLANG_VERSION=//p' "$HERE/../real-sglang-env.sh")"
ROOT="${SGLBENCH_REAL_SGLANG_HOME:-/var/cache/sglbench/real-sglang-$VERSION}"

port=30000
model=tiny-qwen2
timeout=900
grace=20
log=""
extra=()
while (($#)); do
  case "$1" in
    --port) port="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --grace) grace="$2"; shift 2 ;;
    --log) log="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "serve.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ ! -f "$ROOT/env.sh" || ! -x "$ROOT/venv/bin/python" ]]; then
  echo "serve.sh: no real SGLang env at $ROOT; run \`make real-sglang\` first" >&2
  exit 3
fi
# shellcheck disable=SC1091
source "$ROOT/env.sh"
PY="$ROOT/venv/bin/python"

[[ -d "$model" ]] || model="$ROOT/models/$model"
[[ -f "$model/config.json" ]] || { echo "serve.sh: no model at $model" >&2; exit 2; }
log="${log:-${TMPDIR:-/tmp}/real-sglang-$port.log}"

# The set-up writes weights for the dense models and the drafts (make_tiny_models.py); a directory
# without them (the hybrid models, the DFLASH draft) is filled by SGLang: --load-format dummy.
has_weights() { [[ -f "$1/model.safetensors" ]]; }
spec=()
draft=""
for ((i = 0; i < ${#extra[@]}; i++)); do
  case "${extra[i]}" in
    --speculative-algorithm | --speculative-algorithm=*) spec=(--prefill-attention-backend intel_amx
      --decode-attention-backend intel_amx) ;;
    --speculative-draft-model-path)  # a bare name means a model of the env
      next="${extra[i + 1]:-}"
      if [[ -n "$next" && ! -d "$next" && -d "$ROOT/models/$next" ]]; then extra[i + 1]="$ROOT/models/$next"; fi
      draft="${extra[i + 1]:-}" ;;
  esac
done
if [[ -n "$draft" && -d "$draft" ]] && ! has_weights "$draft"; then
  spec+=(--speculative-draft-load-format dummy)
fi
if ((${#spec[@]})); then
  verdict="$(cat "$ROOT/cpu-spec-ops.txt" 2>/dev/null || echo "no $ROOT/cpu-spec-ops.txt: run \`make real-sglang\`")"
  if [[ "$verdict" != ok:* ]]; then
    echo "serve.sh: speculative decoding cannot run on this env: $verdict" >&2
    exit 3
  fi
fi

load=(--load-format auto)
has_weights "$model" || load=(--load-format dummy)
cmd=("$PY" -m sglang.launch_server
  --model-path "$model" "${load[@]}"
  --host 127.0.0.1 --port "$port"
  --device cpu --disable-cuda-graph --attention-backend torch_native
  --enable-metrics --sleep-on-idle
  --max-total-tokens 16384
  "${spec[@]}" "${extra[@]}")

printf 'serve.sh: %s\n' "${cmd[*]}" >"$log"
t0=$(date +%s.%N)
# Own session and process group, so a stop can reach every process SGLang forks.
setsid "${cmd[@]}" >>"$log" 2>&1 </dev/null &
pid=$!

stopping=0
waiter=""
stop() {
  stopping=1
  [[ -z "$waiter" ]] || kill "$waiter" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  # Whatever is left of the group (the launcher, schedulers, detokenizer) goes now.
  kill -KILL -- "-$pid" 2>/dev/null || true
}
trap stop TERM INT

# Ready = the log says so and /health answers 200. The check runs in the background so that a
# SIGTERM during start-up is handled at once (bash runs traps only between commands or in `wait`).
"$PY" - "$pid" "$port" "$log" "$timeout" <<'PY' &
import os, sys, time, urllib.request
pid, port, log, timeout = int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    try:  # gone, or a zombie the shell has not reaped yet
        with open(f"/proc/{pid}/stat") as f:
            dead = f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        dead = True
    if dead:
        print(f"serve.sh: the server exited before it was ready (log: {log})", file=sys.stderr)
        sys.exit(1)
    with open(log, errors="replace") as f:
        fired = "The server is fired up and ready to roll" in f.read()
    if fired:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as r:
                if r.status == 200:
                    sys.exit(0)
        except OSError:
            pass
    time.sleep(0.25)
print(f"serve.sh: not ready after {timeout:.0f} s (log: {log})", file=sys.stderr)
sys.exit(2)
PY
waiter=$!
set +e
wait "$waiter"
rc=$?
set -e
waiter=""
if ((stopping)); then
  exit 143
fi
if ((rc != 0)); then
  trap - TERM INT
  stop
  tail -n 30 "$log" >&2
  exit 1
fi
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
echo "READY url=http://127.0.0.1:$port pid=$pid pgid=$pid log=$log seconds=$secs"

set +e
while :; do
  wait "$pid"
  rc=$?
  # wait returns early (rc > 128) when a trapped signal arrives; loop until the server is gone.
  kill -0 "$pid" 2>/dev/null || break
done
((stopping)) && kill -KILL -- "-$pid" 2>/dev/null
exit "$rc"
