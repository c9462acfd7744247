#!/usr/bin/env python3
"""Planner speed: milliseconds per config for ``capacity.plan_command`` (what ``sglbench plan`` and the host
module run per config), over the public accuracy cases and one config per modelled architecture.

Each config is planned ``--repeat`` times in this process (imports and catalog loading are paid once, as in
a playbook run that plans many configs); the figure is the median wall time per plan. A config predicted
to fail also runs the recommendation search (every candidate is a re-plan), the slow path, reported apart.
Free memory and weights that the accuracy test reads from each case's log are not passed here (the plan
then uses the defaults and the config estimate): the figures are about speed, not accuracy. A command line
checked against every catalogued release (no ``sglang_version``) costs ~6 ms more than one release's.

Not a test: figures depend on the machine. The budget is 50 ms per config. Example::

    PYTHONPATH=python python benchmarks/planner_speed.py --repeat 20
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from sglbench.hostlib import capacity  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
BUDGET_MS = 50.0

# one config per modelled layout that the accuracy cases do not already cover
ARCHITECTURES = [
    ("nemotron-h-8b", ["--mem-fraction-static", "0.85"], "H100"),
    ("lfm2-700m", [], "L4"),
    ("kimi-linear-tiny", ["--mem-fraction-static", "0.85"], "H100"),
    ("falcon-h1-tiny", ["--mem-fraction-static", "0.85"], "H100"),
    ("deepseek-v3.2", ["--tp-size", "8"], "H200"),
    ("gemma-3-27b-it", [], "H100"),
    ("gpt-oss-120b", [], "H100"),
    ("llama-4-maverick-17b-128e-instruct", ["--tp-size", "8"], "H200"),
    ("qwen3-30b-a3b", [], "H100"),
    ("glm-4.7", ["--tp-size", "8"], "H200"),
]


def configs() -> list[tuple[str, list[str], dict]]:
    """(label, argv, plan_command keywords) for every config timed."""
    out = []
    for case_json in sorted((FIXTURES / "startup_logs").glob("*/case.json")):
        case = json.loads(case_json.read_text())
        model = case["model"]
        model_dir = FIXTURES / model if "/" in model else FIXTURES / "models" / model
        argv = ["--model-path", str(model_dir), *case["launch_args"]]
        if "draft_model" in case:
            argv += ["--speculative-draft-model-path", str(FIXTURES / "models" / case["draft_model"])]
        kw: dict = {"accounting": case["accounting"], "platform": case.get("platform", "cuda")}
        kw.update({k: case[k] for k in ("free_gib", "weights_gib", "draft_weights_gib") if k in case})
        if "gpu_mem_gib" in case:
            kw["gpu_mem_gib"] = case["gpu_mem_gib"]
        else:
            kw["gpu"] = case["gpu"]
        if "sglang_version" in case:
            kw["sglang_version"] = case["sglang_version"]
        out.append((case_json.parent.name, argv, kw))
    for model, flags, gpu in ARCHITECTURES:
        out.append((model, ["--model-path", str(FIXTURES / "models" / model), *flags], {"gpu": gpu}))
    return out


def time_one(argv: list[str], kw: dict, repeat: int) -> tuple[float, bool]:
    """(median ms per plan, whether the plan fits)."""
    samples = []
    fits = True
    for _ in range(repeat):
        t0 = time.perf_counter()
        plan = capacity.plan_command(argv, **kw)
        samples.append((time.perf_counter() - t0) * 1000.0)
        fits = plan.fits
    return statistics.median(samples), fits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=10, help="plans per config (the median is reported)")
    args = ap.parse_args()
    capacity.plan_command(*configs()[0][1:2], **configs()[0][2])  # warm the catalog and module caches
    rows = [(label, *time_one(argv, kw, args.repeat)) for label, argv, kw in configs()]
    width = max(len(r[0]) for r in rows)
    print(f"{'config':<{width}}  ms/plan  path")
    for label, ms, fits in rows:
        print(f"{label:<{width}}  {ms:7.2f}  {'fits' if fits else 'fails: + recommendation search'}")
    fitting = [ms for _, ms, fits in rows if fits]
    failing = [ms for _, ms, fits in rows if not fits]
    worst = max(ms for _, ms, _ in rows)
    print(
        f"\n{len(rows)} configs: median {statistics.median(ms for _, ms, _ in rows):.2f} ms, "
        f"worst {worst:.2f} ms per config (budget {BUDGET_MS:.0f} ms); "
        f"fitting plans median {statistics.median(fitting):.2f} ms"
        + (
            f", failing plans (with recommendations) median {statistics.median(failing):.2f} ms"
            if failing
            else ""
        )
    )
    return 0 if worst < BUDGET_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
