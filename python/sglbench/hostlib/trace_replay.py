"""Timestamped trace replay: Mooncake-format traces read on the controller, replayed on their own clock.

Stdlib only; ships as ``ansible.module_utils.sglbench_hostlib.trace_replay``. Both sides use it: the
controller turns ``trace:<path>`` into prompt records (``prompts.resolve_prompt_source`` through
``workloads``), the load generator on the host turns a point's rate into the trace's send times.

The file is the one SGLang's bench client replays (``sglang/benchmark/datasets/mooncake.py``,
``--dataset-name mooncake --use-trace-timestamps``): JSONL, one request per line,

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ..., 2353]}

``timestamp`` in ms (any origin; requests are replayed in timestamp order, as SGLang sorts them),
``input_length`` and ``output_length`` in tokens, ``hash_ids`` the blocks of :data:`BLOCK_TOKENS` tokens
the prompt is made of (the same id in two requests is the same block of prompt, so the server's prefix
cache sees the trace's sharing). As in SGLang, ``hash_ids`` may be missing (no shared block) and
``output_length`` defaults to 256; other fields are ignored. Each record becomes a prompt of exactly
``input_length`` token ids (:mod:`.token_blocks`: the blocks, then filler of its own), generating exactly
``output_length`` tokens (``max_new_tokens``, ``ignore_eos``), sent ``arrival_s`` = (timestamp − first
timestamp) / 1000 after the first.

The trace's speed is the point's rate: a rate point of R req/s replays the first ``num_prompts`` requests
with every gap scaled by one factor, so that their mean rate is R (the speed-up over the trace's own clock
is R over the trace's own mean rate; the point's summary says both, ``trace_replay``). Prompt ids are
``<file stem>@<first 12 hex of the file's sha256>:<line>``: the prompt records (and so the attempt's
identity hash) change whenever a byte of the file does, and the point's hash holds its rate.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .token_blocks import BLOCK_TOKENS, MAX_TOKENS
from .workloads import WorkloadError, read_source_bytes

TRACE_PREFIX = "trace:"
TRACE_CATEGORY = "trace"
DEFAULT_OUTPUT_LENGTH = 256  # SGLang's default when a record has no output_length
MAX_TRACE_REQUESTS = 1_000_000
_USAGE = "use trace:<path> with a Mooncake-format JSONL file, e.g. trace:/data/mooncake_trace.jsonl"


@dataclass(frozen=True)
class TraceRequest:
    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def _int_field(rec: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = rec.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise WorkloadError(
            f"{where}: '{key}' must be an integer from 1 to {MAX_TOKENS} tokens, got {value!r}"
        )
    return value


def parse_request(rec: Any, line: int, where: str) -> TraceRequest:
    """One trace line; WorkloadError naming the line and the field when it is not a request."""
    if not isinstance(rec, dict):
        raise WorkloadError(f"{where}: expected an object with 'timestamp', 'input_length', 'output_length'")
    ts = rec.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts) or ts < 0:
        raise WorkloadError(f"{where}: 'timestamp' must be a number of ms >= 0, got {ts!r}")
    hash_ids = rec.get("hash_ids", [])
    if not isinstance(hash_ids, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in hash_ids
    ):
        raise WorkloadError(f"{where}: 'hash_ids' must be a list of block ids (integers >= 0)")
    default_len = len(hash_ids) * BLOCK_TOKENS if hash_ids else None
    return TraceRequest(
        line=line,
        timestamp_ms=float(ts),
        input_length=_int_field(rec, "input_length", where, default_len),
        output_length=_int_field(rec, "output_length", where, DEFAULT_OUTPUT_LENGTH),
        hash_ids=tuple(hash_ids),
    )


def read_trace(path: str | Path) -> tuple[list[TraceRequest], str]:
    """The requests of a trace file in timestamp order (stable) and the file's sha256."""
    p = Path(path).expanduser()
    data, text = read_source_bytes(p, "trace", _USAGE)
    out: list[TraceRequest] = []
    for no, raw in enumerate(text.splitlines(), start=1):
        s = raw.strip()
        if not s:
            continue
        where = f"{p}:{no}"
        try:
            rec = json.loads(s)
        except (json.JSONDecodeError, RecursionError) as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise WorkloadError(f"{where}: not valid JSON ({msg}); one request object per line") from None
        out.append(parse_request(rec, no, where))
        if len(out) > MAX_TRACE_REQUESTS:
            raise WorkloadError(f"trace file {p} holds more than {MAX_TRACE_REQUESTS} requests; cut it")
    if not out:
        raise WorkloadError(f"trace file {p} holds no requests; {_USAGE}")
    out.sort(key=lambda r: r.timestamp_ms)
    return out, hashlib.sha256(data).hexdigest()


def trace_path(spec: str) -> str:
    path = spec[len(TRACE_PREFIX) :].strip()
    if not path:
        raise WorkloadError(f"bad source {spec!r}; {_USAGE}")
    return path


def trace_records(spec: str, seed: int = 0) -> list[dict[str, Any]]:
    """Prompt records of a ``trace:<path>`` source, in timestamp order (``seed`` plays no part)."""
    del seed  # a trace is replayed as it is
    path = Path(trace_path(spec)).expanduser()
    requests, sha = read_trace(path)
    t0 = requests[0].timestamp_ms
    name = f"{path.stem}@{sha[:12]}"
    out = []
    for r in requests:
        pid = f"{name}:{r.line}"
        out.append(
            {
                "id": pid,
                "category": TRACE_CATEGORY,
                "token_blocks": {"blocks": list(r.hash_ids), "length": r.input_length, "salt": pid},
                "max_new_tokens": r.output_length,
                "arrival_s": (r.timestamp_ms - t0) / 1000.0,
            }
        )
    return out


# -- the host side: a point's send times --------------------------------------------------------------
def timed(prompts: Sequence[Any]) -> bool:
    """True when the prompts are a trace (every one has its ``arrival_s``); ValueError for a mix."""
    n = sum(1 for p in prompts if p.arrival_s is not None)
    if n and n != len(prompts):
        raise ValueError(
            f"{n} of {len(prompts)} prompts carry trace send times (arrival_s): a trace source cannot be "
            "mixed with other prompt sets; give it alone"
        )
    return bool(n)


@dataclass(frozen=True)
class Replay:
    """The send times of one trace point and how they relate to the trace's own clock."""

    times: list[float]  # s from the point's start, one per request sent
    own_rate: float | None  # the replayed window's mean rate on the trace's clock (req/s)
    speedup: float | None  # times are the trace's gaps divided by this

    @property
    def window_rate(self) -> float | None:
        """Mean rate of the times as sent (the self-check's target rate)."""
        n = len(self.times)
        return (n - 1) / self.times[-1] if n > 1 and self.times[-1] > 0 else None

    def summary(self, rate: float) -> dict[str, Any]:
        return {
            "requests": len(self.times),
            "rate": "inf" if math.isinf(rate) else rate,
            "own_rate": self.own_rate,
            "speedup": self.speedup,
        }


def replay_schedule(
    arrivals: Sequence[float], rate: float, n: int, duration_s: float | None = None
) -> Replay:
    """Send times of the first ``n`` requests whose trace send times are ``arrivals`` (sorted), scaled so
    their mean rate is ``rate`` (``inf``: all at once), then cut at ``duration_s``."""
    window = list(arrivals[:n])
    if not window:
        raise ValueError("the trace holds no request to replay")
    span = window[-1] - window[0]
    own = (len(window) - 1) / span if span > 0 else None
    if math.isinf(rate):
        return Replay([0.0] * len(window), own, math.inf)
    if own is None:
        if len(window) > 1:
            raise ValueError(
                f"the first {len(window)} requests of the trace share one timestamp: no rate to scale; "
                "use request_rate inf (all at once) or more requests"
            )
        return Replay([0.0], None, None)
    speedup = rate / own
    times = [(a - window[0]) / speedup for a in window]
    if duration_s is not None:
        times = [t for t in times if t < duration_s]
    return Replay(times, own, speedup)
