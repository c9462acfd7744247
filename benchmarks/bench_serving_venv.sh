#!/usr/bin/env bash
# Side venv with SGLang's own bench_serving client, for
# `benchmarks/client_ceiling.py --baseline bench_serving` (its Python client) and, from 0.5.23,
# `--baseline bench_serving_rust` (the same command with `--rust-client`). Nothing of SGLang is
# committed here: the wheel comes from PyPI at set-up time.
#
#   bash benchmarks/bench_serving_venv.sh [VENV]                  # sglang 0.5.23, /tmp/bs-venv-0.5.23
#   SGLANG_VERSION=0.5.10.post1 bash benchmarks/bench_serving_venv.sh /tmp/bs-venv
#   PYTHONPATH=python python3 benchmarks/client_ceiling.py --baseline bench_serving \
#       --baseline-python /tmp/bs-venv-0.5.23/bin/python
#
# Versions (SGLANG_VERSION, default 0.5.23, the newest on PyPI when this was written):
#   0.5.23        client in `sglang.benchmark.serving` (`sglang.bench_serving` is a deprecated alias
#                 that star-imports it and warns); datasets in `sglang.benchmark.datasets`.
#   0.5.10.post1  client in `sglang.bench_serving` (the figures of the older section).
# client_ceiling.py finds the module itself (`--bench-serving-module auto`).
#
# The Rust client (0.5.23): `--rust-client` hands the parsed arguments to the compiled extension
# `sglang.srt.rust_extensions._bench` (PyO3, Tokio; links only libc, libm, libgcc_s), which the sglang
# wheel itself bundles: no other package provides it, and it needs nothing beyond the Python client's
# import chain. The wheel is built for one CPython (0.5.23: cp311), so PYTHON must be that version;
# the check at the end loads the extension and runs its `--help` when the wheel has one.
#
# What it installs: sglang WITHOUT its dependencies (torch, flashinfer, ... are not needed by the
# client), plus exactly what importing the client pulls in, pinned to the versions that were measured
# (transformers and tokenizers at sglang's own pins where it has them: 0.5.23 pins transformers 5.19.0,
# tokenizers 0.23.2 and python-dateutil<3; 0.5.10.post1 pins transformers 5.3.0).
# `$VENV/sglbench-freeze.txt` records the full resolved set, `$VENV/sglbench-module` the client module.
#
# The shim (the only thing not installed from PyPI; written into the venv's site-packages, never into
# this repo's tree), `_sglbench_bs_shim.py`, loaded by a `.pth` file at interpreter start:
#   1. The client imports `sglang.srt.utils.network` (stdlib, psutil, zmq), but the package
#      `sglang/srt/utils/__init__.py` star-imports `common.py`, which needs torch, triton,
#      torchvision and starlette at import time. The shim registers `sglang.srt.utils` as a bare
#      package on the installed directory, so `network.py` (and any other submodule) loads unchanged
#      from the wheel and only that `__init__` is skipped. Needed by both versions.
#   2. 0.5.23 only: `sglang.benchmark.serving` imports the constant FAKE_BOOTSTRAP_HOST from
#      `sglang.srt.disaggregation.utils`, a module that imports torch and torch.distributed (the
#      constant is used only with `--fake-prefill`, which we do not pass). The shim registers a
#      module of that name that holds only that constant, its value read (ast.literal_eval) from the
#      installed file, so it is the wheel's own value. 0.5.10.post1 never imports that module.
# No code of the client's request path is touched.
#
# Tokenizer: bench_serving needs a local one (no hub here). `$VENV/sglbench-tokenizer` is a byte-level
# BPE without merges (one token per byte, 32,000 ids, so random-ids prompts look like real vocab ids),
# saved with transformers so `AutoTokenizer.from_pretrained(dir)` loads it offline.
set -euo pipefail

SGLANG_VERSION=${SGLANG_VERSION:-0.5.23}
VENV=${1:-/tmp/bs-venv-$SGLANG_VERSION}
PY=${PYTHON:-python3}
case "$SGLANG_VERSION" in
0.5.23)
    MODULE=sglang.benchmark.serving
    PINS=(
        aiohttp==3.14.5
        msgspec==0.23.0
        numpy==2.4.6
        orjson==3.13.0
        requests==2.34.2
        tqdm==4.70.1
        transformers==5.19.0
        tokenizers==0.23.2
        huggingface_hub==1.33.0
        pybase64==1.5.1
        pillow==13.0.0
        psutil==7.2.2
        pyzmq==27.3.0
        ipython==9.18.1
        pydantic==2.14.4
        datasets==5.2.0
        python-dateutil==2.9.0.post0
    )
    ;;
0.5.10.post1)
    MODULE=sglang.bench_serving
    PINS=(
        aiohttp==3.14.5
        numpy==2.4.6
        requests==2.34.2
        tqdm==4.70.1
        transformers==5.3.0
        tokenizers==0.22.2
        huggingface_hub==1.33.0
        pybase64==1.5.1
        pillow==13.0.0
        psutil==7.2.2
        pyzmq==27.3.0
        ipython==9.18.1
        pydantic==2.14.4
        datasets==5.2.0
    )
    ;;
*)
    echo "SGLANG_VERSION=$SGLANG_VERSION: no pin set here (known: 0.5.23, 0.5.10.post1)" >&2
    exit 2
    ;;
esac

"$PY" -m venv "$VENV"
# pip then warns that sglang's other requirements (torch, flashinfer, ...) are missing: intended.
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "sglang==$SGLANG_VERSION"
"$VENV/bin/pip" install -q --disable-pip-version-check "${PINS[@]}"

SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cat >"$SITE/_sglbench_bs_shim.py" <<'EOF'
"""Written by sglbench's benchmarks/bench_serving_venv.sh; NOT SGLang code.

Lets SGLang's bench_serving client import without torch (see that script's header):

1. ``sglang.srt.utils`` is registered as a bare package (path = the installed directory), so that
   ``sglang.srt.utils.network`` imports without the package ``__init__``, which star-imports
   ``sglang.srt.utils.common`` and with it torch, triton and torchvision. Submodules load unchanged.
2. ``sglang.srt.disaggregation.utils`` (imports torch) is registered as a module holding only the
   constants the client imports from it, their values read from the installed file's source.
"""

import ast
import importlib.util
import os
import sys
import types

CONSTANTS_ONLY = {"sglang.srt.disaggregation.utils": ("FAKE_BOOTSTRAP_HOST",)}


def _bare_package(root: str, name: str) -> None:
    path = os.path.join(root, *name.split(".")[1:])
    if os.path.isdir(path):
        mod = types.ModuleType(name, "bare package: __init__ skipped by the sglbench shim")
        mod.__path__ = [path]
        mod.__package__ = name
        sys.modules.setdefault(name, mod)


def _constants_only(root: str, name: str, names: tuple) -> None:
    path = os.path.join(root, *name.split(".")[1:]) + ".py"
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except OSError:
        return
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in names:
                values[target.id] = ast.literal_eval(node.value)
    if set(values) != set(names):
        return  # not this layout: leave the real import to fail loudly
    mod = types.ModuleType(name, f"sglbench shim: only {', '.join(names)} from {path}")
    mod.__file__ = path
    mod.__dict__.update(values)
    sys.modules.setdefault(name, mod)


def _install() -> None:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return
    root = list(spec.submodule_search_locations)[0]
    _bare_package(root, "sglang.srt.utils")
    for name, names in CONSTANTS_ONLY.items():
        _constants_only(root, name, names)


_install()
EOF
echo "import _sglbench_bs_shim" >"$SITE/_sglbench_bs_shim.pth"
echo "$MODULE" >"$VENV/sglbench-module"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
"$VENV/bin/python" - "$VENV/sglbench-tokenizer" 32000 <<'EOF'
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

out, size = sys.argv[1], int(sys.argv[2])
vocab = {ch: i for i, ch in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
vocab["<|endoftext|>"] = len(vocab)
while len(vocab) < size:
    vocab[f"<t{len(vocab)}>"] = len(vocab)
tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
PreTrainedTokenizerFast(
    tokenizer_object=tok, eos_token="<|endoftext|>", model_max_length=1 << 20
).save_pretrained(out)
EOF

"$VENV/bin/pip" freeze --disable-pip-version-check >"$VENV/sglbench-freeze.txt"
"$VENV/bin/python" -m "$MODULE" --help >/dev/null
if [ -d "$SITE/sglang/srt/rust_extensions" ]; then
    "$VENV/bin/python" - sglang.srt.rust_extensions._bench <<'EOF' 2>/dev/null
import sys

from sglang.srt.rust_extensions import load_rust_extension

# mode "never": the module bundled in the wheel, never a Cargo build.
ext = load_rust_extension(sys.argv[1], mode="never")
assert callable(ext.run_config) and "torch" not in sys.modules
print(f"rust client: {ext.__file__}")
EOF
    "$VENV/bin/python" -m sglang.benchmark.rust_client --help >/dev/null
fi
"$VENV/bin/python" - "$VENV/sglbench-tokenizer" "$MODULE" "$SGLANG_VERSION" <<'EOF' 2>/dev/null
import importlib
import importlib.metadata
import sys

importlib.import_module(sys.argv[2])
from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(sys.argv[1])
assert len(tok.encode("x" * 128, add_special_tokens=False)) == 128
assert "torch" not in sys.modules
assert importlib.metadata.version("sglang") == sys.argv[3]
print(
    f"bench_serving venv ready: {sys.prefix} (sglang {sys.argv[3]}, python -m {sys.argv[2]}; "
    f"tokenizer {sys.argv[1]}, vocab {tok.vocab_size})"
)
EOF
