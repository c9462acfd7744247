#!/usr/bin/env bash
# Side venv with SGLang's own bench_serving client (sglang 0.5.10.post1), for
# `benchmarks/client_ceiling.py --baseline bench_serving`. Nothing of SGLang is committed here:
# the wheel comes from PyPI at set-up time.
#
#   bash benchmarks/bench_serving_venv.sh [VENV]        # default /tmp/bs-venv
#   PYTHONPATH=python python3 benchmarks/client_ceiling.py --baseline bench_serving \
#       --baseline-python /tmp/bs-venv/bin/python
#
# What it installs: sglang==0.5.10.post1 WITHOUT its dependencies (torch, flashinfer, ... are not
# needed by the client), plus exactly what `import sglang.bench_serving` pulls in, pinned to the
# versions that were measured (transformers at sglang's own pin, 5.3.0). `$VENV/sglbench-freeze.txt`
# records the full resolved set.
#
# One shim (the only thing not installed from PyPI; written into the venv's site-packages, never
# into this repo's tree): bench_serving imports `sglang.srt.utils.network` (NetworkAddress: stdlib,
# psutil, zmq), but the package `sglang/srt/utils/__init__.py` star-imports `common.py`, which
# needs torch, triton, torchvision and starlette at import time. `_sglbench_bs_shim.py`, loaded by a
# `.pth` file at interpreter start, registers `sglang.srt.utils` as a bare package pointing at the
# installed directory, so `network.py` loads unchanged from the wheel and only that `__init__` is
# skipped. No code of bench_serving's request path is touched.
#
# Tokenizer: bench_serving needs a local one (no hub here). `$VENV/sglbench-tokenizer` is a byte-level
# BPE without merges (one token per byte, 32,000 ids, so random-ids prompts look like real vocab ids),
# saved with transformers so `AutoTokenizer.from_pretrained(dir)` loads it offline.
set -euo pipefail

VENV=${1:-/tmp/bs-venv}
PY=${PYTHON:-python3}
SGLANG_VERSION=0.5.10.post1
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

"$PY" -m venv "$VENV"
# pip then warns that sglang's other requirements (torch, flashinfer, ...) are missing: intended.
"$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "sglang==$SGLANG_VERSION"
"$VENV/bin/pip" install -q --disable-pip-version-check "${PINS[@]}"

SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
cat >"$SITE/_sglbench_bs_shim.py" <<'EOF'
"""Written by sglbench's benchmarks/bench_serving_venv.sh; NOT SGLang code.

Registers ``sglang.srt.utils`` as a bare package (path = the installed directory) so that
``sglang.srt.utils.network`` imports without the package ``__init__``, which star-imports
``sglang.srt.utils.common`` and with it torch, triton and torchvision. Submodules load unchanged.
"""

import importlib.util
import os
import sys
import types


def _install() -> None:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return
    path = os.path.join(list(spec.submodule_search_locations)[0], "srt", "utils")
    mod = types.ModuleType("sglang.srt.utils", "bare package: __init__ skipped by the sglbench shim")
    mod.__path__ = [path]
    mod.__package__ = "sglang.srt.utils"
    sys.modules.setdefault("sglang.srt.utils", mod)


_install()
EOF
echo "import _sglbench_bs_shim" >"$SITE/_sglbench_bs_shim.pth"

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
"$VENV/bin/python" -m sglang.bench_serving --help >/dev/null
"$VENV/bin/python" - "$VENV/sglbench-tokenizer" <<'EOF' 2>/dev/null
import sys

import sglang.bench_serving  # noqa: F401
from transformers import AutoTokenizer

tok = AutoTokenizer.from_pretrained(sys.argv[1])
assert len(tok.encode("x" * 128, add_special_tokens=False)) == 128
assert "torch" not in sys.modules
print(f"bench_serving venv ready: {sys.prefix} (tokenizer {sys.argv[1]}, vocab {tok.vocab_size})")
EOF
