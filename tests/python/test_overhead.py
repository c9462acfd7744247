"""The campaign's own overhead per attempt (sglbench.overhead), over records shaped as the cycle writes."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from recordfactory import bench, point, record, write

from sglbench.hostlib.result_schema import Timings
from sglbench.overhead import PHASES, attempt_overhead, campaign_overhead, overhead_lines, record_overhead
from sglbench.records import parse_record

T0 = 1_795_940_000.0
# An ok attempt: plan 0.8 s, stop 2.1 s, start+health 13.1 s (12.5 s of it the server's own start),
# probe 0.4 s, bench 10.5 s (10 s of it load), journal+stop 2.1 s, record 1.0 s: 30 s in all, 7.5 s of it
# overhead.
OK_TIMINGS = {
    "started_at": T0,
    "stop_started_at": T0 + 0.8,
    "start_started_at": T0 + 2.9,
    "health_started_at": T0 + 3.3,
    "moved_on_at": T0 + 16.0,
    "bench_started_at": T0 + 16.4,
    "done_at": T0 + 26.9,
    "record_started_at": T0 + 29.0,
    "ended_at": T0 + 30.0,
    "total_s": 30.0,
    "time_to_ready_s": 12.5,
}
OK_PHASES = {"plan": 0.8, "stop": 2.1, "start": 0.6, "probe": 0.4, "bench": 0.5, "end": 2.1, "record": 1.0}
# A record of a cycle that stopped after writing it: no end of the bench, no start of the record.
STOP_AFTER_RECORD = {k: v for k, v in OK_TIMINGS.items() if k not in ("done_at", "record_started_at")}


def _rec(timings: dict[str, Any] | None = None, **kw: Any) -> Any:
    two_points = [point(1, 0, 100.0, duration_s=5.0), point(2, 0, 180.0, duration_s=5.0)]
    kw.setdefault("benchmark", bench(two_points))
    return parse_record(record(timings=OK_TIMINGS if timings is None else timings, **kw), Path("r.json"))


def test_an_ok_attempt_is_split_by_phase_and_the_phases_add_up_to_the_overhead() -> None:
    o = record_overhead(_rec())
    assert o.total_s == pytest.approx(7.5)
    assert o.phases == pytest.approx({**OK_PHASES, "final": None})
    assert math.fsum(v for v in o.phases.values() if v is not None) == pytest.approx(o.total_s)
    assert (o.host, o.instance) == ("gpu1", "ar-tp1")


def test_a_points_whole_load_generator_run_counts_as_load_where_the_record_has_it() -> None:
    # 0.2 s of each point was cache flushes and warm-up around its 5 s window: load, not overhead
    pts = [point(1, 0, 100.0, duration_s=5.0), point(2, 0, 180.0, duration_s=5.0)]
    o = record_overhead(_rec(benchmark=bench([{**p, "load_s": 5.2} for p in pts])))
    assert o.total_s == pytest.approx(7.5 - 0.4) and o.phases["bench"] == pytest.approx(0.5 - 0.4)
    # a point without it (older records) counts its measured window
    mixed = record_overhead(_rec(benchmark=bench([{**pts[0], "load_s": 5.2}, pts[1]])))
    assert mixed.total_s == pytest.approx(7.5 - 0.2)


def test_the_servers_own_stop_in_the_final_stop_is_not_overhead() -> None:
    # 1.6 s of the 2.1 s journal+stop was systemctl stop of the server (SGLang's drain and exit check)
    o = record_overhead(_rec({**OK_TIMINGS, "server_stop_s": 1.6}))
    assert o.total_s == pytest.approx(7.5 - 1.6) and o.phases["end"] == pytest.approx(2.1 - 1.6)
    assert math.fsum(v for v in o.phases.values() if v is not None) == pytest.approx(o.total_s)
    # an attempt that started no server stopped none of its own: nothing is taken out
    skipped = {"started_at": T0, "ended_at": T0 + 1.0, "total_s": 1.0, "server_stop_s": 0.5}
    assert attempt_overhead(Timings(**skipped), 0.0, server_started=False).total_s == pytest.approx(1.0)


def test_a_record_that_ends_at_the_bench_has_no_split_of_bench_stop_and_record() -> None:
    o = record_overhead(_rec(STOP_AFTER_RECORD))
    assert o.total_s == pytest.approx(7.5)
    unknown = dict.fromkeys(("bench", "end", "record", "final"))
    assert o.phases == pytest.approx({"plan": 0.8, "stop": 2.1, "start": 0.6, "probe": 0.4, **unknown})


def test_an_older_record_without_phase_timestamps_has_a_total_but_no_split() -> None:
    """recordfactory's default timings: 60 s, 12.5 s to ready, 2 x 5 s load, no phase entries."""
    o = record_overhead(_rec(timings={}))
    assert o.total_s == pytest.approx(60.0 - 12.5 - 10.0)
    assert set(o.phases.values()) == {None}


def test_a_failed_start_gives_the_phases_it_reached_and_no_total() -> None:
    t = {k: OK_TIMINGS[k] for k in ("started_at", "stop_started_at", "start_started_at")}
    t.update(health_started_at=T0 + 3.0, failure_reported_at=T0 + 9.0, record_started_at=T0 + 9.3)
    t.update(ended_at=T0 + 9.5, total_s=9.5, time_to_ready_s=None)
    failure = {"phase": "health", "cause": "cuda_oom", "message": "CUDA out of memory"}
    o = record_overhead(_rec(t, outcome="failed", failure=failure, benchmark=None))
    assert o.total_s is None
    unknown = dict.fromkeys(("start", "probe", "bench", "final"))
    # The final stop runs from the failure to the record.
    assert o.phases == pytest.approx({"plan": 0.8, "stop": 2.1, "end": 0.3, "record": 0.2, **unknown})


def test_an_attempt_the_plan_skipped_is_all_overhead() -> None:
    t = {"started_at": T0, "ended_at": T0 + 0.9, "total_s": 0.9}
    failure = {"phase": "plan", "cause": "planned_failure", "message": "does not fit"}
    o = record_overhead(_rec(t, outcome="skipped", failure=failure, benchmark=None))
    assert o.total_s == pytest.approx(0.9)
    assert set(o.phases.values()) == {None}


def test_nan_and_clock_skew_give_unknown_phases_never_negative_ones() -> None:
    skewed = {**OK_TIMINGS, "moved_on_at": OK_TIMINGS["start_started_at"] + 5.0}  # < time to ready
    o = record_overhead(_rec(skewed))
    assert o.phases["start"] is None and o.phases["probe"] == pytest.approx(8.5)
    nan = record_overhead(_rec({**OK_TIMINGS, "time_to_ready_s": float("nan"), "stop_started_at": math.nan}))
    assert nan.total_s is None and nan.phases["start"] is None
    assert nan.phases["plan"] is None and nan.phases["stop"] is None
    assert nan.phases["bench"] == pytest.approx(0.5)
    # More load than the attempt's wall time (a damaged record): unknown, not negative.
    assert attempt_overhead(Timings(total_s=5.0, time_to_ready_s=1.0), 10.0, True).total_s is None
    # A point without a duration leaves the load, and so the bench phase and the total, unknown.
    undated = point(1, 0, 100.0, duration_s=5.0)
    undated["duration_s"] = None
    o = record_overhead(_rec(benchmark=bench([point(2, 0, 100.0), undated])))
    assert o.total_s is None and o.phases["bench"] is None and o.phases["plan"] == pytest.approx(0.8)


def _shifted(by: float, longer: float = 0.0) -> dict[str, Any]:
    t = {k: v + by if k.endswith("_at") else v for k, v in OK_TIMINGS.items()}
    t["ended_at"] += longer
    t["total_s"] += longer
    return t


def test_the_gap_after_the_record_is_the_one_to_the_hosts_next_attempt_of_the_same_session() -> None:
    # ar ends at +30, eagle starts at +31.9 (1.9 s after it), spec on gpu2 and the last one have none.
    recs = [
        _rec(_shifted(31.9), config="eagle", algorithm="eagle"),
        _rec(),
        _rec(_shifted(0.5), host="gpu2", config="spec"),
    ]
    by_name = {o.instance: o for o in campaign_overhead(recs, since=T0 - 5.0)}
    assert by_name["ar-tp1"].phases["final"] == pytest.approx(1.9)
    assert by_name["ar-tp1"].total_s == pytest.approx(7.5 + 1.9)
    assert by_name["eagle-tp1"].phases["final"] is None and by_name["spec-tp1"].phases["final"] is None
    # Without the session's start no gap is trusted (a resumed run's pause is not overhead).
    assert {o.phases["final"] for o in campaign_overhead(recs)} == {None}
    # Attempts an earlier session recorded are left out, and their host's gaps are not trusted (an
    # attempt this session reused writes no record, so a gap could hold all of its time).
    assert [o.instance for o in campaign_overhead(recs, since=T0 + 10.0)] == ["eagle-tp1"]
    resumed = [*recs, _rec(_shifted(60.0), config="next")]
    assert [(o.instance, o.phases["final"]) for o in campaign_overhead(resumed, since=T0 + 10.0)] == [
        ("eagle-tp1", None),
        ("next-tp1", None),
    ]


def test_the_block_lists_each_attempt_then_the_mean_per_config_and_the_total() -> None:
    recs = [_rec(_shifted(100.0, 2.0), config="eagle", algorithm="eagle"), _rec(), _rec({}, config="old")]
    lines = overhead_lines(campaign_overhead(recs), earlier=2)
    assert lines[0] == (
        "overhead per config (s; time outside the server's start and stop and the load): "
        "2 attempt(s) recorded by an earlier session not counted"
    )
    # In the order the attempts started (ar and old at the same time: by instance).
    assert lines[1] == (
        "  gpu1/ar-tp1: 7.5 (plan+resume 0.8, stop 2.1, start+health 0.6, probe 0.4, bench 0.5, "
        "journal+stop 2.1, record 1.0, after record -)"
    )
    assert lines[2] == (
        "  gpu1/old-tp1: 37.5 (plan+resume -, stop -, start+health -, probe -, bench -, journal+stop -, "
        "record -, after record -)"
    )
    assert lines[3].startswith("  gpu1/eagle-tp1: 9.5 (")
    assert lines[4] == (
        "campaign overhead: 18.2 s per config on average (plan+resume 0.8, stop 2.1, start+health 0.6, "
        "probe 0.4, bench 0.5, journal+stop 2.1, record 2.0, after record -); 54.5 s in all over 3 of 3 "
        "configs"
    )
    assert overhead_lines([]) == []
    assert overhead_lines([], earlier=3) == [
        "overhead: all 3 attempt(s) recorded by an earlier session, none measured"
    ]


def test_a_campaign_with_no_known_overhead_says_so() -> None:
    failure = {"phase": "health", "cause": "cuda_oom", "message": "x"}
    t = {"started_at": T0, "start_started_at": T0 + 1.0, "ended_at": T0 + 5.0, "total_s": 5.0}
    lines = overhead_lines(campaign_overhead([_rec(t, outcome="failed", failure=failure, benchmark=None)]))
    assert lines[-1].startswith("campaign overhead: unknown")
    assert "-" in lines[1]


def test_every_phase_reads_keys_the_record_writes() -> None:
    from sglbench.hostlib.result_schema import RecordFacts

    facts = RecordFacts(run_id="r", host="h", instance={"name": "a-tp1", "tp": 1}, outcome="ok", timings={})
    written = set(facts.to_dict(ended_at=1.0)["timings"])
    assert {k for _label, starts, end in PHASES.values() for k in (*starts, end)} <= written
    assert set(Timings.__dataclass_fields__) <= written


def test_sglbench_run_prints_the_block_after_its_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sglbench import runner

    one_point = bench([point(1, 0, 100.0, duration_s=10.0)])
    write(tmp_path, record(timings=OK_TIMINGS, benchmark=one_point))
    write(tmp_path, record(timings=_shifted(-3600.0), config="kept", benchmark=one_point))
    meta = tmp_path / "run1" / runner.RUNNER_DIR / "run.json"
    meta.parent.mkdir()
    meta.write_text(json.dumps({"run_id": "run1", "started_at": T0 - 10.0}))
    runner._print_summary(tmp_path / "run1")
    out = capsys.readouterr().out
    assert "1 attempt(s) recorded by an earlier session not counted" in out
    assert "gpu1/ar-tp1: 7.5 (" in out and "kept-tp1:" not in out.split("overhead per config")[1]
    assert out.index("| ") < out.index("campaign overhead: 7.5 s per config on average (plan+resume 0.8,")


def test_summarize_prints_the_block_with_overhead_and_refuses_it_for_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sglbench import cli

    write(tmp_path, record(timings=OK_TIMINGS, benchmark=bench([point(1, 0, 100.0, duration_s=10.0)])))
    assert cli.main(["summarize", str(tmp_path / "run1"), "--overhead"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("7.5 s in all over 1 of 1 configs")
    assert "gpu1/ar-tp1: 7.5 (plan+resume 0.8," in out
    assert cli.main(["summarize", str(tmp_path / "run1")]) == 0
    assert "campaign overhead" not in capsys.readouterr().out
    assert cli.main(["summarize", str(tmp_path / "run1"), "--overhead", "--format", "csv"]) == 2
    assert "--overhead is for --format md" in capsys.readouterr().err


def test_the_record_copies_every_phase_entry_the_cycle_takes() -> None:
    from sglbench import cycle
    from sglbench.hostlib.result_schema import PHASE_STARTS

    taken = {*cycle.PHASE_TIMESTAMP.values(), cycle.DONE_TIMESTAMP, cycle.RECORD_TIMESTAMP}
    assert set(PHASE_STARTS) | {"moved_on_at"} == taken
