"""Read a model directory's ``config.json`` the way SGLang/transformers would, with their errors."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any


class ModelConfigError(Exception):
    """Startup failure reading a model config; ``str()`` is the exception line SGLang would print."""


def load_config(model_path: str) -> dict[str, Any]:
    """Return the parsed config.json of ``model_path`` or raise :class:`ModelConfigError`."""
    path = os.path.join(model_path, "config.json")
    if not os.path.isfile(path):
        raise ModelConfigError(
            f"OSError: {model_path} does not appear to have a file named config.json. "
            f"Checkout 'https://huggingface.co/{model_path}/tree/main' for available files."
        )
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelConfigError(
            f"OSError: It looks like the config file at '{path}' is not a valid JSON file. ({exc})"
        ) from None
    if not isinstance(data, dict):
        raise ModelConfigError(
            f"OSError: It looks like the config file at '{path}' is not a valid JSON file."
        )
    return data


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language-model part (multimodal configs nest it under ``text_config``)."""
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


@dataclass(frozen=True)
class ModelFacts:
    """What the HTTP side needs to know about the model (geometry lives in the planner)."""

    architecture: str
    model_type: str
    vocab_size: int
    eos_token_ids: tuple[int, ...]
    max_position_embeddings: int | None
    has_image_understanding: bool
    draft_block_size: int | None


def facts(config: dict[str, Any]) -> ModelFacts:
    text = text_config(config)
    archs = config.get("architectures") or ["UnknownForCausalLM"]
    eos = text.get("eos_token_id", config.get("eos_token_id"))
    if isinstance(eos, int):
        eos_ids: tuple[int, ...] = (eos,)
    elif isinstance(eos, list):
        eos_ids = tuple(int(x) for x in eos if isinstance(x, int))
    else:
        eos_ids = ()
    block = config.get("block_size")
    dflash = config.get("dflash_config")
    if block is None and isinstance(dflash, dict):
        block = dflash.get("block_size")
    max_pos = text.get("max_position_embeddings", config.get("max_position_embeddings"))
    return ModelFacts(
        architecture=str(archs[0]),
        model_type=str(config.get("model_type", text.get("model_type", "unknown"))),
        vocab_size=int(text.get("vocab_size", config.get("vocab_size", 32000)) or 32000),
        eos_token_ids=eos_ids,
        max_position_embeddings=int(max_pos) if isinstance(max_pos, int) else None,
        has_image_understanding="vision_config" in config,
        draft_block_size=int(block) if isinstance(block, int) else None,
    )
