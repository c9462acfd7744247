"""The tiny models' weights (scripts/real-sglang/make_tiny_models.py), as the env's set-up wrote them.

Read from the safetensors headers (no torch here): every weighted model holds the tensors its config
implies, in its config's dtype; the STANDALONE draft is byte for byte the target, the perturbed draft
is not; the generator writes the same bytes again (the env's stamps rebuild the models only when the
generator changes, so a run must not depend on when it ran).
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
from pathlib import Path

import pytest

from real_sglang import HAVE_ENV, NO_REAL_ENV, REPO, ROOT

pytestmark = pytest.mark.real
if not HAVE_ENV:
    pytest.skip(NO_REAL_ENV, allow_module_level=True)

MODELS = ROOT / "models"
WEIGHTED = [
    "tiny-qwen2",
    "tiny-qwen3",
    "tiny-qwen2-draft",
    "tiny-qwen2-draft-perturbed",
    "tiny-eagle-qwen2",
    "tiny-eagle3-qwen3",
]
DTYPES = {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}


def header(path: Path) -> dict[str, dict]:
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        head = json.loads(f.read(size))
    head.pop("__metadata__", None)
    return head


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", WEIGHTED)
def test_weights_match_the_config(name: str) -> None:
    config = json.loads((MODELS / name / "config.json").read_text())
    head = header(MODELS / name / "model.safetensors")
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    assert {t["dtype"] for t in head.values()} == {DTYPES[config["torch_dtype"]]}
    embed = head.get("model.embed_tokens.weight") or head["embed_tokens.weight"]
    assert embed["shape"] == [config["vocab_size"], h]
    layer_ids = {int(k.split(".")[k.split(".").index("layers") + 1]) for k in head if ".layers." in f".{k}"}
    assert layer_ids == set(range(layers))
    q_proj = next(v for k, v in head.items() if k.endswith("layers.0.self_attn.q_proj.weight"))
    in_dim = 2 * h if config["architectures"] == ["LlamaForCausalLMEagle3"] else h
    assert q_proj["shape"] == [config["num_attention_heads"] * config["head_dim"], in_dim]


def test_the_standalone_draft_is_the_target_and_the_perturbed_one_is_not() -> None:
    target = digest(MODELS / "tiny-qwen2" / "model.safetensors")
    assert digest(MODELS / "tiny-qwen2-draft" / "model.safetensors") == target
    perturbed = MODELS / "tiny-qwen2-draft-perturbed" / "model.safetensors"
    assert digest(perturbed) != target
    assert header(perturbed).keys() == header(MODELS / "tiny-qwen2" / "model.safetensors").keys()


def test_models_without_weights_are_the_dummy_loaded_ones() -> None:
    for d in sorted(MODELS.iterdir()):
        assert (d / "model.safetensors").exists() == (d.name in WEIGHTED), d.name


def test_the_generator_writes_the_same_bytes_again(tmp_path: Path) -> None:
    subprocess.run(
        [
            str(ROOT / "venv" / "bin" / "python"),
            str(REPO / "scripts" / "real-sglang" / "make_tiny_models.py"),
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    for name in WEIGHTED:
        assert digest(tmp_path / name / "model.safetensors") == digest(MODELS / name / "model.safetensors"), (
            name
        )
