"""sglbench report: one self-contained HTML file with embedded plots, PNGs beside it, SIMULATED banner."""

from __future__ import annotations

import base64
import html
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import recordfactory as rf

from sglbench import cli, report, results

PLOTS = ("throughput", "speedup", "breakeven", "frontier", "latency", "acceptance", "scaling", "capacity")


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href", "srcset", "action", "data") and v is not None:
                self.refs.append((tag, k, v))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    root = tmp_path_factory.mktemp("campaign")
    run = rf.demo_campaign(root, tps=(1, 8), concurrencies=(1, 4))
    out = root / "out" / "report.html"
    return out, report.render(results.load(run), out)


def test_html_is_self_contained(rendered: tuple[Path, list[Path]]) -> None:
    out, _ = rendered
    text = out.read_text()
    p = _Refs()
    p.feed(text)
    assert "script" not in p.tags and "link" not in p.tags and "iframe" not in p.tags
    assert not re.search(r"https?://", text)  # nothing to fetch, not even in CSS
    imgs = [v for tag, k, v in p.refs if tag == "img"]
    assert len(imgs) == len(PLOTS)
    for v in imgs:
        assert v.startswith("data:image/png;base64,")
        assert base64.b64decode(v.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert all(v.startswith(("data:", "#")) for _t, _k, v in p.refs)


def test_pngs_are_written_beside_the_html(rendered: tuple[Path, list[Path]]) -> None:
    out, written = rendered
    pngs = sorted(p.name for p in written if p.suffix == ".png")
    assert pngs == sorted(f"report-{k}.png" for k in PLOTS)
    for p in written[1:]:
        assert p.parent == out.parent and p.read_bytes()[:4] == b"\x89PNG"
        assert base64.b64encode(p.read_bytes()).decode() in out.read_text()  # the same image is embedded


def test_content_a_reader_needs(rendered: tuple[Path, list[Path]]) -> None:
    text = rendered[0].read_text()
    assert "SIMULATED DATA" in text
    assert re.findall(r"<h2>([^<]*)</h2>", text) == [html.escape(h, quote=False) for h in report.SECTIONS]
    # the deployment answer: a deploy table per TP, the pairs behind it, the limits, the knee lines
    assert "<h3>TP 1: deploy table</h3>" in text and "<h3>TP 8: deploy table</h3>" in text
    assert "qwen27b-ddtree-b16 at every measured level (concurrency 1 to 4)" in text
    assert "<h3>TP 1: speculative vs baseline</h3>" in text
    assert "slot-bound at concurrency 4" in text and "Knee (m, mixed)" in text
    assert "<h3>TP 1</h3>" in text and "<h3>TP 8</h3>" in text and "<h3>TP 4</h3>" not in text
    # failure list with classified causes and a recommendation each
    assert "cuda_oom" in text and "lower --mem-fraction-static" in text
    assert "planned_failure" in text and "Planner recommends --max-running-requests 4" in text


def test_memory_split_adds_up_to_the_gpu() -> None:
    plan = rf.demo_plan(1, True, 4)
    split = report.memory_split(plan)
    assert split is not None
    assert sum(split.values()) == pytest.approx(plan["gpu_mem_gib"])
    assert split["speculative reservation"] == pytest.approx(4.59)
    assert split["weights"] == pytest.approx(50.95 + 3.22)
    assert report.memory_split({}) is None


def test_sparse_run_says_what_is_missing(tmp_path: Path) -> None:
    rf.write(tmp_path, rf.record(config="ar", simulated=False))
    rf.write(
        tmp_path,
        rf.record(
            config="x",
            algorithm="DFLASH",
            outcome="failed",
            simulated=False,
            failure={"phase": "health", "cause": "zero_requests", "message": "slots"},
        ),
    )
    out = tmp_path / "r.html"
    written = report.render(results.load(tmp_path / "run1"), out)
    text = out.read_text()
    assert written == [out]  # no plots without data
    assert "SIMULATED" not in text
    assert "Not shown: no benchmark points were recorded" in text
    assert "Not shown: no attempt carries a capacity plan" in text
    assert "zero_requests" in text and "Lower --max-running-requests" in text


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rf.write(tmp_path, rf.record(config="ar", benchmark=rf.bench([rf.point(1, 0, 5.0)])))
    out = tmp_path / "rep" / "index.html"
    assert cli.main(["report", str(tmp_path / "run1"), "-o", str(out)]) == 0
    assert out.is_file() and "SIMULATED" in capsys.readouterr().out
    assert cli.main(["report", str(tmp_path / "run1"), "-o", str(tmp_path / "r.pdf")]) == 2
    assert cli.main(["report", str(tmp_path / "nothing"), "-o", str(out)]) == 2


def test_flag_spelling() -> None:
    assert report._flag("max_running_requests") == "--max-running-requests"
    assert report._flag("--mamba-ssm-dtype") == "--mamba-ssm-dtype"


def test_several_hosts_merge(tmp_path: Path) -> None:
    for host, scale in (("gpu1", 1.0), ("gpu2", 1.5)):
        rf.write(
            tmp_path,
            rf.record(
                host=host, config="ar", benchmark=rf.bench([rf.point(1, r, 10.0 * scale) for r in range(2)])
            ),
        )
        rf.write(
            tmp_path,
            rf.record(
                host=host,
                config="sd",
                algorithm="DFLASH",
                benchmark=rf.bench([rf.point(1, r, 20.0 * scale + r) for r in range(2)]),
            ),
        )
    res = results.load(tmp_path / "run1")
    out = tmp_path / "r.html"
    report.render(res, out)
    text = out.read_text()
    assert "host(s) gpu1, gpu2" in text and '<th class="l">host</th>' in text
    assert "ar @ gpu1" not in text  # series labels are drawn in the PNG, not the HTML
    assert sorted(p.name for p in tmp_path.glob("r-*.png")) == [
        "r-breakeven.png",
        "r-frontier.png",
        "r-latency.png",
        "r-speedup.png",
        "r-throughput.png",
    ]


def test_report_into_a_directory_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`report -o <dir>` used to write the PNGs and a .tmp file, then fail on the rename with a traceback."""
    run = rf.demo_campaign(tmp_path / "c", tps=(1,), concurrencies=(1,))
    target = tmp_path / "out" / "report.html"
    target.mkdir(parents=True)
    assert cli.main(["report", str(run), "-o", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sglbench report: error: -o {target} is a directory")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["report.html"]
    assert list(target.iterdir()) == []


def test_report_write_failure_removes_every_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while writing (disk full, ...) leaves neither .tmp files nor a half set of PNGs."""
    from sglbench import outfiles

    run = rf.demo_campaign(tmp_path / "c", tps=(1,), concurrencies=(1,))
    out = tmp_path / "out" / "report.html"
    real_fdopen, calls = outfiles.os.fdopen, []

    def failing_fdopen(fd: int, *a: object, **kw: object):  # the third file hits a full disk
        calls.append(fd)
        if len(calls) == 3:
            outfiles.os.close(fd)
            raise OSError(28, "No space left on device")
        return real_fdopen(fd, *a, **kw)

    monkeypatch.setattr(outfiles.os, "fdopen", failing_fdopen)
    with pytest.raises(outfiles.OutputError, match="No space left on device"):
        report.render(results.load(run), out)
    assert list((tmp_path / "out").iterdir()) == []


def test_the_report_reads_the_deployment_answer_summarize_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = rf.demo_campaign(tmp_path / "c", tps=(1,), concurrencies=(1, 4))
    cli.main(["summarize", str(run)])
    doc = (run / "breakeven.json").read_text()
    (run / "breakeven.json").write_text(doc.replace("qwen27b-ddtree-b16 at every", "STORED at every"))
    capsys.readouterr()
    out = tmp_path / "r.html"
    report.render(results.load(run), out)
    assert "STORED at every measured level" in out.read_text()
    assert capsys.readouterr().err == ""


def _figures(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Every figure the report draws, by the title of its first axes (the PNGs are still written)."""
    drawn: list[Any] = []
    real = report._png

    def keep(fig: Any) -> bytes:
        drawn.append(fig)
        return real(fig)

    monkeypatch.setattr(report, "_png", keep)
    return {"figs": drawn}


def _labels(fig: Any) -> list[str]:
    return sorted({t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()})


def test_two_hosts_serving_the_same_config_are_two_series_in_every_plot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _figures(monkeypatch)
    report.render(results.load(rf.pair_campaign(tmp_path)), tmp_path / "r.html")
    series = ["ar @ gpu-a", "ar @ gpu-b", "sd @ gpu-a", "sd @ gpu-b"]
    throughput, speedup, latency, *_ = seen["figs"]
    assert _labels(throughput) == series and _labels(latency) == series
    assert _labels(speedup) == ["sd @ gpu-a", "sd @ gpu-b"]
    bars = [b for b in speedup.axes[0].patches]
    assert len(bars) == 4  # two hosts x two concurrencies, none drawn over another
    assert len({round(b.get_x(), 6) for b in bars}) == 4


def test_one_host_plots_keep_the_config_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _figures(monkeypatch)
    rf.pair_campaign(tmp_path / "both")
    one = tmp_path / "one"
    (one / "run1").mkdir(parents=True)
    (tmp_path / "both" / "run1" / "gpu-a").rename(one / "run1" / "gpu-a")
    report.render(results.load(one / "run1"), tmp_path / "r.html")
    assert _labels(seen["figs"][0]) == ["ar", "sd"]


def test_by_host_relabels_config_and_baseline_only_with_several_hosts() -> None:
    import pandas as pd

    t = pd.DataFrame({"host": ["a", "b", "b"], "config": ["x", "x", "y"], "baseline": ["x", "x", None]})
    got = report.by_host(t, True)
    assert got["config"].tolist() == ["x @ a", "x @ b", "y @ b"]
    assert got["baseline"].tolist()[:2] == ["x @ a", "x @ b"] and pd.isna(got["baseline"].iloc[2])
    assert t["config"].tolist() == ["x", "x", "y"]  # a copy: the summary table keeps its names
    assert report.by_host(t, False) is t


def test_a_dropped_host_is_in_the_overview_findings_and_failures(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    report.render(results.load(rf.pair_campaign(tmp_path, drop=True)), out)
    text = out.read_text()
    assert "host(s) gpu-a, gpu-b (dropped out)" in text
    assert "Dropped out</span>: gpu-b: unreachable in the benchmark phase of sd-tp1" in text
    row = re.search(r'<tr class="failed"><td class="l"><b>sd-tp1</b> @ gpu-b.*?</tr>', text)
    assert row is not None and "never recorded: not valid; 1 point(s) committed before" in row.group(0)
    assert "highest throughput <b>sd</b> on gpu-a at concurrency 4" in text


@pytest.fixture(scope="module")
def telemetry_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], results.Results]:
    root = tmp_path_factory.mktemp("telemetry")
    res = results.load(rf.telemetry_campaign(root))
    out = root / "out" / "report.html"
    return out, report.render(res, out), res


def test_energy_bars_carry_the_mean_and_interval_over_repeats(
    telemetry_report: tuple[Path, list[Path], results.Results],
) -> None:
    _, _, res = telemetry_report
    t = report.energy_table(res).set_index(["config", "concurrency"])
    pts = res.points.set_index(["config", "concurrency", "repeat"])
    for (cfg, conc), row in t.iterrows():
        reps = [pts.loc[(cfg, conc, r), "j_per_token"] for r in (0, 1)]
        assert row.j_per_token == pytest.approx(sum(reps) / 2)
        assert (row.lo, row.hi) == pytest.approx((min(reps), max(reps)))  # two repeats: the exact range
    assert t.loc[("ar", 4), "flagged"] and not t.loc[("ar", 1), "flagged"]


def test_telemetry_section_shows_energy_and_one_series_plot_per_attempt(
    telemetry_report: tuple[Path, list[Path], results.Results],
) -> None:
    out, written, _ = telemetry_report
    names = sorted(p.name for p in written if p.suffix == ".png")
    assert "report-energy.png" in names
    assert "report-telemetry-ar-tp1.png" in names and "report-telemetry-dflash-tp1.png" in names
    text = out.read_text()
    section = text.split(f"<h2>{html.escape(report.TELEMETRY)}</h2>", 1)[1].split("<h2>", 1)[0]
    assert section.count("<img") == 3 and "Telemetry of ar-tp1" in section
    assert "SIMULATED" in section  # the stand-in's power is labelled where it is shown
    assert "J/tok" in text and "$/Mtok" in text  # the summary tables of the page
    assert "throttled 1/2" in text


def test_a_report_without_telemetry_says_why_it_has_no_energy_plot(rendered: tuple[Path, list[Path]]) -> None:
    text = rendered[0].read_text()
    assert "Not shown: no point has GPU telemetry with an energy figure" in text
    assert "J/tok" not in text
