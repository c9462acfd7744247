"""Multi-turn sessions: conversations whose every turn is sent with the session's history.

Stdlib only; ships as ``ansible.module_utils.sglbench_hostlib.sessions``. Two halves:

**Sources (controller).** ``prompts.resolve_prompt_source`` turns a session source into prompt records,
one per user turn, each with ``session`` and ``turn`` (0, 1, ...); the records (their content, so their
identity in the point hash) reach the host as the load generator's ``prompts``.

- ``multi-turn:<sessions>x<turns>[:<system words>:<user words>]``: ``sessions`` conversations of ``turns``
  user turns each. Turn 0 is the session's own system prompt and its first question, joined as SGLang's
  generated-shared-prefix dataset joins them in its multi-turn mode (``system + "\\n\\n" + question``,
  ``sglang/benchmark/datasets/generated_shared_prefix.py``); turns 1, 2, ... are further questions.
  Words come from the shared-prefix vocabulary through a generator seeded by the bench seed, so the same
  spec and seed give the same sessions everywhere. No two sessions share a prefix: what the cache finds
  is each session's own history. Category ``multi-turn``; ids ``mt-s<session>-t<turn>``, sessions
  ``mt-s<session>``. Defaults: 512 system words, 64 user words.
- ``sharegpt-turns:<path>``: a ShareGPT-format file (the format ``sharegpt:`` reads, JSON list or JSONL),
  every conversation with at least two turns one session whose user turns are its ``human`` (or
  ``user``) values in order; the file's ``gpt`` answers are not sent, the server's own answers take their
  place. Category ``sharegpt-turns``; sessions are the record's ``id``, else ``<file stem>:<record
  number>``, turn ids ``<session>:t<turn>``.

A user's JSONL file may carry ``session`` and ``turn`` as well.

**Running them (host).** :func:`check_prompts` groups the records into :class:`Session` objects. At a load
point the load generator takes whole sessions in a seeded order (:class:`SessionPlan`) until their turns
reach the point's request count, and :func:`run_sessions` plays them: turn k is sent only once turn k-1's
response has fully arrived, as the messages ``[user 0, assistant 0, ..., user k]`` where every assistant
message is the server's actual answer (as SGLang's bench client builds its multi-turn rounds,
``wrap_multi_turn_request_func`` in ``sglang/benchmark/serving.py``). ``openai-chat`` sends the messages;
``native`` and ``openai`` send their contents joined by blank lines (``Prompt.as_text``), so every turn's
text extends the previous one's. A closed-loop point runs ``concurrency`` sessions at once (a session holds
its slot for all its turns); a rate point starts sessions on the Poisson schedule, at most
``concurrency`` at once when capped. With a duration no new session starts after the deadline; a
started one runs to its end. A turn that fails ends its session. Each request row carries ``session`` and
``turn``; the point summary's ``turns`` (:func:`turn_table`) gives per turn the TTFT and the prompt
tokens the server found cached (``meta_info.cached_tokens``; on the OpenAI routes
``usage.prompt_tokens_details.cached_tokens``, which SGLang fills with ``--enable-cache-report``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import metrics as metrics_mod
from .loadgen_api import RequestRecord
from .prompts import Prompt, PromptError
from .workloads import WorkloadError, _records, _words

MULTI_TURN_PREFIX = "multi-turn:"
SHAREGPT_TURNS_PREFIX = "sharegpt-turns:"
MULTI_TURN_CATEGORY = "multi-turn"
SHAREGPT_TURNS_CATEGORY = "sharegpt-turns"
MULTI_TURN_DEFAULTS = (512, 64)  # words per system prompt, per user turn
MAX_SESSION_TURNS = 100_000  # user turns of one multi-turn spec (sessions x turns)
MAX_SESSION_WORDS = 200_000  # words of one system prompt or user turn
_MULTI_TURN = re.compile(r"^(\d+)x(\d+)(?::(\d+):(\d+))?$")
_USAGE = "use multi-turn:<sessions>x<turns>[:<system words>:<user words>], e.g. multi-turn:16x4"
_HUMAN = ("human", "user")

_perf = time.perf_counter


# -- sources (controller) ----------------------------------------------------------------------------------
def is_session_source(spec: str) -> bool:
    return spec.startswith((MULTI_TURN_PREFIX, SHAREGPT_TURNS_PREFIX))


def parse_multi_turn(spec: str) -> tuple[int, int, int, int]:
    """(sessions, turns per session, system words, user words) of a ``multi-turn:`` spec."""
    m = _MULTI_TURN.match(spec[len(MULTI_TURN_PREFIX) :].strip())
    if not m:
        raise WorkloadError(f"bad multi-turn spec {spec!r}; {_USAGE}")
    sessions, turns = int(m.group(1)), int(m.group(2))
    sys_words = int(m.group(3)) if m.group(3) else MULTI_TURN_DEFAULTS[0]
    user_words = int(m.group(4)) if m.group(4) else MULTI_TURN_DEFAULTS[1]
    if min(sessions, turns, sys_words, user_words) < 1:
        raise WorkloadError(f"multi-turn spec {spec!r}: every number must be >= 1; {_USAGE}")
    if sessions * turns > MAX_SESSION_TURNS or max(sys_words, user_words) > MAX_SESSION_WORDS:
        raise WorkloadError(
            f"multi-turn spec {spec!r}: at most {MAX_SESSION_TURNS} turns in all and {MAX_SESSION_WORDS} "
            "words per part; use smaller numbers"
        )
    return sessions, turns, sys_words, user_words


def multi_turn_records(spec: str, seed: int) -> list[dict[str, Any]]:
    """Prompt records of ``sessions`` x ``turns`` user turns, each session with its own system prompt."""
    sessions, turns, sys_words, user_words = parse_multi_turn(spec)
    rng = random.Random(f"multi-turn:{seed}")
    out = []
    for s in range(sessions):
        system = f"System prompt {s}. " + _words(rng, sys_words)
        for t in range(turns):
            question = f"Turn {t}: " + _words(rng, user_words) + "?"
            out.append(
                {
                    "id": f"mt-s{s}-t{t}",
                    "category": MULTI_TURN_CATEGORY,
                    "prompt": f"{system}\n\n{question}" if t == 0 else question,
                    "session": f"mt-s{s}",
                    "turn": t,
                }
            )
    return out


def _user_turns(rec: Any, where: str) -> list[str] | None:
    """The user turns of a ShareGPT record in order; None when it has fewer than two turns."""
    if not isinstance(rec, dict):
        raise WorkloadError(f"{where}: expected a JSON object with a 'conversations' list")
    turns = rec.get("conversations", rec.get("conversation"))
    if not isinstance(turns, list):
        raise WorkloadError(
            f"{where}: no 'conversations' list; give [{{'from': 'human', 'value': '...'}}, ...]"
        )
    if len(turns) < 2:
        return None
    out = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or turn.get("from") not in _HUMAN:
            continue
        value = turn.get("value")
        if not isinstance(value, str) or not value.strip():
            raise WorkloadError(f"{where}: conversations[{i}] needs a non-empty string 'value'")
        out.append(value)
    return out or None


def sharegpt_turns_records(path: str | Path) -> list[dict[str, Any]]:
    """Prompt records of every user turn of a ShareGPT file, one session per conversation."""
    p = Path(path).expanduser()
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for n, (where, rec) in enumerate(_records(p)):
        users = _user_turns(rec, where)
        if users is None:
            continue
        rid = rec.get("id")
        sid = str(rid) if isinstance(rid, (str, int)) and not isinstance(rid, bool) else f"{p.stem}:{n}"
        if sid in seen:
            raise WorkloadError(f"{where}: id {sid!r} is used by an earlier conversation; give unique ids")
        seen.add(sid)
        for t, value in enumerate(users):
            out.append(
                {
                    "id": f"{sid}:t{t}",
                    "category": SHAREGPT_TURNS_CATEGORY,
                    "prompt": value,
                    "session": sid,
                    "turn": t,
                }
            )
    if not out:
        raise WorkloadError(f"ShareGPT file {p} holds no conversation with a user turn and two turns or more")
    return out


def session_records(spec: str, seed: int) -> list[dict[str, Any]]:
    """Prompt records of a ``multi-turn:`` or ``sharegpt-turns:`` source."""
    if spec.startswith(SHAREGPT_TURNS_PREFIX):
        path = spec[len(SHAREGPT_TURNS_PREFIX) :].strip()
        if not path:
            raise WorkloadError(f"bad source {spec!r}; give a path, e.g. sharegpt-turns:/data/sharegpt.json")
        return sharegpt_turns_records(path)
    if spec.startswith(MULTI_TURN_PREFIX):
        return multi_turn_records(spec, seed)
    raise WorkloadError(
        f"unknown session source {spec!r}; use {MULTI_TURN_PREFIX}<S>x<T> or {SHAREGPT_TURNS_PREFIX}<path>"
    )


# -- sessions (host) ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Session:
    id: str
    turns: tuple[Prompt, ...]  # turn 0, 1, ... in order


def group_sessions(prompts: Sequence[Prompt]) -> list[Session] | None:
    """The sessions of ``prompts`` in first-seen order; None when no prompt belongs to one."""
    n_turns = sum(1 for p in prompts if p.session is not None)
    if n_turns == 0:
        return None
    if n_turns != len(prompts):
        raise PromptError(
            f"{n_turns} of the {len(prompts)} prompts are session turns and the others are not; list a "
            "multi-turn source alone in prompt_sets (or only session sources)"
        )
    by_id: dict[str, list[Prompt]] = {}
    for p in prompts:
        by_id.setdefault(str(p.session), []).append(p)
    out = []
    for sid, turns in by_id.items():
        turns.sort(key=lambda p: p.turn or 0)
        numbers = [p.turn for p in turns]
        if numbers != list(range(len(turns))):
            raise PromptError(
                f"session {sid!r} has turns {numbers}; give turns 0, 1, 2, ... once each, without gaps"
            )
        out.append(Session(sid, tuple(turns)))
    return out


def check_prompts(prompts: Sequence[Prompt], procs: int) -> list[Session] | None:
    """The sessions of a load generator's prompts (None: no sessions), checked against its settings."""
    sessions = group_sessions(prompts)
    if sessions is not None and procs > 1:
        raise PromptError(
            f"multi-turn sessions run in one client process, got procs = {procs}; set procs to 1"
        )
    return sessions


def first_turns(sessions: Sequence[Session]) -> list[Prompt]:
    """Every session's turn 0 (warm-up requests: no history, and the cache is flushed after them)."""
    return [s.turns[0] for s in sessions]


def iter_sessions(sessions: Sequence[Session], seed: int) -> Iterator[Session]:
    """Endless deterministic stream: seeded shuffles of every session, one after another."""
    if not sessions:
        raise PromptError("no sessions to choose from")
    rng = random.Random(f"sessions:{seed}")
    while True:
        order = list(sessions)
        rng.shuffle(order)
        yield from order


class SessionPlan:
    """The sessions of one point: the seeded order, whole sessions, while fewer turns than ``budget``
    (the point's request count) are planned; the last one may end a few turns past it."""

    def __init__(self, sessions: Sequence[Session], budget: int, seed: int) -> None:
        self._it = iter_sessions(sessions, seed)
        self.budget = budget
        self.planned_turns = 0
        self.started = 0

    def next(self) -> Session | None:
        if self.planned_turns >= self.budget:
            return None
        session = next(self._it)
        self.planned_turns += len(session.turns)
        self.started += 1
        return session


@dataclass
class TurnRecord(RequestRecord):
    """A request record of one turn of a session."""

    session: str | None = None
    turn: int | None = None


class ResponseText:
    """The text of one streamed answer, from its raw events (fed by the load generator's event tap).

    As SGLang's bench client reads it: ``native`` takes the last event's ``text`` (cumulative unless the
    server streams increments), the OpenAI routes join every chunk's ``text`` (completions) or
    ``reasoning_content`` + ``content`` (chat)."""

    __slots__ = ("_events", "_last", "api")

    def __init__(self, api: str) -> None:
        self.api = api
        self._last: bytes | None = None
        self._events: list[bytes] = []

    def feed(self, payloads: list[bytes]) -> None:
        if self.api == "native":
            for payload in payloads:
                if payload != b"[DONE]":
                    self._last = payload
        else:
            self._events.extend(payloads)

    def value(self, rec: RequestRecord) -> str:
        """The answer's text; ValueError (one line) when the events do not hold it whole."""
        if self.api == "native":
            return self._native(rec)
        parts = []
        for payload in self._events:
            if payload == b"[DONE]":
                continue
            obj = _decode(payload)
            for ch in obj.get("choices") or ():
                delta = ch.get("delta")
                if isinstance(delta, dict):
                    parts.append((delta.get("reasoning_content") or "") + (delta.get("content") or ""))
                elif isinstance(ch.get("text"), str):
                    parts.append(ch["text"])
        return "".join(parts)

    def _native(self, rec: RequestRecord) -> str:
        obj = _decode(self._last or b"{}")
        text, ids = obj.get("text"), obj.get("output_ids")
        if isinstance(ids, list) and rec.completion_tokens is not None and len(ids) != rec.completion_tokens:
            raise ValueError(
                "the server streams increments (--incremental-streaming-output), so the last event does not "
                "hold the whole answer the next turn needs; use --api openai-chat or drop that flag"
            )
        if not isinstance(text, str):
            raise ValueError("the last stream event has no 'text'; the next turn needs the answer's text")
        return text


def _decode(payload: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(payload)
    except ValueError:
        raise ValueError(f"undecodable stream event: {payload[:120]!r}") from None
    return obj if isinstance(obj, dict) else {}


# send(record, prompt, t0, model, tap) -> when the response ended (the load generator's one request)
Send = Callable[[RequestRecord, Prompt, float, "str | None", Callable[[list[bytes]], None]], Awaitable[float]]


async def run_sessions(
    send: Send,
    api: str,
    plan: SessionPlan,
    concurrency: int | None,
    schedule: list[float] | None,
    t0: float,
    deadline: float | None,
    model: str | None,
    out: list[RequestRecord],
) -> None:
    """The point's sessions from ``t0``: closed loop (``schedule`` None, ``concurrency`` sessions at once)
    or sessions started on ``schedule`` (at most ``concurrency`` at once when given)."""
    idx = itertools.count()

    async def converse(session: Session, scheduled: float, ready: float) -> None:
        history: tuple[dict[str, str], ...] = ()
        for turn in session.turns:
            user = {"role": "user", "content": turn.as_text()}
            prompt = Prompt(
                turn.id, turn.category, messages=(*history, user), session=session.id, turn=turn.turn
            )
            rec = TurnRecord(next(idx), turn.id, turn.category, session=session.id, turn=turn.turn)
            rec.scheduled_s, rec.ready_s = scheduled - t0, ready - t0
            out.append(rec)
            answer = ResponseText(api)
            await send(rec, prompt, t0, model, answer.feed)
            if not rec.ok:
                return  # the next turn needs this one's answer
            try:
                reply = answer.value(rec)
            except ValueError as exc:
                rec.error = str(exc)
                return
            history = (*history, user, {"role": "assistant", "content": reply})
            scheduled = ready = _perf()  # the next turn is due once its history is built

    if schedule is None:
        assert concurrency is not None

        async def worker() -> None:
            while deadline is None or _perf() < deadline:
                session = plan.next()
                if session is None:
                    return
                now = _perf()
                await converse(session, now, now)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return
    sem = asyncio.Semaphore(concurrency) if concurrency else None

    async def timed(session: Session, due: float) -> None:
        if sem is None:
            await converse(session, due, due)
            return
        async with sem:
            await converse(session, due, max(due, _perf()))

    loop = asyncio.get_running_loop()
    tasks = []
    for t_sched in schedule:
        session = plan.next()
        if session is None:
            break
        delay = t0 + t_sched - _perf()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(loop.create_task(timed(session, t0 + t_sched)))
    if tasks:
        await asyncio.gather(*tasks)


def turn_table(records: Sequence[RequestRecord]) -> list[dict[str, Any]]:
    """Per turn index of the measured session turns: counts, TTFT distribution (ms), mean prompt and
    cached tokens and the cached share of prompt tokens (None where the server reported none)."""
    by_turn: dict[int, list[RequestRecord]] = {}
    for rec in records:
        turn = getattr(rec, "turn", None)
        if turn is not None and not rec.warmup:
            by_turn.setdefault(int(turn), []).append(rec)
    out = []
    for turn, recs in sorted(by_turn.items()):
        ok = [r for r in recs if r.ok]
        ttft = [m.ttft_s for m in map(metrics_mod.request_metrics, ok) if m.ttft_s is not None]
        prompt = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
        cached = [r.cached_tokens for r in ok if r.cached_tokens is not None]
        both = [
            (r.prompt_tokens, r.cached_tokens) for r in ok if r.prompt_tokens and r.cached_tokens is not None
        ]
        total_prompt = sum(p for p, _ in both)
        out.append(
            {
                "turn": turn,
                "n_requests": len(recs),
                "n_ok": len(ok),
                "ttft_ms": metrics_mod.distribution(ttft, 1000.0),
                "prompt_tokens_mean": math.fsum(prompt) / len(prompt) if prompt else None,
                "cached_tokens_mean": math.fsum(cached) / len(cached) if cached else None,
                "cached_fraction": sum(c for _, c in both) / total_prompt if total_prompt else None,
            }
        )
    return out


def format_turns(points: Sequence[dict[str, Any]]) -> str:
    """The per-turn tables of a summary's points as text ("" when no point has one)."""
    head = (
        f"{'point':>10} {'rep':>3} {'turn':>4} {'ok':>5} {'ttft50':>8} {'prompt':>8} {'cached':>8} "
        f"{'cached%':>7}"
    )
    lines = []
    for p in points:
        for t in p.get("turns") or ():
            frac = t["cached_fraction"]
            cells = (
                _fmt(t["ttft_ms"]["p50"], ".1f"),
                _fmt(t["prompt_tokens_mean"], ".0f"),
                _fmt(t["cached_tokens_mean"], ".0f"),
                _fmt(frac * 100 if frac is not None else None, ".1f"),
            )
            lines.append(
                f"{p['point']:>10} {p['repeat']:>3} {t['turn']:>4} {t['n_ok']:>5} "
                f"{cells[0]:>8} {cells[1]:>8} {cells[2]:>8} {cells[3]:>7}"
            )
    return "\n".join([head, *lines]) if lines else ""


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)
