"""The API key appears nowhere a local user could read it, on a real run on the sim host.

Here the key is an inventory variable in a root-only group_vars file (what a vault gives), and the run is
plain ``ansible-playbook``; the other supported way, ``SGLBENCH_API_KEY`` exported to ``sglbench run``, is
checked the same way over the whole fault-injection chain (tests/python/test_faults_simhost.py). While
the run goes on, every process's argv on the controller and on the host is sampled; afterwards we grep
the host's world-readable files under /etc, /run and /var, its whole journal, and everything the run
left on the controller (records, runner artifacts). The benchmark points succeeding proves the server
really required the key, and the unit shows the launcher that gave it to SGLang.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import simhost_util as sh

NAME = f"sglbench-simhost-secrets-{os.getpid()}"
CONFIG = "qwen3-8b-ar"


@pytest.fixture(scope="module")
def sim() -> object:
    yield from sh.sim_host(NAME)


def _check_points_used_the_key(results: Path) -> None:
    rec = json.loads(next(results.rglob(f"{CONFIG}-tp1/record.json")).read_text())
    assert rec["outcome"] == "ok", rec.get("failure")
    assert rec["benchmark"]["points"] and all(p["n_ok"] > 0 for p in rec["benchmark"]["points"])


@pytest.mark.simhost
def test_api_key_appears_in_no_argv_no_readable_file_no_journal_line_and_no_record(
    sim: str, tmp_path: Path
) -> None:
    key = "sk-leaktest-" + secrets.token_hex(12)
    inv = tmp_path / "inv"
    shutil.copytree(sh.REPO / "inventory" / "sim", inv)
    secret_vars = inv / "group_vars" / "sglang_gpu" / "secrets.yml"
    secret_vars.write_text(f"sglbench_api_key: {key}\n")
    secret_vars.chmod(0o600)
    results = tmp_path / "results"
    extra = {
        "tp": "1", "ansible_host": NAME, "sglbench_results_dir": str(results), "sglbench_run_id": "vault",
        "sglang_cycle_configs": [CONFIG], "sglbench_bench": sh.LOAD, "sglbench_matrix": sh.MATRIX,
    }  # fmt: skip
    ap = str(Path(sys.executable).parent / "ansible-playbook")
    with sh.Sampler(NAME, key) as seen:
        proc = subprocess.run(
            [ap, str(sh.REPO / "playbooks" / "bench.yml"), "-i", str(inv), "-e", json.dumps(extra)],
            cwd=sh.REPO, env={k: v for k, v in sh.env(NAME).items() if k != "SGLBENCH_API_KEY"},
            capture_output=True, text=True, timeout=900,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert seen.server_seen, "the sampler never saw the server running"
    assert key not in proc.stdout + proc.stderr
    _check_points_used_the_key(results)
    unit = sh.host(NAME, "systemctl", "cat", f"sglang-{CONFIG}-tp1.service").stdout
    assert "sglbench-launch --key-env SGLBENCH_API_KEY" in unit  # the server ran under the launcher
    leaks = seen.hits + sh.grep_host(NAME, key) + sh.grep_tree(key, results)
    assert not leaks, leaks
    # the secrets file on the host holds the key, readable by root only
    mode = sh.host(NAME, "stat", "-c", "%a %U", "/etc/sglang/secrets.env").stdout.split()
    assert mode == ["600", "root"]
