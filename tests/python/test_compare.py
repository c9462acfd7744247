"""sglbench compare: the regression rule on constructed runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import recordfactory as rf

from sglbench import bootstrap, cli, compare, results


def _run(
    root: Path, run_id: str, ar: list[float], spec: list[float] | None, spec_outcome: str = "ok"
) -> Path:
    rf.write(
        root,
        rf.record(
            run_id=run_id, config="ar", benchmark=rf.bench([rf.point(4, i, v) for i, v in enumerate(ar)])
        ),
    )
    if spec_outcome == "ok":
        pts = [rf.point(4, i, v) for i, v in enumerate(spec or [])]
        rf.write(root, rf.record(run_id=run_id, config="dflash", algorithm="DFLASH", benchmark=rf.bench(pts)))
    else:
        rf.write(
            root,
            rf.record(
                run_id=run_id,
                config="dflash",
                algorithm="DFLASH",
                outcome=spec_outcome,
                failure={"phase": "health", "cause": "cuda_oom", "message": "OOM"},
            ),
        )
    return root / run_id


def _status(table, config: str) -> str:
    return table[table.config == config].iloc[0]["status"]


def test_clear_drop_is_a_regression_and_noise_is_not(tmp_path: Path) -> None:
    a = results.load(_run(tmp_path, "a", [100.0, 101.0, 99.0], [200.0, 202.0, 198.0]))
    b = results.load(_run(tmp_path, "b", [100.5, 99.5, 100.0], [150.0, 152.0, 148.0]))
    t = compare.compare(a, b)
    assert _status(t, "ar") == "unchanged"
    assert _status(t, "dflash") == "regression"
    row = t[t.config == "dflash"].iloc[0]
    assert row.ratio == pytest.approx(0.75) and row.ratio_ci_high < 1


def test_classify_rule() -> None:
    c = compare.classify
    kw = {"min_effect": 0.02, "no_ci_threshold": 0.1}
    assert c(bootstrap.Estimate(0.97, 0.95, 0.99), **kw) == "regression"
    assert c(bootstrap.Estimate(0.99, 0.985, 0.995), **kw) == "unchanged"  # real but below min effect
    assert c(bootstrap.Estimate(0.90, 0.80, 1.01), **kw) == "unchanged"  # CI includes 1
    assert c(bootstrap.Estimate(1.10, 1.05, 1.15), **kw) == "improvement"
    assert c(bootstrap.Estimate(0.85, math.nan, math.nan), **kw) == "regression (no CI)"
    assert c(bootstrap.Estimate(0.95, math.nan, math.nan), **kw) == "unchanged"


def test_outcome_change_is_a_regression_and_cli_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_dir = _run(tmp_path, "a", [100.0, 100.0], [200.0, 210.0])
    b_dir = _run(tmp_path, "b", [100.0, 100.0], None, spec_outcome="failed")
    t = compare.compare(results.load(a_dir), results.load(b_dir))
    assert "regression: now failed (cuda_oom)" in set(t.status)
    assert cli.main(["compare", str(a_dir), str(b_dir)]) == 1
    out = capsys.readouterr().out
    assert "1 regression(s)" in out and "**regression: now failed (cuda_oom)**" in out
    assert cli.main(["compare", str(a_dir), str(a_dir)]) == 0
    assert cli.main(["compare", str(a_dir), str(tmp_path / "nope")]) == 2


def test_a_config_that_vanished_in_b_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """compare exited 0 when a config measured in A had no record in B."""
    run_a = _run(tmp_path, "a", [100.0, 101.0, 99.0], [200.0, 202.0, 198.0])
    rf.write(
        tmp_path,
        rf.record(run_id="b", config="ar", benchmark=rf.bench([rf.point(4, i, 100.0 + i) for i in range(3)])),
    )
    t = compare.compare(results.load(run_a), results.load(tmp_path / "b"))
    assert _status(t, "dflash") == compare.GONE
    assert cli.main(["compare", str(run_a), str(tmp_path / "b")]) == 1
    assert "regression: gone" in capsys.readouterr().out
    assert cli.main(["compare", str(tmp_path / "b"), str(run_a)]) == 0  # a new config is no regression


def test_compare_seed_must_be_non_negative(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_a = _run(tmp_path, "a", [100.0], [200.0])
    assert cli.main(["compare", str(run_a), str(run_a), "--seed", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["sglbench compare: error: --seed must be an integer from 0 to 2**64-1, got -1"]


def test_hosts_are_dropped_from_the_match_only_between_two_single_host_runs() -> None:
    without = ["tp", "config", "prompt_set", "point"]
    assert compare.match_keys({"gpu1"}, {"gpu2"}) == without
    assert compare.match_keys({"gpu1"}, {"gpu1"}) == compare.MATCH_KEYS
    assert compare.match_keys({"gpu-a", "gpu-b"}, {"gpu-c", "gpu-d"}) == compare.MATCH_KEYS
    assert compare.match_keys({"gpu-a"}, {"gpu-a", "gpu-b"}) == compare.MATCH_KEYS


def test_two_host_runs_compare_per_host_and_a_cut_attempt_is_a_regression(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_dir = rf.pair_campaign(tmp_path / "a")
    b_dir = rf.pair_campaign(tmp_path / "b", drop=True)
    t = compare.compare(results.load(a_dir), results.load(b_dir))
    ar = t[(t.config == "ar") & (t.concurrency == 1)]
    assert ar["host"].tolist() == ["gpu-a", "gpu-b"] and ar["tok_s_a"].tolist() == [10.5, 15.75]
    assert set(ar["status"]) == {"unchanged"}  # each host against itself, never pooled
    cut = t[(t.host == "gpu-b") & (t.config == "sd")]
    assert set(cut["status"]) == {"regression: now cut (host unreachable)"} and len(cut) == 2
    assert set(t[(t.host == "gpu-a") & (t.config == "sd")]["status"]) == {"unchanged"}
    assert cli.main(["compare", str(a_dir), str(b_dir)]) == 1
    out = capsys.readouterr().out
    assert "| status | tp | host | config |" in out
    assert "| **regression: now cut (host unreachable)** | 1 | gpu-b | sd |" in out


def test_one_host_compare_has_no_host_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_dir = _run(tmp_path, "a", [100.0, 100.0], [200.0, 210.0])
    assert cli.main(["compare", str(a_dir), str(a_dir)]) == 0
    assert "| status | tp | config |" in capsys.readouterr().out
