"""Summary tables: speedup and bootstrap CI values against hand-computed ones on constructed records."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import recordfactory as rf
from hypothesis import given
from hypothesis import strategies as st

from sglbench import bootstrap, cli, results, summarize


def _write_pair(root: Path, ar: list[float], spec: list[float], simulated: bool = True) -> Path:
    pts = [rf.point(4, i, v) for i, v in enumerate(ar)]
    rf.write(root, rf.record(config="ar", benchmark=rf.bench(pts, simulated=simulated), simulated=simulated))
    pts = [rf.point(4, i, v, accept=3.0) for i, v in enumerate(spec)]
    rec = rf.record(
        config="dflash", algorithm="DFLASH", benchmark=rf.bench(pts, simulated=simulated), simulated=simulated
    )
    rf.write(root, rec)
    return root / "run1"


def _row(table, config: str, tp: int = 1):
    m = table[(table.config == config) & (table.tp == tp)]
    assert len(m) == 1, m
    return m.iloc[0]


def test_two_repeats_ci_is_the_exact_bootstrap_range(tmp_path: Path) -> None:
    # Baseline repeats 100, 100 -> mean 100, no spread. Config repeats 200, 400: resampling two repeats
    # gives means 200 (p=1/4), 300 (1/2), 400 (1/4), so the 95% percentile interval is [200, 400];
    # the speedup is 300/100 = 3.0 with interval [2.0, 4.0].
    res = results.load(_write_pair(tmp_path, [100.0, 100.0], [200.0, 400.0]))
    t = summarize.summary_table(res)
    ar, sp = _row(t, "ar"), _row(t, "dflash")
    assert ar.tok_s == 100.0 and (ar.tok_s_ci_low, ar.tok_s_ci_high) == (100.0, 100.0)
    assert sp.tok_s == 300.0
    assert (sp.tok_s_ci_low, sp.tok_s_ci_high) == (200.0, 400.0)
    assert sp.baseline == "ar"
    assert sp.speedup == pytest.approx(3.0)
    assert (sp.speedup_ci_low, sp.speedup_ci_high) == (pytest.approx(2.0), pytest.approx(4.0))
    assert ar.speedup == pytest.approx(1.0)
    assert sp.accept_length == 3.0


def test_request_level_resampling_with_one_repeat(tmp_path: Path) -> None:
    # One repeat, two requests of 10 and 30 tokens over a 1 s window: observed 40 tok/s. Resampling two
    # requests gives sums 20 (1/4), 40 (1/2), 60 (1/4) -> interval [20, 60].
    rf.write(
        tmp_path,
        rf.record(config="ar", benchmark=rf.bench([rf.point(2, 0, 40.0, duration_s=1.0, n_ok=2)])),
        requests=[rf.request(2, 0, 0, 10), rf.request(2, 0, 1, 30)],
    )
    t = summarize.summary_table(results.load(tmp_path / "run1"))
    r = _row(t, "ar")
    assert r.tok_s == 40.0 and (r.tok_s_ci_low, r.tok_s_ci_high) == (20.0, 60.0)


def test_single_repeat_without_requests_has_no_interval(tmp_path: Path) -> None:
    t = summarize.summary_table(results.load(_write_pair(tmp_path, [100.0], [150.0])))
    sp = _row(t, "dflash")
    assert sp.speedup == pytest.approx(1.5)
    assert math.isnan(sp.speedup_ci_low) and math.isnan(sp.tok_s_ci_low)
    assert "1.50x" in summarize.fmt_ci(sp.speedup, sp.speedup_ci_low, sp.speedup_ci_high, ".2f", "x")


def test_bootstrap_matches_a_hand_written_reference() -> None:
    # Same algorithm written out naively with the same random stream.
    samples = [bootstrap.RepeatSample(5.0, 2.0, (4.0, 6.0, 2.0)), bootstrap.RepeatSample(7.0)]
    got = bootstrap.replicates(samples, 50, bootstrap.rng_for(3, "x"))
    rng = bootstrap.rng_for(3, "x")
    draws = rng.integers(0, 3, size=(50, 3))
    first = 5.0 * np.array([4.0, 6.0, 2.0])[draws].sum(axis=1) / 12.0
    pick = rng.integers(0, 2, size=(50, 2))
    per = np.vstack([first, np.full(50, 7.0)])
    want = [(per[pick[b, 0], b] + per[pick[b, 1], b]) / 2 for b in range(50)]
    assert np.allclose(got, want)


def test_interval_is_seeded_and_deterministic(tmp_path: Path) -> None:
    run = _write_pair(tmp_path, [100.0, 90.0, 110.0], [180.0, 220.0, 205.0])
    a = summarize.summary_table(results.load(run), seed=1)
    b = summarize.summary_table(results.load(run), seed=1)
    c = summarize.summary_table(results.load(run), seed=2)
    cols = ["tok_s_ci_low", "tok_s_ci_high", "speedup_ci_low", "speedup_ci_high"]
    assert a[cols].equals(b[cols])
    assert not a[cols].equals(c[cols])
    sp = _row(a, "dflash")
    assert sp.speedup_ci_low <= sp.speedup <= sp.speedup_ci_high


def test_baseline_matches_model_tp_and_concurrency(tmp_path: Path) -> None:
    # Two models, each with its own AR baseline; a TP4 spec config without a TP4 baseline gets no speedup.
    rf.write(
        tmp_path, rf.record(config="big-ar", model_path="/m/big", benchmark=rf.bench([rf.point(1, 0, 50.0)]))
    )
    rf.write(
        tmp_path,
        rf.record(config="small-ar", model_path="/m/small", benchmark=rf.bench([rf.point(1, 0, 200.0)])),
    )
    rf.write(
        tmp_path,
        rf.record(
            config="small-dflash",
            algorithm="DFLASH",
            model_path="/m/small",
            benchmark=rf.bench([rf.point(1, 0, 300.0), rf.point(2, 0, 999.0)]),
        ),
    )
    rf.write(
        tmp_path,
        rf.record(
            config="big-dflash",
            algorithm="DFLASH",
            model_path="/m/big",
            tp=4,
            benchmark=rf.bench([rf.point(1, 0, 80.0)]),
        ),
    )
    t = summarize.summary_table(results.load(tmp_path / "run1"))
    small = t[(t.config == "small-dflash") & (t.concurrency == 1)].iloc[0]
    assert small.baseline == "small-ar" and small.speedup == pytest.approx(1.5)
    no_conc = t[(t.config == "small-dflash") & (t.concurrency == 2)].iloc[0]
    assert no_conc.baseline is None or (isinstance(no_conc.baseline, float) and math.isnan(no_conc.baseline))
    assert math.isnan(_row(t, "big-dflash", tp=4).speedup)


def test_skips_and_failures_get_a_row_with_cause(tmp_path: Path) -> None:
    run = _write_pair(tmp_path, [100.0], [150.0])
    rf.write(
        tmp_path,
        rf.record(
            config="mrr8",
            algorithm="DFLASH",
            outcome="skipped",
            plan_=rf.plan(fits=False, mrr=0),
            failure={"phase": "plan", "cause": "planned_failure", "message": "0 request slots"},
        ),
    )
    rf.write(
        tmp_path,
        rf.record(
            config="oom",
            algorithm="DFLASH",
            outcome="failed",
            failure={"phase": "health", "cause": "cuda_oom", "message": "CUDA out of memory"},
        ),
    )
    res = results.load(run)
    t = summarize.summary_table(res)
    skip, fail = _row(t, "mrr8"), _row(t, "oom")
    assert skip.outcome == "skipped" and skip.note.startswith("planned skip: planned_failure")
    assert skip.max_running_requests_predicted == 0
    assert fail.note.startswith("failed: cuda_oom")
    md = summarize.to_markdown(t, res)
    assert "## TP 1" in md and "planned skip: planned_failure (0 request slots)" in md
    assert summarize.SIM_BANNER in md and "| SIM |" in md
    assert summarize.exit_code(res) == 1


def test_invalid_points_are_flagged(tmp_path: Path) -> None:
    rf.write(
        tmp_path,
        rf.record(config="ar", benchmark=rf.bench([rf.point(1, 0, 10.0), rf.point(1, 1, 11.0, valid=False)])),
    )
    res = results.load(tmp_path / "run1")
    r = _row(summarize.summary_table(res), "ar")
    assert not r.valid and r.note.startswith("1/2 repeats invalid: client CPU")
    assert summarize.exit_code(res) == 1


def test_autotuned_attempts_name_the_flags_that_ran(tmp_path: Path) -> None:
    """An autotuned attempt says which flags the policy changed; an untuned one says nothing extra."""
    tuned_plan = rf.plan(
        autotune={"applied": True, "flags": {"mamba_ssm_dtype": "bfloat16", "enable_foo": True}},
    )
    rf.write(
        tmp_path,
        rf.record(config="tuned", plan_=tuned_plan, benchmark=rf.bench([rf.point(1, 0, 10.0)])),
    )
    not_applied = rf.plan(autotune={"applied": False, "flags": None})
    rf.write(
        tmp_path,
        rf.record(config="plain", plan_=not_applied, benchmark=rf.bench([rf.point(1, 0, 10.0)])),
    )
    res = results.load(tmp_path / "run1")
    t = summarize.summary_table(res)
    tuned, plain = _row(t, "tuned"), _row(t, "plain")
    assert tuned.autotuned == "--mamba-ssm-dtype bfloat16 --enable-foo"
    assert not isinstance(plain.autotuned, str)  # missing (None or NaN in the frame)
    assert summarize.outcome_text(tuned) == "ok (autotuned: --mamba-ssm-dtype bfloat16 --enable-foo)"
    assert summarize.outcome_text(plain) == "ok"
    assert "ok (autotuned: --mamba-ssm-dtype bfloat16" in summarize.to_markdown(t, res)


def test_cli_formats_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _write_pair(tmp_path, [100.0, 100.0], [200.0, 400.0], simulated=False)
    assert cli.main(["summarize", str(run)]) == 0
    out = capsys.readouterr().out
    assert "300.0 [200.0, 400.0]" in out and "3.00x [2.00, 4.00]" in out and "SIMULATED" not in out
    assert cli.main(["summarize", str(run), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("run_id,host,tp,config")
    pq = tmp_path / "t.parquet"
    assert cli.main(["summarize", str(run), "--format", "parquet", "-o", str(pq)]) == 0
    import pandas as pd

    assert set(pd.read_parquet(pq)["config"]) == {"ar", "dflash"}
    assert cli.main(["summarize", str(run), "--format", "parquet"]) == 2
    assert cli.main(["summarize", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "no such directory" in err and "Traceback" not in err


def test_missing_points_from_the_resume_block_are_not_ok(tmp_path: Path) -> None:
    b = rf.bench([rf.point(1, 0, 10.0)])
    b["resume"] = {"expected": 2, "done": 1, "missing": ["c1-r1"]}
    rf.write(tmp_path, rf.record(config="ar", benchmark=b))
    res = results.load(tmp_path / "run1")
    assert res.attempts.iloc[0]["points_missing"] == 1
    r = _row(summarize.summary_table(res), "ar")
    assert not r.valid and r.note == "1 expected point(s) missing"
    assert summarize.exit_code(res) == 1


def test_invalid_reasons_are_digested_per_kind() -> None:
    from sglbench.summarize import reason_digest

    digest = reason_digest(
        [
            "client waited 17% of the time for a CPU (> 10%); send lateness p99 6.81 ms > 5.0 ms",
            "client waited 23% of the time for a CPU (> 10%)",
            "",
        ]
    )
    assert digest == (
        "client waited 23% of the time for a CPU (> 10%) (x2); send lateness p99 6.81 ms > 5.0 ms"
    )


# -- one-line errors instead of tracebacks -----------------------------------------------------
def _one_line_error(capsys: pytest.CaptureFixture[str], prog: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sglbench {prog}: error: "), err
    return err[0]


def test_a_results_root_with_two_copies_of_one_run_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was `ValueError: The truth value of a Series is ambiguous`: the copy doubled every attempt."""
    import shutil

    _write_pair(tmp_path / "res", [100.0, 101.0], [200.0, 202.0])
    shutil.copytree(tmp_path / "res" / "run1", tmp_path / "res" / "run1-copy")
    for argv in (
        ["summarize", str(tmp_path / "res")],
        ["report", str(tmp_path / "res"), "-o", str(tmp_path / "r.html")],
    ):
        assert cli.main(argv) == 2
        line = _one_line_error(capsys, argv[0])
        assert "run run1: attempt gpu1/ar-tp1 is in both" in line and "give only one of them" in line
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("where", ["directory", "proc", "missing-dir"])
def test_output_file_problems_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    run = _write_pair(tmp_path, [100.0, 101.0], [200.0, 202.0])
    out = {
        "directory": tmp_path,
        "proc": Path("/proc/sglbench.md"),
        "missing-dir": tmp_path / "new" / "s.md",
    }[where]
    rc = cli.main(["summarize", str(run), "-o", str(out)])
    if where == "missing-dir":  # created, like report -o does
        assert rc == 0 and out.is_file()
        return
    assert rc == 2
    assert f"-o {out}" in _one_line_error(capsys, "summarize")


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--seed", "-1"], "--seed must be an integer from 0"),
        (["--bootstrap", "99999999999"], "--bootstrap must be from 100 to 100000"),
        (["--bootstrap", "5"], "--bootstrap must be from 100 to 100000"),
    ],
)
def test_seed_and_bootstrap_are_bounded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], needle: str
) -> None:
    """--bootstrap 99999999999 tried to allocate 1.46 TiB; --seed -1 was a numpy traceback."""
    run = _write_pair(tmp_path, [100.0, 101.0], [200.0, 202.0])
    assert cli.main(["summarize", str(run), *argv]) == 2
    assert needle in _one_line_error(capsys, "summarize")


def test_tpot_percentiles_reach_the_table_and_its_markdown(tmp_path: Path) -> None:
    """TPOT p50/p99 (the load generator's tpot_ms) are means over repeats, like every latency column."""
    pts = [rf.point(2, 0, 100.0, itl=4.0), rf.point(2, 1, 100.0, itl=6.0)]  # tpot_ms: p50 4/6, p99 8/12
    rf.write(tmp_path, rf.record(config="ar", benchmark=rf.bench(pts)))
    res = results.load(tmp_path / "run1")
    t = summarize.summary_table(res, n_boot=200)
    row = _row(t, "ar")
    assert row.tpot_ms_p50 == pytest.approx(5.0) and row.tpot_ms_p99 == pytest.approx(10.0)
    md = summarize.to_markdown(t, res)
    header = next(line for line in md.splitlines() if line.startswith("| config"))
    cells = next(line for line in md.splitlines() if line.startswith("| ar "))
    col = header.split(" | ").index("TPOT p50/p99 ms")
    assert header.split(" | ").index("TTFT p50/p99 ms") < col < header.split(" | ").index("ITL p50/p99 ms")
    assert cells.split(" | ")[col] == "5.00 / 10.00"


def test_an_attempt_without_points_shows_a_dash_for_its_prompt_set(tmp_path: Path) -> None:
    """Several prompt sets give a prompts column; a skipped attempt has none: a dash, not nan."""
    for config, prompts in (("ar", "chat"), ("ar2", "code")):
        bench = rf.bench([rf.point(1, 0, 100.0)], prompts=prompts)
        rf.write(tmp_path, rf.record(config=config, benchmark=bench))
    rf.write(tmp_path, rf.record(config="skipped", outcome="skipped", benchmark=None, kv_observed=None))
    rows = summarize.display_rows(summarize.summary_table(results.load(tmp_path / "run1")))
    by_config = {r["config"]: r for r in rows}
    assert by_config["ar"]["prompts"] == "chat" and by_config["ar2"]["prompts"] == "code"
    assert by_config["skipped"]["prompts"] == "-"


def test_two_hosts_serving_the_same_configs_keep_a_row_and_a_baseline_each(tmp_path: Path) -> None:
    res = results.load(rf.pair_campaign(tmp_path))
    t = summarize.summary_table(res)
    sd = t[(t.config == "sd") & (t.concurrency == 1)]
    assert sd["host"].tolist() == ["gpu-a", "gpu-b"] and sd["tok_s"].tolist() == [20.5, 30.75]
    # each host's speedup is over its own baseline: 1.5x faster hosts, the same ratio on both
    assert sd["speedup"].round(4).tolist() == [round(20.5 / 10.5, 4)] * 2
    md = summarize.to_markdown(t, res)
    assert "host(s) gpu-a, gpu-b\n" in md and "| host | config |" in md and "Dropped out" not in md
    assert summarize.exit_code(res) == 0


def test_a_dropped_host_is_named_and_its_cut_attempt_is_not_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = rf.pair_campaign(tmp_path, drop=True)
    res = results.load(run)
    t = summarize.summary_table(res)
    cut = t[t.outcome == "cut"]
    assert cut[["host", "config", "tp", "valid"]].values.tolist() == [["gpu-b", "sd", 1, False]]
    assert cut.iloc[0].note == (
        "cut: host unreachable in the benchmark phase, no record; 1 point(s) committed before, kept for the "
        "resume"
    )
    assert t[t.host == "gpu-a"]["valid"].all()  # the other host's results stand
    assert cli.main(["summarize", str(run)]) == 1
    out = capsys.readouterr().out
    assert "host(s) gpu-a, gpu-b (dropped out)" in out
    assert (
        "**Dropped out: gpu-b: unreachable in the benchmark phase of sd-tp1 (cut: not recorded, not valid); "
        "1 attempt(s) recorded: ssh: connection reset**"
    ) in out
    (cut_line,) = [x for x in out.splitlines() if x.startswith("| gpu-b | sd | - | - |")]
    assert cut_line.endswith("| SIM |")  # its run is simulated, so is the row that says nothing was kept
    assert cli.main(["summarize", str(run), "--format", "csv"]) == 1
    assert "gpu-b,1,sd,,," in capsys.readouterr().out


def test_one_host_output_has_no_host_column_and_no_drop_notice(tmp_path: Path) -> None:
    res = results.load(_write_pair(tmp_path, [100.0, 110.0], [200.0, 210.0]))
    md = summarize.to_markdown(summarize.summary_table(res), res)
    assert "host(s) gpu1\n" in md and "| config | algorithm |" in md and "| host |" not in md
    assert "Dropped out" not in md and "cut" not in md


def _telemetry_pair(root: Path, throttled_repeat: int | None = None) -> Path:
    def throttle(r: int) -> object:
        return (lambda t, g: 0x40 if t > 1005.0 else 0) if r == throttled_repeat else 0

    pts = [rf.with_telemetry(rf.point(4, r, 100.0), power_w=300.0, throttle=throttle(r)) for r in range(2)]
    rf.write(root, rf.record(config="ar", benchmark=rf.bench(pts)))
    pts = [rf.with_telemetry(rf.point(4, r, 200.0, accept=3.0), power_w=350.0) for r in range(2)]
    rf.write(root, rf.record(config="dflash", algorithm="DFLASH", benchmark=rf.bench(pts)))
    return root / "run1"


def test_energy_per_token_and_cost_columns_come_from_the_points(tmp_path: Path) -> None:
    res = results.load(_telemetry_pair(tmp_path, throttled_repeat=1))
    t = summarize.summary_table(res)
    ar, sp = _row(t, "ar"), _row(t, "dflash")
    # 10 s windows on one GPU: 300 W x 10 s over 100 tok/s x 10 s, and 350 W over 200 tok/s.
    assert ar.j_per_token == pytest.approx(300.0 * 10 / 1000)
    assert sp.j_per_token == pytest.approx(350.0 * 10 / 2000)
    assert sp.usd_per_mtok == pytest.approx(2.0 * 10 / 3600 / 2000 * 1e6)
    assert ar.telemetry_flags == "throttled 1/2" and sp.telemetry_flags == ""
    md = summarize.to_markdown(t, res)
    assert "J/tok" in md and "$/Mtok" in md and "telemetry flags" in md and "throttled 1/2" in md
    assert summarize.TELEMETRY_FLAGS_NOTE in md
    assert summarize.SIM_BANNER in md  # simulated stays labelled


def test_tables_without_telemetry_have_no_energy_columns(tmp_path: Path) -> None:
    res = results.load(_write_pair(tmp_path, [100.0, 100.0], [200.0, 400.0]))
    t = summarize.summary_table(res)
    assert t["j_per_token"].isna().all()
    md = summarize.to_markdown(t, res)
    assert "J/tok" not in md and "$/Mtok" not in md and "telemetry flags" not in md


def test_cost_column_needs_a_price(tmp_path: Path) -> None:
    pts = [rf.with_telemetry(rf.point(4, r, 100.0), gpu_hour_usd=None) for r in range(2)]
    rf.write(tmp_path, rf.record(config="ar", benchmark=rf.bench(pts)))
    res = results.load(tmp_path / "run1")
    md = summarize.to_markdown(summarize.summary_table(res), res)
    assert "J/tok" in md and "$/Mtok" not in md


@given(st.text(alphabet=st.sampled_from("ab cd;:,"), max_size=400), st.integers(min_value=20, max_value=200))
def test_a_shortened_message_keeps_its_start_and_end_within_the_width(text: str, width: int) -> None:
    out = summarize.shorten(text, width)
    if len(text) <= width:
        assert out == text
    else:
        assert len(out) <= width and " … " in out
        head, tail = out.split(" … ", 1)
        assert text.startswith(head) and text.endswith(tail)


def test_a_failed_benchmark_cell_shows_where_and_what_to_change() -> None:
    msg = (
        "point c1-r0 of qwen3-8b-short-tp1 failed: prompt benchmark against http://127.0.0.1:30001 failed: "
        "prompt long-3000-0 has 3000 tokens + 8 to generate, over the context length 2048 the server "
        "serves; use a shorter long-context length or a config with --context-length of at least 3008"
    )
    cell = summarize.shorten(msg, 140)
    assert cell.startswith("point c1-r0 of qwen3-8b-short-tp1") and cell.endswith("at least 3008")
