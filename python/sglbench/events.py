"""ansible-runner events -> campaign progress, as pure functions (unit-tested on recorded events).

``apply_event(state, event) -> state`` folds one runner event dict (``event``, ``created``,
``event_data.{host, task, role, res}``) into a new :class:`Progress` without touching the old one;
``progress_lines`` renders one line per GPU host (phase and config, N of M, elapsed, ETA) and
``failure_kind`` decides whether the run itself could not proceed.

What the events carry (the contract is in the results, not in task names; docs/operations.md):

- ``res.ansible_facts.sglang_units_instances`` (name, config, tp of every unit) and
  ``res.ansible_facts.sglang_preflight_phases`` -> the attempts planned per host (M);
- ``res.ansible_facts.__sglang_cycle_state`` (:data:`sglbench.cycle.STATE_FACT`): every phase transition
  of a config attempt carries the whole attempt state (``instance``, ``step``, ``outcome``, ``failure``,
  ``t.started_at``, ...): a new ``(instance, started_at)`` starts attempt N, ``step`` moves it through
  plan/stop/start/bench/record (health and probe happen inside the start's host call: their timestamps
  come with the next state, and a failure in them names them as its phase), ``step == "recorded"`` ends it;
- ``runner_on_unreachable``; failures in the preflight/units roles (nothing ran), failures of the
  actions that write results on the controller; ``playbook_on_stats``.

Streams recorded before the plays emitted the attempt state (tests/fixtures/runner_events/) are read
from the task names of that time (``cycle | Begin the attempt of <instance>``, ``cycle | Enter the
<phase> phase``, ``cycle | Report <instance>``); a host that sent one attempt state is read from states only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sglbench.cycle import STATE_FACT
from sglbench.resume import POINT_FAILED

SETUP_ROLES = ("sglang_preflight", "sglang_units")
# Actions that write results on the controller: their failure means the run could not proceed.
RESULTS_ACTIONS = ("sglbench_record", "sglbench_points")
# Task names of streams recorded before the attempt state was emitted.
PHASE_TASK = re.compile(r"^cycle \| Enter the (?P<phase>\w+) phase")
BEGIN_TASK = re.compile(r"^cycle \| Begin the attempt of (?P<instance>\S+)")
REPORT_TASK = re.compile(r"^cycle \| Report (?P<instance>\S+)")
INSTANCE_TP = re.compile(r"-tp(?P<tp>\d+)$")
PHASE_NAMES = {"bench": "benchmark"}
RECORD_TASK = "cycle | Write the record"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Attempt:
    instance: str
    outcome: str  # ok | failed | skipped | ?
    detail: str  # rest of the report line, e.g. "(health: zero_requests), ready in 5.8 s"


@dataclass(frozen=True)
class HostProgress:
    host: str
    phase: str = "preflight"
    instance: str | None = None
    tp: int | None = None
    total: int | None = None
    done: tuple[Attempt, ...] = ()
    first_seen: float | None = None
    first_attempt_at: float | None = None
    attempt_started_at: float | None = None
    last_done_at: float | None = None
    last_seen: float | None = None
    unreachable: str | None = None  # message
    unreachable_in: str | None = None  # the phase the host was in when it became unreachable
    setup_failed: str | None = None  # failure in preflight/units (nothing benchmarked)
    results_failed: str | None = None  # results could not be written on the controller (disk full, ...)
    instances: tuple[tuple[str, str, int], ...] = ()  # (name, config, tp) of every unit
    phases: tuple[int, ...] | None = None
    attempt_id: tuple[str, Any] | None = None  # (instance, started_at) of the attempt state
    structured: bool = False  # the host sends attempt states (task names are not read)

    @property
    def n_started(self) -> int:
        return len(self.done) + (1 if self.instance and self.phase not in ("done",) else 0)


@dataclass(frozen=True)
class Progress:
    """The whole run as seen through its events."""

    configs: tuple[str, ...] = ()  # config filter ([] = all)
    hosts: dict[str, HostProgress] = field(default_factory=dict)
    started_at: float | None = None
    last_seen: float | None = None
    stats: dict[str, Any] | None = None
    warnings: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return self.stats is not None


def event_time(event: dict[str, Any]) -> float | None:
    created = event.get("created")
    if not isinstance(created, str):
        return None
    try:
        return datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def planned_instances(
    instances: tuple[tuple[str, str, int], ...], phases: tuple[int, ...] | None, configs: tuple[str, ...]
) -> list[tuple[str, str, int]] | None:
    """The attempts a host will make, as (instance, config, tp): units whose TP is in the selected phases
    and config in the filter (None until both are known)."""
    if not instances or phases is None:
        return None
    return [(n, c, tp) for n, c, tp in instances if tp in phases and (not configs or c in configs)]


def planned_total(
    instances: tuple[tuple[str, str, int], ...], phases: tuple[int, ...] | None, configs: tuple[str, ...]
) -> int | None:
    """How many attempts a host will make (see :func:`planned_instances`)."""
    planned = planned_instances(instances, phases, configs)
    return None if planned is None else len(planned)


def _tp_of(host: HostProgress, instance: str) -> int | None:
    for name, _c, tp in host.instances:
        if name == instance:
            return tp
    m = INSTANCE_TP.search(instance)
    return int(m.group("tp")) if m else None


GENERIC_LOOP_MSGS = ("All items completed", "One or more items failed")


def _msg(res: Any) -> str:
    """``res.msg`` as one line: a list message (debug with ``msg: [...]``) is joined with "; "; for a loop
    ("All items completed"), the message of the first item that failed or could not reach its host."""
    if isinstance(res, dict):
        msg = res.get("msg")
        items = res.get("results")
        if (msg in GENERIC_LOOP_MSGS or not msg) and isinstance(items, list):
            for item in items:
                if (
                    isinstance(item, dict)
                    and (item.get("unreachable") or item.get("failed"))
                    and item.get("msg")
                ):
                    return str(item["msg"])
        if isinstance(msg, str):
            return msg
        if isinstance(msg, list):
            items = [str(m).strip() for m in msg]
            # drop empty facts such as "failure: {}" or "KV tokens: None"
            return "; ".join(i for i in items if i and not i.endswith((": {}", ": None", ": null", ":")))
        if res.get("stderr"):
            return str(res["stderr"])[-500:]
    return ""


def parse_report(instance: str, msg: str) -> Attempt:
    """``"qwen-tp1: failed (health: zero_requests), ready in 3 s"`` or the list form joined by
    :func:`_msg` (``"qwen-tp1: ok; time to ready (s): 5.3; KV tokens: 452325"``) -> Attempt."""
    text = msg.split(":", 1)[1].strip() if msg.startswith(instance + ":") else msg.strip()
    head, _sep, rest = text.partition(";")
    outcome, _, detail = head.strip().partition(" ")
    outcome = outcome.rstrip(",;")
    if outcome not in ("ok", "failed", "skipped"):
        return Attempt(instance, "?", text)
    detail = " ".join(p for p in (detail.strip(), rest.strip()) if p)
    return Attempt(instance, outcome, detail)


def _action(data: dict[str, Any]) -> str:
    """The task's action without its collection prefix (``sglbench_record``)."""
    return str(data.get("task_action") or "").rsplit(".", 1)[-1]


def attempt_detail(attempt: dict[str, Any]) -> str:
    """``"(health: zero_requests), ready in 5.8 s"`` from a recorded attempt state."""
    parts = []
    failure = attempt.get("failure")
    if isinstance(failure, dict) and failure.get("cause"):
        parts.append(f"({failure.get('phase')}: {failure.get('cause')})")
    if attempt.get("reused"):
        parts.append("reused (same hash)")
    ready = attempt.get("time_to_ready_s")
    if isinstance(ready, (int, float)) and not isinstance(ready, bool):
        parts.append(f"ready in {ready:.1f} s")
    return ", ".join(parts)


def _attempt_state(res: Any) -> dict[str, Any] | None:
    facts = res.get("ansible_facts") if isinstance(res, dict) else None
    attempt = facts.get(STATE_FACT) if isinstance(facts, dict) else None
    return attempt if isinstance(attempt, dict) and attempt.get("instance") else None


def _begin(host: HostProgress, instance: str, t: float | None) -> HostProgress:
    return replace(
        host,
        instance=instance,
        tp=_tp_of(host, instance),
        phase="plan",
        attempt_started_at=t,
        first_attempt_at=host.first_attempt_at if host.first_attempt_at is not None else t,
    )


def _record_done(host: HostProgress, attempt: Attempt, t: float | None) -> HostProgress:
    return replace(host, done=(*host.done, attempt), phase="recorded", last_done_at=t)


def apply_attempt(host: HostProgress, attempt: dict[str, Any], t: float | None) -> HostProgress:
    """One transition of a config attempt (its state, see :mod:`sglbench.cycle`)."""
    instance = str(attempt["instance"])
    started = (attempt.get("t") or {}).get("started_at") if isinstance(attempt.get("t"), dict) else None
    host = replace(host, structured=True)
    if host.attempt_id != (instance, started):
        host = replace(_begin(host, instance, t), attempt_id=(instance, started))
    step = str(attempt.get("step") or "")
    if step == "recorded":
        outcome = str(attempt.get("outcome") or "?")
        return _record_done(host, Attempt(instance, outcome, attempt_detail(attempt)), t)
    return replace(host, phase=PHASE_NAMES.get(step, step)) if step else host


def _legacy_task(host: HostProgress, kind: str, task: str, res: Any, t: float | None) -> HostProgress:
    """Progress from the task names of a stream without attempt states."""
    if kind == "runner_on_start":
        return replace(host, phase="record") if task.startswith(RECORD_TASK) else host
    if m := BEGIN_TASK.match(task):
        return _begin(host, m.group("instance"), t)
    if m := PHASE_TASK.match(task):
        return replace(host, phase=PHASE_NAMES.get(m.group("phase"), m.group("phase")))
    if m := REPORT_TASK.match(task):
        inst = m.group("instance")
        return _record_done(host, parse_report(inst, _msg(res)), t)
    return host


def _facts(host: HostProgress, facts: dict[str, Any], configs: tuple[str, ...]) -> HostProgress:
    """The unit instances and the TP phases of a host -> its planned attempts."""
    if isinstance(facts.get("sglang_units_instances"), list):
        insts = tuple(
            (str(i.get("name")), str(i.get("config")), int(i.get("tp") or 0))
            for i in facts["sglang_units_instances"]
            if isinstance(i, dict)
        )
        host = replace(host, instances=insts, phase="deploy")
    if isinstance(facts.get("sglang_preflight_phases"), list):
        host = replace(host, phases=tuple(int(p) for p in facts["sglang_preflight_phases"]))
    return replace(host, total=planned_total(host.instances, host.phases, configs))


def _failed(host: HostProgress, data: dict[str, Any], task: str, res: Any) -> HostProgress:
    if data.get("role") in SETUP_ROLES or task.startswith(("preflight |", "units |")):
        return replace(host, phase="setup failed", setup_failed=f"{task}: {_msg(res)}".strip(": "))
    bench_failure = isinstance(res, dict) and POINT_FAILED in res  # a point failed; its results are written
    if _action(data) in RESULTS_ACTIONS and not host.results_failed and not bench_failure:
        return replace(host, results_failed=_msg(res) or task)
    return host


def _unreachable(host: HostProgress, task: str, res: Any) -> HostProgress:
    """The host became unreachable (its connection retries ran out): the message says where, when an
    attempt was under way. The first such event is the one kept."""
    if host.unreachable:
        return host
    msg = _msg(res) or "unreachable"
    if host.instance and host.phase not in ("recorded", "unreachable"):
        msg += f" (during {host.instance}, {host.phase}: task {task!r})"
    return replace(host, phase="unreachable", unreachable=msg, unreachable_in=host.phase)


def apply_host_event(
    host: HostProgress, kind: str, data: dict[str, Any], state: Progress, t: float | None
) -> HostProgress:
    """One runner event of ``host`` (not modified) -> its progress after it."""
    task = str(data.get("task") or "")
    res = data.get("res")
    if kind == "runner_on_unreachable":
        return _unreachable(host, task, res)
    if kind == "runner_on_failed" and not data.get("ignore_errors"):
        return _failed(host, data, task, res)
    if kind == "runner_on_ok":
        facts = res.get("ansible_facts") if isinstance(res, dict) else None
        if isinstance(facts, dict):
            host = _facts(host, facts, state.configs)
        if attempt := _attempt_state(res):
            return apply_attempt(host, attempt, t)
    if kind in ("runner_on_ok", "runner_on_start") and not host.structured:
        return _legacy_task(host, kind, task, res, t)
    return host


def apply_event(state: Progress, event: dict[str, Any]) -> Progress:
    """The progress after one more runner event (``state`` is not modified)."""
    kind = event.get("event")
    data = event.get("event_data") or {}
    t = event_time(event)
    started = state.started_at if state.started_at is not None else t
    state = replace(state, started_at=started, last_seen=t if t is not None else state.last_seen)
    if kind == "playbook_on_stats":
        stats = {k: data.get(k) or {} for k in ("ok", "failures", "dark", "rescued", "skipped", "changed")}
        return replace(state, stats=stats)
    if kind == "warning":
        text = data.get("warning") if isinstance(data.get("warning"), str) else event.get("stdout")
        msg = ANSI.sub("", text).strip() if isinstance(text, str) else ""
        return replace(state, warnings=(*state.warnings, msg)) if msg else state
    host_name = data.get("host")
    if not host_name:
        return state
    host = state.hosts.get(host_name) or HostProgress(host=host_name, first_seen=t)
    host = replace(host, last_seen=t if t is not None else host.last_seen)
    hosts = dict(state.hosts)
    hosts[host_name] = apply_host_event(host, str(kind), data, state, t)
    return replace(state, hosts=hosts)


def fold(events: list[dict[str, Any]], configs: tuple[str, ...] = ()) -> Progress:
    state = Progress(configs=configs)
    for ev in events:
        state = apply_event(state, ev)
    return state


# -- rendering --------------------------------------------------------------------------------------
def fmt_duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "?"
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def eta_s(host: HostProgress, now: float) -> float | None:
    """Remaining time = mean time per finished attempt x attempts left (None before the first ends)."""
    if host.total is None or not host.done or host.first_attempt_at is None or host.last_done_at is None:
        return None
    left = host.total - len(host.done)
    if left <= 0:
        return 0.0
    per = (host.last_done_at - host.first_attempt_at) / len(host.done)
    # the attempt in progress has already used part of its share
    in_progress = (
        (now - host.attempt_started_at) if host.attempt_started_at and host.phase != "recorded" else 0
    )
    return max(0.0, per * left - min(in_progress, per))


def host_line(host: HostProgress, now: float) -> str:
    total = "?" if host.total is None else str(host.total)
    n = len(host.done) + (1 if host.instance and host.phase not in ("recorded",) else 0)
    where = f"TP{host.tp} {host.instance}" if host.instance else "-"
    elapsed = fmt_duration(now - host.first_seen) if host.first_seen is not None else "?"
    eta = fmt_duration(eta_s(host, now))
    line = f"{host.host}: [{n}/{total}] {where} {host.phase}, elapsed {elapsed}, ETA {eta}"
    if host.unreachable:
        line += f" — UNREACHABLE: {host.unreachable[:200]}"
    if host.setup_failed:
        line += f" — SETUP FAILED: {host.setup_failed[:300]}"
    if host.results_failed:
        line += f" — RESULTS NOT WRITTEN: {host.results_failed[:300]}"
    return line


def progress_lines(state: Progress, now: float | None = None) -> list[str]:
    now = now if now is not None else (state.last_seen or 0.0)
    return [host_line(state.hosts[h], now) for h in sorted(state.hosts)]


def attempt_lines(state: Progress) -> list[str]:
    out = []
    for h in sorted(state.hosts):
        for a in state.hosts[h].done:
            detail = a.detail if not a.detail or a.detail.startswith("(") else f"({a.detail})"
            out.append(f"{h}: {a.instance}: {a.outcome}{(' ' + detail) if detail else ''}")
    for d in dropped_hosts(state):
        if d.instance:
            where = f" in the {d.phase} phase" if d.phase else ""
            out.append(f"{d.host}: {d.instance}: {CUT} (host {d.reason}{where}; not recorded, not valid)")
        if d.not_started:
            out.append(f"{d.host}: never started (host {d.reason}): {', '.join(d.not_started)}")
    return out


# The outcome shown for an attempt that began and was never recorded (its host dropped out, or the run was
# killed): not a record outcome (hostlib/result_schema.OUTCOMES), since no record exists.
CUT = "cut"


@dataclass(frozen=True)
class DroppedHost:
    """A GPU host that dropped out of the run (unreachable): where it was, what it finished, what it left.

    ``sglbench run`` writes one per such host into ``run.json`` (``dropped``); summaries and reports read
    them back with :meth:`from_dict`."""

    host: str
    message: str
    phase: str | None = None  # the phase it was in: preflight, deploy, or the cut attempt's phase
    instance: str | None = None  # the attempt it cut (begun, never recorded), if any
    config: str | None = None
    tp: int | None = None
    recorded: tuple[str, ...] = ()  # attempts it recorded in this session
    not_started: tuple[str, ...] = ()  # planned attempts it never began
    reason: str = "unreachable"

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "reason": self.reason,
            "message": self.message,
            "phase": self.phase,
            "instance": self.instance,
            "config": self.config,
            "tp": self.tp,
            "recorded": list(self.recorded),
            "not_started": list(self.not_started),
        }

    @classmethod
    def from_dict(cls, data: Any) -> DroppedHost | None:
        """The entry of ``run.json``, or None when it is not one (never a guess)."""
        if not isinstance(data, dict) or not isinstance(data.get("host"), str) or not data["host"]:
            return None

        def text(key: str) -> str | None:
            v = data.get(key)
            return v if isinstance(v, str) and v else None

        def names(key: str) -> tuple[str, ...]:
            v = data.get(key)
            return tuple(str(x) for x in v) if isinstance(v, list) else ()

        tp = data.get("tp")
        return cls(
            host=data["host"],
            message=text("message") or "",
            phase=text("phase"),
            instance=text("instance"),
            config=text("config"),
            tp=tp if isinstance(tp, int) and not isinstance(tp, bool) else None,
            recorded=names("recorded"),
            not_started=names("not_started"),
            reason=text("reason") or "unreachable",
        )

    def describe(self) -> str:
        """One line: why, where, and what it left (``h: unreachable in the benchmark phase of ...``)."""
        where = f" in the {self.phase} phase" if self.phase else ""
        if self.instance:
            where += f" of {self.instance} (cut: not recorded, not valid)"
        done = f"{len(self.recorded)} attempt(s) recorded"
        if self.not_started:
            done += f", {len(self.not_started)} never started ({', '.join(self.not_started)})"
        why = f": {first_line(self.message, 160)}" if self.message else ""
        return f"{self.host}: {self.reason}{where}; {done}{why}"


def first_line(text: str, width: int) -> str:
    """The first line of ``text``, at most ``width`` characters (an ellipsis when cut)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def dropped_host(host: HostProgress, configs: tuple[str, ...]) -> DroppedHost:
    """What an unreachable host left behind, from its progress."""
    phase = host.unreachable_in
    cut = host.instance if host.instance and phase not in ("recorded", "unreachable") else None
    recorded = tuple(a.instance for a in host.done)
    config = next((c for n, c, _tp in host.instances if n == cut), None) if cut else None
    planned = planned_instances(host.instances, host.phases, configs) or []
    return DroppedHost(
        host=host.host,
        message=host.unreachable or "unreachable",
        phase=phase,
        instance=cut,
        config=config,
        tp=host.tp if cut else None,
        recorded=recorded,
        not_started=tuple(n for n, _c, _tp in planned if n not in recorded and n != cut),
    )


def dropped_hosts(state: Progress) -> list[DroppedHost]:
    """Every host that became unreachable during the run (also one only the final stats call dark)."""
    dark = set((state.stats or {}).get("dark") or {})
    out = []
    for name in sorted(set(state.hosts) | dark):
        host = state.hosts.get(name) or HostProgress(host=name)
        if host.unreachable or name in dark:
            out.append(dropped_host(host, state.configs))
    return out


def failure_kind(state: Progress) -> str | None:
    """Why the run as a whole could not proceed, or None: unreachable host, failed setup, no stats."""
    msgs = []
    for h in sorted(state.hosts):
        hp = state.hosts[h]
        if hp.unreachable:
            msgs.append(f"{h} unreachable: {hp.unreachable}")
        if hp.setup_failed:
            msgs.append(f"{h} preflight/setup failed: {hp.setup_failed}")
        if hp.results_failed:
            msgs.append(
                f"{h}: results could not be written on the controller, the campaign stopped there (the "
                f"server was stopped first): {hp.results_failed}"
            )
    if state.stats is not None:
        for h in sorted(state.stats.get("dark") or {}):
            if h not in state.hosts or not state.hosts[h].unreachable:
                msgs.append(f"{h} unreachable")
    return "; ".join(msgs) or None
