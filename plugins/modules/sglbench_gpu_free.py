#!/usr/bin/python
"""Ansible module: wait until GPUs are really free, killing leftover SGLang workers."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_gpu_free
short_description: Wait until GPUs hold no compute processes and no memory, killing leftover SGLang workers
description:
  - Polls C(nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total) and
    C(nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory,process_name) until the requested GPUs have no
    compute process and at most I(threshold_mib) memory in use.
  - After I(grace) seconds, processes still holding those GPUs whose command line matches I(kill_match) get
    SIGTERM, then SIGKILL after I(kill_grace) seconds, together with their topmost matching ancestor (the
    server's main process), so a leftover server is stopped whole. Processes that do not match are never
    killed.
  - Fails with a report of what still holds memory (pid, command line, MiB per GPU) when the GPUs are not
    free by I(timeout).
  - In check mode it only reports (never kills).
options:
  gpus:
    description: GPU indices that must be free. Empty means every GPU.
    type: list
    elements: int
    default: []
  timeout:
    description: Seconds to wait in total.
    type: float
    default: 60
  grace:
    description: Seconds to wait for memory to be released on its own before killing leftovers.
    type: float
    default: 2
  kill_grace:
    description: Seconds between SIGTERM and SIGKILL.
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
    description: Seconds between polls.
    type: float
    default: 0.2
  nvidia_smi:
    description: Path or name of nvidia-smi.
    type: str
    default: nvidia-smi
extends_documentation_fragment:
  - sglbench
"""

EXAMPLES = r"""
- name: stop | Wait until GPUs 0-3 are free
  sglbench_gpu_free:
    gpus: [0, 1, 2, 3]
    timeout: 60
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
  description: Seconds waited.
  type: float
  returned: always
"""

import os
import signal
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib.nvidia_smi import (
    NvidiaSmiError,
    apps_query_argv,
    gpu_query_argv,
    gpu_report,
    parse_apps,
    parse_gpus,
    read_cmdline,
    run_nvidia_smi,
    server_root,
)


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec={
            "gpus": {"type": "list", "elements": "int", "default": []},
            "timeout": {"type": "float", "default": 60.0},
            "grace": {"type": "float", "default": 2.0},
            "kill_grace": {"type": "float", "default": 5.0},
            "kill_match": {"type": "str", "default": "sglang"},
            "threshold_mib": {"type": "int", "default": 1024},
            "interval": {"type": "float", "default": 0.2},
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
        },
        supports_check_mode=True,
    )


def snapshot(p, wanted):
    gpus = parse_gpus(run_nvidia_smi(gpu_query_argv(p["nvidia_smi"])))
    apps = parse_apps(run_nvidia_smi(apps_query_argv(p["nvidia_smi"])))
    cmdlines = {a.pid: read_cmdline(a.pid) for a in apps}
    return gpus, gpu_report(gpus, apps, wanted, p["threshold_mib"], cmdlines)


def signal_pid(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def run(module: AnsibleModule) -> None:
    p = module.params
    wanted = p["gpus"] or None
    start = time.monotonic()
    deadline = start + p["timeout"]
    killed: list[dict] = []
    termed: dict[int, float] = {}
    first_report = ""
    try:
        while True:
            gpus, report = snapshot(p, wanted)
            if report.free:
                break
            first_report = first_report or report.describe()
            now = time.monotonic()
            if now >= deadline:
                break
            if not module.check_mode and p["kill_match"] and now - start >= p["grace"]:
                for holder in report.holders:
                    if p["kill_match"] not in holder.cmdline:
                        continue
                    # the server's main process first (it takes its workers down), then the holder
                    root = server_root(holder.pid, p["kill_match"])
                    for pid in dict.fromkeys((root, holder.pid)):
                        entry = {**holder.__dict__, "pid": pid, "holder_pid": holder.pid}
                        if pid != holder.pid:
                            entry.update(used_mib=0, cmdline=read_cmdline(pid))
                        sent = termed.get(pid)
                        if sent is None:
                            if signal_pid(pid, signal.SIGTERM):
                                termed[pid] = now
                                killed.append({**entry, "signal": "SIGTERM"})
                        elif now - sent >= p["kill_grace"] and signal_pid(pid, signal.SIGKILL):
                            termed[pid] = float("inf")
                            killed.append({**entry, "signal": "SIGKILL"})
            time.sleep(min(p["interval"], max(0.0, deadline - now)))
    except NvidiaSmiError as err:
        module.fail_json(msg=f"cannot check GPU memory: {err}")
        return
    wanted_set = set(wanted) if wanted else {g.index for g in gpus}
    final = [
        {"index": g.index, "used_mib": g.used_mib, "total_mib": g.total_mib}
        for g in gpus
        if g.index in wanted_set
    ]
    out = {
        "changed": bool(killed),
        "free": report.free,
        "killed": killed,
        "report": first_report,
        "gpus": final,
        "waited_s": round(time.monotonic() - start, 3),
    }
    if report.free:
        module.exit_json(**out)
    unkillable = [
        h.describe() for h in report.holders if not p["kill_match"] or p["kill_match"] not in h.cmdline
    ]
    hint = (
        f" Not killed (command line lacks {p['kill_match']!r}): {'; '.join(unkillable)}."
        if unkillable
        else ""
    )
    module.fail_json(
        msg=(
            f"GPUs {sorted(wanted_set)} still busy after {p['timeout']}s: {report.describe()}.{hint} "
            "Stop those processes (or raise the timeout) before starting the next config."
        ),
        **out,
    )


def main() -> None:
    run(build_module())


if __name__ == "__main__":
    main()
