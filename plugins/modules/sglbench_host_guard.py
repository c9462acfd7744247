#!/usr/bin/python
"""Ansible module: end a benchmark client left on the GPU host by a dead campaign of this controller."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_host_guard
short_description: End an orphaned benchmark client of this controller; refuse one of another controller
description:
  - The benchmark module holds C(/run/sglbench/bench.lock) on the GPU host while it sends load and writes
    its pid, unit, run id and controller into it. A client whose controller process was killed keeps
    running on the host (killing C(ssh) or C(podman exec) does not end it).
  - When the lock is held by a client of the same I(controller), its campaign is gone (the controller's
    host lock is ours), so the client and its child processes get SIGTERM, then SIGKILL after
    I(kill_grace) seconds.
  - When it is held by a client of another controller, the module fails and names it, since two
    controllers must not drive one host.
  - Nothing happens (no change) when no client runs. In check mode it only reports.
options:
  controller:
    description: Name of the controller this campaign runs on (its hostname).
    type: str
    required: true
  run_id:
    description: Run id of this campaign (reported only).
    type: str
    default: ""
  dir:
    description: Directory of the bench lock on the host.
    type: path
    default: /run/sglbench
  kill_grace:
    description: Seconds between SIGTERM and SIGKILL.
    type: float
    default: 5
extends_documentation_fragment:
  - sglbench
"""

EXAMPLES = r"""
- name: stop | End benchmark clients left by a dead campaign
  sglbench_host_guard:
    controller: "{{ sglbench_controller }}"
    run_id: "{{ sglbench_run_id }}"
"""

RETURN = r"""
found:
  description: The client that held the bench lock (pid, unit, url, run_id, controller, started_at), or null.
  type: dict
  returned: always
killed:
  description: Pids that were signalled.
  type: list
  elements: int
  returned: always
freed:
  description: Whether the bench lock is free now.
  type: bool
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib.host_guard import Campaign, GuardRefused, clear_orphans


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "controller": {"type": "str", "required": True},
            "run_id": {"type": "str", "default": ""},
            "dir": {"type": "path", "default": "/run/sglbench"},
            "kill_grace": {"type": "float", "default": 5.0},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        report = clear_orphans(
            Campaign(p["run_id"], p["controller"]), p["dir"], p["kill_grace"], check_mode=module.check_mode
        )
    except GuardRefused as err:
        module.fail_json(msg=str(err))
        return
    module.exit_json(changed=bool(report.killed), **report.as_dict())


if __name__ == "__main__":
    main()
