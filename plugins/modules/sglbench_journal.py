#!/usr/bin/python
"""Ansible module: the full journal of one start of an SGLang unit, with the failure classified."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_journal
short_description: Read the full journal of one start of an SGLang unit and classify why it failed
description:
  - Reads every journal entry of one start of the unit, selected by its InvocationID
    (C(_SYSTEMD_INVOCATION_ID=) for the server's own output, C(INVOCATION_ID=) for systemd's messages
    about it),
    so earlier starts never leak in and nothing is truncated.
  - Parses SGLang's startup lines (KV cache, Mamba cache, memory pool, summary) and classifies a failure
    (zero_requests, not_enough_memory, cuda_oom, bad_args, port_in_use, readiness_timeout, unknown) with the
    lines that show it.
  - Read-only. Works in check mode.
options:
  unit:
    description: The systemd unit, e.g. C(sglang-qwen-ar-tp1.service).
    type: str
    required: true
  invocation_id:
    description: InvocationID of the start to read. Default is the unit's current (most recent) one.
    type: str
  wait_outcome:
    description:
      - How the readiness wait ended (C(ready), C(unit_ended), C(timeout)); C(timeout) turns an unclassified
        failure into C(readiness_timeout). Omit for a start that did not fail.
    type: str
  redact:
    description: Secret strings (API key, tokens) replaced by C(<redacted>) in everything returned.
    type: list
    elements: str
    default: []
  settle:
    description: Seconds to wait for late journal lines of a process that just exited.
    type: float
    default: 1.0
extends_documentation_fragment:
  - sglbench
"""

EXAMPLES = r"""
- name: rescue | Save the journal of this start
  sglbench_journal:
    unit: sglang-qwen-dflash-tp1.service
    invocation_id: "{{ wait.invocation_id }}"
    wait_outcome: "{{ wait.outcome }}"
  register: journal
"""

RETURN = r"""
journal:
  description: The full journal of this start, one entry per line (ISO time, identifier[pid], message).
  type: str
  returned: always
entries:
  description: Number of journal entries.
  type: int
  returned: always
invocation_id:
  description: The InvocationID that was read.
  type: str
  returned: always
cause:
  description: Classified failure cause; null when the start did not fail.
  type: str
  returned: always
  sample: zero_requests
cause_lines:
  description: The log lines that show the cause.
  type: list
  elements: str
  returned: always
startup:
  description: SGLang startup facts parsed from the log (KV tokens, Mamba slots, summary line, ready flag...).
  type: dict
  returned: always
ready_logged_at:
  description: Unix time of the "ready to roll" line (null if absent).
  type: float
  returned: always
unit_state:
  description: C(systemctl show) snapshot of the unit.
  type: dict
  returned: always
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib.sglang_logs import classify_start, parse_startup_log
from ansible.module_utils.sglbench_hostlib.systemd_unit import (
    JournalEntry,
    first_entry_time,
    journal_argv,
    messages_text,
    parse_journal_json,
    read_unit_state,
    render_journal,
)

READY_LINE = "The server is fired up and ready to roll!"


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "required": True},
            "invocation_id": {"type": "str"},
            "wait_outcome": {"type": "str"},
            "redact": {"type": "list", "elements": "str", "default": [], "no_log": True},
            "settle": {"type": "float", "default": 1.0},
        },
        supports_check_mode=True,
    )


def read_entries(module: AnsibleModule, invocation_id: str, settle: float):
    """Read the journal until two reads agree (late lines of a just-exited process), up to ``settle`` s."""
    module.run_command(["journalctl", "--sync"])
    deadline = time.monotonic() + settle
    previous = -1
    while True:
        rc, out, err = module.run_command(journal_argv(invocation_id))
        if rc != 0:
            module.fail_json(msg=f"journalctl failed for invocation {invocation_id} (rc={rc}): {err.strip()}")
        entries = parse_journal_json(out)
        if len(entries) == previous or time.monotonic() >= deadline:
            return entries
        previous = len(entries)
        time.sleep(0.2)


def redact_entry(entry: JournalEntry, secrets: list[str]) -> JournalEntry:
    message = entry.message
    for secret in secrets:
        message = message.replace(secret, "<redacted>")
    return JournalEntry(entry.realtime_us, entry.identifier, entry.pid, message)


def run(module: AnsibleModule) -> None:
    p = module.params
    unit = p["unit"]
    try:
        state = read_unit_state(unit, runner=lambda argv: module.run_command(list(argv)))
    except RuntimeError as err:
        module.fail_json(msg=f"cannot read the state of {unit}: {err}")
        return
    invocation_id = p["invocation_id"] or state.invocation_id
    if not invocation_id:
        module.fail_json(
            msg=f"{unit} has no InvocationID (it was never started since boot); nothing to read",
            unit_state=state.as_dict(),
        )
    entries = read_entries(module, invocation_id, p["settle"])
    secrets = [s for s in p["redact"] if s]
    if secrets:
        entries = [redact_entry(e, secrets) for e in entries]
    text = messages_text(entries)
    startup = parse_startup_log(text)
    verdict = classify_start(text, p["wait_outcome"], state.result)
    ready_us = first_entry_time(entries, READY_LINE)
    module.exit_json(
        changed=False,
        unit=unit,
        invocation_id=invocation_id,
        journal=render_journal(entries),
        entries=len(entries),
        cause=verdict["cause"],
        cause_lines=verdict["lines"],
        startup=startup,
        ready_logged_at=None if ready_us is None else ready_us / 1e6,
        unit_state=state.as_dict(),
    )


def main() -> None:
    run(build_module())


if __name__ == "__main__":
    main()
