"""Weight memory per TP rank, from the checkpoint on disk (or estimated from geometry).

Standard library only (ships to the GPU host as ``module_utils/sglbench_hostlib/checkpoint.py``).

Order of evidence, best first:

1. ``*.safetensors`` headers: every tensor's dtype and shape. Floating tensors are counted in the
   dtype SGLang loads them in (the model dtype), quantized ones (int8/uint8/fp8/...) as stored.
   Tensors SGLang does not load for the target (``mtp.*`` multi-token-prediction heads, unless
   the speculative algorithm uses them) are left out.
2. ``model.safetensors.index.json`` ``metadata.total_size`` (bytes as stored, everything included).
3. Sizes of ``*.safetensors`` / ``*.bin`` / ``*.pt`` files.
4. No weights on disk: ``params x bytes/param`` from the config geometry. This is an **estimate**
   and is labelled so (``source="estimate"``).

The per-rank figure is total / tp (TP shards the large matrices; replicated norms and biases are
negligible). SGLang's "Load weight end ... mem usage" line is the ground truth to compare against.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import Any

GiB = float(1 << 30)

_SAFETENSORS_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "U16": 2,
    "U32": 4,
    "U64": 8,
    "F4": 0.5,
}
_FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}
_MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class WeightsEstimate:
    total_gib: float  # whole checkpoint as SGLang would load it (all ranks)
    per_rank_gib: float
    source: str  # "safetensors-headers" | "index-total-size" | "file-sizes" | "estimate" | "given"
    detail: str

    @property
    def is_estimate(self) -> bool:
        return self.source == "estimate"


def _read_header(path: str) -> dict[str, Any]:
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (n,) = struct.unpack("<Q", raw)
        if n <= 0 or n > _MAX_HEADER:
            raise ValueError(f"{path}: implausible safetensors header length {n}")
        header = json.loads(fh.read(n))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: safetensors header is not a JSON object")
    return header


def _skip_tensor(name: str, keep_mtp: bool) -> bool:
    return not keep_mtp and (name.startswith("mtp.") or ".mtp." in name or name.startswith("model.mtp"))


def safetensors_loaded_bytes(paths: list[str], load_bytes: float = 2.0, keep_mtp: bool = False) -> int:
    total = 0.0
    for path in paths:
        for name, meta in _read_header(path).items():
            if name == "__metadata__" or not isinstance(meta, dict):
                continue
            if _skip_tensor(name, keep_mtp):
                continue
            dtype = str(meta.get("dtype", ""))
            numel = 1
            for d in meta.get("shape", []):
                numel *= int(d)
            if dtype in _FLOAT_DTYPES:
                total += numel * load_bytes
            else:
                start, end = (meta.get("data_offsets") or [0, 0])[:2]
                total += (int(end) - int(start)) if end else numel * _SAFETENSORS_BYTES.get(dtype, 1)
    return int(total)


def weights_from_dir(
    model_dir: str, tp: int = 1, load_bytes: float = 2.0, keep_mtp: bool = False
) -> WeightsEstimate | None:
    """Weight memory from a checkpoint directory; None if it holds no weights.

    A Hugging Face cache snapshot (``snapshots/<commit>``, files symlinked into ``blobs/``) works as is;
    dangling links are ignored, and when shards the index lists are missing (a partial download) the
    index's total size is used instead of the headers of the shards that are there.
    """
    if not model_dir or not os.path.isdir(model_dir):
        return None
    names = sorted(n for n in os.listdir(model_dir) if os.path.isfile(os.path.join(model_dir, n)))
    shards = [os.path.join(model_dir, n) for n in names if n.endswith(".safetensors")]
    missing = _missing_indexed_shards(model_dir, names)
    if shards and not missing:
        try:
            total = safetensors_loaded_bytes(shards, load_bytes=load_bytes, keep_mtp=keep_mtp)
            return WeightsEstimate(
                total / GiB,
                total / GiB / tp,
                "safetensors-headers",
                f"{len(shards)} safetensors file(s), floating tensors at {load_bytes:g} B"
                + ("" if keep_mtp else ", mtp.* excluded"),
            )
        except (OSError, ValueError, json.JSONDecodeError):
            pass  # fall through to the index / file sizes
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.isfile(index):
        try:
            with open(index, encoding="utf-8") as fh:
                size = json.load(fh).get("metadata", {}).get("total_size")
            if isinstance(size, int | float) and size > 0:
                return WeightsEstimate(
                    size / GiB,
                    size / GiB / tp,
                    "index-total-size",
                    "model.safetensors.index.json metadata.total_size (as stored)"
                    + (f"; {len(missing)} indexed shard(s) not on disk" if missing else ""),
                )
        except (OSError, ValueError):
            pass
    files = [os.path.join(model_dir, n) for n in names if n.endswith((".safetensors", ".bin", ".pt", ".pth"))]
    if files:
        size = sum(os.path.getsize(f) for f in files)
        return WeightsEstimate(
            size / GiB, size / GiB / tp, "file-sizes", f"sum of {len(files)} weight file sizes"
        )
    return None


def _missing_indexed_shards(model_dir: str, names: list[str]) -> list[str]:
    """Shard files ``model.safetensors.index.json`` maps tensors to that are not in ``names``."""
    try:
        with open(os.path.join(model_dir, "model.safetensors.index.json"), encoding="utf-8") as fh:
            weight_map = json.load(fh).get("weight_map")
    except (OSError, ValueError, AttributeError):
        return []
    if not isinstance(weight_map, dict):
        return []
    return sorted({str(f) for f in weight_map.values()} - set(names))


def bytes_per_param(cfg: dict[str, Any], model_dtype_bytes: float = 2.0) -> float:
    """Average bytes per parameter for the estimate, from ``quantization_config``."""
    quant = cfg.get("quantization_config")
    if not isinstance(quant, dict):
        tc = cfg.get("text_config")
        quant = tc.get("quantization_config") if isinstance(tc, dict) else None
    if not isinstance(quant, dict):
        return model_dtype_bytes
    method = str(quant.get("quant_method", "")).lower()
    bits = quant.get("bits") or quant.get("w_bit")
    if method in ("fp8", "fbgemm_fp8", "w8a8_fp8", "compressed-tensors") and not bits:
        return 1.05  # fp8 linears + bf16 embeddings/norms/scales
    if method in ("modelopt_fp4", "nvfp4") or "fp4" in str(quant.get("quant_algo", "")).lower():
        return 0.6
    if bits:
        return float(bits) / 8.0 + 0.1
    return model_dtype_bytes


def estimate_from_params(params: float, bytes_per: float, tp: int) -> WeightsEstimate:
    total = params * bytes_per
    return WeightsEstimate(
        total / GiB,
        total / GiB / tp,
        "estimate",
        f"ESTIMATE from config geometry: {params / 1e9:.2f} B params x {bytes_per:g} B (no weights on disk)",
    )
