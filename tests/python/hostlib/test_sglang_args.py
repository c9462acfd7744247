from __future__ import annotations

import subprocess
import sys

import pytest

from sglbench.hostlib import sglang_args
from sglbench.hostlib.sglang_args import SglangArgsError, parse_launch_args_or_raise


def test_real_spellings_and_aliases_map_to_serverargs_fields() -> None:
    ns = parse_launch_args_or_raise(
        [
            "--model-path", "/models/q",
            "--tp", "4",
            "--mem-fraction-static", "0.75",
            "--max-running-requests", "8",
            "--context-length", "32768",
            "--speculative-algorithm", "dflash",
            "--speculative-draft-model", "/models/d",
            "--speculative-dflash-block-size", "16",
            "--mamba-radix-cache-strategy", "extra_buffer",
            "--cuda-graph-bs", "1", "2", "4",
        ]
    )
    assert ns.tp_size == 4
    assert ns.mem_fraction_static == 0.75
    assert ns.speculative_algorithm == "DFLASH"
    assert ns.speculative_draft_model_path == "/models/d"
    assert ns.mamba_scheduler_strategy == "extra_buffer"
    assert ns.cuda_graph_bs == [1, 2, 4]
    assert sglang_args.draft_token_count(ns) == 16


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--model-path", "m", "--no-such-flag"], "--no-such-flag"),
        (["--model-path", "m", "--speculative-algorithm", "DFLASH"], "--speculative-draft-model-path"),
        (["--model-path", "m", "--speculative-algorithm", "MEDUSA"], "MEDUSA"),
        (["--model-path", "m", "--mem-fraction-static", "1.5"], "--mem-fraction-static"),
        (["--model-path", "m", "--tp", "0"], "--tp-size"),
        (["--model-path", "m", "--kv-cache-dtype", "int3"], "--kv-cache-dtype"),
        (
            ["--model-path", "m", "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
             "--speculative-dflash-block-size", "8", "--speculative-num-draft-tokens", "16"],
            "must match",
        ),
    ],
)
def test_bad_command_lines_name_the_flag(argv: list[str], needle: str) -> None:
    with pytest.raises(SglangArgsError, match=needle):
        parse_launch_args_or_raise(argv)


def test_exiting_parser_behaves_like_argparse(tmp_path) -> None:
    code = (
        "from sglbench.hostlib.sglang_args import parse_launch_args;"
        "parse_launch_args(['--model-path', 'm', '--bogus-flag', '1'])"
    )
    env = {"PYTHONPATH": "python"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 2
    assert "--bogus-flag" in proc.stderr


@pytest.mark.parametrize(
    ("argv", "tokens"),
    [
        ([], 0),
        (["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "d",
          "--speculative-ddtree-budget", "32"], 33),
        (["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
          "--speculative-num-steps", "5"], 6),
        (["--speculative-algorithm", "NGRAM"], 12),
    ],
)
def test_draft_token_count(argv: list[str], tokens: int) -> None:
    ns = parse_launch_args_or_raise(["--model-path", "m", *argv])
    assert sglang_args.draft_token_count(ns) == tokens


def test_to_argv_round_trips_through_the_parser() -> None:
    argv = sglang_args.to_argv(
        {"model_path": "/m", "--tp-size": 2, "enable_metrics": True, "disable_cuda_graph": False,
         "max_running_requests": None, "cuda_graph_bs": [1, 2]}
    )
    assert argv == ["--model-path", "/m", "--tp-size", "2", "--enable-metrics", "--cuda-graph-bs", "1", "2"]
    ns = parse_launch_args_or_raise(argv)
    got = (ns.tp_size, ns.enable_metrics, ns.disable_cuda_graph, ns.cuda_graph_bs)
    assert got == (2, True, False, [1, 2])
