"""Long-context prompts: seeded token ids of one length, and the check that prompts fit the context.

Stdlib only; ships as ``ansible.module_utils.sglbench_hostlib.long_context``.
``long-context:<tokens>[x<count>]`` is read on the controller (``prompts.resolve_prompt_source``
through ``workloads``): ``count`` prompts (default :data:`DEFAULT_COUNT`) of exactly ``tokens`` token
ids each, named by the bench seed (the same spec and seed give the same ids everywhere, another seed
other ids), built on the host from their ``token_blocks`` (:mod:`.token_blocks`), so the records stay
small whatever the length. No two prompts share a prefix. Category ``long-context-<tokens>``; prompt
ids ``long-<tokens>-<i>``.

On the host the load generator checks, before any load, that every prompt whose length it knows (token
ids) fits the served context with its output (:func:`check_fits`); SGLang itself rejects such a request.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .token_blocks import MAX_TOKENS
from .workloads import WorkloadError

LONG_CONTEXT_PREFIX = "long-context:"
DEFAULT_COUNT = 16
MAX_COUNT = 100_000
_SPEC = re.compile(r"^(\d+)(?:x(\d+))?$")
_USAGE = "use long-context:<tokens>[x<count>], e.g. long-context:32768x8"


def parse_long_context(spec: str) -> tuple[int, int]:
    """(tokens, count) of a ``long-context:`` spec."""
    raw = spec[len(LONG_CONTEXT_PREFIX) :].strip()
    m = _SPEC.match(raw)
    if not m:
        raise WorkloadError(f"bad long-context spec {spec!r}; {_USAGE}")
    tokens, count = int(m.group(1)), int(m.group(2) or DEFAULT_COUNT)
    if not 1 <= tokens <= MAX_TOKENS or not 1 <= count <= MAX_COUNT:
        raise WorkloadError(
            f"long-context spec {spec!r}: tokens must be 1 to {MAX_TOKENS} and count 1 to {MAX_COUNT}; "
            + _USAGE
        )
    return tokens, count


def long_context_records(spec: str, seed: int = 0) -> list[dict[str, Any]]:
    """Prompt records of a ``long-context:<tokens>[x<count>]`` source."""
    tokens, count = parse_long_context(spec)
    return [
        {
            "id": f"long-{tokens}-{i}",
            "category": f"long-context-{tokens}",
            "token_blocks": {"blocks": [], "length": tokens, "salt": f"long-context:{seed}:{tokens}:{i}"},
        }
        for i in range(count)
    ]


def served_context(server_info: Mapping[str, Any] | None, models: Mapping[str, Any] | None) -> int | None:
    """The context length the server serves: ``--context-length`` when the launch set it
    (``/server_info`` ``context_length``), else the model's (``/v1/models`` ``max_model_len``)."""
    ctx = (server_info or {}).get("context_length")
    if isinstance(ctx, int) and not isinstance(ctx, bool) and ctx > 0:
        return ctx
    data = (models or {}).get("data")
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], Mapping) else {}
    mml = first.get("max_model_len")
    return mml if isinstance(mml, int) and not isinstance(mml, bool) and mml > 0 else None


def check_fits(prompts: Sequence[Any], context: int | None, max_new_tokens: int) -> None:
    """ValueError (one line, naming the first prompt and the fix) when a token-id prompt and its output do
    not fit ``context`` tokens; nothing to check when the context is unknown."""
    if context is None:
        return
    for p in prompts:
        if p.token_blocks is not None:
            n_in = p.token_blocks.length
        elif p.input_ids is not None:
            n_in = len(p.input_ids)
        else:
            continue  # text: its token count is the server's to know
        n_out = p.max_new_tokens or max_new_tokens
        if n_in + n_out > context:
            raise ValueError(
                f"prompt {p.id!r} ({p.category}) is {n_in} input + {n_out} output tokens, more than the "
                f"server's context length {context}; use prompts of at most {context - n_out} tokens "
                "(long-context:<tokens>) or a config with a longer --context-length"
            )
