"""The whole path on the stand-in: the load generator's rows against a baseline and two speculative
stand-ins (one clean, one with SGLBENCH_SIM_DIVERGE), read back as results; the gate passes the clean
config and fails the lossy one, and the acceptance histograms reach the per-position table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import recordfactory as rf
from sim.sim_harness import launch, model

from sglbench import acceptance, lossless, results, summarize
from sglbench.hostlib import loadgen
from sglbench.hostlib.prompts import Prompt

PROMPTS = [
    Prompt(f"q{i}", "chat" if i % 2 else "code", text=f"stand-in prompt {i}: go on") for i in range(12)
]
SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", model("eagle3-qwen3-8b")]


def _rows(tmp: Path, args: list[str], **env: str) -> list[dict[str, Any]]:
    sim = launch(tmp, ["--model-path", model("qwen3-8b"), *args], **env)
    try:
        spec = loadgen.BenchSpec(
            url=sim.url,
            prompts=PROMPTS,
            points=[loadgen.LoadPoint(concurrency=4)],
            sampling=loadgen.SamplingSpec(max_new_tokens=20, ignore_eos=True),
            num_prompts=len(PROMPTS),
            warmup=1,
            repeats=1,
        )
        return loadgen.record_rows(loadgen.run_campaign(spec))
    finally:
        sim.stop()


def test_gate_and_positions_from_stand_in_rows(tmp_path: Path) -> None:
    root = tmp_path / "results"
    bench = rf.bench([rf.point(4, 0, 100.0)])
    bench["meta"]["sampling"] = {"max_new_tokens": 20, "temperature": 0.0}
    configs = [
        ("ar", "none", [], {}),
        ("eagle", "EAGLE3", SPEC, {}),
        ("lossy", "EAGLE3", SPEC, {"SGLBENCH_SIM_DIVERGE": "0.5:3"}),
    ]
    for name, algorithm, args, env in configs:
        rows = _rows(tmp_path / name, args, **env)
        measured = [r for r in rows if not r["warmup"]]
        assert all(r["error"] is None and len(r["output_ids"]) == 20 for r in measured)
        assert all(r["output_ids"] is None for r in rows if r["warmup"])  # kept only where compared
        rf.write(root, rf.record(config=name, algorithm=algorithm, benchmark=bench), rows)
    res = results.load(root / "run1")
    gate = lossless.gate(res).set_index("config")
    assert gate.loc["eagle", lossless.COLUMN] == lossless.PASS and gate.loc["eagle", "n_compared"] == 12
    assert gate.loc["lossy", lossless.COLUMN] == lossless.FAIL
    assert 0 < gate.loc["lossy", "n_exact"] < 12 and gate.loc["lossy", "first_divergence_min"] == 3
    shown = {r["config"]: r for r in summarize.display_rows(summarize.summary_table(res, n_boot=20))}
    assert "not lossless" in shown["lossy"]["speedup [95% CI]"]
    assert "not lossless" not in shown["eagle"]["speedup [95% CI]"]
    positions = acceptance.position_table(acceptance.histograms(res))
    assert set(positions["config"]) == {"eagle", "lossy"}
    assert set(positions["category"]) == {"all", "chat", "code"}
    assert (positions["steps"] > 0).all() and positions["pos_1"].between(0, 1).all()
