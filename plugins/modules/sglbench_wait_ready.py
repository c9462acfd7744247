#!/usr/bin/python
"""Ansible module: start an SGLang unit, wait for its server to be ready while watching the unit, read
its server facts: the start, health and probe phases in one round trip."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_wait_ready
short_description: Start an SGLang unit, wait for readiness while watching it, read its server facts
description:
  - With I(start), first starts the unit (C(systemctl start --no-block)), so the wait watches that start.
  - Polls the server's readiness endpoint (default C(/health_generate)) until it answers HTTP 200.
  - Before every poll it reads C(systemctl show -p ActiveState,SubState,ExecMainStatus,...) of the unit;
    when the unit failed or its main process exited, it stops waiting at once instead of waiting out the
    deadline.
  - With I(server_info), once ready reads C(/server_info) (falling back to the deprecated
    C(/get_server_info)) and returns its whitelisted, secret-free view; the raw payload never leaves the host.
  - Fails with the unit state, the URL and the timeout when the server is not ready. Every result says
    which phases the call entered (C(phases_entered_s)); a failure happened in the last of them.
  - Without I(start) it is read-only. In check mode it starts nothing and only observes.
options:
  unit:
    description: Name of the systemd unit that runs the server, e.g. C(sglang-qwen-ar-tp1.service).
    type: str
    required: true
  start:
    description: Start the unit first (without waiting for systemd's start job).
    type: bool
    default: false
  server_info:
    description: Once ready, read the server's facts from C(/server_info).
    type: bool
    default: false
  api_key:
    description: Bearer key for C(/server_info) when the server runs with C(--api-key).
    type: str
  info_timeout:
    description: Seconds to wait for each C(/server_info) request.
    type: float
    default: 10
  url:
    description: Base URL of the server, e.g. C(http://127.0.0.1:30000).
    type: str
    required: true
  endpoint:
    description: Readiness path. SGLang answers 503 until its warmup generation succeeded.
    type: str
    default: /health_generate
  timeout:
    description: Seconds to wait for readiness before giving up (the model load time on a real GPU host).
    type: float
    default: 900
  interval:
    description: Seconds between polls.
    type: float
    default: 0.2
  probe_timeout:
    description: Timeout in seconds of one HTTP probe.
    type: float
    default: 2.0
extends_documentation_fragment:
  - sglbench
"""

EXAMPLES = r"""
- name: health | Wait for the server
  sglbench_wait_ready:
    unit: sglang-qwen-ar-tp1.service
    url: http://127.0.0.1:30000
    timeout: 900

- name: start | Start the unit, wait until it is ready and read its facts
  sglbench_wait_ready:
    unit: sglang-qwen-ar-tp1.service
    url: http://127.0.0.1:30000
    start: true
    server_info: true
  register: wait
"""

RETURN = r"""
ready:
  description: Whether the endpoint answered 200.
  type: bool
  returned: always
outcome:
  description: C(ready), C(unit_ended) (the unit failed or exited while starting) or C(timeout).
  type: str
  returned: always
  sample: unit_ended
elapsed_s:
  description: Seconds this module waited.
  type: float
  returned: always
time_to_ready_s:
  description: Seconds from the unit's main process start to readiness being seen (null unless ready).
  type: float
  returned: always
detect_latency_s:
  description: When the unit ended, seconds from its main process exit to this module noticing it.
  type: float
  returned: always
polls:
  description: Number of HTTP probes made.
  type: int
  returned: always
http_statuses:
  description: Count of each HTTP status seen (C(None) = nothing answered).
  type: dict
  returned: always
unit_state:
  description: Last C(systemctl show) snapshot (active_state, sub_state, result, invocation_id...).
  type: dict
  returned: always
invocation_id:
  description: The unit's InvocationID of this start (selects this start's journal).
  type: str
  returned: always
ready_at:
  description: Unix time (host clock) when readiness or the unit's end was seen.
  type: float
  returned: always
exited_at:
  description: Unix time (host clock) when the unit's main process exited (null unless the unit ended).
  type: float
  returned: always
phases_entered_s:
  description:
    - Seconds after the call began at which it entered each phase after the one it began in - C(health)
      (the wait, after I(start)) and C(probe) (the server facts, once ready, with I(server_info)).
  type: dict
  returned: always
  sample: {health: 0.02, probe: 6.31}
call_s:
  description: Seconds from the call's beginning to its result (the phases are placed back from its end).
  type: float
  returned: always
server_info:
  description: With I(server_info), the normalised server facts (see docs/records.md for every field).
  type: dict
  returned: when ready and I(server_info)
  sample:
    endpoint: /server_info
    max_total_num_tokens: 11893
    effective_max_running_requests: 4
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib.readiness import READY, UNIT_ENDED, wait_ready
from ansible.module_utils.sglbench_hostlib.server_api import (
    HEALTH_ENDPOINT,
    ServerApiError,
    endpoint_url,
    fetch_server_info,
    http_status,
    normalise_server_info,
)
from ansible.module_utils.sglbench_hostlib.systemd_unit import read_unit_state


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "start": {"type": "bool", "default": False},
            "server_info": {"type": "bool", "default": False},
            "api_key": {"type": "str", "no_log": True},
            "info_timeout": {"type": "float", "default": 10.0},
            "url": {"type": "str", "required": True},
            "endpoint": {"type": "str", "default": HEALTH_ENDPOINT},
            "timeout": {"type": "float", "default": 900.0},
            "interval": {"type": "float", "default": 0.2},
            "probe_timeout": {"type": "float", "default": 2.0},
        },
        supports_check_mode=True,
    )


class CallPhases:
    """When this call entered each phase after the one it began in, and how long it took (seconds)."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.entered: dict[str, float] = {}

    def enter(self, phase: str) -> None:
        self.entered[phase] = round(time.monotonic() - self.began, 3)

    def result(self) -> dict:
        return {"phases_entered_s": dict(self.entered), "call_s": round(time.monotonic() - self.began, 3)}


def start_unit(module: AnsibleModule, unit: str, phases: CallPhases) -> None:
    """Queue the unit's start and return (``--no-block``): the wait below watches it come up."""
    if not module.check_mode:
        rc, out, err = module.run_command(["systemctl", "start", "--no-block", unit])
        if rc != 0:
            module.fail_json(
                msg=f"cannot start {unit}: systemctl start failed (rc={rc}): {(err or out).strip()}",
                unit=unit,
                changed=False,
                **phases.result(),
            )
    phases.enter("health")


def read_server_info(module: AnsibleModule, out: dict, phases: CallPhases) -> None:
    """The probe phase: the ready server's facts into ``out``, or the failure naming the URL."""
    p = module.params
    phases.enter("probe")
    try:
        endpoint, payload = fetch_server_info(p["url"], p["info_timeout"], p["api_key"])
    except ServerApiError as err:
        module.fail_json(msg=str(err), timeout=p["info_timeout"], **out, **phases.result())
        return
    out["server_info"] = normalise_server_info(payload, endpoint)


def run(module: AnsibleModule) -> None:
    p = module.params
    unit = p["unit"]
    url = endpoint_url(p["url"], p["endpoint"])
    phases = CallPhases()
    if p["start"]:
        start_unit(module, unit, phases)
    changed = p["start"] and not module.check_mode

    def check_unit():
        return read_unit_state(unit, runner=lambda argv: module.run_command(list(argv)))

    try:
        result = wait_ready(
            check_unit=check_unit,
            probe=lambda t: http_status(url, t),
            timeout_s=p["timeout"],
            interval_s=p["interval"],
            clock=time.monotonic,
            sleep=time.sleep,
            probe_timeout_s=p["probe_timeout"],
        )
    except RuntimeError as err:
        module.fail_json(
            msg=f"cannot watch {unit} while waiting for {url}: {err}",
            unit=unit,
            url=url,
            changed=changed,
            **phases.result(),
        )
        return
    now_mono = time.monotonic()
    state = result.unit
    time_to_ready = None
    if result.outcome == READY and state.exec_main_start_monotonic_us:
        time_to_ready = round(now_mono - state.exec_main_start_monotonic_us / 1e6, 3)
    detect_latency = None
    if result.outcome == UNIT_ENDED and state.exec_main_exit_monotonic_us:
        detect_latency = round(now_mono - state.exec_main_exit_monotonic_us / 1e6, 3)
    out = {
        "changed": changed,
        "ready": result.ready,
        "outcome": result.outcome,
        "elapsed_s": round(result.elapsed_s, 3),
        "time_to_ready_s": time_to_ready,
        "detect_latency_s": detect_latency,
        "polls": result.polls,
        "http_statuses": result.statuses,
        "unit": unit,
        "url": url,
        "unit_state": state.as_dict(),
        "invocation_id": state.invocation_id,
        "ready_at": time.time(),
        "exited_at": None if detect_latency is None else round(time.time() - detect_latency, 6),
    }
    if result.ready:
        if p["server_info"]:
            read_server_info(module, out, phases)
        module.exit_json(**out, **phases.result())
    if result.outcome == UNIT_ENDED:
        msg = (
            f"{unit} ended while starting: {state.describe()}; {url} never answered 200 "
            f"(waited {result.elapsed_s:.1f}s of {p['timeout']}s). The journal of this start says why."
        )
    else:
        msg = (
            f"{url} not ready after {p['timeout']}s (last HTTP status {result.last_status}); "
            f"{state.describe()}. Raise the readiness timeout if the model needs longer to load."
        )
    module.fail_json(msg=msg, **out, **phases.result())


def main() -> None:
    run(build_module())


if __name__ == "__main__":
    main()
