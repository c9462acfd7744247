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

OPS = ("prepare", "plan", "next", "commit", "assemble")


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
            "telemetry",
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


def _b64_text(value: Any) -> str | None:
    if not value:
        return None
    try:
        return base64.b64decode(str(value)).decode("utf-8")
    except (ValueError, UnicodeDecodeError) as err:
        raise AnsibleActionFail(f"sglbench_points: records_b64 is not base64 UTF-8 text: {err}") from err


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
