"""Action plugin: resumable benchmark points of one config attempt, on the controller, in-process.

Thin wrapper over :mod:`sglbench.resume` (the one implementation: python/sglbench/resume.py; the files
it keeps are documented in docs/records.md, "Resumable results"). Nothing runs on the host.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)

from sglbench import resume  # noqa: E402

OPS = ("prepare", "plan", "commit", "assemble")


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
        try:
            if op == "prepare":
                out = resume.prepare_attempt(directory, str(a.get("identity_hash") or ""), fresh=fresh)
                return {**result, "changed": bool(out["moved"]), **out}
            if op == "plan":
                expected = resume.expected_points(
                    str(a.get("identity_hash") or ""),
                    a.get("load") or {},
                    _int_or_none(a.get("server_max_running_requests")),
                )
                out = resume.plan_points(directory, expected, fresh=fresh, stamp=a.get("stamp") or None)
                return {**result, "changed": bool(out["moved"]), "expected": expected, **out}
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
            bench = resume.assemble_benchmark(
                directory,
                a.get("points") or [],
                prompt_set=str(a.get("prompt_set") or "default"),
                identity_hash=str(a.get("identity_hash") or ""),
                ran=a.get("ran") or [],
            )
            return {**result, "changed": bench is not None, "benchmark": bench}
        except (resume.ResumeError, OSError) as err:
            raise AnsibleActionFail(f"sglbench_points op={op} in {directory}: {err}") from err


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
