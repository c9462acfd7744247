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
GiB = 1 << 30


class CalibrationError(ValueError):
    """A record the calibration cannot use; the message names the field and the fix."""


def calibration(record: dict) -> dict:
    """What an attempt's record says about the host: the free memory at start that reproduces the KV
    tokens SGLang allocated, and the weight memory it loaded.

    The planner's budget is ``rest = pre x mfs - weights`` (minus draft weights where the variant counts
    them) and the KV pool is what the Mamba split leaves of it; so with the observed tokens (and Mamba
    slots) and the recorded cell and slot sizes, ``pre = (rest_observed + weights) / mfs``.
    Returns ``{free_gib, weights_gib, gpu_mem_gib, accounting, tp_size, model_class, planned_free_gib,
    observed_tokens}``.
    """
    plan = record.get("plan")
    if not isinstance(plan, dict) or "cell_bytes" not in plan:
        raise CalibrationError("plan: the record has no capacity plan (re-run with the planner enabled)")
    observed = ((record.get("capacity") or {}).get("observed")) or {}
    tokens = observed.get("max_total_num_tokens")
    if not isinstance(tokens, int) or tokens <= 0:
        raise CalibrationError(
            "capacity.observed.max_total_num_tokens: the server never reported its KV pool (the attempt did "
            "not start); calibrate from a record of a config that started"
        )
    server_info = ((record.get("observed") or {}).get("server_info")) or {}
    weight = (server_info.get("memory_usage_gib") or {}).get("weight")
    weights = float(weight) if isinstance(weight, int | float) and weight > 0 else float(plan["weights_gib"])
    kv_bytes = tokens * float(plan["cell_bytes"])
    slots = observed.get("mamba_slots")
    state_bytes = (float(plan["rest_gib"]) - float(plan["kv_budget_gib"])) * GiB  # Mamba + spec reservation
    if isinstance(slots, int) and plan.get("mamba_slots") is not None and plan.get("mamba_per_req_bytes"):
        state_bytes += (slots - int(plan["mamba_slots"])) * float(plan["mamba_per_req_bytes"])
    rest = (kv_bytes + state_bytes) / GiB
    static_draft = float(plan.get("draft_weights_gib") or 0.0) if plan.get("accounting") == "C" else 0.0
    mfs = float(plan["mem_fraction_static"])
    return {
        "free_gib": (rest + weights + static_draft) / mfs,
        "weights_gib": weights,
        "gpu_mem_gib": float(plan["gpu_mem_gib"]),
        "accounting": plan.get("accounting"),
        "tp_size": int(plan.get("tp_size") or 1),
        "model_class": plan.get("model_class"),
        "planned_free_gib": float(plan["pre_gib"]),
        "observed_tokens": tokens,
    }


def _load_record(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise CalibrationError(f"--calibrate: cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise CalibrationError(f"--calibrate: {path} is not a record (a JSON object)")
    return data


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
    if args.gpu_mem_gib is None and args.gpu is None and not getattr(args, "calibrate", None):
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
    free_gib, weights_gib, gpu_mem_gib, accounting = (
        args.free_gib,
        args.weights_gib,
        args.gpu_mem_gib,
        args.accounting,
    )
    cal = None
    if getattr(args, "calibrate", None):
        try:
            cal = calibration(_load_record(args.calibrate))
        except CalibrationError as exc:
            print(f"sglbench plan: error: {exc}", file=sys.stderr)
            return 2
        free_gib = free_gib if free_gib is not None else cal["free_gib"]
        accounting = accounting or cal["accounting"]
        if args.gpu is None and gpu_mem_gib is None:
            gpu_mem_gib = cal["gpu_mem_gib"]
    try:
        p = capacity.plan_command(
            launch,
            gpu=args.gpu,
            gpu_mem_gib=gpu_mem_gib,
            free_gib=free_gib,
            weights_gib=weights_gib,
            draft_weights_gib=args.draft_weights_gib,
            accounting=accounting,
            sglang_version=args.sglang_version,
            overlap=overlap,
            platform=getattr(args, "platform", "cuda"),
        )
    except capacity.PlanError as exc:
        print(f"sglbench plan: error: {exc.field}: {exc.message}", file=sys.stderr)
        return 2
    if cal is not None:
        if weights_gib is None and cal["model_class"] == p.model_class and p.weights_source != "given":
            # the same model: the weights the record's server loaded, re-divided for this TP size
            p = capacity.plan_command(
                launch,
                gpu=args.gpu,
                gpu_mem_gib=gpu_mem_gib,
                free_gib=free_gib,
                weights_gib=cal["weights_gib"] * cal["tp_size"] / p.tp_size,
                draft_weights_gib=args.draft_weights_gib,
                accounting=accounting,
                sglang_version=args.sglang_version,
                overlap=overlap,
                platform=getattr(args, "platform", "cuda"),
            )
        p.notes.insert(
            0,
            f"calibrated from {args.calibrate}: free at start {cal['free_gib']:.2f} GiB reproduces the "
            f"{cal['observed_tokens']} KV tokens SGLang allocated (the record's plan assumed "
            f"{cal['planned_free_gib']:.2f} GiB); weights {cal['weights_gib']:.2f} GiB per rank "
            f"at TP{cal['tp_size']}",
        )
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
