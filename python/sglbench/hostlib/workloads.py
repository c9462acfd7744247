"""Workload sources beyond the shipped prompt sets: ShareGPT conversations and shared-prefix groups.

Stdlib only; ships as ``ansible.module_utils.sglbench_hostlib.workloads``, but runs on the controller:
``prompts.resolve_prompt_source`` turns a source into prompt records there, and the records (their
content, so their identity in the point hash) reach the host as the load generator's ``prompts``.

- ``sharegpt:<path>``: a ShareGPT-format file, a JSON list or JSONL, one conversation per record with
  ``conversations`` (or ``conversation``) = ``[{"from": "human", "value": "..."}, {"from": "gpt", ...}]``.
  As SGLang's bench client reads it (``sglang/benchmark/datasets/sharegpt.py``): conversations with fewer
  than two turns are skipped and the first turn's ``value`` is the prompt. Prompt ids are the record's
  ``id`` when it has one, else ``<file stem>:<record number>``; category ``sharegpt``.
- ``shared-prefix:<groups>x<questions>[:<system words>:<question words>]``: ``groups`` system prompts,
  each followed by ``questions`` different questions (prompt text ``system + "\\n\\n" + question``, as
  SGLang's generated-shared-prefix dataset joins them), words drawn from a fixed vocabulary by a seeded
  generator, so the same spec and seed give the same prompts everywhere. Category ``shared-prefix``;
  prompt ids ``sp-g<group>-q<question>``. Defaults: 512 system words, 64 question words.

Sources with a module of their own, each dispatched from here by its prefix (:func:`_own_modules`):
``trace:<path>`` (:mod:`.trace_replay`), ``long-context:<tokens>[x<count>]`` (:mod:`.long_context`),
``specbench:<path>`` (:mod:`.specbench`).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .prompts import PromptError

SHAREGPT_PREFIX = "sharegpt:"
SHARED_PREFIX_PREFIX = "shared-prefix:"
SHAREGPT_CATEGORY = "sharegpt"
SHARED_PREFIX_CATEGORY = "shared-prefix"
SHARED_PREFIX_DEFAULTS = (512, 64)  # words per system prompt, per question
MAX_SHARED_PREFIX_PROMPTS = 100_000
MAX_SHARED_PREFIX_WORDS = 200_000
_SHARED_PREFIX = re.compile(r"^(\d+)x(\d+)(?::(\d+):(\d+))?$")
# A plain vocabulary (no tokenizer on the controller): every word is a few tokens in any BPE vocabulary.
_VOCAB = tuple(
    " ".join(
        (
            "the of and to in is for on with as by at from that this it be are was an or which not have has",
            "model server token cache prefix request batch draft verify accept decode prefill memory layer",
            "system user answer question explain describe compare list summarize write code function value",
            "time rate speed length number data result table figure test case error reason step plan policy",
            "river mountain city garden window paper music light market history science energy water field",
        )
    ).split()
)


class WorkloadError(PromptError):
    """A workload source is unusable; the message names the source, the field and the fix."""


def _own_modules() -> dict[str, Callable[[str, int], list[dict[str, Any]]]]:
    """Prefix -> reader of the sources kept in modules of their own (they import this one)."""
    from . import long_context, specbench, trace_replay

    return {
        trace_replay.TRACE_PREFIX: trace_replay.trace_records,
        long_context.LONG_CONTEXT_PREFIX: long_context.long_context_records,
        specbench.SPECBENCH_PREFIX: specbench.specbench_records,
    }


def is_workload(spec: str) -> bool:
    return spec.startswith((SHAREGPT_PREFIX, SHARED_PREFIX_PREFIX, *_own_modules()))


def _first_turn(rec: Any, where: str) -> str | None:
    """The first turn's text of a ShareGPT record; None when it has fewer than two turns."""
    if not isinstance(rec, dict):
        raise WorkloadError(f"{where}: expected a JSON object with a 'conversations' list")
    turns = rec.get("conversations", rec.get("conversation"))
    if not isinstance(turns, list):
        raise WorkloadError(
            f"{where}: no 'conversations' list; give [{{'from': 'human', 'value': '...'}}, ...]"
        )
    if len(turns) < 2:
        return None
    first = turns[0]
    value = first.get("value") if isinstance(first, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise WorkloadError(f"{where}: conversations[0] needs a non-empty string 'value'")
    return value


def read_source_bytes(path: Path, kind: str, hint: str = "") -> tuple[bytes, str]:
    """A source file's bytes and UTF-8 text; WorkloadError naming the ``kind`` of file, the path and why
    (plus ``hint``, what the file should be) when it cannot be read or is not UTF-8 text."""
    tail = f"; {hint}" if hint else ""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WorkloadError(f"cannot read {kind} file {path}: {exc.strerror or exc}{tail}") from None
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{kind} file {path} is not UTF-8 text (byte {exc.start}){tail}") from None


def _records(path: Path) -> list[tuple[str, Any]]:
    """(where, record) of a JSON list or a JSONL file."""
    _data, text = read_source_bytes(path, "ShareGPT")
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise WorkloadError(
                f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); give a JSON list or JSONL"
            ) from None
        return [(f"{path}[{i}]", rec) for i, rec in enumerate(data)]
    out = []
    for no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s:
            continue
        try:
            out.append((f"{path}:{no}", json.loads(s)))
        except json.JSONDecodeError as exc:
            raise WorkloadError(
                f"{path}:{no}: not valid JSON ({exc.msg}); one conversation per line"
            ) from None
    return out


def sharegpt_records(path: str | Path) -> list[dict[str, Any]]:
    """Prompt records (``id``, ``category``, ``prompt``) of a ShareGPT file's first turns."""
    p = Path(path).expanduser()
    out: list[dict[str, Any]] = []
    for n, (where, rec) in enumerate(_records(p)):
        value = _first_turn(rec, where)
        if value is None:
            continue
        rid = rec.get("id")
        pid = str(rid) if isinstance(rid, (str, int)) and not isinstance(rid, bool) else f"{p.stem}:{n}"
        out.append({"id": pid, "category": SHAREGPT_CATEGORY, "prompt": value})
    if not out:
        raise WorkloadError(f"ShareGPT file {p} holds no conversation with two turns or more")
    return out


def parse_shared_prefix(spec: str) -> tuple[int, int, int, int]:
    """(groups, questions per group, system words, question words) of a ``shared-prefix:`` spec."""
    raw = spec[len(SHARED_PREFIX_PREFIX) :].strip()
    m = _SHARED_PREFIX.match(raw)
    usage = (
        "use shared-prefix:<groups>x<questions>[:<system words>:<question words>], e.g. shared-prefix:4x16"
    )
    if not m:
        raise WorkloadError(f"bad shared-prefix spec {spec!r}; {usage}")
    groups, questions = int(m.group(1)), int(m.group(2))
    sys_words = int(m.group(3)) if m.group(3) else SHARED_PREFIX_DEFAULTS[0]
    q_words = int(m.group(4)) if m.group(4) else SHARED_PREFIX_DEFAULTS[1]
    if min(groups, questions, sys_words, q_words) < 1:
        raise WorkloadError(f"shared-prefix spec {spec!r}: every number must be >= 1; {usage}")
    if groups * questions > MAX_SHARED_PREFIX_PROMPTS or max(sys_words, q_words) > MAX_SHARED_PREFIX_WORDS:
        raise WorkloadError(
            f"shared-prefix spec {spec!r}: at most {MAX_SHARED_PREFIX_PROMPTS} prompts and "
            f"{MAX_SHARED_PREFIX_WORDS} words per part; use smaller numbers"
        )
    return groups, questions, sys_words, q_words


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_VOCAB) for _ in range(n))


def shared_prefix_records(spec: str, seed: int) -> list[dict[str, Any]]:
    """Prompt records of ``groups`` x ``questions`` prompts sharing their group's system prompt."""
    groups, questions, sys_words, q_words = parse_shared_prefix(spec)
    rng = random.Random(f"shared-prefix:{seed}")
    systems = [f"System prompt {g}. " + _words(rng, sys_words) for g in range(groups)]
    out = []
    for g, system in enumerate(systems):
        for q in range(questions):
            question = f"Question {q}: " + _words(rng, q_words) + "?"
            out.append(
                {
                    "id": f"sp-g{g}-q{q}",
                    "category": SHARED_PREFIX_CATEGORY,
                    "prompt": f"{system}\n\n{question}",
                }
            )
    return out


def workload_records(spec: str, seed: int) -> list[dict[str, Any]]:
    """Prompt records of a ``sharegpt:`` or ``shared-prefix:`` source."""
    if spec.startswith(SHAREGPT_PREFIX):
        path = spec[len(SHAREGPT_PREFIX) :].strip()
        if not path:
            raise WorkloadError(f"bad source {spec!r}; give a path, e.g. sharegpt:/data/sharegpt.json")
        return sharegpt_records(path)
    if spec.startswith(SHARED_PREFIX_PREFIX):
        return shared_prefix_records(spec, seed)
    for prefix, reader in _own_modules().items():
        if spec.startswith(prefix):
            return reader(spec, seed)
    raise WorkloadError(
        f"unknown workload source {spec!r}; use {SHAREGPT_PREFIX}<path> or {SHARED_PREFIX_PREFIX}<N>x<M>"
    )
