"""Small synthetic SGLang flag catalogs (two releases with a rename) for parser tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BASE_FLAGS: list[dict[str, Any]] = [
    {
        "opts": ["--model-path", "--model"],
        "dest": "model_path",
        "action": "store",
        "type": "str",
        "required": True,
    },
    {
        "opts": ["--tp-size", "--tensor-parallel-size"],
        "dest": "tp_size",
        "action": "store",
        "type": "int",
        "default": 1,
    },
    {"opts": ["--port"], "dest": "port", "action": "store", "type": "int", "default": 30000},
    {"opts": ["--mem-fraction-static"], "dest": "mem_fraction_static", "action": "store", "type": "float"},
    {"opts": ["--max-running-requests"], "dest": "max_running_requests", "action": "store", "type": "int"},
    {"opts": ["--speculative-algorithm"], "dest": "speculative_algorithm", "action": "store", "type": "str"},
    {
        "opts": ["--speculative-draft-model-path"],
        "dest": "speculative_draft_model_path",
        "action": "store",
        "type": "str",
    },
    {"opts": ["--disable-radix-cache"], "dest": "disable_radix_cache", "action": "store_true"},
    {
        "opts": ["--kv-cache-dtype"],
        "dest": "kv_cache_dtype",
        "action": "store",
        "type": "str",
        "choices": ["auto", "fp8_e4m3"],
        "default": "auto",
    },
    {
        "opts": ["--page-size"],
        "dest": "page_size",
        "action": "store",
        "type": "int",
        "choices": ["1", "16", "64"],
    },
    {"opts": ["--cuda-graph-bs"], "dest": "cuda_graph_bs", "action": "store", "type": "int", "nargs": "+"},
    {
        "opts": ["--json-model-override-args"],
        "dest": "json_model_override_args",
        "action": "store",
        "type": "json",
        "default": "{}",
    },
    {
        "opts": ["--reasoning-parser"],
        "dest": "reasoning_parser",
        "action": "store",
        "type": "str",
        "choices": ["deepseek-r1", "qwen3"],
    },
    {"opts": ["--enable-lora"], "dest": "enable_lora", "action": "store_true"},
    {
        "opts": ["--enable-metrics", "--no-enable-metrics"],
        "dest": "enable_metrics",
        "action": "bool_optional",
    },
    {
        "opts": ["--max-total-tokens"],
        "dest": "max_total_tokens",
        "action": "store",
        "type": "other:human_readable_int",
    },
]
OLD_ONLY = [
    {
        "opts": ["--mamba-scheduler-strategy"],
        "dest": "mamba_scheduler_strategy",
        "action": "store",
        "type": "str",
        "choices": ["auto", "extra_buffer", "no_buffer"],
        "default": "auto",
    },
]
NEW_ONLY = [
    {
        "opts": ["--mamba-radix-cache-strategy"],
        "dest": "mamba_radix_cache_strategy",
        "action": "store",
        "type": "str",
        "choices": ["auto", "extra_buffer", "extra_buffer_lazy", "no_buffer"],
        "default": "auto",
    },
    {
        "opts": ["--watchdog-timeout"],
        "dest": "watchdog_timeout",
        "action": "store",
        "type": "float",
        "default": 300,
    },
]


def catalog_doc(release: str, flags: list[dict[str, Any]], allow_abbrev: bool = True) -> dict[str, Any]:
    return {
        "schema": "sglbench.sglang_catalog/1",
        "release": release,
        "method": "parser",
        "allow_abbrev": allow_abbrev,
        "flags": sorted(flags, key=lambda f: f["opts"][0]),
    }


def write_catalogs(directory: Path, *, abbrev: bool = True) -> Path:
    """``0.5.10`` (old Mamba spelling) and ``0.5.20`` (renamed, + --watchdog-timeout), with renames.json."""
    directory.mkdir(parents=True, exist_ok=True)
    docs = {
        "0.5.10": catalog_doc("0.5.10", BASE_FLAGS + OLD_ONLY, abbrev),
        "0.5.20": catalog_doc("0.5.20", BASE_FLAGS + NEW_ONLY, abbrev),
    }
    for release, doc in docs.items():
        (directory / f"{release}.json").write_text(json.dumps(doc))
    renames = {
        "schema": "sglbench.sglang_renames/1",
        "renames": [
            {
                "old": "--mamba-scheduler-strategy",
                "new": "--mamba-radix-cache-strategy",
                "last_with_old": "0.5.10",
                "first_with_new": "0.5.20",
                "evidence": "test",
            }
        ],
    }
    (directory / "renames.json").write_text(json.dumps(renames))
    return directory
