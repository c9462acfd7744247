"""Progress from ansible-runner events (pure functions) on a recorded sim-host run and synthetic events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sglbench import cycle, events

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "runner_events" / "bench_sim_tp1.json"
CONFIGS = ("qwen3-8b-ar", "qwen27b-dflash-mrr8")


def _recorded() -> list[dict]:
    return json.loads(FIXTURE.read_text())


def _ev(
    kind: str,
    host: str | None,
    task: str = "",
    res: dict | None = None,
    t: str = "2026-11-29T10:00:00+00:00",
    role: str = "sglang_cycle",
    **data,
) -> dict:
    return {
        "event": kind,
        "created": t,
        "event_data": {"host": host, "task": task, "role": role, "res": res or {}, **data},
    }


def test_recorded_run_folds_to_two_attempts() -> None:
    state = events.fold(_recorded(), CONFIGS)
    host = state.hosts["simhost"]
    assert host.phases == (1,)
    assert host.total == 2  # the two selected configs have a TP1 unit
    assert [(a.instance, a.outcome) for a in host.done] == [
        ("qwen27b-dflash-mrr8-tp1", "failed"),
        ("qwen3-8b-ar-tp1", "ok"),
    ]
    assert host.done[0].detail == "(health: zero_requests)"
    assert state.finished and state.stats["rescued"] == {"simhost": 1}
    assert events.failure_kind(state) is None
    assert (
        events.attempt_lines(state)[0] == "simhost: qwen27b-dflash-mrr8-tp1: failed (health: zero_requests)"
    )


def test_without_a_config_filter_every_tp1_unit_counts() -> None:
    host = events.fold(_recorded()).hosts["simhost"]
    assert host.total == sum(1 for _n, _c, tp in host.instances if tp == 1) > 2


def test_phases_seen_in_order_during_the_run() -> None:
    state = events.Progress(configs=CONFIGS)
    seen = []
    for ev in _recorded():
        state = events.apply_event(state, ev)
        h = state.hosts.get("simhost")
        if h and h.instance == "qwen3-8b-ar-tp1" and (not seen or seen[-1] != h.phase):
            seen.append(h.phase)
    assert seen == ["plan", "stop", "start", "health", "probe", "benchmark", "record", "recorded"]


def test_apply_event_is_pure() -> None:
    before = events.Progress(configs=CONFIGS)
    after = events.apply_event(before, _ev("runner_on_ok", "h", "cycle | Begin the attempt of a-tp4"))
    assert before.hosts == {} and after.hosts["h"].instance == "a-tp4" and after.hosts["h"].tp == 4


def test_progress_line_counts_elapsed_and_eta() -> None:
    evs = [
        _ev(
            "runner_on_ok",
            "h",
            "units | Compute the unit instances of the matrix",
            role="sglang_units",
            res={
                "ansible_facts": {
                    "sglang_units_instances": [
                        {"name": f"c{i}-tp1", "config": f"c{i}", "tp": 1} for i in range(4)
                    ]
                }
            },
            t="2026-11-29T10:00:00+00:00",
        ),
        _ev(
            "runner_on_ok",
            "h",
            "preflight | Select the TP phases to run",
            role="sglang_preflight",
            res={"ansible_facts": {"sglang_preflight_phases": [1]}},
            t="2026-11-29T10:00:00+00:00",
        ),
        _ev("runner_on_ok", "h", "cycle | Begin the attempt of c0-tp1", t="2026-11-29T10:00:00+00:00"),
        _ev(
            "runner_on_ok",
            "h",
            "cycle | Report c0-tp1",
            res={"msg": "c0-tp1: ok, ready in 5 s"},
            t="2026-11-29T10:01:00+00:00",
        ),
        _ev("runner_on_ok", "h", "cycle | Begin the attempt of c1-tp1", t="2026-11-29T10:01:00+00:00"),
        _ev("runner_on_ok", "h", "cycle | Enter the health phase", t="2026-11-29T10:01:10+00:00"),
    ]
    state = events.fold(evs)
    h = state.hosts["h"]
    assert h.total == 4 and len(h.done) == 1
    now = events.event_time(evs[-1])
    assert now is not None
    # 60 s per attempt so far, 3 left, 10 s of the current one used -> 170 s
    assert events.eta_s(h, now) == pytest.approx(170.0)
    assert events.progress_lines(state) == ["h: [2/4] TP1 c1-tp1 health, elapsed 1m10s, ETA 2m50s"]


@pytest.mark.parametrize(
    ("report", "outcome", "detail"),
    [
        ("x-tp1: ok, ready in 5.8 s, 481148 KV tokens", "ok", "ready in 5.8 s, 481148 KV tokens"),
        ("x-tp1: skipped (plan: planned_failure)", "skipped", "(plan: planned_failure)"),
        ("something else", "?", "something else"),
    ],
)
def test_parse_report(report: str, outcome: str, detail: str) -> None:
    a = events.parse_report("x-tp1", report)
    assert (a.outcome, a.detail) == (outcome, detail)


def test_unreachable_and_setup_failures_stop_the_run() -> None:
    state = events.fold(
        [
            _ev(
                "runner_on_unreachable",
                "gpu2",
                "Gathering Facts",
                res={"msg": "ssh: connect to host gpu2 port 22: timed out"},
            ),
            _ev(
                "runner_on_failed",
                "gpu1",
                "preflight | Check the matrix (names, ports, TP sizes, draft paths, value ranges)",
                role="sglang_preflight",
                res={"msg": "Bad SGLang matrix for gpu1: config x: tp 3 does not divide 8"},
            ),
            {
                "event": "playbook_on_stats",
                "created": "2026-11-29T10:00:01+00:00",
                "event_data": {"dark": {"gpu2": 1}, "failures": {"gpu1": 1}, "ok": {}},
            },
        ]
    )
    kind = events.failure_kind(state)
    assert kind is not None and "gpu2 unreachable: ssh: connect" in kind and "tp 3 does not divide 8" in kind
    assert "UNREACHABLE" in events.progress_lines(state)[1]


def test_rescued_cycle_failures_do_not_stop_the_run() -> None:
    state = events.fold(
        [
            _ev(
                "runner_on_failed",
                "gpu1",
                "health | Wait for readiness of sglang-x-tp1.service",
                role="sglang_service",
                res={"msg": "ended while starting"},
            ),
        ]
    )
    assert events.failure_kind(state) is None


def test_fmt_duration() -> None:
    assert [events.fmt_duration(s) for s in (None, 5, 65, 3700)] == ["?", "5s", "1m05s", "1h01m"]


def test_warning_events_keep_their_text_without_colour() -> None:
    ev = {
        "event": "warning",
        "stdout": "\x1b[1;35m[WARNING]: Encountered 1 template error.\x1b[0m\r\n",
        "event_data": {"warning": True, "task": "x"},
    }
    assert events.apply_event(events.Progress(), ev).warnings == ("[WARNING]: Encountered 1 template error.",)


def test_report_as_a_list_message() -> None:
    # roles/sglang_cycle reports with `msg: [...]` (as seen on a sim-host run)
    res = {
        "msg": [
            "x-tp1: failed",
            "failure: {'phase': 'health', 'cause': 'zero_requests'}",
            "time to ready (s): None",
            "KV tokens: None",
        ]
    }
    st = events.apply_event(events.Progress(), _ev("runner_on_ok", "h", "cycle | Report x-tp1", res))
    a = st.hosts["h"].done[0]
    assert a.outcome == "failed" and a.detail == "failure: {'phase': 'health', 'cause': 'zero_requests'}"
    ok = events.parse_report(
        "y-tp1", events._msg({"msg": ["y-tp1: ok", "failure: {}", "time to ready (s): 5.27"]})
    )
    assert (ok.outcome, ok.detail) == ("ok", "time to ready (s): 5.27")


# -- structured events: the attempt state each transition of roles/sglang_cycle emits ---------------
def _state_ev(state: dict, t: str, task: str = "any task name") -> dict:
    return _ev("runner_on_ok", "h", task, res={"ansible_facts": {cycle.STATE_FACT: state}}, t=t)


def _attempt_stream(instance: str, minute: int, fail_in: str | None) -> list[dict]:
    """The set_fact events of one attempt, as the play emits them (states built by sglbench.cycle): the
    start, health and probe phases are one host call, so health and probe come with the next event."""
    at = f"2026-11-29T10:{minute:02d}:%02d+00:00"
    state = cycle.begin(instance, 1000.0 + minute)
    evs = [_state_ev(state, at % 0, task=f"renamed | first step of {instance}")]
    for i, phase in enumerate(("stop", "start"), start=1):
        state = cycle.enter(state, phase, 1000.0 + minute + i)
        evs.append(_state_ev(state, at % i))
    entered = {"health": 0.1, "probe": 0.9}
    if fail_in in ("health", "probe"):
        upto = {k: v for k, v in entered.items() if k == "health" or fail_in == "probe"}
        result = {"msg": "refused", "phases_entered_s": upto, "call_s": 0.95}
        state = cycle.fail(state, result, {"name": "t"}, 1000.0 + minute + 3)
        evs.append(_state_ev(state, at % 3))
    else:
        call = {"phases_entered_s": entered, "call_s": 0.95}
        state = cycle.passed(state, call, 1000.0 + minute + 3)
        state = cycle.enter(state, "bench", 1000.0 + minute + 3)
        evs.append(_state_ev(state, at % 3))
        if fail_in == "bench":
            state = cycle.fail(state, {"msg": "refused"}, {"name": "t"}, 1000.0 + minute + 4)
        else:
            state = cycle.done(state, 1000.0 + minute + 6)
        evs.append(_state_ev(state, at % 6))
    journal = {"cause": "zero_requests", "unit_state": {"active_state": "failed"}}
    state = cycle.classify(state, journal, {}, 1000.0 + minute + 7)
    evs.append(_state_ev(state, at % 7))
    state = cycle.recorded(state, {"time_to_ready_s": None if fail_in == "health" else 5.84})
    evs.append(_state_ev(state, at % 8))
    # the human report keeps its old name: it must not count the attempt a second time
    evs.append(
        _ev("runner_on_ok", "h", f"cycle | Report {instance}", res={"msg": f"{instance}: ok"}, t=at % 9)
    )
    return evs


def test_structured_events_give_phases_attempts_and_details_whatever_the_task_names() -> None:
    evs = _attempt_stream("a-tp1", 0, fail_in="health") + _attempt_stream("b-tp2", 1, fail_in=None)
    seen = []
    state = events.Progress()
    for ev in evs:
        state = events.apply_event(state, ev)
        h = state.hosts["h"]
        if h.instance == "b-tp2" and (not seen or seen[-1] != h.phase):
            seen.append(h.phase)
    assert seen == ["plan", "stop", "start", "benchmark", "done", "record", "recorded"]
    host = state.hosts["h"]
    assert host.structured and host.tp == 2
    assert [(a.instance, a.outcome, a.detail) for a in host.done] == [
        ("a-tp1", "failed", "(health: zero_requests)"),
        ("b-tp2", "ok", "ready in 5.8 s"),
    ]
    assert events.attempt_lines(state) == [
        "h: a-tp1: failed (health: zero_requests)",
        "h: b-tp2: ok (ready in 5.8 s)",
    ]


def test_a_new_attempt_of_the_same_instance_is_counted_again() -> None:
    evs = _attempt_stream("a-tp1", 0, fail_in="bench") + _attempt_stream("a-tp1", 1, fail_in=None)
    host = events.fold(evs).hosts["h"]
    assert [a.outcome for a in host.done] == ["failed", "ok"]
    assert host.done[0].detail == "(bench: zero_requests), ready in 5.8 s"  # exited: the journal's cause


@pytest.mark.parametrize(
    ("attempt", "detail"),
    [
        (cycle.skip(cycle.begin("x", 1.0), "no room"), "(plan: planned_failure)"),
        (cycle.reuse(cycle.begin("x", 1.0), True), "reused (same hash)"),
        ({**cycle.done(cycle.begin("x", 1.0), 2.0), "time_to_ready_s": 12.04}, "ready in 12.0 s"),
        (cycle.done(cycle.begin("x", 1.0), 2.0), ""),
    ],
)
def test_attempt_detail(attempt: dict, detail: str) -> None:
    assert events.attempt_detail(attempt) == detail


def test_a_fact_that_is_not_an_attempt_state_is_ignored() -> None:
    ev = _ev("runner_on_ok", "h", "x", res={"ansible_facts": {cycle.STATE_FACT: {"phase": "stop"}}})
    assert not events.apply_event(events.Progress(), ev).hosts["h"].structured


def test_a_host_lost_mid_attempt_says_during_which_attempt_and_phase() -> None:
    """A connection that stays down past ssh's retries ends the host's play: the run's failure names the
    attempt and phase it cut, and the first unreachable event is the one kept."""
    state = cycle.enter(cycle.begin("a-tp1", 1000.0), "bench", 1001.0)
    task = "bench | Run the prompt benchmark at c1-r0"
    lost = {"msg": "Failed to connect to the host via ssh: Connection refused", "unreachable": True}
    st = events.fold(
        [
            _state_ev(state, "2026-11-29T10:00:00+00:00"),
            _ev("runner_on_unreachable", "h", task, res=lost, t="2026-11-29T10:00:30+00:00"),
            _ev("runner_on_unreachable", "h", "later", res={"msg": "x"}, t="2026-11-29T10:00:31+00:00"),
        ]
    )
    assert events.failure_kind(st) == (
        "h unreachable: Failed to connect to the host via ssh: Connection refused "
        f"(during a-tp1, benchmark: task {task!r})"
    )


PAIR = FIXTURE.with_name("bench_simpair_drop.json")


def test_a_host_dropped_mid_attempt_while_the_other_went_on() -> None:
    state = events.fold(json.loads(PAIR.read_text()))
    a, b = state.hosts["simhost-a"], state.hosts["simhost-b"]
    assert [(x.instance, x.outcome) for x in a.done] == [
        ("qwen3-8b-ar-tp1", "ok"),
        ("qwen3-8b-dflash-tp1", "ok"),
    ]
    assert a.unreachable is None and b.done == () and b.unreachable_in == "benchmark"
    (gone,) = events.dropped_hosts(state)
    assert gone == events.DroppedHost(
        host="simhost-b",
        message=b.unreachable or "",
        phase="benchmark",
        instance="qwen3-8b-ar-tp1",
        config="qwen3-8b-ar",
        tp=1,
        recorded=(),
        not_started=("qwen3-8b-dflash-tp1",),
    )
    assert gone.message.startswith("Task failed: Failed to create temporary directory")
    lines = events.attempt_lines(state)
    assert lines[:2] == [
        "simhost-a: qwen3-8b-ar-tp1: ok (ready in 12.5 s)",
        "simhost-a: qwen3-8b-dflash-tp1: ok (ready in 6.7 s)",
    ]
    assert lines[2:] == [
        "simhost-b: qwen3-8b-ar-tp1: cut (host unreachable in the benchmark phase; not recorded, not valid)",
        "simhost-b: never started (host unreachable): qwen3-8b-dflash-tp1",
    ]
    kind = events.failure_kind(state)
    assert kind is not None and kind.startswith("simhost-b unreachable: ") and "simhost-a" not in kind
    line_b = events.progress_lines(state)[1]
    assert line_b.startswith("simhost-b: [1/2] TP1 qwen3-8b-ar-tp1 unreachable") and "UNREACHABLE" in line_b


def _drop(at: list[dict]) -> events.Progress:
    unreachable = _ev("runner_on_unreachable", "h", "stop | Stop", res={"msg": "ssh: connection reset"})
    stats = {
        "event": "playbook_on_stats",
        "created": "2026-11-29T10:09:00+00:00",
        "event_data": {"dark": {"h": 1}},
    }
    return events.fold([*at, unreachable, stats])


def _planned(n: int) -> list[dict]:
    insts = [{"name": f"c{i}-tp1", "config": f"c{i}", "tp": 1} for i in range(n)]
    return [
        _ev(
            "runner_on_ok",
            "h",
            "units",
            role="sglang_units",
            res={"ansible_facts": {"sglang_units_instances": insts}},
        ),
        _ev(
            "runner_on_ok",
            "h",
            "phases",
            role="sglang_preflight",
            res={"ansible_facts": {"sglang_preflight_phases": [1]}},
        ),
    ]


def _state(instance: str, step: str, **extra: object) -> dict:
    attempt = {"instance": instance, "step": step, "t": {"started_at": 1.0}, **extra}
    return _ev("runner_on_ok", "h", "cycle", res={"ansible_facts": {cycle.STATE_FACT: attempt}})


def test_a_host_dropped_between_attempts_cut_nothing() -> None:
    state = _drop([*_planned(3), _state("c0-tp1", "bench"), _state("c0-tp1", "recorded", outcome="ok")])
    (gone,) = events.dropped_hosts(state)
    assert (gone.phase, gone.instance, gone.recorded, gone.not_started) == (
        "recorded",
        None,
        ("c0-tp1",),
        ("c1-tp1", "c2-tp1"),
    )
    assert "cut" not in " ".join(events.attempt_lines(state))


def test_a_host_dropped_before_its_units_has_nothing_planned() -> None:
    (gone,) = events.dropped_hosts(
        _drop([_ev("runner_on_ok", "h", "preflight | Check", role="sglang_preflight")])
    )
    assert (gone.phase, gone.instance, gone.not_started, gone.message) == (
        "preflight",
        None,
        (),
        "ssh: connection reset",
    )


def test_a_second_unreachable_event_keeps_the_phase_of_the_first() -> None:
    evs = [*_planned(1), _state("c0-tp1", "health")]
    once = events.fold([*evs, _ev("runner_on_unreachable", "h", "x", res={"msg": "gone"})])
    twice = events.apply_event(once, _ev("runner_on_unreachable", "h", "y", res={"msg": "still gone"}))
    assert twice.hosts["h"].unreachable_in == "health" and events.dropped_hosts(twice)[0].instance == "c0-tp1"


def test_a_host_only_the_stats_call_dark_is_dropped_too() -> None:
    stats = {
        "event": "playbook_on_stats",
        "created": "2026-11-29T10:09:00+00:00",
        "event_data": {"dark": {"g": 1}},
    }
    (gone,) = events.dropped_hosts(events.fold([stats]))
    assert (gone.host, gone.message, gone.phase) == ("g", "unreachable", None)
    assert events.dropped_hosts(events.fold(_planned(1))) == []


def test_dropped_host_round_trips_and_rejects_what_is_not_one() -> None:
    gone = events.DroppedHost("h", "gone", "benchmark", "c0-tp1", "c0", 1, ("a-tp1",), ("c1-tp1",))
    assert events.DroppedHost.from_dict(json.loads(json.dumps(gone.to_dict()))) == gone
    assert events.DroppedHost.from_dict({"host": "h", "tp": True, "recorded": "x"}) == events.DroppedHost(
        "h", ""
    )
    for junk in (None, [], "h", {"host": ""}, {"host": 3}):
        assert events.DroppedHost.from_dict(junk) is None
    text = gone.describe()
    assert text.startswith("h: unreachable in the benchmark phase of c0-tp1 (cut: not recorded, not valid)")
    assert "1 attempt(s) recorded, 1 never started (c1-tp1): gone" in text


def test_a_failed_point_is_a_benchmark_failure_and_unwritable_results_stop_the_run() -> None:
    """The benchmark action fails both when a point fails on the host (its result names the point: the
    measured points are committed, the attempt fails and the run goes on) and when the controller cannot
    write the results (the run cannot proceed)."""
    state = cycle.enter(cycle.begin("a-tp1", 1000.0), "bench", 1001.0)
    task = "bench | Measure and commit the points of a-tp1"
    bench = {"failed": True, "msg": "point c1-r1 of a-tp1 failed: boom", "point_failed": "c1-r1"}
    disk = {"failed": True, "msg": "sglbench_points op=run in /r: [Errno 28] No space left on device"}
    for res, kept in ((bench, None), (disk, disk["msg"])):
        ev = _ev("runner_on_failed", "h", task, res=res, task_action="sglbench_points")
        st = events.fold([_state_ev(state, "2026-11-29T10:00:00+00:00"), ev])
        assert st.hosts["h"].results_failed == kept
