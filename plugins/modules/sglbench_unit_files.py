#!/usr/bin/python
"""Ansible module: install a set of systemd unit files in one round trip, verified, stale ones pruned."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_unit_files
short_description: Install rendered systemd unit files in one round trip, verify them, prune stale ones
description:
  - Writes each file of I(files) into I(dir) when its content differs (atomically, with I(mode)).
  - Changed units are verified with C(systemd-analyze verify) under their real unit names before anything is
    written; a unit that does not verify fails the task and nothing is installed.
  - Files matching I(prune_pattern) that contain I(marker) but are not in I(files) (configs removed from the
    matrix) are stopped with C(systemctl stop) and removed. Files without the marker are never touched.
  - Supports check mode and C(--diff) (one diff per written or removed file).
  - Does not reload systemd; notify a handler when C(changed).
options:
  dir:
    description: Directory of the unit files.
    type: path
    default: /etc/systemd/system
  files:
    description: The desired files, each with C(name) (file name in I(dir)) and C(content).
    type: list
    elements: dict
    required: true
  mode:
    description: File mode of written files.
    type: str
    default: "0644"
  prune_pattern:
    description: Glob of file names this module manages (candidates for removal).
    type: str
    default: sglang-*.service
  marker:
    description: Text a file must contain to be removed by this module.
    type: str
    default: "sglbench:sglang_units"
  validate:
    description: Verify changed units with C(systemd-analyze verify) before installing them.
    type: bool
    default: true
extends_documentation_fragment:
  - sglbench
attributes:
  diff_mode:
    support: full
"""

EXAMPLES = r"""
- name: units | Install the unit files
  sglbench_unit_files:
    dir: /etc/systemd/system
    files:
      - name: sglang-qwen-ar-tp1.service
        content: "{{ lookup('ansible.builtin.template', 'sglang-instance.service.j2') }}"
"""

RETURN = r"""
written:
  description: Names of files written (new or changed).
  type: list
  elements: str
  returned: always
removed:
  description: Names of managed files removed (their units were stopped first).
  type: list
  elements: str
  returned: always
unchanged:
  description: Names of files already up to date.
  type: list
  elements: str
  returned: always
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib.unit_files import (
    diff_entries,
    plan_files,
    read_matching,
    write_atomic,
)


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec={
            "dir": {"type": "path", "default": "/etc/systemd/system"},
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "content": {"type": "str", "required": True},
                },
            },
            "mode": {"type": "str", "default": "0644"},
            "prune_pattern": {"type": "str", "default": "sglang-*.service"},
            "marker": {"type": "str", "default": "sglbench:sglang_units"},
            "validate": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )


def verify(module: AnsibleModule, write: dict[str, str], installed: dict[str, str]) -> None:
    """systemd-analyze verify every changed unit under its real name, next to the other new units."""
    if not write:
        return
    tmp = tempfile.mkdtemp(prefix="sglbench-verify-")
    try:
        for name, content in {**installed, **write}.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as fh:
                fh.write(content)
        paths = [os.path.join(tmp, name) for name in sorted(write)]
        rc, out, err = module.run_command(
            ["systemd-analyze", "verify", *paths], environ_update={"SYSTEMD_LOG_COLOR": "0"}
        )
        if rc == 0:
            return
        for path in paths:  # name the unit(s) at fault
            rc1, out1, err1 = module.run_command(["systemd-analyze", "verify", path])
            if rc1 != 0:
                name = os.path.basename(path)
                why = (err1 or out1).strip().replace(tmp + "/", "")
                module.fail_json(
                    msg=f"unit {name} does not verify (systemd-analyze rc={rc1}); nothing installed: {why}",
                    unit=name,
                    content=write[name],
                )
        module.fail_json(msg=f"units do not verify together (rc={rc}): {(err or out).strip()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(module: AnsibleModule) -> None:
    p = module.params
    directory = p["dir"]
    desired = {f["name"]: f["content"] for f in p["files"]}
    bad = [n for n in desired if "/" in n or n in ("", ".", "..")]
    if bad:
        module.fail_json(msg=f"file names must be plain names inside {directory}: {bad}")
    existing = read_matching(directory, list(desired), p["prune_pattern"])
    plan = plan_files(existing, desired, p["prune_pattern"], p["marker"])
    result = {
        "changed": plan.changed,
        "written": sorted(plan.write),
        "removed": plan.remove,
        "unchanged": plan.unchanged,
    }
    if module._diff:
        result["diff"] = diff_entries(plan, directory)
    if p["validate"] and plan.write:
        verify(module, plan.write, {n: c for n, c in desired.items() if n not in plan.write})
    if module.check_mode or not plan.changed:
        module.exit_json(**result)
    mode = int(p["mode"], 8)
    os.makedirs(directory, exist_ok=True)
    for name, content in plan.write.items():
        write_atomic(os.path.join(directory, name), content, mode)
    for name in plan.remove:
        module.run_command(["systemctl", "stop", name])
        os.unlink(os.path.join(directory, name))
    module.exit_json(**result)


def main() -> None:
    run(build_module())


if __name__ == "__main__":
    main()
