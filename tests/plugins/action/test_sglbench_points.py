"""plugins/action/sglbench_points.py with the SLO-bounded search: plan, next, commit, assemble as bench.yml
calls them, on the controller, until the search says done."""

from __future__ import annotations

import importlib.util
import json
import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ansible.errors import AnsibleActionFail

from sglbench.hostlib import request_rows

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
    # the loop bound: every level of the budget, each with its repeats and the re-measures it may take
    assert plan["todo"] == [] and plan["search_iterations"] == 6 * (2 + 2) and plan["expected"] == []
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


class _Host:
    """The benchmark module as the host would answer ``op=run``'s calls: rows from ``ttft_s(point)``, an
    optional point that fails, and every call's arguments kept."""

    def __init__(self, ttft_s: Any = lambda p: 0.05, fail_key: str | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.ttft_s, self.fail_key = ttft_s, fail_key

    def __call__(
        self, module_name: str, module_args: dict[str, Any], task_vars: Any = None
    ) -> dict[str, Any]:
        assert module_name == "sglbench_prompt_bench"
        self.calls.append(module_args)
        out: list[dict[str, Any]] = []
        for p in module_args["points"]:
            if p["key"] == self.fail_key:
                return {"points": out, "meta": {"url": "u"}, "failed_point": {"key": p["key"], "msg": "boom"}}
            summary = {"n_err": 0, "valid": True, "client": {"wall_s": 1.0}, "point": f"c{p['concurrency']}"}
            out.append(
                {"key": p["key"], "summary": summary, "records": _rows(self.ttft_s(p)), "spooled": False}
            )
        return {"points": out, "meta": {"url": "u"}, "warnings": ["a cut-off client was ended"]}


def _run(monkeypatch: pytest.MonkeyPatch, host: _Host, **args: Any) -> dict[str, Any]:
    am = object.__new__(action.ActionModule)
    am._task = SimpleNamespace(args=args, check_mode=False)
    monkeypatch.setattr(action.ActionBase, "run", lambda self, tmp=None, task_vars=None: {})
    am._execute_module = host  # type: ignore[method-assign]
    out: dict[str, Any] = am.run(task_vars={})
    return out


def test_run_measures_the_ladder_in_one_host_call_and_commits_every_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load = {"concurrency": [1, 2], "repeats": 2}
    common = {"dir": str(tmp_path), "identity_hash": IDENTITY, "load": load}
    plan = _call(monkeypatch, op="plan", fresh=False, **common)
    host = _Host()
    bench = {"url": "http://127.0.0.1:1", "api_key": None, "warmup": 2, "duration": None}
    out = _run(monkeypatch, host, op="run", points=plan["todo"], bench=bench, spool_dir="/run/x", **common)
    keys = [p["key"] for p in plan["todo"]]
    assert out["ran"] == keys == ["c1-r0", "c1-r1", "c2-r0", "c2-r1"] and len(host.calls) == 1
    call = host.calls[0]
    assert "api_key" not in call and "duration" not in call and call["warmup"] == 2  # unset = module default
    assert call["spool"] == {"dir": "/run/x", "hash": IDENTITY, "seen": {}} and call["return_records"] is True
    assert [p["key"] for p in call["points"]] == keys
    assert out["warnings"] == ["a cut-off client was ended"]
    again = _call(monkeypatch, op="plan", fresh=False, **common)
    assert again["todo"] == [] and again["done"] == keys  # every point committed


def test_run_commits_packed_rows_as_the_host_wrote_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = {"dir": str(tmp_path), "identity_hash": IDENTITY, "load": {"concurrency": [1], "repeats": 1}}
    plan = _call(monkeypatch, op="plan", fresh=False, **common)
    rows = _rows(0.05)

    def host(module_name: str, module_args: dict[str, Any], task_vars: Any = None) -> dict[str, Any]:
        assert module_args["pack_records"] is True
        summary = {"n_err": 0, "valid": True, "client": {"wall_s": 1.0}, "t0_unix": 100.0}
        point = {"key": "c1-r0", "summary": summary, "spooled": False, "n_records": len(rows)}
        return {"points": [{**point, request_rows.PACKED_KEY: request_rows.pack(rows)}], "meta": {}}

    out = _run(monkeypatch, host, op="run", points=plan["todo"], **common)  # type: ignore[arg-type]
    assert out["ran"] == ["c1-r0"]
    assert (tmp_path / "points" / "c1-r0.requests.jsonl").read_text() == request_rows.jsonl(rows)

    def broken(module_name: str, module_args: dict[str, Any], task_vars: Any = None) -> dict[str, Any]:
        return {"points": [{"key": "c1-r0", "summary": {}, request_rows.PACKED_KEY: "@@"}], "meta": {}}

    with pytest.raises(AnsibleActionFail, match="point c1-r0: packed request rows are not gzip"):
        _run(monkeypatch, broken, op="run", points=plan["todo"], **common)  # type: ignore[arg-type]


def test_run_commits_the_points_before_a_failed_one_and_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = {"dir": str(tmp_path), "identity_hash": IDENTITY, "load": {"concurrency": [1, 2], "repeats": 1}}
    plan = _call(monkeypatch, op="plan", fresh=False, **common)
    out = _run(
        monkeypatch, _Host(fail_key="c2-r0"), op="run", points=plan["todo"], instance="ar-tp1", **common
    )
    # a failed benchmark, not results that could not be written (those raise): events.py tells them apart
    assert out["failed"] is True and out["msg"] == "point c2-r0 of ar-tp1 failed: boom"
    assert out["point_failed"] == "c2-r0"
    docs = {p.stem: p.read_text() for p in (tmp_path / "points").glob("*.json")}
    assert sorted(docs) == ["c1-r0", "c2-r0"]
    assert '"outcome":"ok"' in docs["c1-r0"].replace(" ", "") and '"error":"boom"' in docs["c2-r0"].replace(
        " ", ""
    )
    again = _call(monkeypatch, op="plan", fresh=False, **common)
    assert [p["key"] for p in again["todo"]] == ["c2-r0"]  # the failed point is measured again


def test_run_fails_a_whole_call_on_its_first_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    common = {"dir": str(tmp_path), "identity_hash": IDENTITY, "load": {"concurrency": [1], "repeats": 2}}
    plan = _call(monkeypatch, op="plan", fresh=False, **common)

    def refused(module_name: str, module_args: dict[str, Any], task_vars: Any = None) -> dict[str, Any]:
        return {"failed": True, "msg": "refused: another benchmark holds the lock"}

    out = _run(monkeypatch, refused, op="run", points=plan["todo"], **common)  # type: ignore[arg-type]
    assert out["failed"] is True and re.match(r"point c1-r0 of .* failed: refused: another", out["msg"])
    assert [p.stem for p in (tmp_path / "points").glob("*.json")] == ["c1-r0"]


def test_run_drives_a_search_one_host_call_per_level_until_it_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = {"dir": str(tmp_path), "identity_hash": IDENTITY, "load": LOAD}
    _call(monkeypatch, op="plan", fresh=False, **common)
    host = _Host(ttft_s=lambda p: 0.1 * p["concurrency"])  # 5 in flight meet 500 ms, 6 do not
    out = _run(monkeypatch, host, op="run", points=[], capacity=CAPACITY, **common)
    assert all(len(c["points"]) == 1 for c in host.calls) and len(out["ran"]) == len(host.calls) > 2
    done = _call(monkeypatch, op="next", capacity=CAPACITY, **common)
    assert done["done"] and done["search"]["limit"] == 5


def test_run_raises_when_the_results_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    common = {"dir": str(tmp_path), "identity_hash": IDENTITY, "load": {"concurrency": [1], "repeats": 1}}
    plan = _call(monkeypatch, op="plan", fresh=False, **common)

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(action.resume, "commit_point", full)
    with pytest.raises(AnsibleActionFail, match=r"op=run in .*No space left on device"):
        _run(monkeypatch, _Host(), op="run", points=plan["todo"], **common)


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


class _TelemetryHost(_Host):
    """The host with telemetry on: each point's raw document, the call's own start and end when asked."""

    def __init__(self, call_clock: bool, spooled: str | None = None) -> None:
        super().__init__()
        self.call_clock, self.spooled = call_clock, spooled

    def __call__(
        self, module_name: str, module_args: dict[str, Any], task_vars: Any = None
    ) -> dict[str, Any]:
        import sys

        sys.path.insert(0, str(REPO / "tests" / "python"))
        from recordfactory import raw_telemetry

        began = time.time()
        out = super().__call__(module_name, module_args, task_vars)
        now = time.time()
        for p in out["points"]:
            p["summary"]["total_output_tokens"] = 1000
            p["telemetry"] = raw_telemetry(start=now - 12.0, power_w=150.0)
            p["spooled"] = p["key"] == self.spooled
        if self.call_clock:
            out["clock"] = {"host_started": began, "host_ended": time.time()}
        return out


@pytest.mark.parametrize("call_clock", [True, False])
def test_run_commits_each_points_telemetry_timed_by_the_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call_clock: bool
) -> None:
    common = {"dir": str(tmp_path), "identity_hash": IDENTITY, "load": {"concurrency": [1, 2], "repeats": 1}}
    plan = _call(monkeypatch, op="plan", fresh=False, **common)
    host = _TelemetryHost(call_clock, spooled="c2-r0")
    _run(monkeypatch, host, op="run", points=plan["todo"], gpu_hour_usd="3.0", **common)
    files = [p for p in (tmp_path / "points").glob("*.json") if not p.name.endswith(".telemetry.json")]
    docs = {p.stem: json.loads(p.read_text()) for p in files}
    assert sorted(docs) == ["c1-r0", "c2-r0"]
    for key, doc in docs.items():
        tel = doc["telemetry"]
        assert tel["energy_j"] == pytest.approx(150.0 * 10.0) and tel["j_per_token"] == pytest.approx(1.5)
        assert tel["cost"]["usd_per_mtok"] == pytest.approx(3.0 * 10.0 / 3600 / 1000 * 1e6)
        assert (tmp_path / "points" / f"{key}.telemetry.json").is_file()
    # The same clocks on both sides of this test: the offset is near zero and within its bound, except for
    # the spooled point without the call's own times, whose offset stays unknown.
    first = docs["c1-r0"]["telemetry"]["clock"]
    if call_clock:
        assert abs(first["offset_s"]) <= first["uncertainty_s"] + 1e-6
        assert docs["c2-r0"]["telemetry"]["clock"]["offset_s"] is not None
    else:
        assert "clock_unknown" in docs["c2-r0"]["telemetry"]["flags"]
