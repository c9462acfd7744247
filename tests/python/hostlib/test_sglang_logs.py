# ruff: noqa: E501, W291  (SGLang log lines are quoted verbatim)
"""SGLang log regexes and readers against hand-written lines in SGLang's formats (sglang.md §3)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sglbench.hostlib import sglang_logs

V1_SPEC_TP1 = """\
[2026-05-01 12:00:00] Init torch distributed begin.
[2026-05-01 12:00:01] Init torch distributed ends. elapsed=0.61 s, mem usage=0.62 GB
[2026-05-01 12:00:01] Load weight begin. avail mem=94.24 GB
[2026-05-01 12:00:40] Load weight end. elapsed=38.91 s, type=Qwen3_5ForConditionalGeneration, avail mem=43.19 GB, mem usage=51.05 GB.
[2026-05-01 12:00:40] Using KV cache dtype: torch.bfloat16
[2026-05-01 12:00:40] Mamba Cache is allocated. max_mamba_cache_size: 4, conv_state size: 0.01GB, ssm_state size: 0.70GB intermediate_ssm_state_cache size: 2.25GB intermediate_conv_window_cache size: 0.04GB 
[2026-05-01 12:00:40] KV Cache is allocated. #tokens: 11893, K size: 0.36 GB, V size: 0.36 GB
[2026-05-01 12:00:40] Memory pool end. avail mem=39.47 GB
[2026-05-01 12:00:41] Capture cuda graph begin. This can take up to several minutes. avail mem=39.40 GB
[2026-05-01 12:01:10] Capture cuda graph end. Time elapsed: 29.50 s. mem usage=0.51 GB. avail mem=38.89 GB.
[2026-05-01 12:01:11] Load weight begin. avail mem=38.89 GB
[2026-05-01 12:01:13] Load weight end. elapsed=2.10 s, type=DFlashDraftModel, avail mem=35.67 GB, mem usage=3.22 GB.
[2026-05-01 12:01:13] KV Cache is allocated. #tokens: 11893, K size: 0.11 GB, V size: 0.11 GB
[2026-05-01 12:01:14] Initialized DFLASH draft runner. attention_backend=flashinfer, model=/m/d, block_size=16, draft_window_size=None, compact_cache=False
[2026-05-01 12:01:14] max_total_num_tokens=11893, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4, context_len=32768, available_gpu_mem=35.20 GB
[2026-05-01 12:01:15] Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)
[2026-05-01 12:01:16] The server is fired up and ready to roll!
[2026-05-01 12:02:00] Decode batch, #running-req: 4, #full token: 2100, full token usage: 0.18, mamba num: 4, mamba usage: 1.00, accept len: 6.10, accept rate: 0.34, cuda graph: True, gen throughput (token/s): 429.69, #queue-req: 3
"""

V3_TP2 = """\
[2026-06-20 08:00:00 TP0] Load weight begin. avail mem=93.70 GB
[2026-06-20 08:00:00 TP1] Load weight begin. avail mem=93.71 GB
[2026-06-20 08:00:20 TP1] Load weight end. elapsed=20.01 s, type=LlamaForCausalLM, avail mem=86.20 GB, mem usage=7.50 GB.
[2026-06-20 08:00:20 TP0] Load weight end. elapsed=20.00 s, type=LlamaForCausalLM, avail mem=86.19 GB, mem usage=7.51 GB.
[2026-06-20 08:00:21 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1200000, K size: 36.62 GB, V size: 36.62 GB
[2026-06-20 08:00:21 TP1] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 1200000, K size: 36.62 GB, V size: 36.62 GB
[2026-06-20 08:00:21 TP0] Max concurrent requests (per dp worker) from the finalized token capacity: max_num_reqs=4096.
[2026-06-20 08:00:21 TP0] Memory pool end. avail mem=12.80 GB
[2026-06-20 08:00:30 TP0] max_total_num_tokens=1200000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=131072, available_gpu_mem=11.90 GB
"""


def test_parse_v1_spec_log() -> None:
    p = sglang_logs.parse_startup_log(V1_SPEC_TP1)
    assert p["tp_size"] == 1
    assert (p["load_begin_avail_gib"], p["weights_gib"], p["draft_weights_gib"]) == (94.24, 51.05, 3.22)
    assert (p["model_class"], p["draft_model_class"]) == (
        "Qwen3_5ForConditionalGeneration",
        "DFlashDraftModel",
    )
    assert p["kv"] == {"tokens": 11893, "dtype": None, "k_gib": 0.36, "v_gib": 0.36, "kv_gib": None}
    assert p["draft_kv"]["k_gib"] == 0.11
    assert p["mamba"] == {
        "slots": 4,
        "conv_gib": 0.01,
        "ssm_gib": 0.70,
        "intermediate_ssm_gib": 2.25,
        "intermediate_conv_gib": 0.04,
    }
    assert p["pool_end_avail_gib"] == 39.47
    assert p["cuda_graph"] == [{"elapsed_s": 29.5, "mem_gib": 0.51, "avail_gib": 38.89}]
    assert (p["max_total_num_tokens"], p["max_running_requests"], p["context_len"]) == (11893, 4, 32768)
    assert p["available_gpu_mem_gib"] == 35.20
    assert p["uvicorn"] == {"url": "http://127.0.0.1:30000", "host": "127.0.0.1", "port": 30000}
    assert p["ready"] is True and p["dflash_block_size"] == 16
    assert p["decode"] == [{"running": 4, "accept_len": 6.10, "accept_rate": 0.34, "gen_throughput": 429.69}]


def test_parse_v3_tp2_counts_rank0_only() -> None:
    p = sglang_logs.parse_startup_log(V3_TP2)
    assert p["tp_size"] == 2
    assert p["load_begin_avail_gib"] == 93.70 and p["weights_gib"] == 7.51
    assert p["kv"]["dtype"] == "torch.float8_e4m3fn" and p["draft_kv"] is None
    assert p["max_num_reqs"] == 4096 and p["ready"] is False


def test_parse_mla_kv_line_and_partial_log() -> None:
    p = sglang_logs.parse_startup_log(
        "[2026-05-01 12:00:40] KV Cache is allocated. #tokens: 500000, KV size: 32.50 GB\n"
    )
    assert p["kv"]["kv_gib"] == 32.5 and p["max_total_num_tokens"] == 500000 and p["summary"] is None


def test_decode_line_without_spec() -> None:
    m = sglang_logs.DECODE.search(
        "Decode batch, #running-req: 7, #token: 900, token usage: 0.01, cuda graph: True, "
        "gen throughput (token/s): 181.20, #queue-req: 0"
    )
    assert m and m.group("run") == "7" and m.group("acc") is None and m.group("tps") == "181.20"


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        (
            V1_SPEC_TP1.split("[2026-05-01 12:00:41]")[0]
            + "[2026-05-01 12:00:41 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            + '  File "x.py", line 296, in __init__\nAssertionError: max_running_request is zero\n',
            "zero_requests",
        ),
        ("AssertionError: capture_bs=[0]\n", "zero_requests"),
        (
            "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
            "max_mamba_cache_size=2, mamba_ratio=5, resulting max_num_reqs=0.\n",
            "zero_requests",
        ),
        (
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: "
            "mem_fraction_static=0.5\n",
            "not_enough_memory",
        ),
        (
            "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5.\n",
            "not_enough_memory",
        ),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n", "cuda_oom"),
        (
            "[2026-05-01 12:01:15] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): "
            "address already in use\n",
            "port_in_use",
        ),
        ("launch_server.py: error: unrecognized arguments: --bogus\n", "bad_args"),
        ("ModuleNotFoundError: No module named 'sgl_kernel'\n", "bad_args"),
        ("[2026-05-01 12:00:01] Load weight begin. avail mem=94.24 GB\n", "readiness_timeout"),
        (V1_SPEC_TP1 + "RuntimeError: something odd\n", "unknown"),
    ],
)
def test_classify_failure(text: str, cause: str) -> None:
    result = sglang_logs.classify_failure(text)
    assert result["cause"] == cause
    assert result["cause"] in sglang_logs.FAILURE_CAUSES
    if cause not in ("readiness_timeout", "unknown"):
        assert result["lines"]


def test_split_line_tags() -> None:
    assert sglang_logs.split_line("[2026-05-01 12:00:00 DP1 TP3] hello") == ("hello", 3)
    assert sglang_logs.split_line("[2026-05-01 12:00:00] hello") == ("hello", None)
    assert sglang_logs.split_line("no prefix") == ("no prefix", None)


def test_real_cpu_engine_startup_lines_parse() -> None:
    """The lines the real SGLang 0.5.23 printed on the CPU engine (tests/fixtures/real_sglang, numbers
    recorded as N): the summary says available_cpu_mem= there, available_gpu_mem= on a GPU."""
    shapes = json.loads(
        (Path(__file__).parents[2] / "fixtures" / "real_sglang" / "0.5.23" / "log_lines.json").read_text()
    )
    numbers = iter(range(100, 1000, 7))

    def fill(shape: str) -> str:
        return "[2026-12-01 06:49:29] " + re.sub(r"\bN\b", lambda _: str(next(numbers)), shape)

    keys = ("load_weight_begin", "load_weight_end", "kv_cache_allocated", "memory_pool_end", "summary")
    text = "\n".join(fill(shapes[k]) for k in (*keys, "uvicorn", "ready", "decode_batch"))
    p = sglang_logs.parse_startup_log(text)
    assert p["summary"] is not None and p["summary"]["device"] == "cpu"
    assert p["available_cpu_mem_gib"] is not None and p["available_gpu_mem_gib"] is None
    assert p["max_total_num_tokens"] == p["summary"]["max_total_num_tokens"]
    assert p["max_running_requests"] is not None and p["context_len"] is not None
    assert p["weights_gib"] is not None and p["model_class"] == "Qwen2ForCausalLM"
    assert p["kv"]["dtype"] == "torch.bfloat16" and p["pool_end_avail_gib"] is not None
    assert p["ready"] and p["uvicorn"]["port"] > 0
    assert len(p["decode"]) == 1 and p["decode"][0]["gen_throughput"] > 0  # "cpu graph: False" too


def test_0523_cuda_graph_capture_lines() -> None:
    """0.5.23 names the captured graph and adds bs= to the decode one (cuda_graph_setup.py)."""
    text = (
        "[2026-12-01 06:00:00] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, "
        "avail mem=20.00 GB\n"
        "[2026-12-01 06:00:09] Capture target decode CUDA graph end. bs=[1, 2, 4], elapsed=9.12 s, "
        "mem usage=1.25 GB, avail mem=18.75 GB.\n"
        "[2026-12-01 06:00:10] Capture target prefill CUDA graph end. elapsed=1.00 s, mem usage=0.50 GB, "
        "avail mem=18.25 GB.\n"
    )
    graphs = sglang_logs.parse_startup_log(text)["cuda_graph"]
    assert graphs == [
        {"elapsed_s": 9.12, "mem_gib": 1.25, "avail_gib": 18.75},
        {"elapsed_s": 1.0, "mem_gib": 0.5, "avail_gib": 18.25},
    ]
    assert sglang_logs.GRAPH_BEGIN.search(text)


def test_cpu_engine_negative_weight_memory() -> None:
    """The CPU engine measures free host RAM around the load, so a tiny model can log mem usage=-0.00
    (seen on the real-SGLang sim host, 0.5.23); the line must still give the model class."""
    line = (
        "[2026-12-01 07:17:47] Load weight end. elapsed=0.03 s, type=Qwen3ForCausalLM, avail mem=20.18 GB, "
        "mem usage=-0.00 GB."
    )
    p = sglang_logs.parse_startup_log(line)
    assert p["model_class"] == "Qwen3ForCausalLM" and p["weights_gib"] == 0.0


@pytest.mark.parametrize(
    ("wait_outcome", "unit_result", "text", "cause"),
    [
        ("ready", "success", "AssertionError: max_running_request is zero\n", None),  # did not fail
        (None, "", "nothing\n", None),
        ("unit_ended", "exit-code", "AssertionError: max_running_request is zero\n", "zero_requests"),
        ("ready", "signal", "The server is fired up and ready to roll!\n", "unknown"),  # killed after ready
        ("timeout", "", "The server is fired up and ready to roll!\n", "readiness_timeout"),
        ("timeout", "", "Load weight begin. avail mem=10.00 GB\n", "readiness_timeout"),
    ],
)
def test_classify_start(wait_outcome: str | None, unit_result: str, text: str, cause: str | None) -> None:
    verdict = sglang_logs.classify_start(text, wait_outcome, unit_result)
    assert verdict["cause"] == cause
    if cause is None:
        assert verdict["lines"] == []
    elif cause == "zero_requests":
        assert verdict["lines"] == ["AssertionError: max_running_request is zero"]
