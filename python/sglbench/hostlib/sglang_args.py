"""SGLang ``launch_server`` command-line flags, by their real spelling.

Stdlib only: this file is shipped to the GPU host as ``ansible.module_utils.sglbench_sglang_args``
and is also what the SGLang stand-in parses its command line with, so a unit's ``ExecStart`` is
checked the same way on the controller, on the host, and by the stand-in.

The destination names are SGLang's ``ServerArgs`` field names. Defaults are SGLang's ([V1]
``srt/server_args.py``); ``None`` means "SGLang decides at startup" (see the capacity planner for
how). Flags that differ between SGLang versions keep every spelling we know of as an alias.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

# Speculative algorithms this project knows. SGLang V2+ accepts any registered name; we accept
# these (case-insensitive) and reject others so a typo fails before a GPU is touched.
SPEC_ALGORITHMS: tuple[str, ...] = (
    "EAGLE",
    "EAGLE3",
    "NEXTN",
    "STANDALONE",
    "NGRAM",
    "DFLASH",
    "DDTREE",
)
# Algorithms that load a separate draft checkpoint (--speculative-draft-model-path required).
DRAFT_MODEL_ALGORITHMS: frozenset[str] = frozenset({"EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "DDTREE"})

KV_CACHE_DTYPES: tuple[str, ...] = ("auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1", "mxfp8")
MAMBA_SSM_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
MAMBA_STRATEGIES: tuple[str, ...] = ("auto", "no_buffer", "extra_buffer", "extra_buffer_lazy")


class SglangArgsError(ValueError):
    """A launch_server command line that SGLang would reject (message names the flag)."""


class _RaisingParser(argparse.ArgumentParser):
    """ArgumentParser that raises instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SglangArgsError(message)


def _spec_algorithm(value: str) -> str:
    upper = value.upper()
    if upper not in SPEC_ALGORITHMS:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {value!r} (choose from {', '.join(SPEC_ALGORITHMS)})"
        )
    return upper


def _fraction(value: str) -> float:
    number = float(value)
    if not 0.0 < number < 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not in (0, 1)")
    return number


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    # Model and tokenizer
    add("--model-path", "--model", dest="model_path", required=True)
    add("--tokenizer-path", dest="tokenizer_path", default=None)
    add("--trust-remote-code", dest="trust_remote_code", action="store_true")
    add("--dtype", dest="dtype", default="auto")
    add("--quantization", dest="quantization", default=None)
    add("--context-length", dest="context_length", type=int, default=None)
    add("--served-model-name", dest="served_model_name", default=None)
    add("--revision", dest="revision", default=None)
    add("--load-format", dest="load_format", default="auto")
    # HTTP server
    add("--host", dest="host", default="127.0.0.1")
    add("--port", dest="port", type=int, default=30000)
    add("--api-key", dest="api_key", default=None)
    add("--admin-api-key", dest="admin_api_key", default=None)
    add("--skip-server-warmup", dest="skip_server_warmup", action="store_true")
    add("--log-level", dest="log_level", default="info")
    add("--log-level-http", dest="log_level_http", default=None)
    add("--enable-metrics", dest="enable_metrics", action="store_true")
    add("--enable-cache-report", dest="enable_cache_report", action="store_true")
    add("--decode-log-interval", dest="decode_log_interval", type=int, default=40)
    add("--stream-interval", dest="stream_interval", type=int, default=1)
    add("--incremental-streaming-output", dest="incremental_streaming_output", action="store_true")
    add("--random-seed", dest="random_seed", type=int, default=None)
    # Parallelism
    add("--tp-size", "--tp", "--tensor-parallel-size", dest="tp_size", type=int, default=1)
    add("--dp-size", "--dp", "--data-parallel-size", dest="dp_size", type=int, default=1)
    add("--pp-size", "--pp", "--pipeline-parallel-size", dest="pp_size", type=int, default=1)
    add("--enable-dp-attention", dest="enable_dp_attention", action="store_true")
    add("--base-gpu-id", dest="base_gpu_id", type=int, default=0)
    # Memory and scheduling
    add("--mem-fraction-static", dest="mem_fraction_static", type=_fraction, default=None)
    add("--max-running-requests", dest="max_running_requests", type=int, default=None)
    add("--max-queued-requests", dest="max_queued_requests", type=int, default=None)
    add("--max-total-tokens", dest="max_total_tokens", type=int, default=None)
    add("--chunked-prefill-size", dest="chunked_prefill_size", type=int, default=None)
    add("--max-prefill-tokens", dest="max_prefill_tokens", type=int, default=16384)
    add("--page-size", dest="page_size", type=int, default=None)
    add("--kv-cache-dtype", dest="kv_cache_dtype", choices=KV_CACHE_DTYPES, default="auto")
    add("--schedule-policy", dest="schedule_policy", default="fcfs")
    add("--schedule-conservativeness", dest="schedule_conservativeness", type=float, default=1.0)
    add("--disable-radix-cache", dest="disable_radix_cache", action="store_true")
    add("--disable-overlap-schedule", dest="disable_overlap_schedule", action="store_true")
    add("--attention-backend", dest="attention_backend", default=None)
    add("--sampling-backend", dest="sampling_backend", default=None)
    # CUDA graphs
    add("--disable-cuda-graph", dest="disable_cuda_graph", action="store_true")
    add("--cuda-graph-max-bs", dest="cuda_graph_max_bs", type=int, default=None)
    add("--cuda-graph-bs", dest="cuda_graph_bs", type=int, nargs="+", default=None)
    add("--disable-piecewise-cuda-graph", dest="disable_piecewise_cuda_graph", action="store_true")
    # Hybrid Mamba / linear attention
    add("--max-mamba-cache-size", dest="max_mamba_cache_size", type=int, default=None)
    add("--mamba-ssm-dtype", dest="mamba_ssm_dtype", choices=MAMBA_SSM_DTYPES, default=None)
    add("--mamba-full-memory-ratio", dest="mamba_full_memory_ratio", type=float, default=0.9)
    add(
        "--mamba-scheduler-strategy",
        "--mamba-radix-cache-strategy",  # V4 spelling
        dest="mamba_scheduler_strategy",
        choices=MAMBA_STRATEGIES,
        default="auto",
    )
    add("--mamba-track-interval", dest="mamba_track_interval", type=int, default=256)
    # Speculative decoding
    add("--speculative-algorithm", dest="speculative_algorithm", type=_spec_algorithm, default=None)
    add(
        "--speculative-draft-model-path",
        "--speculative-draft-model",
        dest="speculative_draft_model_path",
        default=None,
    )
    add("--speculative-draft-model-revision", dest="speculative_draft_model_revision", default=None)
    add("--speculative-num-steps", dest="speculative_num_steps", type=int, default=None)
    add("--speculative-eagle-topk", dest="speculative_eagle_topk", type=int, default=None)
    add("--speculative-num-draft-tokens", dest="speculative_num_draft_tokens", type=int, default=None)
    add("--speculative-dflash-block-size", dest="speculative_dflash_block_size", type=int, default=None)
    add("--speculative-ddtree-budget", dest="speculative_ddtree_budget", type=int, default=None)
    add(
        "--speculative-draft-window-size",
        "--speculative-dflash-draft-window-size",
        dest="speculative_draft_window_size",
        type=int,
        default=None,
    )
    add("--speculative-dflash-enable-ddtree", dest="speculative_dflash_enable_ddtree", action="store_true")
    add("--speculative-draft-attention-backend", dest="speculative_draft_attention_backend", default=None)
    add("--speculative-accept-threshold-single", dest="speculative_accept_threshold_single", type=float,
        default=1.0)
    add(
        "--speculative-accept-threshold-acc", dest="speculative_accept_threshold_acc", type=float, default=1.0
    )
    add("--speculative-draft-model-quantization", dest="speculative_draft_model_quantization", default=None)


def build_parser(prog: str = "launch_server", *, raising: bool = False) -> argparse.ArgumentParser:
    """Return a parser for SGLang's launch_server flags.

    ``raising=True`` gives a parser whose errors raise :class:`SglangArgsError` instead of
    printing usage and exiting with status 2 (argparse's behaviour, which the stand-in keeps).
    """
    cls = _RaisingParser if raising else argparse.ArgumentParser
    parser = cls(prog=prog, allow_abbrev=False, description="SGLang server (launch_server flags).")
    _add_arguments(parser)
    return parser


def _check(ns: argparse.Namespace) -> None:
    """Cross-flag rules SGLang enforces at ServerArgs time (messages name the flags)."""
    for flag, value in (("--tp-size", ns.tp_size), ("--dp-size", ns.dp_size), ("--pp-size", ns.pp_size)):
        if value < 1:
            raise SglangArgsError(f"{flag} must be >= 1, got {value}")
    if not 0 < ns.port < 65536:
        raise SglangArgsError(f"--port must be in 1..65535, got {ns.port}")
    if ns.max_running_requests is not None and ns.max_running_requests < 1:
        raise SglangArgsError(f"--max-running-requests must be >= 1, got {ns.max_running_requests}")
    if ns.context_length is not None and ns.context_length < 1:
        raise SglangArgsError(f"--context-length must be >= 1, got {ns.context_length}")
    algo = ns.speculative_algorithm
    if algo in DRAFT_MODEL_ALGORITHMS and not ns.speculative_draft_model_path:
        raise SglangArgsError(
            f"--speculative-algorithm {algo} needs --speculative-draft-model-path (the draft checkpoint)"
        )
    if algo is None and ns.speculative_draft_model_path:
        raise SglangArgsError("--speculative-draft-model-path is set but --speculative-algorithm is not")
    block, draft = ns.speculative_dflash_block_size, ns.speculative_num_draft_tokens
    if algo in ("DFLASH", "DDTREE") and block is not None and draft is not None and block != draft:
        raise SglangArgsError(
            f"--speculative-dflash-block-size ({block}) and --speculative-num-draft-tokens ({draft}) "
            "must match"
        )


def parse_launch_args(argv: Sequence[str], prog: str = "launch_server") -> argparse.Namespace:
    """Parse like SGLang: on error print usage + message to stderr and exit with status 2."""
    parser = build_parser(prog)
    ns = parser.parse_args(list(argv))
    try:
        _check(ns)
    except SglangArgsError as exc:
        parser.error(str(exc))
    return ns


def parse_launch_args_or_raise(argv: Sequence[str]) -> argparse.Namespace:
    """Parse, raising :class:`SglangArgsError` (message names the flag) instead of exiting."""
    ns = build_parser(raising=True).parse_args(list(argv))
    _check(ns)
    return ns


def to_argv(flags: dict[str, Any]) -> list[str]:
    """Render ``{"--flag": value}`` (or ``{"flag_name": value}``) as an argv list.

    ``True`` renders a bare switch, ``False``/``None`` omit the flag, lists render as several
    values. Keys may be given as ``mem_fraction_static`` or ``--mem-fraction-static``.
    """
    argv: list[str] = []
    for key, value in flags.items():
        flag = key if key.startswith("--") else "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv.append(flag)
            argv.extend(str(v) for v in value)
        else:
            argv.extend([flag, str(value)])
    return argv


def draft_token_count(ns: argparse.Namespace) -> int:
    """Tokens verified per step (SGLang's resolved ``speculative_num_draft_tokens``), 0 without spec.

    DFLASH: the block size (flag, alias, else 16 — the draft config may override, see the planner).
    DDTREE: ``budget + 1`` tree nodes verified. EAGLE*: ``steps + 1`` when topk is 1, default (3,1,4).
    NGRAM: 12 by default.
    """
    algo = ns.speculative_algorithm
    if algo is None:
        return 0
    if algo == "DFLASH":
        return ns.speculative_dflash_block_size or ns.speculative_num_draft_tokens or 16
    if algo == "DDTREE":
        if ns.speculative_ddtree_budget is not None:
            return ns.speculative_ddtree_budget + 1
        return ns.speculative_dflash_block_size or ns.speculative_num_draft_tokens or 16
    if algo == "NGRAM":
        return ns.speculative_num_draft_tokens or 12
    if ns.speculative_num_draft_tokens:
        return ns.speculative_num_draft_tokens
    steps = ns.speculative_num_steps or 3
    topk = ns.speculative_eagle_topk or 1
    return steps + 1 if topk == 1 else 4
