"""Action plugin: build one config attempt's ``record.json`` and write its files on the controller.

Runs on the controller only (no module is shipped anywhere), so saving a record costs milliseconds
instead of a module round trip per file. ``record`` carries the facts the play gathered; the document is
built from them by the result contract (``result_schema.RecordFacts``, python/sglbench/hostlib/
result_schema.py). Documentation: plugins/modules/sglbench_record.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

_PYTHON_SRC = str(Path(__file__).resolve().parents[2] / "python")
if _PYTHON_SRC not in sys.path:  # the checkout's package, even when sglbench is not installed
    sys.path.insert(0, _PYTHON_SRC)

from sglbench.hostlib import result_schema  # noqa: E402  (the result contract)
from sglbench.hostlib.sglang_facts import ATTEMPT_SCHEMA  # noqa: E402  (declared once)
from sglbench.resume import prepare_attempt, write_atomic  # noqa: E402  (one atomic writer on the controller)

SCHEMA = ATTEMPT_SCHEMA


def _text(name: str, content: Any) -> str:
    if isinstance(content, str):
        return content
    return json.dumps(content, indent=2, sort_keys=False, default=str) + "\n"


def record_text(facts: Any, files: dict[str, Any], ended_at: float | None = None) -> str:
    """``record.json`` built from the play's facts; ``unit.file`` names unit.service when it is written."""
    if not isinstance(facts, dict):
        raise AnsibleActionFail("sglbench_record: record must be a mapping of the attempt's facts")
    try:
        built = result_schema.RecordFacts.from_dict(
            {**facts, "unit_written": bool(files.get("unit.service"))}
        )
    except (TypeError, ValueError) as err:
        raise AnsibleActionFail(f"sglbench_record: {err}") from None
    return json.dumps(built.to_dict(ended_at), indent=4, sort_keys=False, default=str) + "\n"


def check_record(text: str) -> None:
    """record.json must be JSON with the current schema id (the contract in docs/records.md)."""
    try:
        record = json.loads(text)
    except ValueError as err:
        raise AnsibleActionFail(f"record.json is not valid JSON: {err}") from err
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise AnsibleActionFail(f"record.json must be an object with schema {SCHEMA!r}")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("dir", "files", "mode", "record", "move_previous"))

    def run(self, tmp: Any = None, task_vars: Any = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = self._task.args
        directory = args.get("dir")
        files = args.get("files") or {}
        if not directory or not isinstance(files, dict):
            raise AnsibleActionFail("sglbench_record needs dir (a path) and files (name -> content)")
        if args.get("record") is not None:
            if "record.json" in files:
                raise AnsibleActionFail(
                    "sglbench_record: give record (the facts) or files.record.json, not both"
                )
            files = {"record.json": record_text(args["record"], files), **files}
        mode = int(str(args.get("mode", "0644")), 8)
        written: list[str] = []
        if self._task.check_mode:
            return {**result, "changed": bool(files), "dir": directory, "written": sorted(files)}
        for name in files:
            if "/" in name or name in ("", ".", ".."):
                raise AnsibleActionFail(f"file name {name!r} must be a plain name inside {directory}")
        moved: list[str] = []
        try:
            if args.get("move_previous"):
                moved = [m["file"] for m in prepare_attempt(directory, "")["moved"]]
            os.makedirs(directory, exist_ok=True)
            for name, content in files.items():
                if content is None:
                    continue
                text = _text(name, content)
                if name == "record.json":
                    check_record(text)
                write_atomic(os.path.join(directory, name), text, mode)
                written.append(name)
        except OSError as err:
            # One line naming the file and the cause (a full results disk, a read-only mount, ...).
            where = err.filename or directory
            raise AnsibleActionFail(
                f"results could not be written on the controller: {where}: {err.strerror or err}"
                f" (written so far: {', '.join(written) or 'nothing'})"
            ) from None
        return {**result, "changed": True, "dir": directory, "written": written, "moved": moved}
