"""Telemetry on the sim host: every point of inventory/sim's 27B autoregressive and DFlash configs at TP1
and concurrency 1 is sampled, and the samples agree with the stand-in's power model.

Starts its own sim host container (``sglbench-simhost-telemetry-<pid>``) from ``$SGLBENCH_SIMHOST_IMAGE``
and runs ``sglbench run`` over the two configs (inventory/sim's launch lines plus ``enable_metrics``, the
inventory's time scale 0.1), two repeats at concurrency 1, 2 s each, 192-token prompts and 64-token
answers. The autoregressive config's server runs with ``SGLBENCH_SIM_THROTTLE=0:2`` from its third
generation request (``SGLBENCH_SIM_THROTTLE_FROM=request:3``): a 2 s power-cap episode from the first
measured request of its first point (after the point's two warm-up requests), however long the campaign
took to get there. So it falls in that point's window, whose GPU samples are flowing by then (the client
waits for them before the window), and never reaches the second point's window, which begins at least
the first one's 2 s later.
Each point is read as the controller committed it: its point file (summary and the telemetry figures
derived on the controller), its request rows and the host's raw telemetry document. Checks:

- every point has a telemetry document whose GPU samples cover its measured window (a sample at or before
  its start, one at or after its end) on the config's GPU, and server rows from ``/metrics`` and
  ``/v1/loads`` (0.5.23's load endpoint);
- the power-cap bit shows in one run of samples of the first point, no longer than the episode, and never
  in the second point; the first point is flagged throttled, the second not;
- the samples carry what the GPUs drew by the stand-in's own account (its power meter's ledger,
  ``SGLBENCH_SIM_POWER_LEDGER``: wall time and cumulative energy at every scheduler step): each sample's
  power (nvidia-smi's average since the sample before) times its interval, summed over the point's
  samples, is within 2 % of the energy the meter accounted between the first and the last sample (the
  server idle at both). The meter's account follows the machine: a starved client's idle gaps and a
  starved stand-in's late steps are in it and in the samples alike, so every point is held to it, valid
  or not, throttled or not;
- the point's window is its measured requests' (first measured send to last measured response);
- the controller's figures agree: its J/token within 1 % of the test's own integral of the samples over
  that window (trapezoid, the ends interpolated) over the output tokens of the window's requests, and the
  point flagged throttled exactly when the episode reaches into its measured window. With the two checks
  above, a wrong unit, window or token count in the telemetry derivation fails whatever the machine's
  load; the meter's own J/token over the window is reported beside (on a starved machine the samples'
  timestamps lag the instants they were read at, which moves energy across a window's edges);
- energy per output token of every point the episode misses and the client's self-check found valid is
  within 8 % (5 % on a quiet machine, see below) of ``power.expected_energy_per_output_token`` for the
  launch (its timing model, the decode steps per request the point drew), for both configs. A point the
  client's self-check rejected (a starved client leaves the server idle between requests) is not held to
  the model, and only that check may reject one;
- the sampling added at most 0.5 s to a point (``sampling.overhead_s``) the client's self-check found
  valid; to one it found starved, at most 0.5 s stretched by the starvation it measured (the share of the
  window the client waited for a CPU, ``client.runqueue_wait_fraction``): the sampler's start and stop
  wait for CPUs like the client does.

The figures go to ``build/test-artifacts/telemetry_simhost.json``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import simhost_util as sh
import yaml

from sglbench import columnar
from sglbench.hostlib import gpus as hostlib_gpus
from sglbench.sim import power, truth

REPO = Path(__file__).resolve().parents[2]
SIM_NAME = f"sglbench-simhost-telemetry-{os.getpid()}"
RUN_ID = "telemetry"
AR, DFLASH = "qwen27b-ar", "qwen27b-dflash"
SCALE = 0.1
PROMPT, OUTPUT = 192, 64
EPISODE_S = 2.0
UNIT_ENV = {
    "SGLBENCH_SIM_TIME_SCALE": str(SCALE),
    "SGLBENCH_SIM_SGLANG_VERSION": "0.5.23+ddtree",
    "SGLBENCH_SIM_ACCOUNTING": "A",
    "SGLBENCH_SIM_POWER_LEDGER": "1",
}
BENCH = {
    "prompt_sets": [f"synthetic:{PROMPT}"],
    "concurrency": [1],
    "repeats": 2,
    "duration_s": 2,
    "num_prompts": 1000,
    "max_new_tokens": OUTPUT,
    "warmup": 2,
    "telemetry": {"enabled": True},  # the defaults: nvidia-smi every 200 ms, the server every 1 s
}
ARTIFACT = REPO / "build" / "test-artifacts" / "telemetry_simhost.json"


def _matrix() -> list[dict[str, Any]]:
    """inventory/sim's two 27B configs at TP1, with /metrics on; the baseline's server throttles."""
    doc = yaml.safe_load(
        (REPO / "inventory" / "sim" / "group_vars" / "sglang_gpu" / "matrix.yml").read_text()
    )
    out = []
    for cfg in doc["sglbench_matrix"]:
        if cfg["name"] not in (AR, DFLASH):
            continue
        cfg = json.loads(json.dumps(cfg).replace("{{ sglbench_models_dir }}", "/models"))
        cfg["tp"] = [1]
        cfg["args"] = {**cfg.get("args", {}), "enable_metrics": True}
        if cfg["name"] == AR:
            cfg["env"] = {
                **cfg.get("env", {}),
                "SGLBENCH_SIM_THROTTLE": f"0:{EPISODE_S}",
                "SGLBENCH_SIM_THROTTLE_FROM": f"request:{BENCH['warmup'] + 1}",
            }
        out.append(cfg)
    return out


@pytest.fixture
def sim_host() -> Any:
    yield from sh.sim_host(SIM_NAME)


def _point_results(attempt_dir: Path) -> list[dict[str, Any]]:
    """The committed points of one attempt, in repeat order: the point file (its summary and the telemetry
    figures the controller derived), its request rows and the host's raw telemetry document."""
    out = []
    for path in sorted((attempt_dir / "points").glob("c*-r*.json")):
        if path.name.endswith(".telemetry.json"):
            continue
        doc = json.loads(path.read_text())
        key = doc["key"]
        rows = [json.loads(line) for line in (path.parent / f"{key}.requests.jsonl").read_text().splitlines()]
        raw = columnar.read_telemetry(path.parent, key)  # the Parquet tables the assemble wrote
        assert raw is not None, f"{path}: no telemetry kept"
        out.append({"summary": doc["summary"], "records": rows, "raw": raw, "figures": doc.get("telemetry")})
    return sorted(out, key=lambda r: r["summary"]["repeat"])


def _window_energy(rows: list[list[Any]], gpu: int, start: float, end: float) -> float:
    """Trapezoid of one GPU's power over [start, end], the ends interpolated."""
    pts = sorted((r[0], r[2]) for r in rows if r[1] == gpu)
    energy = 0.0
    for (t0, p0), (t1, p1) in itertools.pairwise(pts):
        a, b = max(t0, start), min(t1, end)
        if b > a:
            pa = p0 + (p1 - p0) * (a - t0) / (t1 - t0)
            pb = p0 + (p1 - p0) * (b - t0) / (t1 - t0)
            energy += (pa + pb) / 2 * (b - a)
    return energy


def _ledgers(host: str) -> list[list[tuple[float, float]]]:
    """Every power meter ledger the host's stand-ins left (one per server start), each as its lines."""
    script = (
        f"find /run /tmp -name '*{power.LEDGER_SUFFIX}' -path '*/power/*' 2>/dev/null"
        " | while read -r f; do echo '== ledger'; cat \"$f\"; done"
    )
    out = sh.host(host, "sh", "-c", script, timeout=120)
    assert out.returncode == 0, out.stderr
    texts = out.stdout.split("== ledger\n")[1:]
    return [power.read_ledger(t) for t in texts]


def _expected(record: dict[str, Any], accept_length: float | None) -> float:
    argv = [a.replace("/models/", f"{REPO}/tests/fixtures/models/") for a in record["argv"][3:]]
    model = truth.server_model(argv, UNIT_ENV)
    kind = hostlib_gpus.find_gpu("rtx-pro-6000")
    assert kind is not None
    return power.expected_energy_per_output_token(
        kind,
        model.timing,
        prompt_tokens=PROMPT,
        output_tokens=OUTPUT,
        accept_length=accept_length if model.accept_length else None,
        time_scale=SCALE,
    )


@pytest.mark.simhost
def test_points_carry_telemetry_that_follows_the_power_model(sim_host: str, tmp_path: Path) -> None:
    t0 = time.monotonic()
    cmd = [
        sys.executable,
        *("-m", "sglbench", "run", "--inventory", str(REPO / "inventory" / "sim"), "--tp", "1"),
        *("--configs", f"{AR},{DFLASH}", "--results", str(tmp_path / "results"), "--run-id", RUN_ID),
        *("--lock-dir", str(tmp_path / "locks"), "--wait", "300"),
        *("-e", f"ansible_host={sim_host}", "-e", "sglbench_bench=" + json.dumps(BENCH)),
        *("-e", "sglbench_matrix=" + json.dumps(_matrix())),
        *("-e", "sglbench_unit_environment=" + json.dumps(UNIT_ENV)),
    ]
    done = subprocess.run(cmd, cwd=REPO, env=sh.env(sim_host), capture_output=True, text=True, timeout=900)
    # exit 1: a point the client's self-check marked invalid (judged below)
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]
    run_dir = tmp_path / "results" / RUN_ID
    host_dir = run_dir / "simhost"
    records = {
        name: json.loads((host_dir / f"{name}-tp1" / "record.json").read_text()) for name in (AR, DFLASH)
    }
    figures: dict[str, Any] = {"elapsed_s": time.monotonic() - t0, "configs": {}}
    judged: list[dict[str, Any]] = []
    ledgers = _ledgers(sim_host)
    try:
        for name, record in records.items():
            results = _point_results(host_dir / f"{name}-tp1")
            assert len(results) == 2, f"{name}: {len(results)} point results"
            docs = [r["raw"] for r in results]
            rows = sorted((r for d in docs for r in d["gpu"]["rows"]), key=lambda r: r[0])
            capped = [bool(r[8] & power.REASON_SW_POWER_CAP) for r in rows]
            if name == AR:
                # one run of capped samples, all of the first point's, no longer than the episode
                assert [k for k, _ in itertools.groupby(capped)].count(True) == 1, capped
                first_t = {r[0] for r in docs[0]["gpu"]["rows"]}
                spell = [r[0] for r, cap in zip(rows, capped, strict=True) if cap]
                assert set(spell) <= first_t, capped
                assert spell[-1] - spell[0] <= EPISODE_S
            else:
                assert not any(capped)
            per_point: list[dict[str, Any]] = []
            figures["configs"][name] = per_point
            for res, doc in zip(results, docs, strict=True):
                summary = res["summary"]
                window, gpu_rows = doc["window"], doc["gpu"]["rows"]
                assert doc["sampling"]["gpus"] == [0] and doc["sampling"]["load_endpoint"] == "/v1/loads"
                assert doc["sampling"]["metrics"] is True, "auto: the launch line has --enable-metrics"
                assert min(r[0] for r in gpu_rows) <= window["start"]
                assert max(r[0] for r in gpu_rows) >= window["end"] - 0.002
                sources = {r[1] for r in doc["server"]["rows"]}
                assert sources == {"metrics", "load"}, doc["errors"]
                stretch = (
                    1.0
                    if summary["valid"]
                    else 1 / (1 - min(0.9, summary["client"]["runqueue_wait_fraction"]))
                )
                assert doc["sampling"]["overhead_s"] <= 0.5 * stretch, (
                    name,
                    summary["repeat"],
                    summary["client"],
                )
                measured_rows = [r for r in res["records"] if not r["warmup"] and r.get("end_s") is not None]
                tokens = sum(r["completion_tokens"] for r in measured_rows)
                j_per_token = _window_energy(gpu_rows, 0, window["start"], window["end"]) / tokens
                # the window is the measured requests': first sent to last response received
                t0_unix = summary["t0_unix"]
                assert window["start"] == pytest.approx(
                    t0_unix + min(r["sent_s"] for r in measured_rows), abs=1e-6
                )
                assert window["end"] == pytest.approx(
                    t0_unix + max(r["end_s"] for r in measured_rows), abs=1e-6
                )
                # the server's account: the ledger of the server the point ran on (its life spans the samples)
                span = min(r[0] for r in gpu_rows), max(r[0] for r in gpu_rows)
                (ledger,) = [lg for lg in ledgers if lg and lg[0][0] <= span[0] and span[1] <= lg[-1][0]]
                pts = sorted(r for r in gpu_rows if r[1] == 0)
                sampled = sum(b[2] * (b[0] - a[0]) for a, b in itertools.pairwise(pts))
                drawn = power.ledger_energy(ledger, span[1]) - power.ledger_energy(ledger, span[0])
                window_drawn = power.ledger_energy(ledger, window["end"]) - power.ledger_energy(
                    ledger, window["start"]
                )
                # a point is throttled when the episode reaches into its window (not only its warm-up)
                interval = doc["sampling"]["gpu_interval_ms"] / 1000
                throttled = any(
                    r[8] & power.REASON_SW_POWER_CAP and r[0] > window["start"] - interval for r in gpu_rows
                )
                # the model at the acceptance this point drew: its decode steps per request (the first token
                # comes from the prefill)
                steps = [r["spec_verify_ct"] for r in measured_rows if r.get("spec_verify_ct")]
                accept = (OUTPUT - 1) * len(steps) / sum(steps) if steps else None
                expected = _expected(record, accept)
                per_point.append(
                    {
                        "point": summary["point"],
                        "repeat": summary["repeat"],
                        "throttled": throttled,
                        "j_per_token": j_per_token,
                        "meter_window_j_per_token": window_drawn / tokens,
                        "expected": expected,
                        "overhead_s": doc["sampling"]["overhead_s"],
                        "accept_length": accept,
                        "accept_length_mean": summary.get("accept_length_mean"),
                        "valid": summary["valid"],
                        "sampled_j": sampled,
                        "meter_j": drawn,
                    }
                )
                assert sampled == pytest.approx(drawn, rel=0.02), (name, per_point[-1])
                # only the client's self-check (a starved machine) may reject one here
                if not summary["valid"]:
                    reasons = summary["invalid_reasons"]
                    assert reasons and set(reasons) <= set(summary["client"]["reasons"]), (name, reasons)
                # the controller's own figures agree: J/token from the same window, and the point flagged
                # throttled exactly when the episode reached into its window
                derived = res["figures"]
                assert derived is not None and derived["j_per_token"] == pytest.approx(j_per_token, rel=0.01)
                assert ("throttled" in derived["flags"]) == throttled, (
                    name,
                    summary["repeat"],
                    derived["flags"],
                )
                assert throttled == (name == AR and summary["repeat"] == 0), (name, summary["repeat"])
                per_point[-1]["controller_j_per_token"] = derived["j_per_token"]
            unthrottled = [p for p in per_point if not p["throttled"]]
            assert unthrottled, f"{name}: every point overlapped the episode"
            judged += [p for p in unthrottled if p["valid"]]
            for p in (p for p in unthrottled if p["valid"]):
                # On a quiet machine the points agree within 5 % (they did: -1.1 % to +2.7 %); `make test`
                # runs this beside four other lanes on two cores, where a starved stand-in runs its decode
                # steps longer than its timing model at the same power (+5.7 % seen once): the guard is 8 %.
                assert p["j_per_token"] == pytest.approx(p["expected"], rel=0.08), (name, p)
    finally:  # the figures so far, also when a check failed
        figures["held_to_the_model"] = len(judged)
        ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
        ARTIFACT.write_text(json.dumps(figures, indent=1))
