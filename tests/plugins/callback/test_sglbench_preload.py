"""sglbench_preload: the project's controller plugins and pyarrow are loaded in Ansible's main process."""

from __future__ import annotations

import configparser
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

# In a fresh interpreter, as ansible-playbook's main process: what is loaded before and after the callback.
PROBE = """
import json, sys
from ansible.plugins.loader import callback_loader, init_plugin_loader
init_plugin_loader()
def loaded():
    return {
        "columnar": "sglbench.columnar" in sys.modules,
        "pandas": "pandas" in sys.modules,
        "filters": any(m.startswith("ansible.plugins.filter.sglbench_cycle") for m in sys.modules),
        "points": "ansible.plugins.action.sglbench_points" in sys.modules,
    }
before = loaded()
callback_loader.get("sglbench_preload")
print(json.dumps({"before": before, "after": loaded()}))
"""


def test_the_callback_loads_filters_actions_and_pyarrow_before_the_workers_fork() -> None:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["before"] == {"columnar": False, "pandas": False, "filters": False, "points": False}
    assert got["after"] == {"columnar": True, "pandas": True, "filters": True, "points": True}


def test_the_project_config_enables_it() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "ansible.cfg")
    assert "sglbench_preload" in cfg["defaults"]["callbacks_enabled"].split(",")
    assert (REPO / cfg["defaults"]["callback_plugins"] / "sglbench_preload.py").is_file()
