"""sglbench.resume: identity hashes, expected points, the resume plan and atomic point commits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import recordfactory

from sglbench import resume


def _parts(**over: object) -> dict[str, object]:
    parts: dict[str, object] = {
        "argv": ["python3", "-m", "sglang.launch_server", "--model-path", "/models/m", "--tp-size", "1"],
        "environment": {"SGLANG_ENABLE_SPEC_V2": "1", "HF_TOKEN": "secret-token"},
        "sglang": {"version": "0.5.1", "accounting": "B"},
        "models": {"model": {"files": {"config.json": "aa"}}, "draft": None},
        "prompts": [{"id": "p1", "prompt": "hi"}],
        "load": {"max_new_tokens": 32, "repeats": 2},
    }
    parts.update(over)
    return parts


def test_identity_is_stable_and_covers_every_defining_input() -> None:
    base = resume.attempt_identity(_parts())
    assert base == resume.attempt_identity(dict(reversed(list(_parts().items()))))  # key order is irrelevant
    changed = {
        "argv": _parts(argv=["python3", "--model-path", "/models/m", "--tp-size", "2"]),
        "env value": _parts(environment={"SGLANG_ENABLE_SPEC_V2": "0", "HF_TOKEN": "secret-token"}),
        "sglang version": _parts(sglang={"version": "0.5.2", "accounting": "B"}),
        "accounting": _parts(sglang={"version": "0.5.1", "accounting": "C"}),
        "model": _parts(models={"model": {"files": {"config.json": "bb"}}, "draft": None}),
        "prompt text": _parts(prompts=[{"id": "p1", "prompt": "hello"}]),
        "load": _parts(load={"max_new_tokens": 64, "repeats": 2}),
    }
    for what, parts in changed.items():
        assert resume.attempt_identity(parts)["hash"] != base["hash"], what


def test_identity_document_keeps_no_secret_and_no_prompt_text() -> None:
    doc = resume.attempt_identity(_parts())["doc"]
    text = json.dumps(doc)
    assert "secret-token" not in text and "hi" not in json.dumps(doc["prompts"])
    assert doc["prompts"]["count"] == 1 and len(doc["environment"]["HF_TOKEN"]) == 64


def test_expected_points_ladder_capped_by_server_and_user() -> None:
    pts = resume.expected_points("h", {"repeats": 2, "seed": 10}, 6)
    assert [p["key"] for p in pts] == ["c1-r0", "c1-r1", "c2-r0", "c2-r1", "c4-r0", "c4-r1", "c6-r0", "c6-r1"]
    assert [p["seed"] for p in pts[:2]] == [10, 11]
    assert [p["key"] for p in resume.expected_points("h", {"max_concurrency": 2}, 6)] == ["c1-r0", "c2-r0"]
    assert [p["key"] for p in resume.expected_points("h", {}, None)][-1] == "c64-r0"
    rate = resume.expected_points("h", {"request_rate": [2.5], "concurrency": [8]}, 4)
    assert [p["key"] for p in rate] == ["r2.5-c8-r0"]
    # the hash depends on the attempt and on the point
    a, b = resume.expected_points("h1", {}, 1), resume.expected_points("h2", {}, 1)
    assert a[0]["hash"] != b[0]["hash"]
    with pytest.raises(resume.ResumeError, match="one cap"):
        resume.expected_points("h", {"request_rate": [1.0], "concurrency": [1, 2]}, None)


def _commit(d: Path, point: dict, outcome: str = "ok", n_err: int = 0) -> None:
    resume.commit_point(
        str(d),
        point,
        outcome=outcome,
        summary={
            "point": point["point"],
            "repeat": 0,
            "n_ok": 1,
            "n_err": n_err,
            "output_throughput_tok_s": 10.0,
            "valid": True,
        },
        meta={"simulated": True},
        records=[{"point": point["point"], "repeat": point["repeat"], "end_s": 1.0}],
    )


def test_plan_keeps_done_points_and_moves_the_rest_aside(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1, 2], "repeats": 2}, None)
    _commit(tmp_path, exp[0])  # done
    _commit(tmp_path, exp[1], outcome="failed")  # failed -> retried
    stale = dict(exp[2], hash="other")
    _commit(tmp_path, stale)  # another config's hash -> never reused
    (tmp_path / "points" / "c2-r1.requests.jsonl").write_text("{}\n")  # rows without their point file
    (tmp_path / ".incoming").mkdir()
    (tmp_path / ".incoming" / "x.jsonl").write_text("partial")
    plan = resume.plan_points(str(tmp_path), exp, now=0)
    assert plan["done"] == ["c1-r0"]
    assert [p["key"] for p in plan["todo"]] == ["c1-r1", "c2-r0", "c2-r1"]
    reasons = {(m["file"], m["reason"]) for m in plan["moved"]}
    assert ("points/c1-r1.json", "failed") in reasons and ("points/c2-r0.json", "stale") in reasons
    assert ("points/c2-r1.requests.jsonl", "partial") in reasons and (
        ".incoming/x.jsonl",
        "partial",
    ) in reasons
    for m in plan["moved"]:  # moved, not deleted
        assert (tmp_path / m["to"]).is_file() and m["to"].startswith("previous/19700101T000000Z-")
    assert sorted(p.name for p in (tmp_path / "points").iterdir()) == ["c1-r0.json", "c1-r0.requests.jsonl"]


def test_fresh_moves_every_point_aside(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    _commit(tmp_path, exp[0])
    plan = resume.plan_points(str(tmp_path), exp, fresh=True, now=0)
    assert plan["done"] == [] and {m["reason"] for m in plan["moved"]} == {"fresh"}


def test_assemble_orders_points_and_writes_requests(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1, 2], "repeats": 2}, None)
    for p in reversed(exp[:3]):
        _commit(tmp_path, p)
    bench = resume.assemble_benchmark(str(tmp_path), exp, prompt_set="math", identity_hash="h", ran=["c2-r0"])
    assert bench is not None and bench["schema"] == "sglbench.bench/1" and bench["simulated"] is True
    assert [(p["point"], p["repeat"]) for p in bench["points"]] == [("c1", 0), ("c1", 1), ("c2", 0)]
    assert [a["point"] for a in bench["aggregates"]] == ["c1", "c2"]
    assert bench["resume"]["measured"] == ["c2-r0"] and bench["resume"]["missing"] == ["c2-r1"]
    rows = pq.read_table(tmp_path / "requests.parquet").to_pylist()
    assert [r["repeat"] for r in rows] == [0, 1, 0]
    assert not (tmp_path / "requests.jsonl").exists()  # JSONL is an export, not written here


def _record(d: Path, outcome: str, h: str, points: list) -> None:
    (d / "record.json").write_text(
        json.dumps({"outcome": outcome, "identity": {"hash": h}, "resume": {"points": points}})
    )
    (d / "journal.log").write_text("log")


def test_prepare_reuses_only_a_complete_attempt_with_the_same_hash(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    _commit(tmp_path, exp[0])
    _record(tmp_path, "ok", "h", exp)
    assert resume.prepare_attempt(str(tmp_path), "h", now=0)["complete"] is True
    assert (tmp_path / "record.json").is_file()
    out = resume.prepare_attempt(str(tmp_path), "h2", now=0)
    assert out["complete"] is False and not (tmp_path / "record.json").exists()
    assert (tmp_path / "previous" / "19700101T000000Z-stale" / "record.json").is_file()
    assert (tmp_path / "previous" / "19700101T000000Z-stale" / "journal.log").is_file()


def test_prepare_moves_a_failed_record_aside_and_keeps_its_points(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    _commit(tmp_path, exp[0])
    _record(tmp_path, "failed", "h", exp)
    out = resume.prepare_attempt(str(tmp_path), "h", now=0)
    assert out["complete"] is False and out["previous"]["outcome"] == "failed"
    assert (tmp_path / "previous" / "19700101T000000Z-failed" / "record.json").is_file()
    assert (tmp_path / "points" / "c1-r0.json").is_file()
    # a second move in the same second gets its own directory
    _record(tmp_path, "failed", "h", exp)
    resume.prepare_attempt(str(tmp_path), "h", now=0)
    assert (tmp_path / "previous" / "19700101T000000Z.2-failed" / "record.json").is_file()


def test_commit_rejects_bad_outcome_and_key(tmp_path: Path) -> None:
    with pytest.raises(resume.ResumeError, match="outcome"):
        resume.commit_point(str(tmp_path), {"key": "c1-r0"}, outcome="maybe")
    with pytest.raises(resume.ResumeError, match="plain name"):
        resume.commit_point(str(tmp_path), {"key": "../x"}, outcome="ok")


def test_one_rerun_moves_into_one_directory_per_reason(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    _commit(tmp_path, exp[0])
    _record(tmp_path, "ok", "h", exp)
    new = resume.expected_points("h2", {"concurrency": [1]}, None)
    prep = resume.prepare_attempt(str(tmp_path), "h2", now=0)
    resume.plan_points(str(tmp_path), new, now=5, stamp=prep["stamp"])
    assert [p.name for p in (tmp_path / "previous").iterdir()] == ["19700101T000000Z-stale"]
    stale = tmp_path / "previous" / "19700101T000000Z-stale"
    assert (stale / "record.json").is_file() and (stale / "points" / "c1-r0.json").is_file()


# -- a point measured while the server failed requests is never reused ------------------------
def test_points_with_failed_requests_are_never_reused(tmp_path: Path) -> None:
    """The defect: c1-r1 measured while the server died (n_ok 15, n_err 985) was committed ok and reused on
    every re-run. Now a re-run moves it aside as 'errors' and measures it again; the attempt whose record
    lists it is not complete, so its server is started again."""
    exp = resume.expected_points("h", {"concurrency": [1], "repeats": 2}, None)
    _commit(tmp_path, exp[0])
    _commit(tmp_path, exp[1], n_err=985)
    _record(tmp_path, "ok", "h", exp)
    assert resume.point_is_done(str(tmp_path), exp[0]) and not resume.point_is_done(str(tmp_path), exp[1])
    prep = resume.prepare_attempt(str(tmp_path), "h", now=0)
    assert prep["complete"] is False and not (tmp_path / "record.json").exists()
    plan = resume.plan_points(str(tmp_path), exp, now=0, stamp=prep["stamp"])
    assert plan["done"] == ["c1-r0"] and [p["key"] for p in plan["todo"]] == ["c1-r1"]
    moved = tmp_path / "previous" / "19700101T000000Z-errors" / "points"
    assert (moved / "c1-r1.json").is_file() and (moved / "c1-r1.requests.jsonl").is_file()
    assert {m["reason"] for m in plan["moved"]} == {"errors"}


def test_a_point_without_a_failed_request_count_is_measured_again(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    resume.commit_point(str(tmp_path), exp[0], outcome="ok", summary={"point": "c1", "n_ok": 3})
    assert resume.plan_points(str(tmp_path), exp, now=0)["done"] == []


def test_max_error_rate_is_not_part_of_the_identity() -> None:
    """It changes how a point is judged, not what is measured, and only error-free points are reused: a
    campaign re-run with another threshold keeps its points (and campaigns from before the option existed
    keep their hashes)."""
    plain = resume.attempt_identity(_parts())
    tolerant = resume.attempt_identity(
        _parts(load={"max_new_tokens": 32, "repeats": 2, "max_error_rate": 0.1})
    )
    assert tolerant["hash"] == plain["hash"] and "max_error_rate" not in tolerant["doc"]["load"]


def test_search_settings_are_not_part_of_the_identity() -> None:
    """They decide which levels are measured, not what one level measures: a search with another budget
    reuses every level it visits again."""
    plain = resume.attempt_identity(_parts())
    searching = resume.attempt_identity(
        _parts(load={"max_new_tokens": 32, "repeats": 2, "search": {"enabled": True, "max_levels": 4}})
    )
    assert searching["hash"] == plain["hash"] and "search" not in searching["doc"]["load"]


def _search_record(d: Path, h: str, points: list, search: dict | None) -> None:
    bench = {"search": search} if search is not None else {}
    doc = {"outcome": "ok", "identity": {"hash": h}, "resume": {"points": points}, "benchmark": bench}
    (d / "record.json").write_text(json.dumps(doc))


def test_a_finished_searchs_record_is_reused_only_with_the_same_search_settings(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    _commit(tmp_path, exp[0])
    settings = {"enabled": True, "mode": "concurrency", "max_levels": 8}
    _search_record(tmp_path, "h", exp, {"verdict": "limit_found", "settings": settings})
    assert resume.prepare_attempt(str(tmp_path), "h", now=0, search_settings=settings)["complete"] is True
    # another budget: the search runs again (and reuses its levels point by point)
    other = {**settings, "max_levels": 12}
    assert resume.prepare_attempt(str(tmp_path), "h", now=0, search_settings=other)["complete"] is False
    # the fixed ladder never takes a search's record, nor a search the ladder's, nor an unfinished search's
    _search_record(tmp_path, "h", exp, {"verdict": "limit_found", "settings": settings})
    assert resume.prepare_attempt(str(tmp_path), "h", now=1)["complete"] is False
    _search_record(tmp_path, "h", exp, None)
    assert resume.prepare_attempt(str(tmp_path), "h", now=2, search_settings=settings)["complete"] is False
    _search_record(tmp_path, "h", exp, {"verdict": None, "settings": settings})
    assert resume.prepare_attempt(str(tmp_path), "h", now=3, search_settings=settings)["complete"] is False


def test_assemble_counts_points_committed_since_the_run_began_as_measured(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1, 2]}, None)
    resume.commit_point(str(tmp_path), exp[0], outcome="ok", summary={"n_err": 0}, now=100.0)
    resume.commit_point(str(tmp_path), exp[1], outcome="ok", summary={"n_err": 0}, now=200.0)
    bench = resume.assemble_benchmark(
        str(tmp_path), exp, prompt_set="p", identity_hash="h", since=150.0, search={"verdict": "x"}
    )
    assert bench is not None and bench["search"] == {"verdict": "x"}
    assert bench["resume"]["measured"] == ["c2-r0"] and bench["resume"]["reused"] == ["c1-r0"]


def test_seen_measurements_lists_every_committed_version_of_a_point_kept_or_moved(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1], "repeats": 2}, None)
    resume.commit_point(str(tmp_path), exp[0], outcome="ok", summary={"n_ok": 1, "n_err": 1, "t0_unix": 10.0})
    resume.plan_points(str(tmp_path), exp, now=0)  # its failed request moves it aside ("errors")
    resume.commit_point(str(tmp_path), exp[0], outcome="ok", summary={"n_ok": 2, "n_err": 0, "t0_unix": 20.0})
    resume.commit_point(str(tmp_path), exp[1], outcome="failed", error="boom")  # no measurement: no t0
    seen = resume.seen_measurements(str(tmp_path), ["c1-r0", "c1-r1", "c9-r0"])
    assert seen == {"c1-r0": [20.0, 10.0]}


# -- telemetry at commit ------------------------------------------------------------------------------------
def _raw_telemetry(**kw: Any) -> dict[str, Any]:
    return recordfactory.raw_telemetry(**kw)


def _commit_tel(d: Path, point: dict, telemetry: object, **kw: object) -> dict:
    return resume.commit_point(
        str(d),
        point,
        outcome="ok",
        summary={"point": point["point"], "n_ok": 4, "n_err": 0, "total_output_tokens": 1200},
        records=[{"point": point["point"], "repeat": point["repeat"], "end_s": 1.0}],
        telemetry=telemetry,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def test_commit_keeps_the_raw_telemetry_and_the_figures_in_the_point_file(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    raw = _raw_telemetry(start=1000.0, seconds=10.0, power_w=300.0)
    host = raw["clock"]
    clock = {"sent": host["host_started"] - 7.2, "received": host["host_ended"] - 6.8}
    doc = _commit_tel(tmp_path, exp[0], raw, clock=clock, gpu_hour_usd="2.0")
    stored = json.loads((tmp_path / "points" / "c1-r0.json").read_text())
    assert stored == doc
    tel = stored["telemetry"]
    assert tel["energy_j"] == pytest.approx(3000.0) and tel["j_per_token"] == pytest.approx(3000.0 / 1200)
    assert tel["clock"]["offset_s"] == pytest.approx(7.0) and tel["clock"]["uncertainty_s"] == pytest.approx(
        0.2
    )
    assert tel["cost"]["usd_per_mtok"] == pytest.approx(2.0 * 10.0 / 3600 / 1200 * 1e6)
    assert json.loads((tmp_path / "points" / "c1-r0.telemetry.json").read_text()) == raw


def test_commit_without_clock_records_the_offset_as_unknown(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    tel = _commit_tel(tmp_path, exp[0], _raw_telemetry())["telemetry"]
    assert tel["clock"]["offset_s"] is None and "clock_unknown" in tel["flags"]


def test_commit_without_telemetry_writes_the_point_file_as_before(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    doc = _commit_tel(tmp_path, exp[0], None)
    assert "telemetry" not in doc
    assert sorted(p.name for p in (tmp_path / "points").iterdir()) == ["c1-r0.json", "c1-r0.requests.jsonl"]


def test_unusable_telemetry_still_commits_the_point(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    doc = _commit_tel(tmp_path, exp[0], {"schema": 1, "window": {"start": 5.0, "end": 1.0}})
    assert doc["outcome"] == "ok" and "window" in doc["telemetry"]["error"]


def test_non_finite_numbers_in_raw_telemetry_are_stored_as_null(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1]}, None)
    raw = _raw_telemetry()
    raw["gpu"]["rows"][0][2] = float("nan")
    _commit_tel(tmp_path, exp[0], raw)
    text = (tmp_path / "points" / "c1-r0.telemetry.json").read_text()
    assert "NaN" not in text and json.loads(text)["gpu"]["rows"][0][2] is None


def test_telemetry_files_move_with_their_point_and_orphans_are_partial(tmp_path: Path) -> None:
    exp = resume.expected_points("h", {"concurrency": [1, 2]}, None)
    _commit_tel(tmp_path, exp[0], _raw_telemetry())
    _commit_tel(tmp_path, dict(exp[1], hash="other"), _raw_telemetry())  # stale
    (tmp_path / "points" / "c4-r0.telemetry-gpu.parquet").write_bytes(b"x")  # no point file
    plan = resume.plan_points(str(tmp_path), exp, now=0)
    assert plan["done"] == ["c1-r0"]
    reasons = {(m["file"], m["reason"]) for m in plan["moved"]}
    assert ("points/c2-r0.telemetry.json", "stale") in reasons
    assert ("points/c4-r0.telemetry-gpu.parquet", "partial") in reasons
    assert (tmp_path / "points" / "c1-r0.telemetry.json").is_file()  # the kept point's


def test_assemble_turns_raw_telemetry_into_tables_and_lists_the_figures(tmp_path: Path) -> None:
    from sglbench import columnar

    exp = resume.expected_points("h", {"concurrency": [1, 2]}, None)
    raw = _raw_telemetry(gpus=(0, 1))
    _commit_tel(tmp_path, exp[0], raw)
    _commit_tel(tmp_path, exp[1], None)
    bench = resume.assemble_benchmark(str(tmp_path), exp, prompt_set="p", identity_hash="h")
    assert bench is not None
    assert bench["points"][0]["telemetry"]["energy_j"] == pytest.approx(2 * 300.0 * 10.0)
    assert "telemetry" not in bench["points"][1]
    points = tmp_path / "points"
    assert not (points / "c1-r0.telemetry.json").exists()
    assert (points / "c1-r0.telemetry-gpu.parquet").is_file() and (
        points / "c1-r0.telemetry-server.parquet"
    ).is_file()
    back = columnar.read_telemetry(points, "c1-r0")
    assert back is not None and back["window"] == raw["window"] and back["gpu"]["rows"] == raw["gpu"]["rows"]
