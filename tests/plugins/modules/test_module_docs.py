"""Every module's documentation as ansible-doc renders it: the shared fragment merged, overrides kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("sglbench_*.py"))
# What a module states itself instead of the fragment's full check mode and no diff mode.
OWN_ATTRIBUTES = {
    "sglbench_prompt_bench": {"check_mode": "none", "diff_mode": "none"},
    "sglbench_unit_files": {"check_mode": "full", "diff_mode": "full"},
}


def test_ansible_doc_merges_the_shared_fragment() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANSIBLE_CONFIG"}  # the repo's ansible.cfg
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(
        ["ansible-doc", "--json", *MODULES],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    docs = json.loads(proc.stdout)
    assert sorted(docs) == MODULES and len(MODULES) >= 7
    for name in MODULES:
        doc = docs[name]["doc"]
        assert doc["author"] == ["sglbench"], name
        support = {attr: value["support"] for attr, value in doc["attributes"].items()}
        assert support == OWN_ATTRIBUTES.get(name, {"check_mode": "full", "diff_mode": "none"}), name
        assert doc["short_description"] and doc["options"], name
