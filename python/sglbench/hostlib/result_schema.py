"""The result contract: every document a campaign writes, one typed model each, for writing and reading.

Pure standard library: ships to the GPU host as ``ansible.module_utils.sglbench_hostlib.result_schema`` and is
imported on the controller as ``sglbench.hostlib.result_schema``. Schema ids come from ``sglang_facts``.

- **Attempt record** (``record.json``, ``sglbench.attempt/1``): :class:`RecordFacts` (what the play
  gathered) -> :meth:`RecordFacts.to_dict` writes it (``plugins/action/sglbench_record.py``);
  :meth:`AttemptRecord.from_dict` reads it.
- **Benchmark summary** (``sglbench.bench/1``, the record's ``benchmark``): :func:`bench_summary` builds
  it, on the host (``loadgen.campaign_summary``) and on the controller (``resume.assemble_benchmark``);
  :meth:`Benchmark.from_dict` reads it, one :class:`BenchPoint` per load point and repeat.
- **Point file** (``points/<key>.json``, ``sglbench.point/1``): :class:`PointFile`.
- **Per-request row** (``requests.jsonl``): :class:`RequestRow` (the fields the controller reads, typed).
- **Point telemetry** (``telemetry`` of a point file and of its bench point): :class:`PointTelemetry`
  reads the figures ``sglbench.telemetry.derive`` computed on the controller; :data:`TELEMETRY_FIGURES`
  names each figure once (column, place in the document, label, unit) as :data:`METRICS` does for
  latency, and :data:`TELEMETRY_FLAGS` the point's warnings.
- **Metrics**: :data:`METRICS` names each latency metric once (its key in a point summary, label, unit,
  the statistics the summary table shows); every frame and table column derives from it with
  :meth:`Metric.column` (``ttft_ms`` + ``p50`` -> ``ttft_ms_p50``, the point summary's ``ttft_ms.p50``).

Reading is tolerant of older files (optional blocks missing or null, numbers written as strings); a
document that does not match raises :class:`RecordError` naming the file and the dotted field.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import metrics
from . import sglang_facts as facts

ATTEMPT_SCHEMA = facts.ATTEMPT_SCHEMA
BENCH_SCHEMA = facts.BENCH_SCHEMA
POINT_SCHEMA = facts.POINT_SCHEMA
OUTCOMES = ("ok", "skipped", "failed")
MAX_INT = 2**62  # integers in records (counts, TP sizes, ports, times) are far below this


# -- metrics: one spelling from host to report --------------------------------------------------------
@dataclass(frozen=True)
class Metric:
    """One latency metric: a distribution in every point summary, columns in every frame and table."""

    key: str  # the point summary's field (a distribution with p50/p90/p99/mean): "ttft_ms"
    label: str  # short name in table headers: "TTFT"
    unit: str  # "ms"
    meaning: str  # what it measures, for the report's notes and plot titles
    shown: tuple[str, ...] = ()  # statistics the summary table shows ("p50", "p99"); () = frames only
    digits: str = ".1f"  # display format of the table cells

    def column(self, stat: str) -> str:
        """The column holding ``stat`` of this metric: ``ttft_ms_p50`` (the summary's ``ttft_ms.p50``)."""
        return f"{self.key}_{stat}"

    @property
    def header(self) -> str:
        """The summary table's display header: ``TTFT p50/p99 ms``."""
        return f"{self.label} {'/'.join(self.shown)} {self.unit}"


STATS = ("p50", "p90", "p99", "mean")  # statistics of each distribution kept in the frames
METRICS: tuple[Metric, ...] = (
    Metric("ttft_ms", "TTFT", "ms", "time to first token", ("p50", "p99")),
    Metric("tpot_ms", "TPOT", "ms", "time per output token after the first", ("p50", "p99"), ".2f"),
    Metric("itl_ms", "ITL", "ms", "inter-token latency", ("p50", "p99"), ".2f"),
    Metric("e2e_ms", "E2E", "ms", "end-to-end request latency"),
)


def table_metrics() -> list[Metric]:
    """The metrics the summary table, its markdown and the report show, in table order."""
    return [m for m in METRICS if m.shown]


def point_metric_columns() -> list[str]:
    """Every latency column of the points frame: ``ttft_ms_p50`` ... ``e2e_ms_mean``."""
    return [m.column(s) for m in METRICS for s in STATS]


def table_metric_columns() -> list[str]:
    """The latency columns of the summary table, in order: ``ttft_ms_p50``, ``ttft_ms_p99``, ..."""
    return [m.column(s) for m in table_metrics() for s in m.shown]


@dataclass(frozen=True)
class Figure:
    """One telemetry figure of a point: a column in every frame, read from the point's ``telemetry``."""

    key: str  # the column in every frame and table: "j_per_token"
    path: tuple[str, ...]  # where it sits in the telemetry document: ("cost", "usd_per_mtok")
    label: str  # table header: "J/tok"
    unit: str
    meaning: str
    shown: bool = False  # a summary-table column (shown only when some point has the figure)
    digits: str = ".2f"  # display format
    # Against a time-scaled stand-in: "time" figures grow with the window (energy, J/token, cost) and are
    # divided by the scale, "rate" figures (per joule) multiplied by it; "" figures stay as read.
    scaled: str = ""


_T, _R = "time", "rate"
TELEMETRY_FIGURES: tuple[Figure, ...] = (
    Figure(
        "j_per_token",
        ("j_per_token",),
        "J/tok",
        "J",
        "GPU energy over the measured window (all the config's GPUs, nvidia-smi power) per output token",
        True,
        ".3f",
        _T,
    ),
    Figure(
        "usd_per_mtok",
        ("cost", "usd_per_mtok"),
        "$/Mtok",
        "USD",
        "the configured GPU-hour price x GPUs x measured window, per million output tokens",
        True,
        scaled=_T,
    ),
    Figure(
        "tokens_per_j",
        ("tokens_per_j",),
        "tok/J",
        "tokens",
        "output tokens per joule, all GPUs",
        False,
        ".3f",
        _R,
    ),
    Figure("energy_j", ("energy_j",), "energy", "J", "GPU energy over the measured window", False, ".0f", _T),
    Figure("power_mean_w", ("power_mean_w",), "power", "W", "mean board power, GPUs summed", digits=".0f"),
    Figure(
        "power_peak_w", ("power_peak_w",), "peak power", "W", "highest one-GPU power sample", digits=".0f"
    ),
    Figure("sm_clock_mean_mhz", ("sm_clock_mean_mhz",), "SM clock", "MHz", "mean SM clock", digits=".0f"),
    Figure("sm_util_mean_pct", ("sm_util_mean_pct",), "SM util", "%", "mean SM utilisation", digits=".0f"),
    Figure("throttled_share", ("throttled_share",), "throttled", "share", "share of the window throttled"),
    Figure("kv_usage_mean", ("server", "kv_usage_mean"), "KV use", "share", "mean KV pool usage"),
    Figure(
        "queue_peak", ("server", "queue_peak"), "queue peak", "requests", "most requests queued", digits=".0f"
    ),
    Figure(
        "running_mean",
        ("server", "running_mean"),
        "running",
        "requests",
        "mean running requests",
        digits=".1f",
    ),
    Figure(
        "spec_accept_length_mean",
        ("server", "spec_accept_length_mean"),
        "srv accept",
        "tokens",
        "accept length",
    ),
    Figure("retractions", ("server", "retractions"), "retracted", "requests", "retractions", digits=".0f"),
    Figure("steady_s", ("steady", "seconds"), "steady", "s", "steady window (MSER-5)", False, ".1f", _T),
    Figure(
        "steady_j_per_token",
        ("steady", "j_per_token"),
        "steady J/tok",
        "J",
        "J/token, steady window",
        False,
        ".3f",
        _T,
    ),
    Figure(
        "steady_power_mean_w",
        ("steady", "power_mean_w"),
        "steady power",
        "W",
        "mean power, steady window",
        digits=".0f",
    ),
    Figure(
        "clock_offset_s",
        ("clock", "offset_s"),
        "clock offset",
        "s",
        "host clock - controller clock",
        digits=".3f",
    ),
    Figure(
        "clock_uncertainty_s", ("clock", "uncertainty_s"), "offset ±", "s", "offset uncertainty", digits=".3f"
    ),
)
# A point's telemetry warnings, in display order: a window that saw power or thermal throttling, no
# steady state, gaps in the samples, a GPU without samples, an unknown clock offset, host sampling errors.
TELEMETRY_FLAGS = ("throttled", "not_steady", "gaps", "missing_gpu", "clock_unknown", "sampling_errors")


def telemetry_columns() -> list[str]:
    """Every telemetry column of the points frame, in :data:`TELEMETRY_FIGURES` order."""
    return [f.key for f in TELEMETRY_FIGURES]


def table_telemetry() -> list[Figure]:
    """The telemetry figures the summary table shows (when some point has them)."""
    return [f for f in TELEMETRY_FIGURES if f.shown]


def table_telemetry_columns() -> list[str]:
    """Their columns, in order: ``j_per_token``, ``usd_per_mtok``."""
    return [f.key for f in table_telemetry()]


# -- typed reading with errors that name the field ------------------------------------------------------
class RecordError(ValueError):
    """A record file does not match the contract; the message names the file, the field and the fix."""

    def __init__(self, path: Path | str, field_name: str, message: str) -> None:
        super().__init__(f"{path}: field '{field_name}': {message}")
        self.path = str(path)
        self.field = field_name
        self.message = message


def _digits(value: int) -> int:
    return len(str(abs(value)))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


class Reader:
    """Typed access to a JSON object with error messages naming the file and the dotted field path."""

    def __init__(self, path: Path | str, data: Any, prefix: str = "") -> None:
        self.path = path
        self.prefix = prefix
        if not isinstance(data, Mapping):
            raise RecordError(path, prefix or "<top level>", f"expected a JSON object, got {_kind(data)}")
        self.data = data

    def name(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def sub(self, key: str, *, required: bool = False) -> Reader | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise RecordError(self.path, self.name(key), "is missing (an object is required)")
            return None
        return Reader(self.path, value, self.name(key))

    def str_(self, key: str, *, required: bool = False, choices: tuple[Any, ...] | None = None) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise RecordError(self.path, self.name(key), "is missing (a string is required)")
            return None
        if not isinstance(value, str):
            raise RecordError(self.path, self.name(key), f"expected a string, got {_kind(value)}")
        if choices is not None and value not in choices:
            raise RecordError(
                self.path, self.name(key), f"is {value!r}; expected one of {', '.join(map(str, choices))}"
            )
        return value

    def int_(self, key: str, *, required: bool = False) -> int | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise RecordError(self.path, self.name(key), "is missing (an integer is required)")
            return None
        if isinstance(value, bool):
            raise RecordError(self.path, self.name(key), f"expected an integer, got {_kind(value)}")
        if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 40:
            value = int(value)  # Jinja sometimes renders numbers as strings
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise RecordError(self.path, self.name(key), f"expected an integer, got {_kind(value)}")
        if abs(value) > MAX_INT:
            raise RecordError(self.path, self.name(key), f"is out of range ({_digits(value)} digits)")
        return value

    def float_(self, key: str) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            raise RecordError(self.path, self.name(key), f"expected a number, got {_kind(value)}")
        if isinstance(value, int) and abs(value) > MAX_INT:
            raise RecordError(self.path, self.name(key), f"is out of range ({_digits(value)} digits)")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise RecordError(self.path, self.name(key), f"expected a number, got {_kind(value)}")

    def bool_(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise RecordError(self.path, self.name(key), f"expected true/false, got {_kind(value)}")

    def dict_(self, key: str) -> dict[str, Any]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise RecordError(self.path, self.name(key), f"expected an object, got {_kind(value)}")
        return dict(value)

    def list_(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise RecordError(self.path, self.name(key), f"expected a list, got {_kind(value)}")
        return value


def _as_int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return None


def stand_in_time_scale(server_info: Any) -> float | None:
    """``SGLBENCH_SIM_TIME_SCALE`` the SGLang stand-in reports in ``/server_info``
    (``sglbench_sim.time_scale``), or None for a real server (or a malformed value)."""
    sim = server_info.get("sglbench_sim") if isinstance(server_info, dict) else None
    scale = sim.get("time_scale") if isinstance(sim, dict) else None
    if isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0:
        return float(scale)
    return None


def launch_device(argv: list[str]) -> str | None:
    """The value of the last ``--device X`` / ``--device=X`` in a launch command line, else None."""
    device = None
    for i, arg in enumerate(argv):
        if arg == "--device" and i + 1 < len(argv):
            device = argv[i + 1]
        elif arg.startswith("--device="):
            device = arg.split("=", 1)[1]
    return device


# -- the benchmark summary (sglbench.bench/1) --------------------------------------------------------------
@dataclass(frozen=True)
class Distribution:
    """p50/p90/p99/mean of one latency metric (ms) for one benchmark point; None when not measured."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None

    @classmethod
    def from_reader(cls, r: Reader | None) -> Distribution:
        if r is None:
            return cls()
        return cls(**{s: r.float_(s) for s in STATS})


# Key of a point summary measured after the host guard ended an earlier client of the same campaign and
# unit (its connection to the controller was lost and Ansible ran the point again): what was ended and why
# (``host_guard.Takeover.as_dict()``: pid, started_at, killed, reason). Absent on every other point.
ENDED_CLIENT = "ended_client"


# Key in a point of a benchmark summary measured with the module's ``points`` option: the load generator's
# whole run for the point on the host (cache flushes, warm-up, measured window, counter reads), in seconds.
LOAD_S = "load_s"


def note_ended_client(summary: Mapping[str, Any], ended: Mapping[str, Any]) -> dict[str, Any]:
    """The benchmark summary with ``ended`` under :data:`ENDED_CLIENT` in each of its points."""
    points = [{**p, ENDED_CLIENT: dict(ended)} for p in summary.get("points") or []]
    return {**summary, "points": points}


@dataclass(frozen=True)
class PointTelemetry:
    """The telemetry figures of one point (``sglbench.telemetry.derive``; docs/records.md, "Telemetry")."""

    figures: dict[str, float | None]  # TELEMETRY_FIGURES key -> value
    flags: list[str] = field(default_factory=list)  # TELEMETRY_FLAGS that apply
    steady_status: str | None = None  # steady | not_steady | too_short | no_series
    throttle_reasons: list[str] = field(default_factory=list)
    gpus: list[int] = field(default_factory=list)
    error: str | None = None  # the raw document could not be used at all

    def figure(self, key: str) -> float | None:
        return self.figures.get(key)

    @classmethod
    def from_reader(cls, r: Reader) -> PointTelemetry:
        figures: dict[str, float | None] = {}
        for f in TELEMETRY_FIGURES:
            node: Reader | None = r
            for part in f.path[:-1]:
                node = node.sub(part) if node is not None else None
            figures[f.key] = node.float_(f.path[-1]) if node is not None else None
        steady = r.sub("steady")
        return cls(
            figures=figures,
            flags=[str(x) for x in r.list_("flags")],
            steady_status=steady.str_("status") if steady is not None else None,
            throttle_reasons=[str(x) for x in r.list_("throttle_reasons")],
            gpus=[int(g) for g in r.list_("gpus") if isinstance(g, int) and not isinstance(g, bool)],
            error=r.str_("error"),
        )


@dataclass(frozen=True)
class BenchPoint:
    """One load point and repeat of a benchmark summary's ``points`` list (what the controller reads)."""

    point: str
    concurrency: int | None
    request_rate: float | None
    repeat: int
    output_throughput_tok_s: float | None
    request_throughput: float | None
    duration_s: float | None
    total_output_tokens: int | None
    n_ok: int
    n_err: int
    latency: dict[str, Distribution]  # METRICS key -> distribution
    accept_length_mean: float | None
    valid: bool
    invalid_reasons: list[str] = field(default_factory=list)
    seed: int | None = None
    ended_client: dict[str, Any] | None = None  # ENDED_CLIENT: measured after ending a cut-off client
    load_s: float | None = None  # LOAD_S: the load generator's whole run for the point
    telemetry: PointTelemetry | None = None  # figures derived on the controller at commit; None: not sampled

    def dist(self, key: str) -> Distribution:
        """The distribution of metric ``key`` (``ttft_ms``); all None when the summary has none."""
        return self.latency.get(key, Distribution())

    @classmethod
    def from_reader(cls, r: Reader) -> BenchPoint:
        conc = r.int_("concurrency")
        rate = r.float_("request_rate")
        label = r.str_("point") or (f"c{conc}" if conc is not None else f"r{rate:g}" if rate else "?")
        return cls(
            point=label,
            concurrency=conc,
            request_rate=rate,
            repeat=r.int_("repeat") or 0,
            output_throughput_tok_s=r.float_("output_throughput_tok_s"),
            request_throughput=r.float_("request_throughput"),
            duration_s=r.float_("duration_s"),
            total_output_tokens=r.int_("total_output_tokens"),
            n_ok=r.int_("n_ok", required=True) or 0,
            n_err=r.int_("n_err") or 0,
            latency={m.key: Distribution.from_reader(r.sub(m.key)) for m in METRICS},
            accept_length_mean=r.float_("accept_length_mean"),
            valid=r.bool_("valid", default=True),
            invalid_reasons=[str(x) for x in r.list_("invalid_reasons")],
            seed=r.int_("seed"),
            ended_client=r.dict_(ENDED_CLIENT) or None,
            load_s=r.float_(LOAD_S),
            telemetry=PointTelemetry.from_reader(tel) if (tel := r.sub("telemetry")) is not None else None,
        )


@dataclass(frozen=True)
class Benchmark:
    """The benchmark summary of one attempt (one prompt set), as the controller reads it."""

    prompt_set: str
    simulated: bool
    points: list[BenchPoint]
    meta: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # expected points without a result (resume block)
    # The SLO-bounded search that chose the points (docs/records.md, "The SLO-bounded search"): its verdict
    # (limit_found, plan_limited, never_met, unresolved), limit, step, bound and every level judged; None
    # for the fixed ladder.
    search: dict[str, Any] | None = None

    @property
    def search_verdict(self) -> str | None:
        """``limit_found`` / ``plan_limited`` / ``never_met`` / ``unresolved``; None without a search (or
        when the search did not finish: the benchmark stopped at a failed point)."""
        verdict = (self.search or {}).get("verdict")
        return str(verdict) if verdict is not None else None

    @property
    def sim_time_scale(self) -> float | None:
        """The stand-in's ``SGLBENCH_SIM_TIME_SCALE`` during this benchmark (None: not the stand-in).

        The stand-in reports it in ``/server_info`` (``sglbench_sim.time_scale``); 0.01 means its
        startup and token timing ran a hundred times faster than the real server would.
        """
        return stand_in_time_scale(self.meta.get("server_info"))

    @classmethod
    def from_dict(cls, path: Path | str, data: Any, prefix: str, record_simulated: bool) -> Benchmark:
        """One summary document (``summary.json`` contents or the record's ``benchmark``)."""
        r = Reader(path, data, prefix)
        if "summary" in r.data and "points" not in r.data:  # {"summary": {...}, ...} wrapper
            inner = r.sub("summary", required=True)
            assert inner is not None
            r = inner
        schema = r.str_("schema")
        if schema is not None and schema.split("/")[0] != BENCH_SCHEMA.split("/")[0]:
            raise RecordError(path, r.name("schema"), f"is {schema!r}; expected {BENCH_SCHEMA}")
        meta = r.dict_("meta")
        prompt_set = r.str_("prompt_set") or meta.get("prompts") or meta.get("prompt_set") or "default"
        points = [
            BenchPoint.from_reader(Reader(path, p, r.name(f"points[{i}]")))
            for i, p in enumerate(r.list_("points"))
        ]
        simulated = r.bool_("simulated", default=False) or bool(meta.get("simulated")) or record_simulated
        resume = r.sub("resume")
        missing = [str(k) for k in resume.list_("missing")] if resume is not None else []
        search = r.data.get("search")
        if search is not None and not isinstance(search, Mapping):
            raise RecordError(path, r.name("search"), f"expected a JSON object or null, got {_kind(search)}")
        return cls(
            prompt_set=str(prompt_set),
            simulated=simulated,
            points=points,
            meta=meta,
            missing=missing,
            search=dict(search) if search is not None else None,
        )


def aggregates(points: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per load point label, in first-seen order: the point and its statistics over repeats."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for p in points:
        groups.setdefault(str(p.get("point")), []).append(p)
    return [
        {
            "point": label,
            "concurrency": group[0].get("concurrency"),
            "request_rate": group[0].get("request_rate"),
            **metrics.aggregate_repeats(group),
        }
        for label, group in groups.items()
    ]


def bench_summary(
    points: list[dict[str, Any]],
    meta: Mapping[str, Any],
    *,
    prompt_set: str | None = None,
    resume: Mapping[str, Any] | None = None,
    search: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The benchmark summary document (``sglbench.bench/1``): run meta, one entry per (point, repeat) in
    the order given, aggregates over repeats; ``prompt_set``, ``resume`` and the ``search`` that chose the
    points when the controller knows them."""
    doc: dict[str, Any] = {
        "schema": BENCH_SCHEMA,
        "simulated": any(bool(p.get("simulated")) for p in points) or bool(meta.get("simulated")),
    }
    if prompt_set is not None:
        doc["prompt_set"] = prompt_set
    doc.update(meta=dict(meta), points=list(points), aggregates=aggregates(points))
    if resume is not None:
        doc["resume"] = dict(resume)
    if search is not None:
        doc["search"] = dict(search)
    return doc


# -- the point file (sglbench.point/1) --------------------------------------------------------------------
POINT_FIELDS = ("point", "concurrency", "request_rate", "repeat", "seed")


@dataclass(frozen=True)
class PointFile:
    """``points/<key>.json``: one committed load point and repeat of a resumable attempt."""

    key: str
    hash: str | None
    point: dict[str, Any]  # POINT_FIELDS of the expected point
    outcome: str  # ok | failed
    error: str | None = None
    committed_at: float | None = None
    requests_file: str | None = None  # relative to the attempt directory
    summary: dict[str, Any] | None = None  # the point summary (one entry of the bench summary's points)
    meta: dict[str, Any] | None = None
    # Figures derived from the point's telemetry (PointTelemetry's document); None when none was sampled.
    telemetry: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        doc = {
            "schema": POINT_SCHEMA,
            "key": self.key,
            "hash": self.hash,
            "point": dict(self.point),
            "outcome": self.outcome,
            "error": self.error,
            "committed_at": self.committed_at,
            "requests_file": self.requests_file,
            "summary": self.summary,
            "meta": self.meta,
        }
        if self.telemetry is not None:
            doc["telemetry"] = self.telemetry
        return doc

    @classmethod
    def from_dict(cls, data: Any) -> PointFile | None:
        """The point file, or None when ``data`` is not an object (a damaged file is never reused)."""
        if not isinstance(data, Mapping):
            return None
        summary, meta, point = data.get("summary"), data.get("meta"), data.get("point")
        telemetry = data.get("telemetry")
        return cls(
            key=str(data.get("key") or ""),
            hash=data.get("hash"),
            point=dict(point) if isinstance(point, Mapping) else {},
            outcome=str(data.get("outcome")),
            error=data.get("error"),
            committed_at=data.get("committed_at"),
            requests_file=data.get("requests_file"),
            summary=dict(summary) if isinstance(summary, Mapping) else None,
            meta=dict(meta) if isinstance(meta, Mapping) else None,
            telemetry=dict(telemetry) if isinstance(telemetry, Mapping) else None,
        )

    @property
    def failed_requests(self) -> int | None:
        """How many measured requests failed (``summary.n_err``); None when the summary does not say."""
        n_err = (self.summary or {}).get("n_err")
        return n_err if isinstance(n_err, int) and not isinstance(n_err, bool) and n_err >= 0 else None

    def is_done(self, expected_hash: Any) -> bool:
        """Committed ``ok`` with the expected hash and not one failed request: reusable as it is."""
        return self.outcome == "ok" and self.hash == expected_hash and self.failed_requests == 0


# -- the per-request row (requests.jsonl) -----------------------------------------------------------------
_NUM = (int, float)
# Fields the controller reads from a row and the JSON types each may have (None is always allowed).
REQUEST_ROW_TYPES: dict[str, tuple[type, ...]] = {
    "point": (str,),
    "concurrency": _NUM,
    "repeat": _NUM,
    "prompt_set": (str,),
    "warmup": (bool, int),
    "sent_s": _NUM,
    "end_s": _NUM,
    "chunk_t": (list,),
    "chunk_tokens": (list,),
    "completion_tokens": _NUM,
    "prompt_tokens": _NUM,
    "spec_verify_ct": _NUM,
    "spec_accept_length": _NUM,
    "output_ids": (list,),
    "spec_accept_histogram": (list,),
}
# List fields of whole numbers (token ids, counts), stored as integer lists rather than floats.
REQUEST_INT_LISTS = frozenset({"output_ids", "spec_accept_histogram"})
# Per-request fields kept as they are in the requests frame (raw chunk timing is reduced to ttft/e2e).
REQUEST_FIELDS = (
    "idx",
    "prompt_id",
    "category",
    "prompt_tokens",
    "completion_tokens",
    "spec_verify_ct",
    "spec_accept_length",
    "finish_reason",
    "error",
)


# The element types a list field may hold, compared as a set of exact types (no per-element Python loop:
# rows carry hundreds of token ids each). JSON gives exactly int and float; bool is never a number here.
_INT_TYPES = frozenset({int})
_NUM_TYPES = frozenset({int, float})


def _bad_int_list(value: Any) -> bool:
    return not isinstance(value, list) or not set(map(type, value)) <= _INT_TYPES


def _bad_row_field(value: Any, types: tuple[type, ...]) -> bool:
    bad = not isinstance(value, types) or (isinstance(value, bool) and bool not in types)
    if not bad and isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
        bad = True
    if not bad and isinstance(value, list):
        bad = not set(map(type, value)) <= _NUM_TYPES
    return bad


@dataclass(frozen=True)
class RequestRow:
    """One row of ``requests.jsonl``: the load generator's request record tagged with its point.

    ``raw`` keeps every field as written; the typed accessors are what the frames derive from."""

    raw: dict[str, Any]

    @classmethod
    def from_dict(cls, path: Path | str, where: str, row: Any) -> RequestRow:
        """The row with its fields checked against :data:`REQUEST_ROW_TYPES`; RecordError otherwise."""
        if not isinstance(row, dict):
            raise RecordError(path, where, f"expected a JSON object per request, got {type(row).__name__}")
        for key, types in REQUEST_ROW_TYPES.items():
            v = row.get(key)
            if v is not None and key in REQUEST_INT_LISTS and _bad_int_list(v):
                raise RecordError(path, f"{where}.{key}", "expected a list of integers (token ids or counts)")
            if v is not None and _bad_row_field(v, types):
                want = "a list of numbers" if list in types else " or ".join(t.__name__ for t in types)
                raise RecordError(path, f"{where}.{key}", f"expected {want}, got {type(v).__name__}")
        return cls(row)

    @property
    def warmup(self) -> bool:
        return bool(self.raw.get("warmup"))

    @property
    def ok(self) -> bool:
        return self.raw.get("error") is None and self.raw.get("end_s") is not None

    def first_token_s(self) -> float | None:
        """Arrival of the first chunk that carried a token (client clock), None without one."""
        chunk_t, chunk_tokens = self.raw.get("chunk_t"), self.raw.get("chunk_tokens")
        if chunk_t is None or chunk_tokens is None:
            return None
        prev = 0
        for t, cum in zip(list(chunk_t), list(chunk_tokens), strict=False):
            if cum is not None and cum > prev:
                return float(t)
            prev = cum if cum is not None else prev
        return None

    def ttft_ms(self) -> float | None:
        first, sent = self.first_token_s(), self.raw.get("sent_s")
        return (first - sent) * 1000.0 if first is not None and sent is not None else None

    def e2e_ms(self) -> float | None:
        end, sent = self.raw.get("end_s"), self.raw.get("sent_s")
        return (end - sent) * 1000.0 if end is not None and sent is not None else None

    def accept_length(self) -> float | None:
        verify, completion = self.raw.get("spec_verify_ct"), self.raw.get("completion_tokens")
        return completion / verify if verify and completion else None


# -- the attempt record (sglbench.attempt/1): reading -----------------------------------------------------
@dataclass(frozen=True)
class ConfigSpec:
    """The config as the matrix defined it (``record.config``)."""

    name: str
    algorithm: str
    model_path: str | None = None
    draft_model_path: str | None = None
    port: int | None = None
    gpus: list[Any] = field(default_factory=list)
    args: dict[str, Any] = field(default_factory=dict)
    extra_args: list[Any] = field(default_factory=list)
    env: dict[str, Any] = field(default_factory=dict)

    @property
    def is_baseline(self) -> bool:
        return self.algorithm.lower() in ("none", "")

    @classmethod
    def from_reader(cls, cfg: Reader) -> ConfigSpec:
        return cls(
            name=cfg.str_("name", required=True) or "",
            algorithm=cfg.str_("algorithm") or "none",
            model_path=cfg.str_("model_path"),
            draft_model_path=cfg.str_("draft_model_path"),
            port=cfg.int_("port"),
            gpus=cfg.list_("gpus"),
            args=cfg.dict_("args"),
            extra_args=cfg.list_("extra_args"),
            env=cfg.dict_("env"),
        )


@dataclass(frozen=True)
class Failure:
    """Why an attempt did not produce results (``record.failure``)."""

    phase: str | None
    cause: str
    message: str = ""
    lines: list[str] = field(default_factory=list)
    task: str | None = None
    wait_outcome: str | None = None
    unit_state: dict[str, Any] | str | None = None  # systemd unit state (object) when known

    @classmethod
    def from_reader(cls, fr: Reader | None, outcome: str) -> Failure | None:
        """The recorded failure; a not-ok record without one gets an ``unknown`` cause."""
        if fr is None:
            if outcome == "ok":
                return None
            return cls(phase=None, cause="unknown", message="the record gives no failure details")
        wait = fr.data.get("wait_outcome")
        return cls(
            phase=fr.str_("phase"),
            cause=fr.str_("cause") or "unknown",
            message=fr.str_("message") or "",
            lines=[str(x) for x in fr.list_("lines")],
            task=fr.str_("task"),
            wait_outcome=str(wait) if wait is not None else None,
            unit_state=fr.data.get("unit_state"),
        )


@dataclass(frozen=True)
class Timings:
    """``record.timings`` as read; a key an older record lacks reads as None."""

    started_at: float | None = None
    ended_at: float | None = None
    total_s: float | None = None
    time_to_ready_s: float | None = None
    server_stop_s: float | None = None
    health_s: float | None = None
    stop_started_at: float | None = None
    start_started_at: float | None = None
    health_started_at: float | None = None
    moved_on_at: float | None = None
    bench_started_at: float | None = None
    done_at: float | None = None
    failure_reported_at: float | None = None
    record_started_at: float | None = None

    @classmethod
    def from_reader(cls, tr: Reader | None) -> Timings:
        if tr is None:
            return cls()
        return cls(**{k: tr.float_(k) for k in cls.__dataclass_fields__})


REQUEST_FILES = ("requests.parquet", "requests.jsonl", "bench/requests.parquet", "bench/requests.jsonl")


@dataclass(frozen=True)
class AttemptRecord:
    """One ``record.json`` as read: one config at one TP size on one host in one run."""

    path: Path
    run_id: str
    host: str
    instance: str
    tp: int
    config: ConfigSpec
    outcome: str
    simulated: bool
    failure: Failure | None = None
    timings: Timings = field(default_factory=Timings)
    plan: dict[str, Any] | None = None
    server_info: dict[str, Any] | None = None
    startup: dict[str, Any] | None = None
    benchmarks: list[Benchmark] = field(default_factory=list)
    argv: list[str] = field(default_factory=list)

    @property
    def attempt_dir(self) -> Path:
        return self.path.parent

    # Predicted vs observed capacity -----------------------------------------------------------------
    @property
    def kv_tokens_predicted(self) -> int | None:
        return _as_int((self.plan or {}).get("max_total_num_tokens"))

    @property
    def max_running_requests_predicted(self) -> int | None:
        return _as_int((self.plan or {}).get("max_running_requests"))

    @property
    def kv_tokens_observed(self) -> int | None:
        for src in (self.server_info, self.startup):
            v = _as_int((src or {}).get("max_total_num_tokens"))
            if v is not None:
                return v
        return None

    @property
    def max_running_requests_observed(self) -> int | None:
        v = _as_int((self.server_info or {}).get("effective_max_running_requests"))
        if v is not None:
            return v
        return _as_int((self.startup or {}).get("max_running_requests"))

    # What produced the figures -----------------------------------------------------------------------
    @property
    def device(self) -> str | None:
        """The ``--device`` the server was launched with (None: not given, SGLang's default, a GPU)."""
        return launch_device(self.argv)

    @property
    def cpu_engine(self) -> bool:
        """True when the real SGLang ran on its CPU engine (``--device cpu``, e.g. the real-SGLang sim host,
        docs/real-sglang.md): its figures are neither simulated nor GPU figures. The stand-in's records
        are ``simulated`` whatever their flags."""
        return not self.simulated and self.device == "cpu"

    def requests_file(self) -> Path | None:
        for name in REQUEST_FILES:
            p = self.attempt_dir / name
            if p.is_file():
                return p
        return None

    @classmethod
    def from_dict(
        cls,
        data: Any,
        path: Path | str = "<record>",
        side_summary: Callable[[], tuple[Path, Any] | None] | None = None,
    ) -> AttemptRecord:
        """Validate and convert one parsed ``record.json``; raises :class:`RecordError`.

        ``side_summary`` finds the benchmark summary beside a record whose own ``benchmark`` field is
        empty (older layouts): (file, contents), or None."""
        path = Path(path)
        r = Reader(path, data)
        _check_attempt_schema(path, r.str_("schema", required=True))
        cfg = r.sub("config", required=True)
        assert cfg is not None
        outcome = r.str_("outcome", required=True, choices=OUTCOMES) or ""
        obs = r.sub("observed")
        simulated = r.bool_("simulated", default=False)
        benchmarks = _benchmarks(r, path, simulated, side_summary)
        tp = r.int_("tp", required=True)
        assert tp is not None
        if tp < 1:
            raise RecordError(path, "tp", f"is {tp}; a TP size is >= 1")
        return cls(
            path=path,
            run_id=r.str_("run_id", required=True) or "",
            host=r.str_("host", required=True) or "",
            instance=r.str_("instance", required=True) or "",
            tp=tp,
            config=ConfigSpec.from_reader(cfg),
            outcome=outcome,
            simulated=simulated or any(b.simulated for b in benchmarks),
            failure=Failure.from_reader(r.sub("failure"), outcome),
            timings=Timings.from_reader(r.sub("timings")),
            plan=r.dict_("plan") or None,
            server_info=obs.dict_("server_info") or None if obs else None,
            startup=obs.dict_("startup") or None if obs else None,
            benchmarks=benchmarks,
            argv=[str(a) for a in r.list_("argv")],
        )


def _check_attempt_schema(path: Path, schema: str | None) -> None:
    if schema == ATTEMPT_SCHEMA:
        return
    major = (schema or "").split("/")[0]
    newer = major == ATTEMPT_SCHEMA.split("/")[0]
    hint = "a newer/older sglbench wrote it" if newer else "not an attempt record"
    raise RecordError(path, "schema", f"is {schema!r}; expected {ATTEMPT_SCHEMA} ({hint})")


def _benchmarks(
    r: Reader, path: Path, simulated: bool, side_summary: Callable[[], tuple[Path, Any] | None] | None
) -> list[Benchmark]:
    bench = r.data.get("benchmark")
    if isinstance(bench, list):
        return [Benchmark.from_dict(path, b, f"benchmark[{i}]", simulated) for i, b in enumerate(bench)]
    if bench is not None:
        return [Benchmark.from_dict(path, bench, "benchmark", simulated)]
    side = side_summary() if side_summary is not None else None
    if side is not None:
        return [Benchmark.from_dict(side[0], side[1], "", simulated)]
    return []


# -- the attempt record (sglbench.attempt/1): writing -----------------------------------------------------
@dataclass(frozen=True)
class RecordFacts:
    """What the cycle gathered about one config attempt: the inputs of ``record.json``.

    The play passes these to the ``sglbench_record`` action (``roles/sglang_cycle/tasks/config.yml``);
    the blocks it got from modules (``wait``: sglbench_wait_ready; ``gpu_free``: sglbench_stop of the stop
    phase before the start; ``journal``: the ``journal`` sglbench_stop read before the final stop) are
    passed whole and picked apart here."""

    run_id: str
    host: str
    instance: dict[str, Any]  # the matrix instance: name, tp, config, algorithm, paths, unit, argv, ...
    outcome: str
    simulated: bool = False
    failure: dict[str, Any] | None = None
    timings: dict[str, Any] = field(default_factory=dict)  # started_at, <phase>_started_at, moved_on_at, ...
    wait: dict[str, Any] = field(default_factory=dict)
    journal: dict[str, Any] = field(default_factory=dict)
    gpu_free: dict[str, Any] = field(default_factory=dict)  # empty: the stop was skipped
    unit_written: bool = False
    plan: dict[str, Any] | None = None
    capacity: dict[str, Any] | None = None
    server_info: dict[str, Any] | None = None
    benchmark: Any = None
    identity: Any = None
    resume: Any = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RecordFacts:
        """From the action's arguments; null blocks become empty, unknown keys are an error."""
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"record facts: unknown field(s) {', '.join(unknown)}")
        missing = [k for k in ("run_id", "host", "instance", "outcome") if data.get(k) is None]
        if missing:
            raise ValueError(f"record facts: {', '.join(missing)} missing")
        blocks = {k: data.get(k) or {} for k in ("timings", "wait", "journal", "gpu_free")}
        return cls(**{**data, **blocks, "simulated": _truthy(data.get("simulated"))})

    def to_dict(self, ended_at: float | None = None) -> dict[str, Any]:
        """The ``record.json`` document; ``ended_at`` defaults to now."""
        inst, j = self.instance, self.journal
        return {
            "schema": ATTEMPT_SCHEMA,
            "simulated": self.simulated,
            "run_id": self.run_id,
            "host": self.host,
            "instance": inst.get("name"),
            "tp": inst.get("tp"),
            "config": _record_config(inst),
            "unit": {
                "name": inst.get("unit"),
                "file": "unit.service" if self.unit_written else None,
                "invocation_id": j.get("invocation_id", self.wait.get("invocation_id")),
            },
            "argv": inst.get("argv"),
            "outcome": self.outcome,
            "failure": self.failure,
            "timings": self._timings(time.time() if ended_at is None else ended_at),
            "stop": self._stop(),
            "plan": self.plan,
            "capacity": self.capacity,
            "observed": {
                "server_info": self.server_info,
                "startup": j.get("startup"),
                "http_statuses": self.wait.get("http_statuses"),
            },
            "benchmark": self.benchmark,
            "identity": self.identity,
            "resume": self.resume,
            "journal": {"file": "journal.log" if "journal" in j else None, "entries": j.get("entries")},
        }

    def _timings(self, ended: float) -> dict[str, Any]:
        t, w = self.timings, self.wait
        started = _float(t.get("started_at"))
        return {
            "started_at": started,
            "ended_at": ended,
            **{key: _float(t.get(key)) for key in PHASE_STARTS},
            "total_s": ended - started if started is not None else None,
            "stop_s": _span(t, "stop_started_at", "start_started_at"),
            "start_s": _span(t, "start_started_at", "health_started_at"),
            "health_s": w.get("elapsed_s"),
            "time_to_ready_s": w.get("time_to_ready_s"),
            # the final stop's systemctl stop of the server (its own drain and exit), host seconds
            "server_stop_s": _float(t.get("server_stop_s")),
            "ready_logged_at": self.journal.get("ready_logged_at"),
            "ready_seen_at": w.get("ready_at") if w.get("ready") else None,
            "moved_on_at": t.get("moved_on_at"),
            "exited_at": w.get("exited_at"),
            "failure_seen_at": w.get("ready_at") if w.get("outcome") == "unit_ended" else None,
            "failure_reported_at": t.get("failure_reported_at"),
        }

    def _stop(self) -> dict[str, Any]:
        g = self.gpu_free
        return {
            "skipped": not g,
            "killed": g.get("killed", []),
            "report": g.get("report", ""),
            "waited_s": g.get("waited_s"),
        }


# The cycle's phase-entry timestamps (controller clock) copied into ``record.timings`` as they are, so
# the time between phases can be read back (``sglbench.overhead``); the probe's entry is ``moved_on_at``,
# the end of the last phase ``done_at`` (or ``failure_reported_at``), the record's start (after the
# final stop) ``record_started_at``.
PHASE_STARTS = (
    "stop_started_at",
    "start_started_at",
    "health_started_at",
    "bench_started_at",
    "done_at",
    "record_started_at",
)


def _record_config(inst: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("algorithm", "model_path", "draft_model_path", "port", "gpus", "args", "extra_args", "env")
    out = {"name": inst.get("config"), **{k: inst.get(k) for k in keys}}
    if inst.get("added_flags"):  # flags the playbook added to the config's own launch line
        out["added_flags"] = list(inst["added_flags"])
    return out


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    return float(value)


def _span(t: Mapping[str, Any], start: str, end: str) -> float | None:
    if start not in t or end not in t:
        return None
    return float(t[end]) - float(t[start])


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1", "on")
    return bool(value)
