"""The SLO-bounded search on the sim host, against the stand-in's own answer, through a SIGKILL.

Starts its own sim host container (``sglbench-simhost-search-<pid>``) from ``$SGLBENCH_SIMHOST_IMAGE`` and
runs ``sglbench run`` over inventory/sim's 27B autoregressive and DFlash configs at TP1 with the search
on (closed loop, TTFT p99 and ITL p50 objectives, short requests, two repeats per level), the two configs
set up for a short-request service (``MATRIX``: why these numbers) so that the AR/DFlash crossover lies
inside what both hold:

1. run 1 is SIGKILLed (the ``sglbench run`` process itself) once DFlash's search has committed the first
   point of its second level (an event every search has, whatever the machine's speed and however many
   points its first level took: from ``start`` it goes up or down, and a level has ``repeats`` points); its
   process-tree keeper stops the units;
2. run 2 (same run id) reuses the baseline's finished attempt and finishes DFlash's search: no point
   committed by run 1 is measured again, nothing is moved aside but the interrupted point's partial files,
   and each search's document is the replay of its committed points;
3. the answer against :mod:`sglbench.sim.truth` (the model in virtual time, no noise), on the product's own
   terms. A level is judged only on points the client self-check found valid (a busy machine starves the
   client; the search then measures the level again or leaves it untrusted), so: every judged level was
   judged on valid points only and its verdict agrees with the model wherever the model is 5 % or more from
   the SLO; an untrusted level was measured again first and never passed; each config's verdict is the
   model's (limit within one search step) unless a level it needed stayed untrusted, and then it claims no
   more than the model allows (a limit no higher than the model's, ``unresolved`` or, for DFlash, short of
   its slots). Where the search located the crossover from trusted levels, it lies within one step of the
   model's, and so does the break-even map's (``sglbench.deploy``) when every point around it was valid;
   where it could not, an untrusted level is why. At most 8 levels per config. A step around the crossover
   is the distance between the two levels it lies between (the search refines them to ``resolution``, 1).

The figures go to ``build/test-artifacts/search_simhost.json``. The stand-in runs in real time here (time
scale 1, not the inventory's 0.1): the client and the stand-in share a small machine with other jobs, and
faster scales multiply their scheduling delays back into real-world time and, at 20 and more streams, let
the baseline's stand-in fall behind its own clock (its ``lag_seconds``): at 0.5 its tok/s at concurrency 20
came out 10 % below the model's, which moved the measured crossover two levels. Each point sends for 2 s
(the model's window too) without warmup requests (the stand-in has nothing to warm).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import simhost_util as sh

from sglbench import results, search
from sglbench.deploy import answer
from sglbench.sim import truth

REPO = Path(__file__).resolve().parents[2]
SIM_NAME = f"sglbench-simhost-search-{os.getpid()}"
RUN_ID = "search"
AR, DFLASH = "qwen27b-ar", "qwen27b-dflash"
SCALE = 1.0
PROMPT, OUTPUT = 192, 64
# A short-request service (192-token prompts, 64-token answers, 4k context) on inventory/sim's two 27B TP1
# configs, overridden the way a user would (-e sglbench_matrix). inventory/sim's DFlash launch (32k context,
# extra_buffer Mamba cache, 0.75 of the memory) holds 4 requests: verifying a 16-token block keeps 16
# intermediate Mamba states per request (1.2 GiB a request in bf16), so it stops far below where its verify
# steps (requests x 16 tokens) go compute bound and the baseline catches up. With the radix cache off (no
# prefix is shared here, and a hybrid model then needs 1 Mamba slot per request instead of 5), bf16 SSM
# state and 0.85 of the memory it holds 20 (the plan: 23.4 GiB of intermediate states, 70,789 KV tokens);
# the baseline holds 32 (its Mamba slots, 96 // 3). Acceptance: DFlash's 6.5 tokens per verify step is a
# math-like figure; at a chat-like 3.5 (SGLBENCH_SIM_ACCEPT_LENGTH) its speedup (2.4x at concurrency 4)
# falls through 1 between 18 and 19 in the model, inside both servers' slots. At 6.5 it would cross near
# 39, beyond the ~27 requests a block-16 DFlash launch of this model holds on one 96 GB GPU (at 0.9 of the
# memory; above that its KV pool runs out).
MATRIX = [
    {
        "name": AR,
        "model_path": "/models/qwen3.6-27b",
        "algorithm": "none",
        "tp": [1],
        "args": {"mem_fraction_static": 0.85, "context_length": 4096},
    },
    {
        "name": DFLASH,
        "model_path": "/models/qwen3.6-27b",
        "algorithm": "DFLASH",
        "draft_model_path": "/models/qwen3.6-27b-dflash",
        "tp": [1],
        "args": {
            "mem_fraction_static": 0.85,
            "max_running_requests": 20,
            "context_length": 4096,
            "speculative_dflash_block_size": 16,
            "mamba_ssm_dtype": "bfloat16",
            "disable_radix_cache": True,
        },
        "env": {"SGLANG_ENABLE_SPEC_V2": "1"},
    },
]
# TTFT p99 of a closed-loop wave of c requests is c prefills of 192 tokens: 84 ms each in the model, so the
# baseline's limit sits between 22 (1848 ms) and 23 (1932 ms); the SLO is half-way. DFlash (the same
# prefills) is held by its 20 slots first: 1680 ms there.
SLO = {"ttft_ms_p99": 1890, "itl_ms_p50": 60}
BENCH = {
    "prompt_sets": [f"synthetic:{PROMPT}"],
    "repeats": 2,
    "duration_s": 2,
    "num_prompts": 1000,
    "max_new_tokens": OUTPUT,
    "warmup": 0,
    "slo": SLO,
    "search": {"enabled": True, "start": 4, "max_levels": 8},
}
UNIT_ENV = {
    "SGLBENCH_SIM_TIME_SCALE": str(SCALE),
    "SGLBENCH_SIM_SGLANG_VERSION": "0.5.23+ddtree",
    "SGLBENCH_SIM_ACCOUNTING": "A",
    "SGLBENCH_SIM_ACCEPT_LENGTH": "3.5",
    # start-up only (weights from the page cache, few CUDA graphs): the test is about serving, not loading
    "SGLBENCH_SIM_LOAD_GIBPS": "20",
    "SGLBENCH_SIM_GRAPH_SECONDS": "4",
}
ARTIFACT = REPO / "build" / "test-artifacts" / "search_simhost.json"


def _env() -> dict[str, str]:
    return sh.env(SIM_NAME)


def _cmd(tmp: Path) -> list[str]:
    return [
        sys.executable,
        *("-m", "sglbench", "run", "--inventory", str(REPO / "inventory" / "sim"), "--tp", "1"),
        *("--configs", f"{AR},{DFLASH}", "--results", str(tmp / "results"), "--run-id", RUN_ID),
        *("--lock-dir", str(tmp / "locks"), "--wait", "300"),
        *("-e", f"ansible_host={SIM_NAME}", "-e", "sglbench_bench=" + json.dumps(BENCH)),
        *("-e", "sglbench_matrix=" + json.dumps(MATRIX)),
        *("-e", "sglbench_unit_environment=" + json.dumps(UNIT_ENV)),
    ]


@pytest.fixture
def sim_host() -> Any:
    yield from sh.sim_host(SIM_NAME)


def _read(p: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(p.read_text())
    return data


def _model(record: dict[str, Any]) -> truth.ServerModel:
    """The stand-in's model of the launch this attempt ran (its argv, the fixture models for /models)."""
    argv = [a.replace("/models/", f"{REPO}/tests/fixtures/models/") for a in record["argv"][3:]]
    return truth.server_model(argv, UNIT_ENV)


def _throughput(record: dict[str, Any]) -> dict[int, float]:
    """Mean output tok/s per concurrency over the repeats, at real-world speed."""
    per: dict[int, list[float]] = {}
    for p in record["benchmark"]["points"]:
        per.setdefault(int(p["concurrency"]), []).append(float(p["output_throughput_tok_s"]) * SCALE)
    return {c: sum(v) / len(v) for c, v in per.items()}


def _analytic_crossover(speedup: dict[int, float]) -> float | None:
    """Where the model's speedup falls to 1, by the break-even map's rule (linear in log load between the
    last level of the leading run above 1 and the next), over every concurrency both hold."""
    levels = sorted(speedup)
    if not levels or not speedup[levels[0]] > 1.0:
        return None
    for a, b in itertools.pairwise(levels):
        if not speedup[b] > 1.0:
            t = (speedup[a] - 1.0) / (speedup[a] - speedup[b])
            return math.exp(math.log(a) + t * (math.log(b) - math.log(a)))
    return None


@pytest.mark.simhost
def test_search_finds_the_models_limits_and_crossover_and_survives_a_sigkill(
    sim_host: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "results" / RUN_ID / "simhost"
    ar_dir, df_dir = run_dir / f"{AR}-tp1", run_dir / f"{DFLASH}-tp1"
    t0 = time.monotonic()

    # 1. SIGKILL of `sglbench run` once DFlash's search has committed the first point of its second level
    log1 = (tmp_path / "run1.log").open("w")
    proc = subprocess.Popen(_cmd(tmp_path), cwd=REPO, env=_env(), stdout=log1, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 3000  # bounds a failure only: a loaded machine takes long
    seen: dict[str, Any] = {}
    start = f"c{BENCH['search']['start']}-"  # the first level's points: c4-r0, c4-r1, ...
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            seen = _progress(df_dir)
            if any(not p.stem.startswith(start) for p in sh.point_files(df_dir / "points", "c*")):
                break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        log1.close()
    first = {p.stem: p.stat().st_mtime_ns for p in sh.point_files(df_dir / "points", "c*")}
    base_first = {p.stem: p.stat().st_mtime_ns for p in sh.point_files(ar_dir / "points", "c*")}
    assert any(not k.startswith(start) for k in first), (seen, (tmp_path / "run1.log").read_text()[-3000:])
    assert (ar_dir / "record.json").exists(), "the baseline's attempt had not ended"
    assert not (df_dir / "record.json").exists(), "the kill came too late: DFlash's search had ended"
    t_kill = time.monotonic()

    # 2. the same run again: the baseline is reused, DFlash's search ends
    run2 = subprocess.run(
        _cmd(tmp_path), cwd=REPO, env=_env(), capture_output=True, text=True, timeout=3000, check=False
    )
    # exit 1 also when a point is invalid (the client self-check on a busy machine); every config must be ok
    assert run2.returncode in (0, 1), run2.stdout[-4000:] + run2.stderr[-2000:]
    t_end = time.monotonic()
    ar, df = _read(ar_dir / "record.json"), _read(df_dir / "record.json")
    assert ar["outcome"] == df["outcome"] == "ok", run2.stdout[-4000:]
    sa, sd = ar["benchmark"]["search"], df["benchmark"]["search"]

    # nothing measured twice: run 2 reused every point run 1 committed, unchanged, and measured only others
    res = df["benchmark"]["resume"]
    assert set(first) <= set(res["reused"]) and not set(first) & set(res["measured"])
    assert all((df_dir / "points" / f"{k}.json").stat().st_mtime_ns == m for k, m in first.items())
    assert {p.stem: p.stat().st_mtime_ns for p in sh.point_files(ar_dir / "points", "c*")} == base_first
    for d in (ar_dir, df_dir):
        # a killed point's rows and raw telemetry may be moved aside, never a committed point
        moved = sh.point_files_below(d / "previous")
        assert moved == [], (
            moved
        )  # no committed point was ever moved aside (only a killed point's rows may be)
    keys = [p["key"] for p in df["resume"]["points"]]
    assert len(keys) == len(set(keys)) and set(keys) == {
        p.stem for p in sh.point_files(df_dir / "points", "c*")
    }
    # the documents are the replay of the committed points: decided again now, they are the same
    for rec, d, doc, base in ((ar, ar_dir, sa, None), (df, df_dir, sd, ar_dir)):
        spec = search.parse_spec(BENCH)
        assert spec is not None
        again = search.decide(
            str(d),
            spec,
            search.Capacity.from_args(doc["capacity"]),
            rec["identity"]["hash"],
            str(base) if base else None,
        )
        assert again.done and again.doc["levels"] == doc["levels"] and again.doc["limit"] == doc["limit"]
        assert again.doc["crossover"] == doc["crossover"]

    # the answer against the model's own
    load = truth.Workload((PROMPT,), OUTPUT, BENCH["duration_s"] / SCALE)
    ar_model, df_model = _model(ar), _model(df)
    true_ar = truth.slo_limit(ar_model, load, SLO)
    true_df = truth.slo_limit(df_model, load, SLO)
    true_x = truth.crossover(df_model, ar_model, load)
    analytic = _analytic_crossover(true_x["speedup"])
    measured_ar, measured_df = _throughput(ar), _throughput(df)
    common = sorted(set(measured_ar) & set(measured_df))
    speedup = {c: measured_df[c] / measured_ar[c] for c in common}
    # the break-even map of the run (what `sglbench summarize` writes to breakeven.json)
    (ans,) = answer.compute(results.load(tmp_path / "results" / RUN_ID))
    (pair,) = [p for p in ans.breakeven.pairs if p.config == DFLASH]
    cross = pair.crossover
    xdoc = sd["crossover"] or {}  # none: the baseline had no valid point to compare with

    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    figures = {
        "simulated": True,
        "time_scale": SCALE,
        "workload": {"prompt_tokens": PROMPT, "output_tokens": OUTPUT, "accept_length": 3.5},
        "slo": SLO,
        "seconds": {"run1_until_kill": round(t_kill - t0, 1), "run2": round(t_end - t_kill, 1)},
        "killed_after_points": sorted(first),
        "killed_at": seen,
        "trust": {AR: sa["trust"], DFLASH: sd["trust"]},
        "run2_measured": res["measured"],
        AR: {
            "found": {k: sa[k] for k in ("verdict", "limit", "next_above", "step", "bound", "bound_by")},
            "true": {k: true_ar[k] for k in ("verdict", "limit", "next_above", "bound")},
            "levels": [
                (lv["level"], lv["verdict"], lv["objectives"]["ttft_ms_p99"]["ci_high"])
                for lv in sa["levels"]
            ],
            "true_ttft_ms_p99": {c: v["ttft_ms_p99"] for c, v in true_ar["values"].items() if c >= 16},
        },
        DFLASH: {
            "found": {k: sd[k] for k in ("verdict", "limit", "next_above", "step", "bound", "bound_by")},
            "true": {k: true_df[k] for k in ("verdict", "limit", "next_above", "bound")},
            "levels": [
                (lv["level"], lv["role"], lv["verdict"], lv["objectives"]["ttft_ms_p99"]["ci_high"])
                for lv in sd["levels"]
            ],
        },
        "speedup": {
            "measured_both": speedup,
            "search": xdoc.get("speedup"),
            "true": {c: round(v, 4) for c, v in true_x["speedup"].items()},
        },
        "crossover": {
            "measured": {
                "status": cross.status,
                "value": cross.estimate.value,
                "ci_low": cross.estimate.ci_low,
                "ci_high": cross.estimate.ci_high,
                "between": cross.between,
            },
            "search": {k: xdoc.get(k) for k in ("status", "between", "step", "levels", "stopped")},
            "analytic": analytic,
            "analytic_first_below_1": true_x["crossover"],
        },
    }
    ARTIFACT.write_text(json.dumps(figures, indent=1, default=str) + "\n")

    assert len(sa["levels"]) <= 8 and len(sd["levels"]) <= 8
    assert (true_ar["verdict"], true_ar["limit"]) == ("limit_found", 22)
    assert (true_df["verdict"], true_df["limit"]) == ("plan_limited", 20)
    assert analytic is not None and 18 < analytic < 19 and true_x["crossover"] == 19
    # every judged level was judged on valid points only, and agrees with the model where it is clear
    for d, doc, model in ((ar_dir, sa, ar_model), (df_dir, sd, df_model)):
        _check_judged_levels(d, doc, model, load)
    # each limit: the model's within one step, unless a level it needed stayed untrusted; then no more
    # than the model allows
    untrusted = set(sa["trust"]["untrusted"]) | set(sd["trust"]["untrusted"])
    if sa["verdict"] == "limit_found":
        assert (
            sa["next_above"] not in sa["trust"]["untrusted"]
            and abs(sa["limit"] - true_ar["limit"]) <= sa["step"]
        )
    else:
        assert sa["trust"]["untrusted"] and sa["verdict"] == "unresolved", sa
        assert sa["limit"] is None or sa["limit"] <= true_ar["limit"] + 1
    if sd["verdict"] == "plan_limited":
        assert (sd["limit"], sd["bound_by"]) == (20, "max_running_requests") and 20 not in sd["trust"][
            "untrusted"
        ]
    else:
        assert sd["trust"]["untrusted"] and (sd["limit"] or 0) < 20, sd
    # the crossover: located by the search from its trusted levels to one step of the model's, or not
    # located because a level stayed untrusted
    if not xdoc:  # no baseline to compare with: not one of its points was valid
        assert not any(lv["trusted"] for lv in sa["levels"]) and sa["trust"]["untrusted"], sa["trust"]
    elif xdoc["status"] == "crosses" and xdoc["stopped"] == "resolved":
        lo, hi = xdoc["between"]
        assert xdoc["step"] == 1 and lo - xdoc["step"] <= analytic <= hi + xdoc["step"], xdoc
        # the break-even map's estimate (the summary table's tok/s, every repeat) within that step of the
        # model's, when every point of both configs at the two levels around it was valid
        assert cross.status == "crosses" and cross.estimate.value is not None
        around = [
            p for d in (ar_dir, df_dir) for lv in (lo, hi) for p in sh.point_files(d / "points", f"c{lv}-r*")
        ]
        if all(json.loads(p.read_text())["summary"].get("valid") is not False for p in around):
            assert abs(cross.estimate.value - analytic) <= xdoc["step"]
    else:
        assert untrusted, xdoc


def _progress(attempt: Path) -> dict[str, Any]:
    """Where the attempt's search stands, from its ``search.json`` (empty before its first judgement)."""
    try:
        return dict(json.loads((attempt / search.STATE_FILE).read_text()).get("progress") or {})
    except (OSError, ValueError):
        return {}


def _check_judged_levels(
    attempt: Path, doc: dict[str, Any], model: truth.ServerModel, load: truth.Workload
) -> None:
    """A trusted level was judged on BENCH's repeats of valid points and its verdict is the model's wherever
    the model's value is 5 % or more from the limit; an untrusted one was not judged and did not pass."""
    for lv in doc["levels"]:
        files = {
            p.stem: json.loads(p.read_text()) for p in sh.point_files(attempt / "points", f"{lv['point']}-r*")
        }
        valid = sorted(k for k, f in files.items() if f["summary"].get("valid") is not False)
        if not lv["trusted"]:
            assert not lv["pass"] and lv["points"] == [] and len(valid) < BENCH["repeats"], lv
            assert all(o["state"] == "untrusted" for o in lv["objectives"].values()), lv
            assert len(files) == BENCH["repeats"] + doc["trust"]["remeasure"], lv  # measured again first
            continue
        assert sorted(lv["points"]) == valid and len(valid) == BENCH["repeats"], (lv["points"], valid)
        assert lv["requests"] == sum(files[k]["summary"]["n_requests"] for k in valid), lv  # theirs only
        c = int(lv["level"])
        true = truth.slo_limit(model, load, SLO, levels=[c])["values"].get(c)
        if not true:
            continue  # beyond what the model's server holds
        for name, limit in SLO.items():
            value, state = true[name], lv["objectives"][name]["state"]
            if value is not None and value <= 0.95 * limit:
                assert state != "fail", (lv["point"], name, value, lv["objectives"][name])
            if value is not None and value >= 1.05 * limit:
                assert state != "pass", (lv["point"], name, value, lv["objectives"][name])
