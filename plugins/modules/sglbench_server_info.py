#!/usr/bin/python
"""Ansible module: normalised, secret-free facts from a running SGLang server's /server_info."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglbench_server_info
short_description: Read KV capacity, request slots and settings from a running SGLang server
description:
  - Reads C(/server_info), falling back to the deprecated C(/get_server_info) on older SGLang builds.
  - Returns a whitelisted, typed view (max_total_num_tokens, effective max running requests, memory usage,
    context length, speculative settings, version). Secrets such as C(api_key) are never returned and the raw
    payload never leaves the host.
  - Read-only. Works in check mode.
options:
  url:
    description: Base URL of the server, e.g. C(http://127.0.0.1:30000).
    type: str
    required: true
  api_key:
    description: Bearer key when the server runs with C(--api-key).
    type: str
  timeout:
    description: Seconds to wait for each HTTP request.
    type: float
    default: 10
extends_documentation_fragment:
  - sglbench
"""

EXAMPLES = r"""
- name: probe | Read server facts
  sglbench_server_info:
    url: http://127.0.0.1:30000
  register: info
"""

RETURN = r"""
server_info:
  description: Normalised server facts (see docs/records.md for every field).
  type: dict
  returned: success
  sample:
    endpoint: /server_info
    max_total_num_tokens: 11893
    effective_max_running_requests: 4
    context_length: 32768
    speculative: {algorithm: DFLASH, num_draft_tokens: 16}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglbench_hostlib.server_api import (
    ServerApiError,
    fetch_server_info,
    normalise_server_info,
)


def build_module() -> AnsibleModule:
    return AnsibleModule(
        argument_spec={
            "url": {"type": "str", "required": True},
            "api_key": {"type": "str", "no_log": True},
            "timeout": {"type": "float", "default": 10.0},
        },
        supports_check_mode=True,
    )


def run(module: AnsibleModule) -> None:
    p = module.params
    try:
        endpoint, payload = fetch_server_info(p["url"], p["timeout"], p["api_key"])
    except ServerApiError as err:
        module.fail_json(msg=str(err), url=p["url"], timeout=p["timeout"])
        return
    module.exit_json(changed=False, server_info=normalise_server_info(payload, endpoint))


def main() -> None:
    run(build_module())


if __name__ == "__main__":
    main()
