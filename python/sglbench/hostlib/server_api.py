"""HTTP helpers for talking to a local SGLang server from the GPU host (stdlib only).

Shipped to the host as ``ansible.module_utils.sglbench_hostlib.server_api``. Everything SGLang-specific
about the HTTP API lives here: URL building, the ``/server_info`` -> ``/get_server_info`` endpoint
fallback, secret stripping and the normalised view of ``/server_info`` that goes into records.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from . import sglang_facts as facts

HEALTH_ENDPOINT = facts.READY_ENDPOINT
SERVER_INFO_ENDPOINTS = facts.SERVER_INFO_ENDPOINTS

# Keys whose values are never returned (matched case-insensitively on the key name).
SECRET_KEY_PARTS = ("api_key", "token", "password", "secret", "credential")
# Keys that contain a SECRET_KEY_PART but are plain numbers/settings, not secrets.
NOT_SECRET_KEYS = frozenset(
    {
        "max_total_num_tokens",
        "max_prefill_tokens",
        "token_capacity",
        "speculative_num_draft_tokens",
        "num_reserved_decode_tokens",
        "max_new_tokens",
    }
)
REDACTED = "<redacted>"


class ServerApiError(RuntimeError):
    """A request to the SGLang server failed; the message names the URL and what to check."""


def base_url(host: str, port: int, scheme: str = "http") -> str:
    """``http://host:port`` with IPv6 literals bracketed and the wildcard bind mapped to loopback."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{int(port)}"


def endpoint_url(base: str, path: str) -> str:
    return base.rstrip("/") + "/" + path.lstrip("/")


def _request(url: str, timeout: float, api_key: str | None) -> urllib.request.Request:
    req = urllib.request.Request(url, method="GET")
    req.add_header("Accept", "application/json")
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    return req


def http_status(url: str, timeout: float, api_key: str | None = None) -> int | None:
    """HTTP status of a GET, or None when nothing answered (refused, reset, timed out)."""
    try:
        with urllib.request.urlopen(_request(url, timeout, api_key), timeout=timeout) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except (TimeoutError, urllib.error.URLError, OSError, ValueError):
        return None


def get_json(url: str, timeout: float, api_key: str | None = None) -> tuple[int, Any]:
    """GET ``url`` and decode JSON. Returns ``(status, payload)``; payload is None on non-2xx.

    Raises ServerApiError when nothing answers or the body is not JSON.
    """
    try:
        with urllib.request.urlopen(_request(url, timeout, api_key), timeout=timeout) as resp:
            body = resp.read()
            status = int(resp.status)
    except urllib.error.HTTPError as err:
        return int(err.code), None
    except (TimeoutError, urllib.error.URLError, OSError) as err:
        raise ServerApiError(
            f"no answer from {url} within {timeout}s ({err}); is the server running and listening there?"
        ) from err
    try:
        return status, json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ServerApiError(f"{url} answered {status} but the body is not JSON: {body[:200]!r}") from err


def fetch_server_info(base: str, timeout: float, api_key: str | None = None) -> tuple[str, dict[str, Any]]:
    """Raw ``/server_info`` payload, falling back to the deprecated ``/get_server_info``.

    Returns ``(endpoint, payload)``. The payload can carry secrets: pass it through
    :func:`strip_secrets` or :func:`normalise_server_info` before it leaves the host.
    """
    tried: list[str] = []
    for path in SERVER_INFO_ENDPOINTS:
        url = endpoint_url(base, path)
        status, payload = get_json(url, timeout, api_key)
        if status == 200 and isinstance(payload, dict):
            return path, payload
        tried.append(f"{path} -> HTTP {status}")
        if status in (401, 403):
            raise ServerApiError(
                f"{url} refused the request (HTTP {status}); the server has --api-key set: "
                "give the same key to the probe (sglbench_api_key)"
            )
    raise ServerApiError(f"no server info at {base} ({'; '.join(tried)})")


def _is_secret_key(key: str) -> bool:
    low = key.lower()
    if low in NOT_SECRET_KEYS:
        return False
    return any(part in low for part in SECRET_KEY_PARTS)


def strip_secrets(obj: Any) -> Any:
    """A copy of ``obj`` where every value under a secret-looking key is redacted (recursively)."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if _is_secret_key(str(key)):
                out[key] = None if value in (None, "") else REDACTED
            else:
                out[key] = strip_secrets(value)
        return out
    if isinstance(obj, list):
        return [strip_secrets(v) for v in obj]
    return obj


def _num(value: Any) -> float | int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return None
    return None


def _int(value: Any) -> int | None:
    num = _num(value)
    return None if num is None else int(num)


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def _graph_gib(value: Any) -> float | int | None:
    """``memory_usage.graph``: one number before 0.5.23; 0.5.23 splits it per capture phase
    (``{"prefill": 0.0, "decode": 1.2, "target_verify": ..., "draft_decode": ...}``): their sum."""
    if isinstance(value, dict):
        parts = [_num(v) for v in value.values()]
        parts = [p for p in parts if p is not None]
        return round(sum(parts), 6) if parts else None
    return _num(value)


def _decode_graph_max_bs(payload: dict[str, Any]) -> Any:
    """0.5.23's ``cuda_graph_config.decode.max_bs`` when decode graphs are on (backend not disabled)."""
    config = payload.get("cuda_graph_config")
    decode = config.get("decode") if isinstance(config, dict) else None
    if not isinstance(decode, dict) or decode.get("backend") == "disabled":
        return None
    return decode.get("max_bs")


def internal_state(payload: dict[str, Any]) -> dict[str, Any]:
    """``internal_states[0]`` of a ``/server_info`` payload (the first DP rank's scheduler), or ``{}``."""
    states = payload.get("internal_states") or []
    return states[0] if states and isinstance(states[0], dict) else {}


def effective_max_running_requests(server_info: dict[str, Any]) -> int | None:
    """The server's effective request cap from ``/server_info`` (per-DP value × dp_size).

    Falls back to the configured top-level ``max_running_requests`` when the scheduler does not report
    its effective value; None when neither is a positive integer.
    """
    per_dp = internal_state(server_info).get("effective_max_running_requests_per_dp")
    if not isinstance(per_dp, int) or per_dp < 1:
        mrr = server_info.get("max_running_requests")
        return mrr if isinstance(mrr, int) and mrr > 0 else None
    dp = server_info.get("dp_size") or 1
    return int(per_dp) * int(dp)


def server_accept_length(server_info: dict[str, Any] | None) -> float | None:
    """The server's own average speculative accept length (``avg_spec_accept_length``), if reported."""
    v = internal_state(server_info or {}).get("avg_spec_accept_length")
    return float(v) if isinstance(v, (int, float)) else None


def normalise_server_info(payload: dict[str, Any], endpoint: str = facts.SERVER_INFO) -> dict[str, Any]:
    """The whitelisted, typed view of an SGLang ``/server_info`` payload (no secrets, no raw dump).

    Capacity comes from ``internal_states[0]`` when present (``memory_usage.token_capacity``,
    ``effective_max_running_requests_per_dp``); the top-level ``max_running_requests`` is only the
    configured value, so it is reported separately as ``max_running_requests_configured``.
    """
    state0 = internal_state(payload)
    mem = state0.get("memory_usage") or {}
    if not isinstance(mem, dict):
        mem = {}
    token_capacity = _int(mem.get("token_capacity"))
    max_total = _int(payload.get("max_total_num_tokens"))
    if max_total is None:
        max_total = token_capacity
    effective = _int(state0.get("effective_max_running_requests_per_dp"))

    def pick(key: str) -> Any:
        value = payload.get(key, state0.get(key))
        return value if isinstance(value, (str, int, float, bool)) or value is None else None

    algorithm = pick("speculative_algorithm")
    return {
        "endpoint": endpoint,
        "version": pick("version"),
        "status": pick("status"),
        "model_path": pick("model_path"),
        "served_model_name": pick("served_model_name"),
        "tp_size": _int(pick("tp_size")),
        "dp_size": _int(pick("dp_size")),
        "pp_size": _int(pick("pp_size")),
        "mem_fraction_static": _num(pick("mem_fraction_static")),
        "context_length": _int(pick("context_length")),
        "max_req_input_len": _int(pick("max_req_input_len")),
        "max_total_num_tokens": max_total,
        "max_running_requests_configured": _int(pick("max_running_requests")),
        "effective_max_running_requests": effective,
        "chunked_prefill_size": _int(pick("chunked_prefill_size")),
        "max_prefill_tokens": _int(pick("max_prefill_tokens")),
        "page_size": _int(pick("page_size")),
        "kv_cache_dtype": pick("kv_cache_dtype"),
        "disable_cuda_graph": pick("disable_cuda_graph"),
        # 0.5.14+ name the fields cuda_graph_max_bs_decode / mamba_radix_cache_strategy; 0.5.23 leaves
        # them as given (None by default) and keeps the resolved value in cuda_graph_config.decode.max_bs
        "cuda_graph_max_bs": _int(
            _first(pick("cuda_graph_max_bs"), pick("cuda_graph_max_bs_decode"), _decode_graph_max_bs(payload))
        ),
        "memory_usage_gib": {
            "weight": _num(mem.get("weight")),
            "kvcache": _num(mem.get("kvcache")),
            "graph": _graph_gib(mem.get("graph")),
            "token_capacity": token_capacity,
        },
        "mamba": {
            "max_mamba_cache_size": _int(pick("max_mamba_cache_size")),
            "mamba_ssm_dtype": pick("mamba_ssm_dtype"),
            "mamba_scheduler_strategy": _first(
                pick("mamba_scheduler_strategy"), pick("mamba_radix_cache_strategy")
            ),
        },
        "speculative": {
            "algorithm": algorithm,
            "draft_model_path": pick("speculative_draft_model_path"),
            "num_steps": _int(pick("speculative_num_steps")),
            "eagle_topk": _int(pick("speculative_eagle_topk")),
            "num_draft_tokens": _int(pick("speculative_num_draft_tokens")),
            "dflash_block_size": _int(pick("speculative_dflash_block_size")),
            "ddtree_budget": _int(pick("speculative_ddtree_budget")),
            "avg_accept_length": _num(state0.get("avg_spec_accept_length")),
        },
        "last_gen_throughput": _num(state0.get("last_gen_throughput")),
    }
