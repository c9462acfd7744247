"""The deployment answer's documents: ``breakeven.json``, ``frontier.json``, ``limits.json`` of one run.

One dataclass per document and per nested object, written with :func:`to_json` and read with
:func:`read_document`, which checks every field's type against the dataclass and raises
:class:`~sglbench.hostlib.result_schema.RecordError` naming the file and the dotted field. The schema ids
are declared in ``hostlib/sglang_facts.py``; every field is documented in ``docs/deploy.md``. Numbers a
document cannot give (no interval without a noise estimate, a bound beyond the measured range) are
``null``, never NaN: the files are plain JSON.
"""

from __future__ import annotations

import json
import math
import types
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

from sglbench.hostlib import sglang_facts as facts
from sglbench.hostlib.result_schema import RecordError

BREAKEVEN_FILE = "breakeven.json"
FRONTIER_FILE = "frontier.json"
LIMITS_FILE = "limits.json"


def finite(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing, NaN or infinite (JSON has neither)."""
    if value is None:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


# -- shared blocks --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    """What a document was computed from: the run's records (a digest of every ``record.json``) and the
    bootstrap settings. A reader uses a file only when both still match (``deploy/store.py``)."""

    records: int
    records_sha256: str
    seed: int
    n_boot: int
    ci_level: float


@dataclass(frozen=True)
class Interval:
    """A value with its 95% interval. A bound is null when there is no noise estimate, or when it lies
    beyond the measured range: then ``*_beyond`` says on which side (``below`` the lowest level or
    ``above`` the highest), else it is empty."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_low_beyond: str = ""
    ci_high_beyond: str = ""


# -- breakeven.json ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpeedupLevel:
    """One load level of a speculative config against its baseline."""

    point: str
    level: float
    measured: str  # "both", "config" (the baseline interpolated) or "baseline" (the config interpolated)
    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    verdict: str  # "faster" (CI above 1), "slower" (CI below 1), "within noise", "no CI"
    valid: bool


@dataclass(frozen=True)
class Crossover:
    """Where the config's speedup over the baseline falls to 1 (see ``deploy/breakeven.py``)."""

    status: str  # "crosses", "faster throughout", "not faster at the lowest level", "no common levels"
    estimate: Interval
    between: list[str] = field(default_factory=list)  # the two measured levels it lies between
    replicates_crossing: float | None = None  # share of bootstrap replicates that cross in range
    crossings: int = 0  # how often the point estimates cross 1 (more than one: not monotone)
    range_low: float | None = None  # the lowest and highest level compared (where an open bound starts)
    range_high: float | None = None


@dataclass(frozen=True)
class Pair:
    """One speculative config against the ``algorithm: none`` config of its group."""

    host: str
    tp: int
    model_path: str | None
    prompt_set: str
    load: str  # "concurrency" or "rate"
    config: str
    algorithm: str
    baseline: str
    levels: list[SpeedupLevel]
    faster_levels: list[float]  # levels whose speedup CI lies above 1
    faster_up_to: float | None  # last level of the run of faster levels from the lowest one
    crossover: Crossover


@dataclass(frozen=True)
class Segment:
    """One stretch of the deploy table: the config to run over a range of measured levels."""

    config: str | None  # None: no config meets the SLO there
    algorithm: str | None
    from_point: str
    to_point: str
    from_level: float
    to_level: float
    speedup_min: float | None = None  # speedup over the baseline across the stretch (speculative only)
    speedup_max: float | None = None
    reason: str = ""


@dataclass(frozen=True)
class DeployRow:
    """The deployable answer for one host, TP, model, prompt set and load mode."""

    host: str
    tp: int
    model_path: str | None
    prompt_set: str
    load: str
    baseline: str | None
    segments: list[Segment]
    text: str  # "qwen27b-dflash up to concurrency 4, then qwen27b-ar (measured to concurrency 16)"
    breakeven: str | None = None  # config whose crossover the row quotes
    crossover: Crossover | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class BreakevenDoc:
    schema: str
    run_id: str
    simulated: bool
    cpu_engine: bool
    source: Source
    method: str
    pairs: list[Pair]
    deploy: list[DeployRow]


# -- frontier.json ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FrontierPoint:
    """One config at one TP size and load level, per GPU and per user."""

    config: str
    algorithm: str
    tp: int
    point: str
    load: str
    level: float
    tok_s: float
    tok_s_per_gpu: float
    tok_s_per_gpu_ci_low: float | None
    tok_s_per_gpu_ci_high: float | None
    tok_s_per_user: float | None  # 1000 / TPOT p50 (ms): each request's own decode rate
    e2e_ms_p50: float | None
    on_frontier: bool
    knee: bool
    valid: bool
    tp1_replicas_tok_s_per_gpu: float | None = None  # best TP1 per-GPU tok/s at >= this per-user rate
    vs_tp1_replicas: float | None = None  # tok_s_per_gpu / tp1_replicas_tok_s_per_gpu


@dataclass(frozen=True)
class FrontierGroup:
    host: str
    model_path: str | None
    prompt_set: str
    knee_rule: str
    knee_reason: str  # why there is no knee, empty when there is one
    points: list[FrontierPoint]


@dataclass(frozen=True)
class FrontierDoc:
    schema: str
    run_id: str
    simulated: bool
    cpu_engine: bool
    source: Source
    method: str
    groups: list[FrontierGroup]


# -- limits.json ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bounds:
    """What the server can hold, from the probe (``observed``) or else the capacity plan (``plan``)."""

    max_running_requests: int | None
    max_running_requests_source: str | None
    kv_tokens: int | None
    kv_tokens_source: str | None
    tokens_per_request: float | None
    tokens_per_request_source: str | None  # "request rows" (prompt + completion means) or None
    kv_requests: int | None  # kv_tokens // tokens_per_request


@dataclass(frozen=True)
class SloCheck:
    point: str
    key: str
    column: str
    limit: float
    value: float | None
    met: bool | None


@dataclass(frozen=True)
class SloVerdict:
    declared: dict[str, float]
    unjudged: list[str]  # declared keys this reader cannot judge
    met_up_to: float | None  # highest level with every lower level meeting every SLO
    first_failing: str | None
    failures: list[SloCheck]
    # searched levels the search did not judge: still short of points the client self-check found valid
    # after re-measuring (the first one stops the SLO walk like a failure: the answer errs low)
    untrusted: list[str] = field(default_factory=list)
    # searched levels judged on re-measured points, their invalid ones left out
    remeasured: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Limit:
    """Why one config's highest load is where it is (``deploy/limits.py``)."""

    host: str
    tp: int
    config: str
    algorithm: str
    model_path: str | None
    prompt_set: str
    load: str
    highest_point: str
    highest_level: float
    examined_point: str  # the level the label is about: the first failing the SLO, else the highest
    label: str  # "slot-bound", "kv-bound", "compute-bound", "slo-bound", "not reached"
    limit_level: float | None  # the highest level that holds (meets the SLO when one is declared)
    next_level: float | None  # the measured level after it, where it stopped holding (None: none)
    in_flight: float | None
    per_user_tok_s_lowest: float | None
    per_user_tok_s_examined: float | None
    bounds: Bounds
    slo: SloVerdict
    evidence: list[str]
    server_counters: dict[str, Any] | None = (
        None  # the server's own counters during the point: not read by the labels yet
    )


@dataclass(frozen=True)
class LimitsDoc:
    schema: str
    run_id: str
    simulated: bool
    cpu_engine: bool
    source: Source
    method: str
    limits: list[Limit]


SCHEMA_OF: dict[type, str] = {
    BreakevenDoc: facts.BREAKEVEN_SCHEMA,
    FrontierDoc: facts.FRONTIER_SCHEMA,
    LimitsDoc: facts.LIMITS_SCHEMA,
}
FILE_OF: dict[type, str] = {BreakevenDoc: BREAKEVEN_FILE, FrontierDoc: FRONTIER_FILE, LimitsDoc: LIMITS_FILE}


# -- writing and reading ------------------------------------------------------------------------------------
def to_json(doc: Any) -> bytes:
    """The document as indented JSON text (NaN refused: a number that cannot be given is null)."""
    return (json.dumps(asdict(doc), indent=1, allow_nan=False) + "\n").encode("utf-8")


T = TypeVar("T")


def read_document(cls: type[T], path: Path) -> T:
    """Read one document file as ``cls``; RecordError naming the file and field when it does not match."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RecordError(path, "<file>", f"cannot be read ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise RecordError(path, "<file>", f"is not JSON ({exc}); run sglbench summarize again") from None
    want = SCHEMA_OF[cls]
    got = data.get("schema") if isinstance(data, dict) else None
    if got != want:
        raise RecordError(path, "schema", f"is {got!r}; expected {want} (run sglbench summarize again)")
    return _build(cls, data, path, "")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _build(cls: type[T], data: Any, path: Path, where: str) -> T:
    if not isinstance(data, dict):
        raise RecordError(path, where or "<top level>", f"expected an object, got {_kind(data)}")
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in fields(cls):  # type: ignore[arg-type]
        name = f"{where}.{f.name}" if where else f.name
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise RecordError(path, name, "is missing")
            continue
        kwargs[f.name] = _value(hints[f.name], data[f.name], path, name)
    return cls(**kwargs)


def _value(hint: Any, value: Any, path: Path, where: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return _value(args[0], value, path, where)
    if hint is Any:
        return value
    if origin is list:
        if not isinstance(value, list):
            raise RecordError(path, where, f"expected a list, got {_kind(value)}")
        (item,) = typing.get_args(hint)
        return [_value(item, v, path, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise RecordError(path, where, f"expected an object, got {_kind(value)}")
        _, item = typing.get_args(hint)
        return {str(k): _value(item, v, path, f"{where}.{k}") for k, v in value.items()}
    if is_dataclass(hint):
        return _build(hint, value, path, where)  # type: ignore[arg-type]
    if hint is bool:
        if not isinstance(value, bool):
            raise RecordError(path, where, f"expected true/false, got {_kind(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecordError(path, where, f"expected an integer, got {_kind(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RecordError(path, where, f"expected a number, got {_kind(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise RecordError(path, where, f"expected a string, got {_kind(value)}")
        return value
    raise TypeError(f"{where}: no reader for {hint!r}")  # a dataclass field of a type this module lacks
