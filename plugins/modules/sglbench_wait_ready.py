#!/usr/bin/python
"""Ansible module: wait for an SGLang server to be ready while watching its systemd unit."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_wait_ready
short_description: Wait for an SGLang server's readiness endpoint while watching its systemd unit
description:
  - Polls the server's readiness endpoint (default C(/health_generate)) until it answers HTTP 200.
  - Before every poll it reads C(systemctl show -p ActiveState,SubState,ExecMainStatus,...) of the unit;
    when the unit failed or its main process exited, it stops waiting at once instead of waiting out the
    deadline.
  - Fails with the unit state, the URL and the timeout when the server is not ready.
  - Read-only. Works in check mode (it only observes).
options:
  unit:
    description: Name of the systemd unit that runs the server, e.g. C(sglang-qwen-ar-tp1.service).
    type: str
    required: true
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
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib.readiness import READY, UNIT_ENDED, wait_ready
from ansible.module_utils.sglbench_hostlib.server_api import HEALTH_ENDPOINT, endpoint_url, http_status
from ansible.module_utils.sglbench_hostlib.systemd_unit import read_unit_state


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "url": {"type": "str", "required": True},
            "endpoint": {"type": "str", "default": HEALTH_ENDPOINT},
            "timeout": {"type": "float", "default": 900.0},
            "interval": {"type": "float", "default": 0.2},
            "probe_timeout": {"type": "float", "default": 2.0},
        },
        supports_check_mode=True,
    )


def run(module: AnsibleModule) -> None:
    p = module.params
    unit = p["unit"]
    url = endpoint_url(p["url"], p["endpoint"])

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
        module.fail_json(msg=f"cannot watch {unit} while waiting for {url}: {err}", unit=unit, url=url)
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
        "changed": False,
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
        module.exit_json(**out)
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
    module.fail_json(msg=msg, **out)


def main() -> None:
    run(build_module())


if __name__ == "__main__":
    main()
