"""The record contracts the controller reads: one ``record.json`` per config attempt.

The Ansible side (``roles/sglang_cycle/templates/record.json.j2``) writes
``results/<run_id>/<host>/<config>-tp<N>/record.json`` with schema ``sglbench.attempt/1``; its
``benchmark`` field holds the load generator's ``summary.json`` (schema ``sglbench.bench/1``, written by
``sglbench.hostlib.loadgen.campaign_summary``) and per-request rows sit beside it as ``requests.jsonl`` (or
``requests.parquet``). This module turns those files into typed dataclasses and nothing else: no pandas,
no statistics. A file that does not match fails with :class:`RecordError` naming the file and the field;
optional parts (plan, probe facts, benchmark, timings) may be missing or null.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sglbench.hostlib import sglang_facts

ATTEMPT_SCHEMA = sglang_facts.ATTEMPT_SCHEMA
BENCH_SCHEMA = sglang_facts.BENCH_SCHEMA
OUTCOMES = ("ok", "skipped", "failed")
BASELINE_ALGORITHMS = (sglang_facts.NO_SPEC, "", None)
# Files beside record.json that may hold per-request rows (first found wins).
REQUEST_FILES = ("requests.parquet", "requests.jsonl", "bench/requests.parquet", "bench/requests.jsonl")
# File beside record.json that may hold the benchmark summary when the record's field is empty.
SUMMARY_FILES = ("summary.json", "bench/summary.json")
MAX_INT = 2**62  # integers in records (counts, TP sizes, ports, times) are far below this


class RecordError(ValueError):
    """A record file does not match the contract; the message names the file, the field and the fix."""

    def __init__(self, path: Path | str, field_name: str, message: str) -> None:
        super().__init__(f"{path}: field '{field_name}': {message}")
        self.path = str(path)
        self.field = field_name
        self.message = message


# -- small typed readers ----------------------------------------------------------------------------
class _Reader:
    """Typed access to a JSON object with error messages naming the file and the dotted field path."""

    def __init__(self, path: Path | str, data: Any, prefix: str = "") -> None:
        self.path = path
        self.prefix = prefix
        if not isinstance(data, Mapping):
            raise RecordError(path, prefix or "<top level>", f"expected a JSON object, got {_kind(data)}")
        self.data = data

    def _name(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def sub(self, key: str, *, required: bool = False) -> _Reader | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise RecordError(self.path, self._name(key), "is missing (an object is required)")
            return None
        return _Reader(self.path, value, self._name(key))

    def str_(self, key: str, *, required: bool = False, choices: tuple[Any, ...] | None = None) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise RecordError(self.path, self._name(key), "is missing (a string is required)")
            return None
        if not isinstance(value, str):
            raise RecordError(self.path, self._name(key), f"expected a string, got {_kind(value)}")
        if choices is not None and value not in choices:
            raise RecordError(
                self.path, self._name(key), f"is {value!r}; expected one of {', '.join(map(str, choices))}"
            )
        return value

    def int_(self, key: str, *, required: bool = False) -> int | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise RecordError(self.path, self._name(key), "is missing (an integer is required)")
            return None
        if isinstance(value, bool):
            raise RecordError(self.path, self._name(key), f"expected an integer, got {_kind(value)}")
        if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 40:
            value = int(value)  # Jinja sometimes renders numbers as strings
        elif isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise RecordError(self.path, self._name(key), f"expected an integer, got {_kind(value)}")
        if abs(value) > MAX_INT:
            raise RecordError(self.path, self._name(key), f"is out of range ({_digits(value)} digits)")
        return value

    def float_(self, key: str) -> float | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            raise RecordError(self.path, self._name(key), f"expected a number, got {_kind(value)}")
        if isinstance(value, int) and abs(value) > MAX_INT:
            raise RecordError(self.path, self._name(key), f"is out of range ({_digits(value)} digits)")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise RecordError(self.path, self._name(key), f"expected a number, got {_kind(value)}")

    def bool_(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        raise RecordError(self.path, self._name(key), f"expected true/false, got {_kind(value)}")

    def dict_(self, key: str) -> dict[str, Any]:
        value = self.data.get(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise RecordError(self.path, self._name(key), f"expected an object, got {_kind(value)}")
        return dict(value)

    def list_(self, key: str) -> list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise RecordError(self.path, self._name(key), f"expected a list, got {_kind(value)}")
        return value


def _digits(value: int) -> int:
    return len(str(abs(value)))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def stand_in_time_scale(server_info: Any) -> float | None:
    """``SGLBENCH_SIM_TIME_SCALE`` the SGLang stand-in reports in ``/server_info``
    (``sglbench_sim.time_scale``), or None for a real server (or a malformed value)."""
    sim = server_info.get("sglbench_sim") if isinstance(server_info, dict) else None
    scale = sim.get("time_scale") if isinstance(sim, dict) else None
    if isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0:
        return float(scale)
    return None


# -- contracts --------------------------------------------------------------------------------------
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


@dataclass(frozen=True)
class Timings:
    started_at: float | None = None
    ended_at: float | None = None
    total_s: float | None = None
    time_to_ready_s: float | None = None
    health_s: float | None = None


@dataclass(frozen=True)
class Distribution:
    """p50/p90/p99/mean of one latency metric (ms) for one benchmark point; None when not measured."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None


@dataclass(frozen=True)
class BenchPoint:
    """One load point and repeat of the load generator's ``summary.json`` ``points`` list."""

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
    ttft_ms: Distribution
    tpot_ms: Distribution
    itl_ms: Distribution
    e2e_ms: Distribution
    accept_length_mean: float | None
    valid: bool
    invalid_reasons: list[str] = field(default_factory=list)
    seed: int | None = None


@dataclass(frozen=True)
class Benchmark:
    """The load generator's summary of one attempt (one prompt set)."""

    prompt_set: str
    simulated: bool
    points: list[BenchPoint]
    meta: dict[str, Any] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # expected points without a result (resume block)

    @property
    def sim_time_scale(self) -> float | None:
        """The stand-in's ``SGLBENCH_SIM_TIME_SCALE`` during this benchmark (None: not the stand-in).

        The stand-in reports it in ``/server_info`` (``sglbench_sim.time_scale``); 0.01 means its
        startup and token timing ran a hundred times faster than the real server would.
        """
        return stand_in_time_scale(self.meta.get("server_info"))


@dataclass(frozen=True)
class AttemptRecord:
    """One ``record.json``: one config at one TP size on one host in one run."""

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


def launch_device(argv: list[str]) -> str | None:
    """The value of the last ``--device X`` / ``--device=X`` in a launch command line, else None."""
    device = None
    for i, arg in enumerate(argv):
        if arg == "--device" and i + 1 < len(argv):
            device = argv[i + 1]
        elif arg.startswith("--device="):
            device = arg.split("=", 1)[1]
    return device


def _as_int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return None


# -- parsing ----------------------------------------------------------------------------------------
def _distribution(r: _Reader, key: str) -> Distribution:
    sub = r.sub(key)
    if sub is None:
        return Distribution()
    return Distribution(sub.float_("p50"), sub.float_("p90"), sub.float_("p99"), sub.float_("mean"))


def parse_bench_point(r: _Reader) -> BenchPoint:
    conc = r.int_("concurrency")
    rate = r.float_("request_rate")
    label = r.str_("point") or (f"c{conc}" if conc is not None else f"r{rate:g}" if rate else "?")
    return BenchPoint(
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
        ttft_ms=_distribution(r, "ttft_ms"),
        tpot_ms=_distribution(r, "tpot_ms"),
        itl_ms=_distribution(r, "itl_ms"),
        e2e_ms=_distribution(r, "e2e_ms"),
        accept_length_mean=r.float_("accept_length_mean"),
        valid=r.bool_("valid", default=True),
        invalid_reasons=[str(x) for x in r.list_("invalid_reasons")],
        seed=r.int_("seed"),
    )


def parse_benchmark(path: Path | str, data: Any, prefix: str, record_simulated: bool) -> Benchmark:
    """One load-generator summary (``summary.json`` contents)."""
    r = _Reader(path, data, prefix)
    if "summary" in r.data and "points" not in r.data:  # {"summary": {...}, ...} wrapper
        inner = r.sub("summary", required=True)
        assert inner is not None
        r = inner
    schema = r.str_("schema")
    if schema is not None and schema.split("/")[0] != BENCH_SCHEMA.split("/")[0]:
        raise RecordError(path, r._name("schema"), f"is {schema!r}; expected {BENCH_SCHEMA}")
    meta = r.dict_("meta")
    prompt_set = r.str_("prompt_set") or meta.get("prompts") or meta.get("prompt_set") or "default"
    points = []
    for i, p in enumerate(r.list_("points")):
        points.append(parse_bench_point(_Reader(path, p, r._name(f"points[{i}]"))))
    simulated = r.bool_("simulated", default=False) or bool(meta.get("simulated")) or record_simulated
    resume = r.sub("resume")
    missing = [str(k) for k in resume.list_("missing")] if resume is not None else []
    return Benchmark(
        prompt_set=str(prompt_set), simulated=simulated, points=points, meta=meta, missing=missing
    )


def parse_record(data: Any, path: Path | str = "<record>") -> AttemptRecord:
    """Validate and convert one parsed ``record.json``; raises :class:`RecordError`."""
    path = Path(path)
    r = _Reader(path, data)
    schema = r.str_("schema", required=True)
    if schema != ATTEMPT_SCHEMA:
        major = (schema or "").split("/")[0]
        hint = "a newer/older sglbench wrote it" if major == "sglbench.attempt" else "not an attempt record"
        raise RecordError(path, "schema", f"is {schema!r}; expected {ATTEMPT_SCHEMA} ({hint})")
    cfg = r.sub("config", required=True)
    assert cfg is not None
    algorithm = cfg.str_("algorithm") or "none"
    config = ConfigSpec(
        name=cfg.str_("name", required=True) or "",
        algorithm=algorithm,
        model_path=cfg.str_("model_path"),
        draft_model_path=cfg.str_("draft_model_path"),
        port=cfg.int_("port"),
        gpus=cfg.list_("gpus"),
        args=cfg.dict_("args"),
        extra_args=cfg.list_("extra_args"),
        env=cfg.dict_("env"),
    )
    outcome = r.str_("outcome", required=True, choices=OUTCOMES) or ""
    failure = None
    fr = r.sub("failure")
    if fr is not None:
        failure = Failure(
            phase=fr.str_("phase"),
            cause=fr.str_("cause") or "unknown",
            message=fr.str_("message") or "",
            lines=[str(x) for x in fr.list_("lines")],
            task=fr.str_("task"),
            wait_outcome=str(fr.data["wait_outcome"]) if fr.data.get("wait_outcome") is not None else None,
            unit_state=fr.data.get("unit_state"),
        )
    if outcome != "ok" and failure is None:
        failure = Failure(phase=None, cause="unknown", message="the record gives no failure details")
    timings = Timings()
    tr = r.sub("timings")
    if tr is not None:
        timings = Timings(
            started_at=tr.float_("started_at"),
            ended_at=tr.float_("ended_at"),
            total_s=tr.float_("total_s"),
            time_to_ready_s=tr.float_("time_to_ready_s"),
            health_s=tr.float_("health_s"),
        )
    plan = r.dict_("plan") or None
    obs = r.sub("observed")
    server_info = obs.dict_("server_info") or None if obs else None
    startup = obs.dict_("startup") or None if obs else None
    simulated = r.bool_("simulated", default=False)

    benchmarks: list[Benchmark] = []
    bench = r.data.get("benchmark")
    if isinstance(bench, list):
        for i, b in enumerate(bench):
            benchmarks.append(parse_benchmark(path, b, f"benchmark[{i}]", simulated))
    elif bench is not None:
        benchmarks.append(parse_benchmark(path, bench, "benchmark", simulated))
    else:
        for name in SUMMARY_FILES:
            side = path.parent / name
            if side.is_file():
                benchmarks.append(parse_benchmark(side, _read_json(side), "", simulated))
                break
    instance = r.str_("instance", required=True) or ""
    tp = r.int_("tp", required=True)
    assert tp is not None
    if tp < 1:
        raise RecordError(path, "tp", f"is {tp}; a TP size is >= 1")
    return AttemptRecord(
        path=path,
        run_id=r.str_("run_id", required=True) or "",
        host=r.str_("host", required=True) or "",
        instance=instance,
        tp=tp,
        config=config,
        outcome=outcome,
        simulated=simulated or any(b.simulated for b in benchmarks),
        failure=failure,
        timings=timings,
        plan=plan,
        server_info=server_info,
        startup=startup,
        benchmarks=benchmarks,
        argv=[str(a) for a in r.list_("argv")],
    )


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RecordError(path, "<file>", f"cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise RecordError(
            path,
            "<file>",
            f"is not UTF-8 JSON text (binary or damaged at byte {exc.start}); move it aside or re-run the "
            "campaign to redo this attempt",
        ) from None
    try:
        return json.loads(text)
    except RecursionError:
        raise RecordError(path, "<file>", "nests JSON too deeply to be a record; move it aside") from None
    except json.JSONDecodeError as exc:
        raise RecordError(
            path,
            "<file>",
            f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "an interrupted run leaves such files: re-run the campaign to redo this attempt",
        ) from None
    except ValueError as exc:  # e.g. an integer literal longer than Python converts
        raise RecordError(path, "<file>", f"is not a usable JSON record ({exc})") from None


def load_record(path: Path | str) -> AttemptRecord:
    """Read and validate one ``record.json``."""
    path = Path(path)
    return parse_record(_read_json(path), path)


def find_record_files(run_dir: Path) -> list[Path]:
    """``<run_dir>/<host>/<instance>/record.json`` files, sorted; directories starting with ``.`` or
    ``_`` (moved-aside attempts, runner artifacts) are ignored."""
    out = []
    for host_dir in sorted(p for p in run_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        for inst_dir in sorted(
            p for p in host_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
        ):
            f = inst_dir / "record.json"
            if f.is_file():
                out.append(f)
    return out
