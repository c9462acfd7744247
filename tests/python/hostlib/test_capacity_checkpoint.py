"""Weight memory from a checkpoint on disk (safetensors headers, index total_size, file sizes)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from sglbench.hostlib import capacity, checkpoint, sglang_args

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
GiB = 1 << 30


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A header-only safetensors file (data bytes omitted: only the header is read)."""
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    sizes = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "I8": 1}
    for name, (dtype, shape) in tensors.items():
        n = sizes[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)


def test_headers_count_floats_in_model_dtype_and_skip_mtp(tmp_path):
    write_safetensors(
        tmp_path / "model-00001.safetensors",
        {
            "model.layers.0.w": ("BF16", [1024, 1024]),
            "model.layers.0.q": ("F8_E4M3", [1024, 1024]),  # quantized: as stored
            "model.norm": ("F32", [1024]),  # float: counted at the load dtype (2 B)
        },
    )
    write_safetensors(tmp_path / "model-00002.safetensors", {"mtp.layers.0.w": ("BF16", [1024, 1024])})
    est = checkpoint.weights_from_dir(str(tmp_path), tp=2, load_bytes=2.0)
    expected = 1024 * 1024 * 2 + 1024 * 1024 + 1024 * 2
    assert est.source == "safetensors-headers"
    assert est.total_gib == pytest.approx(expected / GiB)
    assert est.per_rank_gib == pytest.approx(expected / GiB / 2)
    with_mtp = checkpoint.weights_from_dir(str(tmp_path), tp=1, keep_mtp=True)
    assert with_mtp.total_gib == pytest.approx((expected + 1024 * 1024 * 2) / GiB)


def test_index_total_size_then_file_sizes(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 3 * GiB}}))
    est = checkpoint.weights_from_dir(str(tmp_path), tp=1)
    assert (est.source, est.total_gib) == ("index-total-size", 3.0)
    other = tmp_path / "bin"
    other.mkdir()
    (other / "pytorch_model.bin").write_bytes(b"\0" * 4096)
    est = checkpoint.weights_from_dir(str(other), tp=1)
    assert est.source == "file-sizes" and est.total_gib == pytest.approx(4096 / GiB)
    assert checkpoint.weights_from_dir(str(tmp_path / "missing"), tp=1) is None


def test_corrupt_safetensors_falls_back_to_index(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 16)
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": GiB}}))
    assert checkpoint.weights_from_dir(str(tmp_path), tp=1).source == "index-total-size"


def test_plan_command_reads_weights_from_model_dir(tmp_path):
    model = tmp_path / "llama"
    shutil.copytree(MODELS / "llama-3.1-8b-instruct", model)
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16 * GiB}}))
    p = capacity.plan_command(["--model-path", str(model), "--tp-size", "2"], gpu="H100")
    assert (p.weights_source, p.weights_gib) == ("index-total-size", 8.0)
    assert not any("ESTIMATE" in n for n in p.notes)


def test_without_weights_the_estimate_is_labelled():
    p = capacity.plan_command(["--model-path", str(MODELS / "llama-3.1-8b-instruct")], gpu="H100")
    assert p.weights_source == "estimate"
    assert p.weights_gib == pytest.approx(8.03e9 * 2 / GiB, rel=0.01)
    assert any("ESTIMATE" in n for n in p.notes)


def test_fp8_checkpoint_estimate_uses_about_one_byte_per_param():
    cfg = json.loads((MODELS / "deepseek-v3" / "config.json").read_text())
    args = sglang_args.parse_launch_args_or_raise(["--model-path", "x", "--tp-size", "8"])
    p = capacity.plan(args, cfg, None, 141.0)
    assert p.weights_gib == pytest.approx(671e9 * 1.05 / GiB / 8, rel=0.03)


# --- Hugging Face cache snapshots (files are symlinks into blobs/) -----------------------------------


def _header_only(tensors: dict[str, tuple[str, list[int]]], tmp_path: Path) -> bytes:
    write_safetensors(tmp_path / "scratch.safetensors", tensors)
    data = (tmp_path / "scratch.safetensors").read_bytes()
    (tmp_path / "scratch.safetensors").unlink()
    return data


def test_weights_from_a_cache_snapshot_follow_the_blob_links(tmp_path, hub_cache):
    shard = _header_only({"model.layers.0.w": ("BF16", [1024, 1024])}, tmp_path)
    snapshot = hub_cache.add("org/m", {"config.json": "{}", "model.safetensors": shard})
    assert (snapshot / "model.safetensors").is_symlink()
    est = checkpoint.weights_from_dir(str(snapshot), tp=1)
    assert est.source == "safetensors-headers" and est.total_gib == pytest.approx(2 * 1024 * 1024 / GiB)


def test_dangling_links_are_ignored(tmp_path, hub_cache):
    snapshot = hub_cache.add("org/m", {"config.json": "{}", "pytorch_model.bin": b"x" * 4096})
    (snapshot / "model-00002.bin").symlink_to("../../blobs/deleted")
    est = checkpoint.weights_from_dir(str(snapshot), tp=1)
    assert est.source == "file-sizes" and est.total_gib == pytest.approx(4096 / GiB)
    assert est.detail == "sum of 1 weight file sizes"


def test_partial_download_uses_the_index_total_not_the_shards_present(tmp_path, hub_cache):
    shard = _header_only({"model.layers.0.w": ("BF16", [1024, 1024])}, tmp_path)
    index = {
        "metadata": {"total_size": 3 * GiB},
        "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"},
    }
    snapshot = hub_cache.add(
        "org/m",
        {"model-00001-of-00002.safetensors": shard, "model.safetensors.index.json": json.dumps(index)},
    )
    est = checkpoint.weights_from_dir(str(snapshot), tp=1)
    assert (est.source, est.total_gib) == ("index-total-size", 3.0)
    assert "1 indexed shard(s) not on disk" in est.detail
    # complete: the headers win again
    (snapshot / "model-00002-of-00002.safetensors").symlink_to(snapshot / "model-00001-of-00002.safetensors")
    assert checkpoint.weights_from_dir(str(snapshot), tp=1).source == "safetensors-headers"


def test_plan_command_sizes_a_hub_id_from_its_snapshot(hub_cache):
    index = {"metadata": {"total_size": 16 * GiB}}
    hub_cache.add(
        "meta-llama/Llama-3.1-8B-Instruct",
        {
            "config.json": (MODELS / "llama-3.1-8b-instruct" / "config.json").read_text(),
            "model.safetensors.index.json": json.dumps(index),
        },
    )
    p = capacity.plan_command(
        ["--model-path", "meta-llama/Llama-3.1-8B-Instruct", "--tp-size", "2"],
        gpu="H100",
        env={"HF_HUB_CACHE": str(hub_cache.root)},
    )
    assert (p.weights_source, p.weights_gib) == ("index-total-size", 8.0)
