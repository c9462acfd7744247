"""SpecBench and SPEED-Bench question files: categorised prompts for speculative decoding.

Stdlib only; ships as ``ansible.module_utils.sglbench_hostlib.specbench``, but runs on the controller:
``specbench:<path>`` becomes prompt records there (``prompts.resolve_prompt_source`` through
``workloads``).

The file is JSONL, one question per line, as Spec-Bench's ``question.jsonl`` and the SPEED-Bench JSONL
SGLang's bench client reads (``sglang/benchmark/datasets/speed_bench.py``) give it:

    {"question_id": 81, "category": "writing", "turns": ["Compose a travel blog post ...", "Rewrite ..."]}

``turns`` is the list of the user's turns; the first is the prompt (as SGLang's SPEED-Bench reader takes
it; a later turn needs the model's answer to the earlier ones). ``category`` becomes the prompt's
category, so the acceptance tables (``sglbench summarize``, the report) show acceptance per category
(Spec-Bench: ``writing``, ``roleplay``, ``reasoning``, ``math``, ``coding``, ``extraction``, ``stem``,
``humanities``, ``translation``, ``summarization``, ``qa``, ``math_reasoning``, ``rag``; SPEED-Bench:
``low_entropy``, ``mixed``, ``high_entropy``); a line without one gets ``specbench``. The prompt id is
``question_id`` (or ``id``) when the line has one, else ``<file stem>:<line>``. Other fields are ignored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .workloads import WorkloadError, read_source_bytes

SPECBENCH_PREFIX = "specbench:"
DEFAULT_CATEGORY = "specbench"
_USAGE = "use specbench:<path> with a JSONL file of {'question_id', 'category', 'turns': [...]} lines"


def _question(rec: Any, where: str, default_id: str) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise WorkloadError(f"{where}: expected a JSON object with a 'turns' list; {_USAGE}")
    turns = rec.get("turns")
    if not isinstance(turns, list) or not turns or not isinstance(turns[0], str) or not turns[0].strip():
        raise WorkloadError(f"{where}: 'turns' must be a list whose first entry is the prompt text")
    category = rec.get("category", DEFAULT_CATEGORY)
    if not isinstance(category, str) or not category.strip():
        raise WorkloadError(f"{where}: 'category' must be a non-empty string, got {category!r}")
    qid = rec.get("question_id", rec.get("id"))
    pid = str(qid) if isinstance(qid, (str, int)) and not isinstance(qid, bool) else default_id
    return {"id": pid, "category": category, "prompt": turns[0]}


def specbench_records(spec: str, seed: int = 0) -> list[dict[str, Any]]:
    """Prompt records (first turns, with their categories) of a ``specbench:<path>`` file."""
    del seed  # the file is taken as it is
    raw = spec[len(SPECBENCH_PREFIX) :].strip()
    if not raw:
        raise WorkloadError(f"bad source {spec!r}; {_USAGE}")
    p = Path(raw).expanduser()
    _data, text = read_source_bytes(p, "SpecBench", _USAGE)
    out = []
    for no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s:
            continue
        try:
            rec = json.loads(s)
        except (json.JSONDecodeError, RecursionError):
            raise WorkloadError(f"{p}:{no}: not valid JSON; one question object per line") from None
        out.append(_question(rec, f"{p}:{no}", f"{p.stem}:{no}"))
    if not out:
        raise WorkloadError(f"SpecBench file {p} holds no questions; {_USAGE}")
    return out
