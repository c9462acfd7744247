"""What Ansible ships to the GPU host: a real ``ansible-playbook`` on localhost (connection local) runs a
throwaway module that imports the hostlib package the way ``plugins/modules/`` do.

ansible-core's module_utils finder reads the module's imports, follows the relative imports inside
``ansible.module_utils.sglbench_hostlib`` and puts every sibling into the AnsiballZ payload; the module
then runs from that payload alone (no ``sglbench`` package imported, every file inside the zip).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")

MODULE = """\
#!/usr/bin/python
import json
import sys

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib import capacity, gpus
from ansible.module_utils.sglbench_hostlib.loadgen import BenchSpec
from ansible.module_utils.sglbench_hostlib.unit_files import write_atomic


def main():
    module = AnsibleModule(argument_spec={"out": {"type": "path", "required": True}})
    prefix = "ansible.module_utils.sglbench_hostlib"
    shipped = {
        name[len(prefix) + 1:] or "__init__": getattr(mod, "__file__", "")
        for name, mod in sys.modules.items() if name == prefix or name.startswith(prefix + ".")
    }
    facts = {
        "shipped": shipped,
        "controller_package": sorted(n for n in sys.modules if n == "sglbench" or n.startswith("sglbench.")),
        "gib": capacity.GiB,
        "h100_memory_gib": gpus.find_gpu("H100").memory_gib,
        "bench_spec": BenchSpec.__module__,
    }
    write_atomic(module.params["out"], json.dumps(facts))
    module.exit_json(changed=False)


if __name__ == "__main__":
    main()
"""

PLAYBOOK = """\
- name: Ship hostlib
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Run a module that imports hostlib
      sglbench_shipping_probe:
        out: "{{ out }}"
"""

# capacity, loadgen and unit_files and everything they import, directly or through a sibling.
EXPECTED = {
    "__init__",
    "atomic_file",
    "capacity_variants",
    "capacity",
    "checkpoint",
    "forked",
    "geometry",
    "gpus",
    "hf_cache",
    "loadgen",
    "load_points",
    "loadgen_api",
    "loadgen_http",
    "long_context",
    "metrics",
    "prompts",
    "result_schema",
    "server_api",
    "sessions",  # the load generator sends multi-turn sessions; they read the workload sources' words
    "sglang_args",
    "sglang_catalog",
    "sglang_defaults",
    "sglang_facts",
    "token_blocks",
    "trace_replay",
    "unit_files",
    "workloads",
}


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> dict:
    tmp = tmp_path_factory.mktemp("shipping")
    (tmp / "library").mkdir()
    (tmp / "library" / "sglbench_shipping_probe.py").write_text(MODULE)
    (tmp / "play.yml").write_text(PLAYBOOK)
    out = tmp / "facts.json"
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),  # the project's module_utils = plugins/module_utils
        "ANSIBLE_LIBRARY": str(tmp / "library"),
        "ANSIBLE_HOME": str(tmp / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp / "local-tmp"),
        "ANSIBLE_REMOTE_TEMP": str(tmp / "remote-tmp"),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
    }
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(tmp / "play.yml"), "-e", f"out={out}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_the_finder_ships_the_package_and_every_sibling_it_imports(shipped: dict) -> None:
    assert set(shipped["shipped"]) == EXPECTED


def test_the_module_runs_from_the_payload_alone(shipped: dict) -> None:
    assert shipped["controller_package"] == []
    for name, path in shipped["shipped"].items():
        assert ".zip/ansible/module_utils/sglbench_hostlib/" in path, (name, path)
    assert shipped["gib"] == 1 << 30 and shipped["h100_memory_gib"] > 0
    assert shipped["bench_spec"] == "ansible.module_utils.sglbench_hostlib.loadgen"


def test_plugins_modules_import_hostlib_only_through_the_package() -> None:
    for path in sorted((REPO / "plugins" / "modules").glob("*.py")):
        imports = [line for line in path.read_text().splitlines() if line.startswith(("from ", "import "))]
        ours = [line for line in imports if "sglbench" in line]
        prefix = "from ansible.module_utils.sglbench_hostlib"
        assert all(line.startswith(prefix) for line in ours), (path, ours)
    link = REPO / "plugins" / "module_utils" / "sglbench_hostlib"
    assert sorted(p.name for p in link.parent.iterdir()) == ["sglbench_hostlib"]
    assert os.readlink(link) == "../../python/sglbench/hostlib"
