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

from sglbench.hostlib import capacity, gpus

MAX_GIB = 4096.0  # no GPU has more memory; larger (or NaN/infinite) figures are typos


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
            platform=getattr(args, "platform", "cuda"),
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
