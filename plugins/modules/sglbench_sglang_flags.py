#!/usr/bin/python
"""Ansible module: the launch flags of the SGLang installed on the host, from its own parser."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_sglang_flags
short_description: Read the launch_server flags of the installed SGLang from its own argument parser
description:
  - Asks I(sglang_python) for the installed SGLang's version and package directory, then builds the
    release's C(launch_server) parser (C(ServerArgs.add_cli_args)) in that interpreter and returns its
    flags as a catalog (spellings, actions, arity, types, choices, defaults), the authority the matrix
    checks and the capacity planner validate each config's command line against.
  - The catalog is cached per interpreter, version and install (key in C(cache_key)) under
    I(cache_dir), so the parser is built once per host and SGLang version. Nothing is written in check
    mode.
  - Never fails for SGLang's sake. When the probe or the parser cannot run (no SGLang, a broken install,
    a time-out), it returns C(catalog=null) and says why in C(error); the controller then uses the
    shipped catalog of the reported version, or of every known release.
options:
  sglang_python:
    description: Python interpreter that has SGLang installed (the units' interpreter).
    type: str
    required: true
  environment:
    description: Environment the units run with (e.g. the stand-in's release on a sim host).
    type: dict
    default: {}
  cache_dir:
    description: Directory for cached catalogs (created when missing, mode 0755).
    type: str
    default: /var/cache/sglbench/sglang-flags
  timeout:
    description: Seconds the version probe and the parser dump may take each.
    type: int
    default: 180
extends_documentation_fragment:
  - sglbench
"""

EXAMPLES = r"""
- name: preflight | Read the launch flags of the installed SGLang
  sglbench_sglang_flags:
    sglang_python: /opt/sglang/.venv/bin/python
  register: __flags
"""

RETURN = r"""
version:
  description: sglang.__version__ of the install (null when it cannot be imported).
  type: str
  returned: always
path:
  description: The sglang package directory.
  type: str
  returned: always
source:
  description: C(installed) (parser built now), C(cache) (built earlier for this install), or null.
  type: str
  returned: always
catalog:
  description: The release's flags (schema sglbench.sglang_catalog/1), or null when they could not be read.
  type: dict
  returned: always
cache_key:
  description: Cache file name for this interpreter, version and install.
  type: str
  returned: when the version probe worked
cache_file:
  description: >-
    The cached catalog's path on the host when it is there now (read from the cache, or written by this
    call); null in check mode, or when it could not be written. C(sglbench_plan) reads it there.
  type: str
  returned: always
error:
  description: Why the flags could not be read from the install (null when they were).
  type: str
  returned: always
"""

import hashlib
import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib.atomic_file import write_atomic
from ansible.module_utils.sglbench_hostlib.plan_inputs import PlanInputError, parse_probe, probe_argv
from ansible.module_utils.sglbench_hostlib.sglang_parser_dump import dump_argv, parse_dump


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec={
            "sglang_python": {"type": "str", "required": True},
            "environment": {"type": "dict", "default": {}},
            "cache_dir": {"type": "str", "default": "/var/cache/sglbench/sglang-flags"},
            "timeout": {"type": "int", "default": 180},
        },
        supports_check_mode=True,
    )


def cache_key(python: str, version: str, path: str) -> str:
    """One file per interpreter, version and install (a reinstall in place changes the mtime)."""
    server_args = os.path.join(path, "srt", "server_args.py")
    try:
        stamp = str(os.stat(server_args).st_mtime_ns)
    except OSError:
        stamp = "-"
    digest = hashlib.sha256("\0".join((python, version, path, stamp)).encode()).hexdigest()[:16]
    safe_version = "".join(c if c.isalnum() or c in ".+-" else "_" for c in version)
    return f"{safe_version}-{digest}.json"


def read_cache(path: str, version: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    if isinstance(doc, dict) and doc.get("release") == version and isinstance(doc.get("flags"), list):
        return doc
    return None


def _tail(text: str) -> str:
    return " ".join((text or "").strip().splitlines()[-3:])[-400:]


def run(module: AnsibleModule) -> None:
    p = module.params
    env = {str(k): str(v) for k, v in p["environment"].items()}
    result = {
        "changed": False,
        "version": None,
        "path": None,
        "source": None,
        "catalog": None,
        "cache_file": None,
        "error": None,
    }
    rc, out, err = module.run_command(probe_argv(p["sglang_python"]), environ_update=env)
    if rc != 0:
        result["error"] = f"cannot import sglang with {p['sglang_python']} (exit {rc}): {_tail(err or out)}"
        module.exit_json(**result)
    try:
        install = parse_probe(out)
    except PlanInputError as exc:
        result["error"] = str(exc)
        module.exit_json(**result)
    result.update(version=install.version, path=install.path)
    key = cache_key(p["sglang_python"], install.version, install.path)
    result["cache_key"] = key
    cache_file = os.path.join(p["cache_dir"], key)
    cached = read_cache(cache_file, install.version)
    if cached is not None:
        module.exit_json(**{**result, "source": "cache", "catalog": cached, "cache_file": cache_file})
    rc, out, err = module.run_command(dump_argv(p["sglang_python"]), environ_update=env)
    try:
        if rc != 0:
            raise ValueError(f"exit {rc}: {_tail(err or out)}")
        doc = parse_dump(out)
    except ValueError as exc:
        result["error"] = f"cannot build SGLang {install.version}'s launch_server parser: {exc}"
        module.exit_json(**result)
    if not module.check_mode:
        try:
            os.makedirs(p["cache_dir"], mode=0o755, exist_ok=True)
            write_atomic(cache_file, json.dumps(doc, separators=(",", ":")), mode=0o644)
            result["cache_file"] = cache_file
        except OSError as exc:
            module.warn(f"could not cache the SGLang flags in {cache_file}: {exc}")
    module.exit_json(**{**result, "source": "installed", "catalog": doc})


def main() -> None:
    run(build_module())


if __name__ == "__main__":
    main()
