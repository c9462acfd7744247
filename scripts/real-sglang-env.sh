#!/usr/bin/env bash
# Set up (or reuse) a pinned, real SGLang that serves tiny models on the CPU.
#
#   scripts/real-sglang-env.sh            # prints progress on stderr, the env's root last on stdout
#   SGLBENCH_REAL_SGLANG_HOME=/some/dir scripts/real-sglang-env.sh
#
# What it makes, under $SGLBENCH_REAL_SGLANG_HOME (default /var/cache/sglbench/real-sglang-<version>),
# outside the work tree so it survives fresh clones:
#   venv/          python venv with sglang==$SGLANG_VERSION from PyPI (~11 GB; cold ~4 min, 4.7 GB download)
#   lib/           libcuda.so.1 stand-in compiled from scripts/real-sglang/libcuda_stub.c
#   models/        tiny model directories (deterministic weights as safetensors; see make_tiny_models.py)
#   cpu_spec_ops/  pure-torch sgl_kernel CPU ops for speculative decoding + the sitecustomize hook that
#                  installs them (copied from scripts/real-sglang/cpu_spec_ops/, on PYTHONPATH via env.sh)
#   cpu-spec-ops.txt  their check against the installed wheels: "ok: ..." or ONE mismatch line
#   env.sh         the environment the server needs (sourced by scripts/real-sglang/serve.sh)
#   manifest.json  what was installed (versions, models)
# Each step leaves a stamp in stamps/; a re-run whose stamps all match is a no-op (<1 s).
#
# Exit codes: 0 ready; 3 cannot run here (not root, no gcc, no python>=3.11, too little disk,
# not Linux x86_64): callers skip; 1 a real failure.
set -euo pipefail

SGLANG_VERSION=0.5.23
NEED_FREE_GB=16

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SRC="$HERE/real-sglang"
ROOT="${SGLBENCH_REAL_SGLANG_HOME:-/var/cache/sglbench/real-sglang-$SGLANG_VERSION}"
VENV="$ROOT/venv"
STAMPS="$ROOT/stamps"

log() { printf '[real-sglang %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
cannot() { printf 'real-sglang: cannot set up here: %s\n' "$*" >&2; exit 3; }
die() { printf 'real-sglang: FAILED: %s\n' "$*" >&2; exit 1; }

sha() { sha256sum "$@" | awk '{print $1}' | sha256sum | cut -c1-16; }
stamp_ok() { [[ -f "$STAMPS/$1" && "$(cat "$STAMPS/$1")" == "$2" ]]; }
stamp_set() { mkdir -p "$STAMPS" && printf '%s' "$2" >"$STAMPS/$1"; }

# What each step depends on; a change re-runs that step (and rewrites env.sh), not the others.
# A new sglang re-checks the stand-in and regenerates the models too.
want_venv="sglang==$SGLANG_VERSION"
want_stub="$(sha "$SRC/libcuda_stub.c")"
want_models="$(sha "$SRC/make_tiny_models.py")"
want_specops="$(sha "$SRC"/cpu_spec_ops/*.py)"
want_envsh="$(sha "${BASH_SOURCE[0]}")"

# --- fast path: everything in place -------------------------------------------------------------
if stamp_ok venv "$want_venv" && stamp_ok stub "$want_stub" && stamp_ok models "$want_models" \
    && stamp_ok specops "$want_specops" && stamp_ok envsh "$want_envsh" && [[ -x "$VENV/bin/python" ]]; then
  echo "$ROOT"
  exit 0
fi

# --- can it run here at all? --------------------------------------------------------------------
[[ "$(uname -s)" == Linux && "$(uname -m)" == x86_64 ]] \
  || cannot "needs Linux x86_64 (this is $(uname -s) $(uname -m))"
if [[ -z "${SGLBENCH_REAL_SGLANG_HOME:-}" && "$(id -u)" != 0 ]]; then
  cannot "not root: the default home $ROOT needs root; set SGLBENCH_REAL_SGLANG_HOME to a writable dir"
fi
command -v gcc >/dev/null 2>&1 || cannot "no gcc (needed to build the libcuda stand-in)"
command -v flock >/dev/null 2>&1 || cannot "no flock (util-linux)"

PY="${SGLBENCH_REAL_SGLANG_PYTHON:-}"
if [[ -z "$PY" ]]; then
  for cand in python3.11 python3.12 python3; do
    if command -v "$cand" >/dev/null 2>&1 \
        && "$cand" -c 'import sys, venv; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 14))' 2>/dev/null; then
      PY="$(command -v "$cand")"
      break
    fi
  done
fi
[[ -n "$PY" ]] || cannot "no python 3.11-3.13 with venv (sglang $SGLANG_VERSION needs >=3.11)"

mkdir -p "$ROOT" 2>/dev/null || cannot "cannot create $ROOT"
[[ -w "$ROOT" ]] || cannot "$ROOT is not writable"

# One set-up at a time (two test sessions may race).
exec 9>"$ROOT/.lock"
flock 9

# --- step 1: the venv with the pinned sglang ----------------------------------------------------
if ! stamp_ok venv "$want_venv" || [[ ! -x "$VENV/bin/python" ]]; then
  avail_kb="$(df -Pk "$ROOT" | awk 'NR==2 {print $4}')"
  have_gb=$((avail_kb / 1024 / 1024))
  if ((have_gb < NEED_FREE_GB)); then
    cannot "needs ~${NEED_FREE_GB} GB free under $ROOT, only ${have_gb} GB"
  fi
  t0=$SECONDS
  if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv $VENV with $PY ($("$PY" -V 2>&1))"
    "$PY" -m venv "$VENV" || die "python -m venv $VENV"
  fi
  log "installing sglang==$SGLANG_VERSION from PyPI (cold: ~4 min, ~4.7 GB of wheels, ~11 GB venv)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >"$ROOT/pip-install.log" 2>&1 \
    || die "upgrading pip in $VENV"
  # torch comes in as sglang pins it (==2.14.1, the CUDA build; it runs on the CPU).
  "$VENV/bin/python" -m pip install --disable-pip-version-check --no-cache-dir --progress-bar off \
    "sglang==$SGLANG_VERSION" >>"$ROOT/pip-install.log" 2>&1 \
    || { tail -n 20 "$ROOT/pip-install.log" >&2; die "pip install sglang==$SGLANG_VERSION (log: $ROOT/pip-install.log)"; }
  got="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("sglang"))')" \
    || die "sglang does not import its own metadata"
  [[ "$got" == "$SGLANG_VERSION" ]] || die "installed sglang $got, wanted $SGLANG_VERSION"
  log "sglang $got installed in $((SECONDS - t0)) s ($(du -sh "$VENV" 2>/dev/null | cut -f1) on disk)"
  rm -f "$STAMPS/stub" "$STAMPS/models" "$STAMPS/specops" "$STAMPS/envsh"
  stamp_set venv "$want_venv"
fi

# --- step 2: the libcuda stand-in ---------------------------------------------------------------
if ! stamp_ok stub "$want_stub" || [[ ! -f "$ROOT/lib/libcuda.so.1" ]]; then
  log "building the libcuda.so.1 stand-in"
  mkdir -p "$ROOT/lib"
  gcc -shared -fPIC -O2 -Wall -Wl,-soname,libcuda.so.1 \
    -o "$ROOT/lib/libcuda.so.1.tmp" "$SRC/libcuda_stub.c" || die "gcc libcuda_stub.c"
  mv -f "$ROOT/lib/libcuda.so.1.tmp" "$ROOT/lib/libcuda.so.1"
  ln -sfn libcuda.so.1 "$ROOT/lib/libcuda.so"
  log "checking that sgl_kernel imports against it"
  LD_LIBRARY_PATH="$ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$VENV/bin/python" - >&2 <<'PY' \
    || die "sgl_kernel does not import with the libcuda stand-in"
import torch
import sgl_kernel  # noqa: F401  (loads common_ops, which links libcuda.so.1)
assert not torch.cuda.is_available(), "torch sees a GPU through the stand-in"
print(f"  sgl_kernel ok; torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")
PY
  rm -f "$STAMPS/envsh"
  stamp_set stub "$want_stub"
fi

# --- step 3: tiny models ------------------------------------------------------------------------
if ! stamp_ok models "$want_models" || [[ ! -d "$ROOT/models" ]]; then
  log "generating tiny models under $ROOT/models"
  rm -rf "$ROOT/models.tmp"
  HF_HUB_OFFLINE=1 "$VENV/bin/python" "$SRC/make_tiny_models.py" "$ROOT/models.tmp" >&2 \
    || die "make_tiny_models.py"
  rm -rf "$ROOT/models"
  mv "$ROOT/models.tmp" "$ROOT/models"
  rm -f "$STAMPS/envsh"
  stamp_set models "$want_models"
fi

# --- step 4: the pure-torch sgl_kernel CPU ops (speculative decoding) -----------------------------
# A mismatch with the installed wheels (versions, a wrapper's signature, an op that became real) is not
# a set-up failure: the check's one line lands in cpu-spec-ops.txt, serve.sh refuses speculative flags
# with it and the speculative tests skip with it; the hook itself then installs nothing.
if ! stamp_ok specops "$want_specops" || [[ ! -f "$ROOT/cpu-spec-ops.txt" ]]; then
  log "installing and checking the pure-torch sgl_kernel CPU ops"
  rm -rf "$ROOT/cpu_spec_ops.tmp"
  mkdir -p "$ROOT/cpu_spec_ops.tmp"
  cp "$SRC"/cpu_spec_ops/*.py "$ROOT/cpu_spec_ops.tmp/"
  rm -rf "$ROOT/cpu_spec_ops"
  mv "$ROOT/cpu_spec_ops.tmp" "$ROOT/cpu_spec_ops"
  verdict="$(LD_LIBRARY_PATH="$ROOT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" SGLBENCH_CPU_SPEC_OPS=0 \
    "$VENV/bin/python" "$ROOT/cpu_spec_ops/sgl_kernel_cpu_ops.py" --check 2>&1 | tail -n 1)" || true
  [[ -n "$verdict" ]] || verdict="sgl_kernel CPU ops: the check printed nothing"
  printf '%s\n' "$verdict" >"$ROOT/cpu-spec-ops.txt"
  log "  $verdict"
  rm -f "$STAMPS/envsh"
  stamp_set specops "$want_specops"
fi

# --- step 5: env.sh and manifest.json -----------------------------------------------------------
if ! stamp_ok envsh "$want_envsh" || [[ ! -f "$ROOT/env.sh" ]]; then
  cat >"$ROOT/env.sh" <<EOF
# Environment for the real SGLang $SGLANG_VERSION CPU set-up (written by scripts/real-sglang-env.sh).
export SGLBENCH_REAL_SGLANG_HOME="$ROOT"
export SGLBENCH_REAL_SGLANG_VERSION="$SGLANG_VERSION"
export SGLBENCH_REAL_SGLANG_PYTHON="$VENV/bin/python"
export LD_LIBRARY_PATH="$ROOT/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PYTHONPATH="$ROOT/cpu_spec_ops\${PYTHONPATH:+:\$PYTHONPATH}"
export SGLANG_USE_CPU_ENGINE=1
export HF_HUB_OFFLINE=1
export TRANSFORMERS_OFFLINE=1
export HF_HUB_DISABLE_TELEMETRY=1
export DO_NOT_TRACK=1
EOF
  "$VENV/bin/python" - "$ROOT" "$SGLANG_VERSION" >"$ROOT/manifest.json.tmp" <<'PY' || die "manifest"
import importlib.metadata as m, json, pathlib, platform, sys
root, version = pathlib.Path(sys.argv[1]), sys.argv[2]
models = {}
for d in sorted((root / "models").iterdir()):
    meta = d / "sglbench_model.json"
    models[d.name] = json.loads(meta.read_text()) if meta.exists() else {}
pkgs = {p: m.version(p) for p in ("sglang", "torch", "sglang-kernel", "transformers", "tokenizers")}
print(json.dumps({"sglang": version, "python": platform.python_version(), "packages": pkgs,
                  "root": str(root), "models": models}, indent=2))
PY
  mv -f "$ROOT/manifest.json.tmp" "$ROOT/manifest.json"
  stamp_set envsh "$want_envsh"
fi

log "ready: $ROOT (serve with scripts/real-sglang/serve.sh)"
echo "$ROOT"
