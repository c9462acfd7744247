"""`sglbench plan`: the arguments; the plan is made and printed by `python/sglbench/plan.py`."""

from __future__ import annotations

import argparse

from sglbench.hostlib import capacity, gpus, sglang_catalog
from sglbench.plan import run


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "plan",
        help="predict SGLang's KV tokens / request slots for a launch command (before launching it)",
        description=(
            "Predict what SGLang will allocate (KV tokens, Mamba state slots, max_running_requests) for "
            "the launch_server flags given after '--', and whether it can serve. Exit 0 fits, 1 predicted "
            "failure, 2 bad input."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "accounting variants: A = builds before 2026-05-27 (<= 0.5.11), B = June-July 2026 main "
            "(0.5.12-0.5.15), C = V4 configurator (>= 0.5.16). Known GPUs: " + ", ".join(gpus.known_names())
        ),
    )
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument("--gpu-mem-gib", type=float, default=None, help="GPU memory per GPU, GiB")
    gpu.add_argument(
        "--gpu", default=None, metavar="NAME", help="GPU kind, e.g. 'RTX PRO 6000', H100, H200, B200"
    )
    p.add_argument(
        "--free-gib",
        type=float,
        default=None,
        help="free memory per GPU when SGLang starts (default: capacity minus "
        f"{gpus.DEFAULT_CONTEXT_OVERHEAD_GIB} GiB CUDA context, +{gpus.TP_OVERHEAD_GIB} GiB with TP>1)",
    )
    p.add_argument(
        "--weights-gib",
        type=float,
        default=None,
        help="target weight memory per rank (default: from the checkpoint on disk, else an estimate)",
    )
    p.add_argument("--draft-weights-gib", type=float, default=None, help="draft weight memory per rank")
    p.add_argument(
        "--accounting",
        choices=capacity.ACCOUNTING_VARIANTS,
        default=None,
        help="memory-accounting variant (default: from --sglang-version, else C)",
    )
    p.add_argument(
        "--sglang-version",
        default=None,
        metavar="V",
        help="the SGLang release the server runs: its flags are checked (a flag V lacks is an error naming "
        "the rename or nearest flag) and it picks the accounting variant. Default: accept what any "
        "catalogued release accepts. Catalogued: " + ", ".join(sglang_catalog.releases()),
    )
    p.add_argument(
        "--overlap",
        choices=("auto", "on", "off"),
        default="auto",
        help="overlap scheduler for the Mamba ratio (auto: on unless --disable-overlap-schedule)",
    )
    p.add_argument(
        "--platform",
        choices=("cuda", "rocm"),
        default="cuda",
        help="GPU platform: on rocm SGLang's aiter attention backend scales mem_fraction_static by 0.85 "
        "for contexts above 8192 tokens",
    )
    p.add_argument(
        "--calibrate",
        default=None,
        metavar="RECORD",
        help="an attempt's record.json from a real start: the free memory that reproduces its logged KV "
        "pool, and its weights (same model), become this plan's --free-gib / --weights-gib unless given",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("launch_args", nargs=argparse.REMAINDER, help="-- then SGLang launch_server flags")
    p.set_defaults(func=run)
    return p
