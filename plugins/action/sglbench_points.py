"""Action plugin: resumable benchmark points of one config attempt, on the controller, in-process.

Thin wrapper over :mod:`sglbench.resume` (python/sglbench/resume.py; the files it keeps are documented in
docs/records.md, "Resumable results") and, when the bench settings enable the SLO-bounded search, over
:mod:`sglbench.search` (python/sglbench/search.py; docs/records.md, "The SLO-bounded search"), whose
``next`` op decides the next load level from the committed points. Nothing runs on the host.
"""

from __future__ import annotations

import base64
import sys
import time
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)

from sglbench import resume, search  # noqa: E402
from sglbench.hostlib import request_rows  # noqa: E402

OPS = ("prepare", "plan", "next", "run", "commit", "assemble")
BENCH_MODULE = "sglbench_prompt_bench"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(
        (
            "op",
            "dir",
            "identity_hash",
            "fresh",
            "load",
            "server_max_running_requests",
            "point",
            "points",
            "outcome",
            "summary",
            "meta",
            "error",
            "records_src",
            "records_b64",
            "records",
            "prompt_set",
            "ran",
            "stamp",
            "capacity",
            "since",
            "baseline_dir",
            "bench",
            "spool_dir",
            "instance",
            "telemetry",
            "clock",
            "gpu_hour_usd",
        )
    )

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        a = self._task.args
        op, directory = a.get("op"), a.get("dir")
        if op not in OPS:
            raise AnsibleActionFail(f"sglbench_points: op must be one of {', '.join(OPS)}, got {op!r}")
        if not directory:
            raise AnsibleActionFail("sglbench_points: dir (the attempt directory) is required")
        fresh = bool(a.get("fresh") or False)
        identity_hash = str(a.get("identity_hash") or "")
        try:
            spec = search.parse_spec(a.get("load") or {})
            if op == "prepare":
                settings = spec.settings if spec is not None else None
                out = resume.prepare_attempt(directory, identity_hash, fresh=fresh, search_settings=settings)
                return {**result, "changed": bool(out["moved"]), **out}
            if op == "plan":
                return {**result, **self._plan(directory, identity_hash, spec, a, fresh)}
            if op == "next":
                if spec is None:
                    raise AnsibleActionFail("sglbench_points op=next needs load with search.enabled: true")
                d = search.decide(directory, spec, _capacity(a), identity_hash, _baseline_dir(a))
                return {
                    **result,
                    "changed": False,
                    "dir": directory,
                    "done": d.done,
                    "point": d.point,
                    "search": d.doc,
                }
            if op == "run":
                try:
                    return {**result, **self._run(directory, identity_hash, spec, a, task_vars)}
                except _PointFailed as err:  # the benchmark failed; what it measured is committed
                    return {**result, "failed": True, "msg": str(err), resume.POINT_FAILED: err.key}
            if op == "commit":
                point = a.get("point")
                if not isinstance(point, dict) or "key" not in point:
                    raise AnsibleActionFail("sglbench_points op=commit needs point (with key and hash)")
                doc = resume.commit_point(
                    directory,
                    point,
                    outcome=str(a.get("outcome") or "ok"),
                    summary=a.get("summary"),
                    meta=a.get("meta"),
                    error=a.get("error"),
                    records_src=a.get("records_src"),
                    records_text=_b64_text(a.get("records_b64")),
                    records=a.get("records"),
                    telemetry=_dict_or_none(a.get("telemetry"), "telemetry"),
                    clock=_dict_or_none(a.get("clock"), "clock"),
                    gpu_hour_usd=a.get("gpu_hour_usd"),
                )
                return {**result, "changed": True, "point": doc}
            points, search_doc = a.get("points") or [], None
            if spec is not None:  # the points the search visited, and its verdict for the record
                d = search.decide(directory, spec, _capacity(a), identity_hash, _baseline_dir(a))
                points, search_doc = d.expected, d.doc
            bench = resume.assemble_benchmark(
                directory,
                points,
                prompt_set=str(a.get("prompt_set") or "default"),
                identity_hash=identity_hash,
                ran=a.get("ran") or [],
                since=_float_or_none(a.get("since")),
                search=search_doc,
            )
            return {**result, "changed": bench is not None, "benchmark": bench, "points": points}
        except search.SearchError as err:
            raise AnsibleActionFail(f"sglbench_points op={op}: {err}") from err
        except (resume.ResumeError, OSError) as err:
            raise AnsibleActionFail(f"sglbench_points op={op} in {directory}: {err}") from err

    def _plan(
        self, directory: str, identity_hash: str, spec: search.SearchSpec | None, a: Any, fresh: bool
    ) -> dict[str, Any]:
        """The fixed ladder's points (``todo``: what to measure), or with a search the levels it already
        committed (kept; ``todo`` empty, ``search_iterations``: the loop bound of the ``next`` calls)."""
        started_at = time.time()
        if spec is None:
            expected = resume.expected_points(
                identity_hash, a.get("load") or {}, _int_or_none(a.get("server_max_running_requests"))
            )
            iterations = 0
        else:
            expected = search.committed_points(directory, identity_hash, spec)
            iterations = spec.iterations
        out = resume.plan_points(directory, expected, fresh=fresh, stamp=a.get("stamp") or None)
        if spec is not None:
            out["todo"] = []
        return {
            "changed": bool(out["moved"]),
            "expected": expected,
            "search_iterations": iterations,
            "started_at": started_at,
            **out,
        }

    def _run(
        self, directory: str, identity_hash: str, spec: search.SearchSpec | None, a: Any, task_vars: Any
    ) -> dict[str, Any]:
        """Measure and commit: the fixed ladder's ``points`` in one host call, or with a search one point per
        call as the search names them (``next``) until it is done. Each returned point is committed at once;
        the host spools each point as it ends (``spool_dir``), so a call cut short loses nothing."""
        instance = str(a.get("instance") or directory)
        # Unset options come as None (a nested dict cannot omit them): the module's defaults apply.
        bench = {k: v for k, v in dict(a.get("bench") or {}).items() if v is not None}
        spool = {"dir": str(a.get("spool_dir") or ""), "hash": identity_hash}
        price = a.get("gpu_hour_usd")  # USD per GPU-hour for the points' cost figures; None: no cost
        ran: list[str] = []
        self._host_warnings: list[str] = []
        if spec is None:
            todo = list(a.get("points") or [])
            if todo:
                ran += self._measure(directory, instance, todo, bench, spool, task_vars, price)
        else:
            for _ in range(spec.iterations):
                d = search.decide(directory, spec, _capacity(a), identity_hash, _baseline_dir(a))
                if d.done or d.point is None:
                    break
                ran += self._measure(directory, instance, [d.point], bench, spool, task_vars, price)
        warnings = {"warnings": self._host_warnings} if self._host_warnings else {}
        return {"changed": bool(ran), "ran": ran, **warnings}

    def _measure(
        self,
        directory: str,
        instance: str,
        todo: list[dict[str, Any]],
        bench: dict[str, Any],
        spool: dict[str, str],
        task_vars: Any,
        gpu_hour_usd: Any = None,
    ) -> list[str]:
        """One host call for ``todo``; commit what it returns, then fail on the point that failed."""
        wanted = [{k: p.get(k) for k in ("key", "concurrency", "request_rate", "repeat")} for p in todo]
        keys = [str(p["key"]) for p in todo]
        spooled = {**spool, "seen": resume.seen_measurements(directory, keys)} if spool["dir"] else None
        args = {**bench, "points": wanted, "spool": spooled, "return_records": True, "pack_records": True}
        sent = time.time()
        res = self._execute_module(module_name=BENCH_MODULE, module_args=args, task_vars=task_vars)
        clock = _call_clock(res, sent, time.time())
        self._host_warnings += [str(w) for w in res.get("warnings") or []]
        by_key = {str(p["key"]): p for p in todo}
        meta = res.get("meta")
        done: list[str] = []
        for i, got in enumerate(res.get("points") or []):
            key = str(got.get("key"))
            if key not in by_key:
                raise AnsibleActionFail(
                    f"sglbench_points op=run: the host returned point {key!r}, not asked for"
                )
            text, rows = _point_rows(got, key)
            resume.commit_point(
                directory,
                by_key[key],
                outcome="ok",
                summary=got.get("summary"),
                meta=meta,
                records_text=text,
                records=rows,
                telemetry=_point_telemetry(res, got, i),
                # A point kept from an earlier, cut-off call was not timed by this call's clocks.
                clock=clock if "host_started" in clock or not got.get("spooled") else None,
                gpu_hour_usd=gpu_hour_usd,
            )
            done.append(key)
        failed_point = res.get("failed_point") if isinstance(res.get("failed_point"), dict) else None
        if failed_point is None and not res.get("failed"):
            return done
        msg = str((failed_point or {}).get("msg") or res.get("msg") or "the benchmark call failed")
        # The point that failed: the one the host names, else (the call itself failed) the first not done.
        key = (
            (failed_point or {}).get("key")
            if failed_point
            else next((k for k in by_key if k not in done), None)
        )
        if key in by_key:
            resume.commit_point(directory, by_key[key], outcome="failed", error=msg)
        raise _PointFailed(
            key, f"point {key or '(after ' + ', '.join(done) + ')'} of {instance} failed: {msg}"
        )


class _PointFailed(Exception):
    """A point of the benchmark failed on the host (``key``; None: the call ended after its last point)."""

    def __init__(self, key: str | None, msg: str) -> None:
        super().__init__(msg)
        self.key = key


def _b64_text(value: Any) -> str | None:
    if not value:
        return None
    try:
        return base64.b64decode(str(value)).decode("utf-8")
    except (ValueError, UnicodeDecodeError) as err:
        raise AnsibleActionFail(f"sglbench_points: records_b64 is not base64 UTF-8 text: {err}") from err


def _point_rows(got: Any, key: str) -> tuple[str | None, list[Any] | None]:
    """A returned point's request rows: its JSON lines and the rows (packed, or as rows)."""
    if request_rows.PACKED_KEY not in got:
        return None, got.get("records")
    try:
        return request_rows.unpack(got[request_rows.PACKED_KEY])
    except request_rows.RowsError as err:
        raise AnsibleActionFail(f"sglbench_points op=run: point {key}: {err}") from err


def _call_clock(res: Any, sent: float, received: float) -> dict[str, Any]:
    """The controller's send and receive times of one host call, with the host's own start and end of it
    when the module says them (``clock`` of its result): what every point of the call is timed against."""
    clock: dict[str, Any] = {"sent": sent, "received": received}
    host = res.get("clock") if isinstance(res, dict) else None
    if isinstance(host, dict):
        clock.update(host_started=host.get("host_started"), host_ended=host.get("host_ended"))
    return clock


def _point_telemetry(res: Any, got: Any, index: int) -> dict[str, Any] | None:
    """A returned point's raw telemetry: its own ``telemetry``, else the entry of the result's ``telemetry``
    list at its position; None when the host sampled nothing."""
    doc = got.get("telemetry") if isinstance(got, dict) else None
    if doc is None:
        docs = res.get("telemetry") if isinstance(res, dict) else None
        doc = docs[index] if isinstance(docs, list) and index < len(docs) else None
    return doc if isinstance(doc, dict) else None


def _dict_or_none(value: Any, name: str) -> dict[str, Any] | None:
    """An optional object argument (``telemetry``: the host's raw document; ``clock``: the controller's
    ``sent``/``received`` times of the benchmark call)."""
    if value in (None, ""):
        return None
    if not isinstance(value, dict):
        raise AnsibleActionFail(
            f"sglbench_points: {name} must be an object or null, got {type(value).__name__}"
        )
    return value


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _float_or_none(value: Any) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _capacity(args: Any) -> search.Capacity:
    """What the server holds, as bench.yml passes it (the probe's figures, else the plan's)."""
    return search.Capacity.from_args(args.get("capacity"))


def _baseline_dir(args: Any) -> str | None:
    """The attempt directory of the config's baseline in this run (bench.yml passes it for a speculative
    config whose run has one), whose levels the search locates the crossover against."""
    value = args.get("baseline_dir")
    return str(value) if value else None
