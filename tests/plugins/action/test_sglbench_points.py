"""plugins/action/sglbench_points.py with the SLO-bounded search: plan, next, commit, assemble as bench.yml
calls them, on the controller, until the search says done."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location(
    "sglbench_points_action", REPO / "plugins/action/sglbench_points.py"
)
assert _spec and _spec.loader
action = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(action)

IDENTITY = "h" * 64
LOAD = {
    "repeats": 2,
    "seed": 0,
    "max_new_tokens": 4,
    "slo": {"ttft_ms_p99": 500},
    "search": {"enabled": True, "max_levels": 6},
}
CAPACITY = {"max_running_requests": "6", "max_total_num_tokens": "100000", "source": "probe"}


def _call(monkeypatch: pytest.MonkeyPatch, **args: Any) -> dict[str, Any]:
    am = object.__new__(action.ActionModule)
    am._task = SimpleNamespace(args=args, check_mode=False)
    monkeypatch.setattr(action.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    out: dict[str, Any] = am.run()
    return out


def _rows(ttft_s: float) -> list[dict[str, Any]]:
    return [
        {
            "sent_s": i * 0.01,
            "end_s": i * 0.01 + ttft_s + 0.03,
            "chunk_t": [i * 0.01 + ttft_s + k * 0.01 for k in range(4)],
            "chunk_tokens": [1, 2, 3, 4],
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "error": None,
        }
        for i in range(30)
    ]


def test_a_search_runs_through_the_action_as_the_playbook_drives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = {"dir": str(tmp_path), "identity_hash": IDENTITY, "load": LOAD}
    plan = _call(monkeypatch, op="plan", fresh=False, **common)
    assert plan["todo"] == [] and plan["search_iterations"] == 12 and plan["expected"] == []
    measured = []
    for _ in range(plan["search_iterations"]):
        nxt = _call(monkeypatch, op="next", capacity=CAPACITY, **common)
        if nxt["done"]:
            break
        point = nxt["point"]
        measured.append(point["key"])
        ttft = 0.1 * point["concurrency"]  # 100 ms per request in flight: 5 meet 500 ms, 6 do not
        summary = {"n_err": 0, "valid": True, "client": {"wall_s": 1.0}, "point": point["point"]}
        _call(monkeypatch, op="commit", dir=str(tmp_path), point=point, summary=summary, records=_rows(ttft))
    assert nxt["done"] and nxt["search"]["verdict"] == "limit_found" and nxt["search"]["limit"] == 5
    assert len(measured) == len(set(measured)) and measured[:2] == ["c1-r0", "c1-r1"]
    out = _call(monkeypatch, op="assemble", capacity=CAPACITY, since=plan["started_at"], **common)
    bench = out["benchmark"]
    assert [p["key"] for p in out["points"]] == measured
    assert bench["search"]["limit"] == 5 and bench["search"]["capacity"]["source"] == "probe"
    assert bench["resume"]["measured"] == measured and bench["resume"]["missing"] == []
    # a re-run plans the committed levels as kept points and decides done at once
    again = _call(monkeypatch, op="plan", fresh=False, **common)
    assert [p["key"] for p in again["expected"]] == sorted(measured) and again["moved"] == []
    assert _call(monkeypatch, op="next", capacity=CAPACITY, **common)["done"] is True


def test_bad_search_settings_fail_the_task_with_the_field_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load = {**LOAD, "search": {"enabled": True, "mode": "sweep"}}
    with pytest.raises(AnsibleActionFail, match=r"op=prepare: sglbench_bench\.search\.mode must be one of"):
        _call(monkeypatch, op="prepare", dir=str(tmp_path), identity_hash=IDENTITY, load=load)
    with pytest.raises(AnsibleActionFail, match=r"op=next needs load with search\.enabled"):
        _call(monkeypatch, op="next", dir=str(tmp_path), identity_hash=IDENTITY, load={"repeats": 1})


def _search(monkeypatch: pytest.MonkeyPatch, directory: Path, tok_s: Any, baseline: str = "") -> list[str]:
    """Drive one attempt's search through the action (next, commit), then assemble; the keys measured."""
    common = {"dir": str(directory), "identity_hash": IDENTITY, "load": LOAD, "baseline_dir": baseline}
    measured = []
    for _ in range(_call(monkeypatch, op="plan", fresh=False, **common)["search_iterations"]):
        nxt = _call(monkeypatch, op="next", capacity=CAPACITY, **common)
        if nxt["done"]:
            break
        point = nxt["point"]
        measured.append(point["key"])
        summary = {
            "n_err": 0,
            "valid": True,
            "client": {"wall_s": 1.0},
            "output_throughput_tok_s": tok_s(point["concurrency"]),
        }
        _call(monkeypatch, op="commit", dir=str(directory), point=point, summary=summary, records=_rows(0.05))
    return measured


def test_a_speculative_search_reads_its_baselines_levels_through_the_action(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "ar-tp1"
    _search(monkeypatch, base, lambda c: 10.0 * c)  # every level passes: 1, 2, 4, 6 (the slots)
    (base / "record.json").write_text('{"outcome": "ok"}')
    spec_dir = tmp_path / "df-tp1"
    measured = _search(
        monkeypatch, spec_dir, lambda c: 10.0 * c * 4.5 / (c + 2.0), str(base)
    )  # crosses at 2.5
    common = {"dir": str(spec_dir), "identity_hash": IDENTITY, "load": LOAD, "baseline_dir": str(base)}
    out = _call(monkeypatch, op="assemble", capacity=CAPACITY, **common)
    x = out["benchmark"]["search"]["crossover"]
    assert x["baseline"] == "ar-tp1" and x["status"] == "crosses" and x["between"] == [2, 3]
    assert x["levels"] == [3] and [p["key"] for p in out["points"]] == measured  # the record lists them


def test_commit_takes_telemetry_clock_and_price_as_the_playbook_passes_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    sys.path.insert(0, str(REPO / "tests" / "python"))
    from recordfactory import raw_telemetry

    raw = raw_telemetry(power_w=200.0)
    point = {"key": "c1-r0", "hash": "x", "point": "c1", "concurrency": 1, "repeat": 0}
    summary = {"point": "c1", "n_ok": 2, "n_err": 0, "total_output_tokens": 400}
    host = raw["clock"]
    out = _call(
        monkeypatch,
        op="commit",
        dir=str(tmp_path),
        point=point,
        summary=summary,
        telemetry=raw,
        clock={"sent": host["host_started"] - 0.1, "received": host["host_ended"] + 0.1},
        gpu_hour_usd="1.5",  # Jinja renders numbers as strings
    )
    tel = out["point"]["telemetry"]
    assert tel["j_per_token"] == pytest.approx(200.0 * 10.0 / 400)
    assert tel["clock"]["offset_s"] == pytest.approx(0.0) and tel["cost"]["gpu_hour_usd"] == 1.5
    assert (tmp_path / "points" / "c1-r0.telemetry.json").is_file()
    with pytest.raises(AnsibleActionFail, match="telemetry must be an object"):
        _call(monkeypatch, op="commit", dir=str(tmp_path), point=point, summary=summary, telemetry=[raw])


def test_commit_reads_telemetry_from_the_registered_result_by_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import sys

    sys.path.insert(0, str(REPO / "tests" / "python"))
    from recordfactory import raw_telemetry

    point = {"key": "c1-r0", "hash": "x", "point": "c1", "concurrency": 1, "repeat": 0}
    summary = {"point": "c1", "n_ok": 2, "n_err": 0, "total_output_tokens": 400}
    monkeypatch.setattr(action.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})

    def commit(task_vars: dict[str, Any], key: str = "c1-r0") -> dict[str, Any]:
        am = object.__new__(action.ActionModule)
        args = {"op": "commit", "dir": str(tmp_path), "point": dict(point, key=key), "summary": summary}
        am._task = SimpleNamespace(args={**args, "telemetry_from": "run"}, check_mode=False)
        out: dict[str, Any] = am.run(task_vars=task_vars)
        return out

    done = commit({"run": {"telemetry": [raw_telemetry(power_w=100.0)]}})
    assert done["point"]["telemetry"]["energy_j"] == pytest.approx(1000.0)
    assert "telemetry" not in commit({"run": {"summary": {}}}, "c2-r0")["point"]  # sampling was off
    assert "telemetry" not in commit({}, "c3-r0")["point"]
    with pytest.raises(AnsibleActionFail, match="list of objects"):
        commit({"run": {"telemetry": "not a list"}})
