"""``sglbench plan``: predict SGLang's KV capacity for a launch command before starting it.

    sglbench plan --gpu "RTX PRO 6000" --free-gib 94.24 --weights-gib 51.05 --accounting A -- \\
        --model-path /models/Qwen3.6-27B --speculative-algorithm DFLASH ... --max-running-requests 8

Everything after ``--`` is SGLang ``launch_server`` flags (a pasted ``python -m sglang.launch_server``
prefix is ignored). Exit status: 0 the config fits, 1 it is predicted to fail (the failure and the
recommendations are printed), 2 bad input (the message names the flag or config field).
"""

from __future__ import annotations

import argparse
import json
import sys

from sglbench.hostlib import capacity, gpus, sglang_catalog

MAX_GIB = 4096.0  # no GPU has more memory; larger (or NaN/infinite) figures are typos


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
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("launch_args", nargs=argparse.REMAINDER, help="-- then SGLang launch_server flags")
    p.set_defaults(func=run)
    return p


def _launch_argv(raw: list[str]) -> list[str]:
    argv = list(raw)
    if argv and argv[0] == "--":
        argv = argv[1:]
    # tolerate a pasted "python -m sglang.launch_server" / "sglang serve" prefix
    for i, tok in enumerate(argv):
        if tok.startswith("--"):
            return argv[i:]
    return argv


def run(args: argparse.Namespace) -> int:
    launch = _launch_argv(args.launch_args)
    if not launch:
        print(
            "sglbench plan: error: give the SGLang launch flags after '--' (at least --model-path)",
            file=sys.stderr,
        )
        return 2
    if args.gpu_mem_gib is None and args.gpu is None:
        print(
            "sglbench plan: error: --gpu-mem-gib or --gpu NAME is required (known: "
            + ", ".join(gpus.known_names())
            + ")",
            file=sys.stderr,
        )
        return 2
    for flag, value, lo_open in (
        ("--gpu-mem-gib", args.gpu_mem_gib, True),
        ("--free-gib", args.free_gib, True),
        ("--weights-gib", args.weights_gib, False),
        ("--draft-weights-gib", args.draft_weights_gib, False),
    ):
        low_ok = value is not None and (value > 0 if lo_open else value >= 0)
        if value is not None and not (low_ok and value <= MAX_GIB):
            low = "> 0" if lo_open else ">= 0"
            print(
                f"sglbench plan: error: {flag} must be a number of GiB {low} and <= {MAX_GIB}, got {value}",
                file=sys.stderr,
            )
            return 2
    overlap = {"auto": None, "on": True, "off": False}[args.overlap]
    try:
        p = capacity.plan_command(
            launch,
            gpu=args.gpu,
            gpu_mem_gib=args.gpu_mem_gib,
            free_gib=args.free_gib,
            weights_gib=args.weights_gib,
            draft_weights_gib=args.draft_weights_gib,
            accounting=args.accounting,
            sglang_version=args.sglang_version,
            overlap=overlap,
        )
    except capacity.PlanError as exc:
        print(f"sglbench plan: error: {exc.field}: {exc.message}", file=sys.stderr)
        return 2
    if args.json:
        try:  # strict JSON: a NaN or infinite figure is a bug, never printed as invalid JSON
            text = json.dumps(p.to_dict(), indent=2, sort_keys=False, allow_nan=False)
        except ValueError:
            print(
                "sglbench plan: error: the plan holds a non-finite figure; check the GiB flags",
                file=sys.stderr,
            )
            return 2
        print(text)
    else:
        print(p.explain())
    return 0 if p.fits else 1
