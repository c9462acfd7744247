"""Run Ansible modules' main() in-process: module_utils aliased to sglbench.hostlib, exits captured."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import ansible.module_utils
import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

REPO = Path(__file__).resolve().parents[3]

# The modules import ansible.module_utils.sglbench_<name>: alias each to the sglbench.hostlib.<name> the
# rest of the suite imports (one copy of every class, unlike extending ansible.module_utils.__path__,
# which would load a second copy of each). Loaded before any test module of this directory.
for _link in sorted((REPO / "plugins" / "module_utils").glob("sglbench_*.py")):
    assert _link.is_symlink(), _link
    _name = _link.stem.removeprefix("sglbench_")
    _mod = importlib.import_module(f"sglbench.hostlib.{_name}")
    sys.modules.setdefault(f"ansible.module_utils.sglbench_{_name}", _mod)
    if not hasattr(ansible.module_utils, f"sglbench_{_name}"):
        setattr(ansible.module_utils, f"sglbench_{_name}", _mod)
if str(REPO / "plugins" / "modules") not in sys.path:
    sys.path.insert(0, str(REPO / "plugins" / "modules"))


class ModuleExit(Exception):
    def __init__(self, failed: bool, result: dict[str, Any]) -> None:
        super().__init__("failed" if failed else "ok")
        self.failed = failed
        self.result = result


@pytest.fixture
def run_module(monkeypatch: pytest.MonkeyPatch):
    """``run_module(module, args, check_mode=False, diff=False) -> ModuleExit`` (never raises SystemExit)."""

    def exit_json(self: Any, **kwargs: Any) -> None:
        raise ModuleExit(False, kwargs)

    def fail_json(self: Any, msg: str, **kwargs: Any) -> None:
        raise ModuleExit(True, {"msg": msg, **kwargs})

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)

    def run(module: Any, args: dict[str, Any], check_mode: bool = False, diff: bool = False) -> ModuleExit:
        payload = {"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check_mode, "_ansible_diff": diff}}
        monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps(payload)))
        monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
        try:
            module.main()
        except ModuleExit as done:
            return done
        raise AssertionError("module returned without exit_json/fail_json")

    return run
