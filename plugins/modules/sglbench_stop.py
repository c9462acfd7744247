#!/usr/bin/python
"""Ansible module: the stop phase in one round trip: no SGLang unit or client of ours left, GPUs free."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_stop
short_description: Stop every SGLang unit and wait until the GPUs are free, in one call
description:
  - The stop phase of a config attempt as one host call, in this order.
  - With I(journal), first reads the full journal of that start of its unit (selected by its InvocationID,
    so earlier starts never leak in) and classifies a failure from it (zero_requests, not_enough_memory,
    cuda_oom, bad_args, port_in_use, readiness_timeout, unknown), before the stop ends the server; the
    unit state returned with it is the one before the stop.
  - Ends a benchmark client left on the host by a dead campaign of this I(controller) (it holds
    C(/run/sglbench/bench.lock)); one of another controller makes the module fail, naming it, since two
    controllers must not drive one host.
  - Stops I(target) when it is active; every SGLang unit is C(PartOf=) it (and C(Wants=) it, so none runs
    while it is inactive). A host without the target has nothing to stop.
  - Polls C(nvidia-smi) until the requested GPUs hold no compute process and at most I(threshold_mib) in
    use. After I(grace) seconds, holders whose command line contains I(kill_match) get SIGTERM, then SIGKILL
    after I(kill_grace) seconds, together with their topmost matching ancestor (the server's main process).
    Processes that do not match are never killed. Fails with what still holds memory when the GPUs are not
    free by I(timeout).
  - In check mode it only reads and reports (stops and kills nothing).
options:
  controller:
    description: Name of the controller this campaign runs on (its hostname).
    type: str
    required: true
  run_id:
    description: Run id of this campaign (reported only).
    type: str
    default: ""
  guard_dir:
    description: Directory of the bench lock on the host.
    type: path
    default: /run/sglbench
  target:
    description: The systemd target every SGLang unit is C(PartOf=).
    type: str
    default: sglang.target
  gpus:
    description: GPU indices that must be free. Empty means every GPU.
    type: list
    elements: int
    default: []
  timeout:
    description: Seconds to wait for free GPUs in total.
    type: float
    default: 60
  grace:
    description: Seconds to wait for memory to be released on its own before killing leftovers.
    type: float
    default: 2
  kill_grace:
    description: Seconds between SIGTERM and SIGKILL (leftover workers and an orphaned benchmark client).
    type: float
    default: 5
  kill_match:
    description: Substring a holder's command line must contain to be killed (empty disables killing).
    type: str
    default: sglang
  threshold_mib:
    description: Memory (MiB) a GPU may show in use and still count as free (driver/context overhead).
    type: int
    default: 1024
  interval:
    description: Seconds between GPU polls.
    type: float
    default: 0.2
  nvidia_smi:
    description: Path or name of nvidia-smi.
    type: str
    default: nvidia-smi
  spool_dir:
    description:
      - A benchmark spool (C(module_utils/sglbench_hostlib/point_spool)) whose points the controller has
        committed, removed after the stop. Omit to keep every spool.
    type: path
  journal:
    description: The start whose journal to read before stopping; omit to read none.
    type: dict
    suboptions:
      unit:
        description: The systemd unit, e.g. C(sglang-qwen-ar-tp1.service).
        type: str
        required: true
      invocation_id:
        description: InvocationID of the start to read. Default is the unit's current (most recent) one.
        type: str
      wait_outcome:
        description:
          - How the readiness wait ended (C(ready), C(unit_ended), C(timeout)); C(timeout) turns an
            unclassified failure into C(readiness_timeout). Omit for a start that did not fail.
        type: str
      redact:
        description: Secret strings (API key, tokens) replaced by C(<redacted>) in everything returned.
        type: list
        elements: str
        default: []
      settle:
        description: Seconds to wait for late journal lines when the server's main process has exited.
        type: float
        default: 1.0
extends_documentation_fragment:
  - sglbench
"""

EXAMPLES = r"""
- name: stop | Stop every SGLang unit and free GPUs 0-3
  sglbench_stop:
    controller: "{{ sglbench_controller }}"
    gpus: [0, 1, 2, 3]

- name: cycle | Keep the journal of this start, then stop everything
  sglbench_stop:
    controller: "{{ sglbench_controller }}"
    journal:
      unit: sglang-qwen-dflash-tp1.service
      invocation_id: "{{ wait.invocation_id }}"
      wait_outcome: "{{ wait.outcome }}"
"""

RETURN = r"""
free:
  description: Whether the GPUs are free.
  type: bool
  returned: always
killed:
  description: Leftover processes that were killed (pid, gpu_index, used_mib, cmdline, signal).
  type: list
  elements: dict
  returned: always
report:
  description: Human-readable report of what held the GPUs (empty when they were free at once).
  type: str
  returned: always
gpus:
  description: Final memory per requested GPU (index, used_mib, total_mib).
  type: list
  elements: dict
  returned: always
waited_s:
  description: Seconds waited for free GPUs.
  type: float
  returned: always
guard:
  description: The orphaned benchmark client that was found (C(found)), the pids signalled (C(killed)) and
    whether the bench lock is free now (C(freed)).
  type: dict
  returned: always
target_stopped:
  description: Whether the target was active and got stopped (false when the host has no such target).
  type: bool
  returned: always
target_stop_s:
  description: >-
    Seconds C(systemctl stop) of the target took, i.e. the servers' own stop (SGLang drains its requests
    and checks for its exit every 5 s); null when nothing was stopped.
  type: float
  returned: always
journal:
  description:
    - With I(journal), the journal of that start - C(journal) (full text, one entry per line), C(entries),
      C(invocation_id), C(cause) (null when the start did not fail), C(cause_lines), C(startup) (SGLang
      startup facts), C(ready_logged_at) and C(unit_state) (C(systemctl show) before the stop) - else null.
    - When the journal cannot be read, C(error) says why; the stop goes on.
  type: dict
  returned: always
spool_removed:
  description: Whether I(spool_dir) existed and was removed.
  type: bool
  returned: success
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib import point_spool
from ansible.module_utils.sglbench_hostlib.gpu_free import FreeSpec, HostOps, wait_free
from ansible.module_utils.sglbench_hostlib.host_guard import Campaign, GuardRefused, clear_orphans
from ansible.module_utils.sglbench_hostlib.nvidia_smi import NvidiaSmiError
from ansible.module_utils.sglbench_hostlib.sglang_logs import start_journal
from ansible.module_utils.sglbench_hostlib.systemd_unit import (
    read_start_journal,
    read_unit_state,
    redact_entries,
)

# What the GPU wait does to the host (nvidia-smi, /proc, signals, the clock).
HOST_OPS = HostOps()


class StopError(Exception):
    """The stop cannot go on; the message says what and where."""


def build_module() -> AnsibleModule:
    journal = {
        "unit": {"type": "str", "required": True},
        "invocation_id": {"type": "str"},
        "wait_outcome": {"type": "str"},
        "redact": {"type": "list", "elements": "str", "default": [], "no_log": True},
        "settle": {"type": "float", "default": 1.0},
    }
    return AnsibleModule(
        argument_spec={
            "controller": {"type": "str", "required": True},
            "run_id": {"type": "str", "default": ""},
            "guard_dir": {"type": "path", "default": "/run/sglbench"},
            "target": {"type": "str", "default": "sglang.target"},
            "gpus": {"type": "list", "elements": "int", "default": []},
            "timeout": {"type": "float", "default": 60.0},
            "grace": {"type": "float", "default": 2.0},
            "kill_grace": {"type": "float", "default": 5.0},
            "kill_match": {"type": "str", "default": "sglang"},
            "threshold_mib": {"type": "int", "default": 1024},
            "interval": {"type": "float", "default": 0.2},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "journal": {"type": "dict", "options": journal},
            "spool_dir": {"type": "path"},
        },
        supports_check_mode=True,
    )


def read_journal(runner, j: dict) -> dict:
    """The journal of one start, read before the stop ends it (a just-exited server gets ``settle``).
    What cannot be read is said in ``error``: the stop goes on either way."""
    unit = j["unit"]
    try:
        state = read_unit_state(unit, runner=runner)
    except RuntimeError as err:
        return {"unit": unit, "error": f"cannot read the state of {unit}: {err}"}
    invocation_id = j["invocation_id"] or state.invocation_id
    if not invocation_id:
        return {
            "unit": unit,
            "unit_state": state.as_dict(),
            "error": f"{unit} has no InvocationID (it was never started since boot); nothing to read",
        }
    try:
        entries = read_start_journal(invocation_id, runner, j["settle"] if state.ended else 0.0)
    except RuntimeError as err:
        return {
            "unit": unit,
            "invocation_id": invocation_id,
            "unit_state": state.as_dict(),
            "error": str(err),
        }
    entries = redact_entries(entries, j["redact"])
    out = start_journal(entries, j["wait_outcome"], state.result)
    return {**out, "unit": unit, "invocation_id": invocation_id, "unit_state": state.as_dict()}


def stop_target(runner, target: str, check_mode: bool) -> bool:
    """Stop ``target``, and so every unit PartOf= it, when it is active (every unit Wants= it, so no unit
    runs while it is inactive); True when it was stopped. A host without the target (units never
    deployed) has nothing to stop."""
    try:
        state = read_unit_state(target, runner=runner)
    except RuntimeError as err:
        raise StopError(f"cannot read the state of {target}: {err}") from None
    if state.load_state == "not-found" or state.active_state in ("inactive", "failed", ""):
        return False
    if check_mode:
        return True
    rc, out, err = runner(["systemctl", "stop", target])
    if rc != 0:
        raise StopError(f"systemctl stop {target} failed (rc={rc}): {(err or out).strip()}")
    return True


def free_spec(p: dict) -> FreeSpec:
    return FreeSpec(
        gpus=tuple(p["gpus"]),
        timeout_s=p["timeout"],
        grace_s=p["grace"],
        kill_grace_s=p["kill_grace"],
        kill_match=p["kill_match"],
        threshold_mib=p["threshold_mib"],
        interval_s=p["interval"],
        nvidia_smi=p["nvidia_smi"],
    )


def run(module: AnsibleModule) -> None:
    p = module.params

    def runner(argv):
        return module.run_command(list(argv))

    out: dict = {
        "changed": False,
        "journal": None,
        "guard": None,
        "target_stopped": False,
        "target_stop_s": None,
    }
    try:
        if p["journal"]:
            out["journal"] = read_journal(runner, p["journal"])
        guard = clear_orphans(
            Campaign(p["run_id"], p["controller"]),
            p["guard_dir"],
            p["kill_grace"],
            check_mode=module.check_mode,
        )
        out["guard"] = guard.as_dict()
        began = time.monotonic()
        out["target_stopped"] = stop_target(runner, p["target"], module.check_mode)
        if out["target_stopped"] and not module.check_mode:
            out["target_stop_s"] = round(time.monotonic() - began, 3)
        spec = free_spec(p)
        freed = wait_free(spec, check_mode=module.check_mode, ops=HOST_OPS)
    except (GuardRefused, StopError) as err:
        module.fail_json(msg=str(err), **out)
        return
    except NvidiaSmiError as err:
        module.fail_json(msg=f"cannot check GPU memory: {err}", **out)
        return
    out.update(freed.as_dict())
    out["spool_removed"] = (
        bool(p["spool_dir"]) and not module.check_mode and point_spool.remove_dir(p["spool_dir"])
    )
    out["changed"] = bool(out["target_stopped"] or freed.killed or guard.killed or out["spool_removed"])
    if freed.free:
        module.exit_json(**out)
    module.fail_json(msg=freed.failure_message(spec), **out)


def main() -> None:
    run(build_module())


if __name__ == "__main__":
    main()
