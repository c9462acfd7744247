"""Controller-side Jinja filter: the record's ``capacity`` block (predicted vs observed KV capacity).

Pure standard library (``ansible-playbook`` needs no ``sglbench`` package). Inputs are what the
cycle already holds: the plan (``sglbench_plan`` module: ``Plan.to_dict()`` plus ``decision``), the
normalised ``/server_info`` (``sglbench_wait_ready`` once ready) and the startup facts parsed from the
journal (``sglbench_stop``'s journal -> ``hostlib/sglang_logs.parse_startup_log``). Documented in
docs/records.md; tested in ``tests/plugins/filter/test_sglbench_capacity_filter.py``.
"""

from __future__ import annotations

from typing import Any

METRICS = ("max_total_num_tokens", "max_running_requests", "mamba_slots")


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _get(d: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def observed_capacity(server_info: Any, startup: Any) -> dict[str, Any]:
    """What the server allocated: ``/server_info`` first, the startup log where it has nothing.

    ``max_running_requests`` is the *effective* count (``internal_states``), else the log's summary
    line; ``mamba_slots`` comes from the ``Mamba Cache is allocated`` line, else
    ``max_mamba_cache_size``. ``sources`` names where each figure came from.
    """
    picks = {
        "max_total_num_tokens": (
            ("server_info", _get(server_info, "max_total_num_tokens")),
            ("startup_log", _get(startup, "max_total_num_tokens")),
        ),
        "max_running_requests": (
            ("server_info", _get(server_info, "effective_max_running_requests")),
            ("startup_log", _get(startup, "max_running_requests")),
        ),
        "mamba_slots": (
            ("startup_log", _get(startup, "mamba", "slots")),
            ("server_info", _get(server_info, "mamba", "max_mamba_cache_size")),
        ),
    }
    out: dict[str, Any] = {}
    sources: dict[str, str | None] = {}
    for metric, options in picks.items():
        out[metric] = None
        sources[metric] = None
        for source, value in options:
            if _int(value) is not None:
                out[metric], sources[metric] = _int(value), source
                break
    out["sources"] = sources
    return out


def error_pct(predicted: int | None, observed: int | None) -> float | None:
    """Signed error of the prediction in percent of the observed value (0 when both are 0)."""
    if predicted is None or observed is None:
        return None
    if observed == 0:
        return 0.0 if predicted == 0 else None
    return round((predicted - observed) / observed * 100.0, 3)


def capacity_compare(plan: Any, server_info: Any = None, startup: Any = None) -> dict[str, Any] | None:
    """``{predicted, observed, error_pct, match}`` for the record; None without a plan.

    ``observed`` is all None when the server never started (skipped configs); ``match`` is None then,
    else whether every figure known on both sides is equal.
    """
    if not isinstance(plan, dict) or "max_total_num_tokens" not in plan:
        return None
    failure = plan.get("failure") if isinstance(plan.get("failure"), dict) else None
    predicted = {
        "max_total_num_tokens": _int(plan.get("max_total_num_tokens")),
        "max_running_requests": _int(plan.get("max_running_requests")),
        "mamba_slots": _int(plan.get("mamba_slots")),
        "fits": plan.get("fits"),
        "failure": failure.get("kind") if failure else None,
        "accounting": plan.get("accounting"),
        "tuned": bool(_get(plan, "decision", "tuned")),
    }
    observed = observed_capacity(server_info, startup)
    errors = {m: error_pct(predicted[m], observed[m]) for m in METRICS}
    compared = [m for m in METRICS if predicted[m] is not None and observed[m] is not None]
    return {
        "predicted": predicted,
        "observed": observed,
        "error_pct": errors,
        "match": all(predicted[m] == observed[m] for m in compared) if compared else None,
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"sglbench_capacity_compare": capacity_compare}
