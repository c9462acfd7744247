"""Results measured against the real SGLang on its CPU engine (`--device cpu`, the real-SGLang sim host) are
labelled so everywhere: the record, the frames, `summarize`, `report`, `compare` (docs/real-sglang.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
import recordfactory as rf

from sglbench import compare, report, results
from sglbench.records import launch_device, load_record
from sglbench.summarize import CPU_BANNER, SIM_BANNER, summary_table, to_markdown

CPU_ARGV = ["/opt/sglang-0.5.23-cpu/bin/python", "-m", "sglang.launch_server", "--model-path", "/m"]
CPU_ARGV += ["--device", "cpu", "--max-total-tokens", "16384"]


@pytest.mark.parametrize(
    ("argv", "device"),
    [
        (["python3", "-m", "sglang.launch_server"], None),
        (["--device", "cpu"], "cpu"),
        (["--device=cpu"], "cpu"),
        (["--device", "cuda", "--device", "cpu"], "cpu"),  # the last one wins, as in argparse
        (["--device"], None),
    ],
)
def test_launch_device(argv: list[str], device: str | None) -> None:
    assert launch_device(argv) == device


def _run(root: Path, *, argv: list[str], simulated: bool, run_id: str = "run1") -> Path:
    pts = [rf.point(1, r, tok_s) for r, tok_s in enumerate([100.0, 110.0])]
    rec = rf.record(run_id=run_id, benchmark=rf.bench(pts, simulated=simulated), simulated=simulated)
    rec["argv"] = argv
    rf.write(root, rec)
    return root / run_id


def test_cpu_engine_run_is_labelled(tmp_path: Path) -> None:
    run = _run(tmp_path, argv=CPU_ARGV, simulated=False)
    rec = load_record(run / "gpu1" / "ar-tp1" / "record.json")
    assert rec.device == "cpu" and rec.cpu_engine and not rec.simulated
    res = results.load(run)
    assert res.cpu_engine and not res.simulated
    assert (
        res.attempts["cpu_engine"].all() and res.points["cpu_engine"].all() and res.runs["cpu_engine"].all()
    )
    table = summary_table(res, n_boot=200)
    assert table["cpu_engine"].all()
    text = to_markdown(table, res)
    assert CPU_BANNER in text and SIM_BANNER not in text and "| CPU |" in text
    out = tmp_path / "report.html"
    report.render(res, out)
    html = out.read_text()
    assert "CPU ENGINE" in html and "SIMULATED DATA" not in html
    other = results.load(_run(tmp_path / "b", argv=CPU_ARGV, simulated=False, run_id="run2"))
    ctext = compare.to_markdown(compare.compare(res, other, n_boot=200), res, other)
    assert "CPU ENGINE" in ctext and "SIMULATED" not in ctext


def test_gpu_and_stand_in_runs_are_not_cpu_engine(tmp_path: Path) -> None:
    gpu = results.load(
        _run(tmp_path / "gpu", argv=["python3", "-m", "sglang.launch_server"], simulated=False)
    )
    assert not gpu.cpu_engine and not gpu.simulated
    assert CPU_BANNER not in to_markdown(summary_table(gpu, n_boot=200), gpu)
    # The stand-in is simulated, whatever flags it was given.
    sim = results.load(_run(tmp_path / "sim", argv=CPU_ARGV, simulated=True))
    assert sim.simulated and not sim.cpu_engine
    text = to_markdown(summary_table(sim, n_boot=200), sim)
    assert SIM_BANNER in text and CPU_BANNER not in text
