"""Controller-side Jinja filters of the benchmark step (docs/records.md, "Resumable results").

``sglbench_attempt_identity``: identity hash of a config attempt (:func:`sglbench.resume.attempt_identity`).
``sglbench_prompt_records``: prompt sets (shipped names, ``synthetic:<len>``, ``sharegpt:<path>``,
``shared-prefix:<N>x<M>``, ``multi-turn:<S>x<T>``, ``sharegpt-turns:<path>``, ``trace:<path>``,
``long-context:<tokens>``, ``specbench:<path>``, JSONL paths) as the prompt records the
``sglbench_prompt_bench`` module takes (:mod:`sglbench.hostlib.prompts`).
The implementations live once in the package (standard library only); this file only exposes them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)

from ansible.errors import AnsibleFilterError  # noqa: E402

from sglbench import resume  # noqa: E402
from sglbench.hostlib import prompts, trace_replay  # noqa: E402


def sglbench_attempt_identity(parts: Any) -> dict[str, Any]:
    """``{{ {...defining inputs...} | sglbench_attempt_identity }}`` -> ``{"hash": ..., "doc": ...}``."""
    try:
        return resume.attempt_identity(parts)
    except resume.ResumeError as err:
        raise AnsibleFilterError(f"sglbench_attempt_identity: {err}") from err


def sglbench_prompt_records(sets: Any, seed: int = 0) -> list[dict[str, Any]]:
    """``{{ ['math', 'code', '/path/mine.jsonl'] | sglbench_prompt_records }}`` -> prompt records."""
    specs = [sets] if isinstance(sets, str) else list(sets or [])
    if not specs:
        raise AnsibleFilterError("sglbench_prompt_records: no prompt set given (e.g. [math, code])")
    out: list[prompts.Prompt] = []
    for spec in specs:
        try:
            out.extend(prompts.resolve_prompt_source(str(spec), seed=int(seed)))
        except prompts.PromptError as err:
            raise AnsibleFilterError(f"sglbench_prompt_records: prompt set {spec!r}: {err}") from err
    try:
        trace_replay.timed(out)  # a trace is replayed alone: said here, before a server starts
    except ValueError as err:
        raise AnsibleFilterError(f"sglbench_prompt_records: prompt sets {specs!r}: {err}") from err
    return [p.to_param() for p in out]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "sglbench_attempt_identity": sglbench_attempt_identity,
            "sglbench_prompt_records": sglbench_prompt_records,
        }
