"""Prompt sources for the load generator: shipped sets, user JSONL, synthetic fixed-length token ids.

Stdlib only; ships to the GPU host as ``ansible.module_utils.sglbench_hostlib.prompts``. On the host the
module receives prompts as a parameter list (``prompts_from_params``); on the controller a set name
resolves to the JSONL files shipped in ``sglbench/prompts/``.

A prompt record (one JSON object per line) carries exactly one of:

- ``"prompt"`` (or ``"text"``): plain text, sent as ``text`` to ``/generate`` and ``prompt`` to
  ``/v1/completions``; wrapped as one user message for ``/v1/chat/completions``;
- ``"messages"``: a chat message list (``[{"role": "user", "content": "..."}]``); text routes get the
  contents joined by blank lines;
- ``"input_ids"``: a list of token ids (native ``/generate`` and ``/v1/completions`` only);
- ``"token_blocks"``: token ids by name, built on the host (:mod:`.token_blocks`; same routes).

Optional: ``"id"`` (defaults to ``<source>:<line>``), ``"category"`` (defaults to ``"user"``),
``"max_new_tokens"`` (this request's output length, generated with ``ignore_eos``: a trace's
``output_length``) and ``"arrival_s"`` (its send time in a replayed trace, :mod:`.trace_replay`).
``"session"`` (a string) and ``"turn"`` (0, 1, ...) together make the record one user turn of a multi-turn
session: the load generator sends it with the session's history (:mod:`.sessions`).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .token_blocks import MAX_TOKENS, TOKEN_ID_RANGE, TokenBlocks

SHIPPED_SETS: tuple[str, ...] = ("math", "code", "chat", "summarize", "long-context")
MIXED_SET = "mixed"  # all shipped sets together
DEFAULT_PROMPT_SET = MIXED_SET
SYNTHETIC_PREFIX = "synthetic:"
# Token ids drawn for synthetic prompts. Kept well inside any modern vocabulary and above the usual
# special-token range so that a random prompt never contains BOS/EOS/pad ids.
SYNTHETIC_ID_RANGE = TOKEN_ID_RANGE
# Synthetic prompts are built in memory before the first request: bound them. The longest context any
# SGLang model serves is well below 2**20 tokens; 2**24 token ids in all is about 130 MB.
MAX_SYNTHETIC_INPUT_LEN = MAX_TOKENS
MAX_SYNTHETIC_IDS = 1 << 24


_CONTENT_FIELDS = ("prompt", "text", "messages", "input_ids", "token_blocks")


class PromptError(ValueError):
    """A prompt source or record is unusable; the message names the place and the fix."""


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    text: str | None = None
    messages: tuple[dict[str, str], ...] | None = None
    input_ids: tuple[int, ...] | None = None
    session: str | None = None  # with ``turn``: one user turn of a multi-turn session (.sessions)
    turn: int | None = None
    token_blocks: TokenBlocks | None = None
    max_new_tokens: int | None = None  # this request's own output length (sent with ignore_eos)
    arrival_s: float | None = None  # its send time in a replayed trace (trace_replay)

    @property
    def kind(self) -> str:
        if self.input_ids is not None or self.token_blocks is not None:
            return "input_ids"
        return "messages" if self.messages is not None else "text"

    def token_ids(self) -> tuple[int, ...] | None:
        """The prompt's token ids (built from its blocks when it has them); None for a text prompt."""
        if self.token_blocks is not None:
            return self.token_blocks.token_ids()
        return self.input_ids

    def as_text(self) -> str:
        if self.text is not None:
            return self.text
        if self.messages is not None:
            return "\n\n".join(m.get("content", "") for m in self.messages)
        raise PromptError(
            f"prompt {self.id!r} is token ids only; it has no text for this API (use --api native)"
        )

    def as_messages(self) -> list[dict[str, str]]:
        if self.messages is not None:
            return [dict(m) for m in self.messages]
        if self.text is not None:
            return [{"role": "user", "content": self.text}]
        raise PromptError(
            f"prompt {self.id!r} is token ids only; chat completions need text (use --api native or openai)"
        )

    def to_param(self) -> dict[str, Any]:
        """Plain dict form (module parameter / JSON), inverse of :func:`parse_prompt_record`."""
        out: dict[str, Any] = {"id": self.id, "category": self.category}
        if self.text is not None:
            out["prompt"] = self.text
        if self.messages is not None:
            out["messages"] = [dict(m) for m in self.messages]
        if self.input_ids is not None:
            out["input_ids"] = list(self.input_ids)
        if self.session is not None:
            out.update(session=self.session, turn=self.turn)
        if self.token_blocks is not None:
            out["token_blocks"] = self.token_blocks.to_param()
        for key in ("max_new_tokens", "arrival_s"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


def parse_prompt_record(obj: Any, where: str, default_id: str) -> Prompt:
    """Validate one JSON record; ``where`` (file:line) goes into every error message."""
    if isinstance(obj, str):
        return Prompt(id=default_id, category="user", text=obj)
    if not isinstance(obj, dict):
        raise PromptError(f"{where}: expected a JSON object with a 'prompt', 'messages' or 'input_ids' field")
    prompt = _prompt_content(obj, where, default_id)
    new_tokens, arrival = obj.get("max_new_tokens"), obj.get("arrival_s")
    if new_tokens is not None and (
        isinstance(new_tokens, bool) or not isinstance(new_tokens, int) or new_tokens < 1
    ):
        raise PromptError(f"{where}: 'max_new_tokens' must be an integer >= 1, got {new_tokens!r}")
    if arrival is not None and (
        isinstance(arrival, bool) or not isinstance(arrival, (int, float)) or not 0 <= arrival < float("inf")
    ):
        raise PromptError(f"{where}: 'arrival_s' must be a finite number of seconds >= 0, got {arrival!r}")
    if new_tokens is None and arrival is None:
        return prompt
    return dataclasses.replace(
        prompt, max_new_tokens=new_tokens, arrival_s=float(arrival) if arrival is not None else None
    )


def _prompt_content(obj: dict[str, Any], where: str, default_id: str) -> Prompt:
    """The prompt of a record: its id, category and the one content field it carries."""
    present = [k for k in _CONTENT_FIELDS if obj.get(k) is not None]
    if not present:
        raise PromptError(f"{where}: no 'prompt', 'messages' or 'input_ids' field; add one of them")
    if len(present) > 1:
        raise PromptError(
            f"{where}: give only one of 'prompt'/'text', 'messages', 'input_ids', 'token_blocks' "
            f"(found {present})"
        )
    pid = str(obj.get("id", default_id))
    category = str(obj.get("category", "user"))
    session, turn = _session_turn(obj, where)
    key = present[0]
    value = obj[key]
    if key in ("prompt", "text"):
        if not isinstance(value, str) or not value:
            raise PromptError(f"{where}: '{key}' must be a non-empty string")
        return Prompt(id=pid, category=category, text=value, session=session, turn=turn)
    if session is not None:
        raise PromptError(f"{where}: a session turn is text; give it as 'prompt', not '{key}'")
    if key == "messages":
        if not isinstance(value, list) or not value:
            raise PromptError(
                f"{where}: 'messages' must be a non-empty list of {{'role', 'content'}} objects"
            )
        msgs = []
        for i, m in enumerate(value):
            if not (
                isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            ):
                raise PromptError(f"{where}: messages[{i}] needs string 'role' and 'content'")
            msgs.append({"role": m["role"], "content": m["content"]})
        return Prompt(id=pid, category=category, messages=tuple(msgs))
    if key == "token_blocks":
        try:
            return Prompt(id=pid, category=category, token_blocks=TokenBlocks.from_param(value))
        except ValueError as exc:
            raise PromptError(f"{where}: {exc}") from None
    if not isinstance(value, list) or not value or not all(isinstance(t, int) and t >= 0 for t in value):
        raise PromptError(f"{where}: 'input_ids' must be a non-empty list of non-negative integers")
    return Prompt(id=pid, category=category, input_ids=tuple(value))


def _session_turn(obj: dict[str, Any], where: str) -> tuple[str | None, int | None]:
    """The record's ``session`` and ``turn``: both or neither, a non-empty string and an integer >= 0."""
    session, turn = obj.get("session"), obj.get("turn")
    if session is None and turn is None:
        return None, None
    if not isinstance(session, str) or not session:
        raise PromptError(f"{where}: 'session' must be a non-empty string when 'turn' is given")
    if isinstance(turn, bool) or not isinstance(turn, int) or turn < 0:
        raise PromptError(f"{where}: 'turn' must be an integer >= 0 (0 = the session's first turn)")
    return session, turn


def load_jsonl(path: str | Path, default_category: str | None = None) -> list[Prompt]:
    """Read a prompt JSONL file (blank lines and lines starting with ``#`` are skipped)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise PromptError(f"cannot read prompt file {p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise PromptError(
            f"prompt file {p} is not UTF-8 text (byte {exc.start}); give JSONL, one JSON object per line"
        ) from None
    out: list[Prompt] = []
    for no, line in enumerate(lines, start=1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        where = f"{p}:{no}"
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as exc:
            raise PromptError(f"{where}: not valid JSON ({exc.msg}); one JSON object per line") from None
        except RecursionError:
            raise PromptError(f"{where}: JSON nested too deeply; one flat JSON object per line") from None
        prompt = parse_prompt_record(obj, where, default_id=f"{p.stem}:{no}")
        if default_category and "category" not in (obj if isinstance(obj, dict) else {}):
            prompt = dataclasses.replace(prompt, category=default_category)
        out.append(prompt)
    if not out:
        raise PromptError(f"prompt file {p} holds no prompts")
    return out


def prompts_from_params(items: list[Any]) -> list[Prompt]:
    """Prompts passed inline (e.g. an Ansible module parameter): strings or prompt records."""
    if not items:
        raise PromptError("the prompt list is empty; pass at least one prompt")
    return [parse_prompt_record(obj, f"prompts[{i}]", default_id=f"p{i}") for i, obj in enumerate(items)]


def check_synthetic(n: int, input_len: int) -> None:
    """PromptError unless ``n`` synthetic prompts of ``input_len`` token ids stay within the bounds."""
    if input_len < 1:
        raise PromptError(f"synthetic input length must be >= 1, got {input_len}")
    if input_len > MAX_SYNTHETIC_INPUT_LEN:
        raise PromptError(
            f"synthetic input length {input_len} is more than {MAX_SYNTHETIC_INPUT_LEN} tokens (longer than "
            "any context SGLang serves); use a smaller 'synthetic:<input_len>'"
        )
    if n < 1:
        raise PromptError(f"the number of synthetic prompts must be >= 1, got {n}")
    if n * input_len > MAX_SYNTHETIC_IDS:
        raise PromptError(
            f"{n} synthetic prompts of {input_len} tokens are {n * input_len} token ids, more than the "
            f"{MAX_SYNTHETIC_IDS} the client builds in memory; use fewer prompts (--num-prompts) or a "
            "smaller 'synthetic:<input_len>'"
        )


def synthetic_prompts(n: int, input_len: int, seed: int) -> list[Prompt]:
    """``n`` prompts of exactly ``input_len`` random token ids (capacity sweeps; no tokenizer needed)."""
    check_synthetic(n, input_len)
    rng = random.Random(seed)
    lo, hi = SYNTHETIC_ID_RANGE
    pool = list(range(lo, hi))  # one int object per id value, shared by every prompt: 8 bytes per token id
    return [
        Prompt(
            id=f"synthetic-{input_len}-{i}",
            category="synthetic",
            input_ids=tuple(pool[rng.randrange(lo, hi) - lo] for _ in range(input_len)),
        )
        for i in range(n)
    ]


def parse_synthetic(spec: str) -> int | None:
    """The input length of a ``synthetic:<input_len>`` source (checked against the bounds for one prompt),
    None for any other source."""
    spec = spec.strip()
    if not spec.startswith(SYNTHETIC_PREFIX):
        return None
    raw = spec[len(SYNTHETIC_PREFIX) :]
    try:
        length = int(raw)
    except ValueError:
        raise PromptError(f"bad synthetic prompt spec {spec!r}; use e.g. 'synthetic:1024'") from None
    check_synthetic(1, length)
    return length


def shipped_sets_dir() -> Path:
    """Directory of the shipped JSONL sets (controller-side; the package data next to hostlib)."""
    return Path(__file__).resolve().parent.parent / "prompts"


def load_shipped_set(name: str) -> list[Prompt]:
    if name == MIXED_SET:
        out: list[Prompt] = []
        for s in SHIPPED_SETS:
            out.extend(load_shipped_set(s))
        return out
    if name not in SHIPPED_SETS:
        raise PromptError(
            f"unknown prompt set {name!r}; choose one of {', '.join((*SHIPPED_SETS, MIXED_SET))}, "
            f"'{SYNTHETIC_PREFIX}<input_len>', or a path to a JSONL file"
        )
    return load_jsonl(shipped_sets_dir() / f"{name}.jsonl", default_category=name)


def resolve_prompt_source(spec: str, *, synthetic_n: int = 64, seed: int = 0) -> list[Prompt]:
    """Resolve ``--prompts``: a set name, several joined by commas, ``synthetic:LEN``, a workload source
    (``sharegpt:<path>``, ``shared-prefix:<N>x<M>``, ``trace:<path>``, ``long-context:<tokens>``,
    ``specbench:<path>``; :mod:`.workloads`), a multi-turn session source (``multi-turn:<S>x<T>``,
    ``sharegpt-turns:<path>``; :mod:`.sessions`), or a JSONL path."""
    spec = spec.strip()
    length = parse_synthetic(spec)
    if length is not None:
        return synthetic_prompts(synthetic_n, length, seed)
    from . import sessions, workloads  # they import this module: resolved here, not at import time

    if workloads.is_workload(spec):
        records = workloads.workload_records(spec, seed)
        return [parse_prompt_record(r, f"{spec} {r['id']}", default_id=r["id"]) for r in records]
    if sessions.is_session_source(spec):
        records = sessions.session_records(spec, seed)
        return [parse_prompt_record(r, f"{spec} {r['id']}", default_id=r["id"]) for r in records]
    names = [s.strip() for s in spec.split(",") if s.strip()]
    if names and all(n in (*SHIPPED_SETS, MIXED_SET) for n in names):
        out: list[Prompt] = []
        for n in names:
            out.extend(load_shipped_set(n))
        return out
    path = Path(spec).expanduser()
    if path.is_file():
        return load_jsonl(path)
    raise PromptError(
        f"--prompts {spec!r} is neither a shipped set ({', '.join((*SHIPPED_SETS, MIXED_SET))}), "
        f"'{SYNTHETIC_PREFIX}<input_len>', 'sharegpt:<path>', 'shared-prefix:<N>x<M>', 'trace:<path>', "
        "'long-context:<tokens>[x<count>]', 'specbench:<path>', 'multi-turn:<S>x<T>', "
        "'sharegpt-turns:<path>', nor an existing JSONL file"
    )


def iter_prompts(prompts: list[Prompt], seed: int) -> Iterator[Prompt]:
    """Endless deterministic stream: seeded shuffles of the whole set, one after another.

    Balanced: after ``n`` draws every prompt was used ``n // len`` or ``n // len + 1`` times, so
    categories keep their share at any ``n``.
    """
    if not prompts:
        raise PromptError("no prompts to choose from")
    rng = random.Random(seed)
    while True:
        order = list(prompts)
        rng.shuffle(order)
        yield from order


def select_prompts(prompts: list[Prompt], n: int, seed: int) -> list[Prompt]:
    """The first ``n`` prompts of :func:`iter_prompts`."""
    return list(itertools.islice(iter_prompts(prompts, seed), n))
