"""What to do with a config the capacity planner predicts will fail: skip it, autotune it, or force it.

Standard library only: shipped to the GPU host as ``ansible.module_utils.sglbench_hostlib.plan_policy`` and
used by the ``sglbench_plan`` module (roles/sglang_cycle/tasks/plan.yml).

Policies (per run):

- ``skip`` (default): a predicted failure is recorded with the planner's recommendations and the
  server is not started.
- ``autotune``: apply the least disruptive recommendation (the planner orders them) whose flags the
  user allows to change and whose values and result stay within the user's bounds; the tuned
  command line is re-planned and must fit. When none qualifies the config is skipped, with the
  reasons each recommendation was rejected.
- ``force``: start anyway; the prediction is recorded beside what the server then does.

Bounds are ``{flag: {"min": x, "max": y}}`` keyed by ServerArgs name (``max_running_requests``) or
flag spelling (``--max-running-requests``). A bound on ``max_running_requests`` or
``max_total_num_tokens`` also applies to the recommendation's *resulting* value, so
``{"max_running_requests": {"min": 4}}`` rejects any change that leaves fewer than 4 request slots.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

POLICIES: tuple[str, ...] = ("skip", "autotune", "force")
DEFAULT_POLICY = "skip"
# Flags autotune may change unless the user says otherwise. Left out on purpose: --tp-size (needs a
# different unit and GPUs), --kv-cache-dtype (changes model outputs), --context-length (changes what
# the server accepts). Add them to the allowed list to let autotune use them.
DEFAULT_AUTOTUNE_FLAGS: tuple[str, ...] = (
    "mem_fraction_static",
    "mamba_full_memory_ratio",
    "mamba_ssm_dtype",
    "mamba_scheduler_strategy",
    "max_running_requests",
    "speculative_dflash_block_size",
    "speculative_ddtree_budget",
    "speculative_num_draft_tokens",
    "disable_radix_cache",
)
NEVER_AUTOTUNE: frozenset[str] = frozenset({"tp_size", "model_path", "speculative_draft_model_path", "port"})
# Results of a recommendation that bounds also apply to.
RESULT_KEYS: tuple[str, ...] = ("max_running_requests", "max_total_num_tokens")
# Flags whose value must change with another one: a new DFLASH block size drops an explicit
# --speculative-num-draft-tokens (the planner re-plans with it unset; SGLang requires them equal).
_COUPLED: dict[str, tuple[str, ...]] = {"speculative_dflash_block_size": ("speculative_num_draft_tokens",)}


class PolicyError(ValueError):
    """Bad policy options (the message names the option and the fix)."""


def dest(flag: str) -> str:
    """``--max-running-requests`` / ``max-running-requests`` / ``max_running_requests`` -> ServerArgs name."""
    return flag.strip().lstrip("-").replace("-", "_")


def flag(name: str) -> str:
    return "--" + dest(name).replace("_", "-")


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise PolicyError(f"policy: {policy!r} is not one of {', '.join(POLICIES)}")
    return policy


def normalise_bounds(bounds: dict[str, Any] | None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for key, spec in (bounds or {}).items():
        if not isinstance(spec, dict) or not set(spec) <= {"min", "max"} or not spec:
            raise PolicyError(
                f"autotune_bounds.{key}: must be a mapping with 'min' and/or 'max', "
                f"e.g. {{min: 4}}, got {spec!r}"
            )
        clean: dict[str, float] = {}
        for side, value in spec.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PolicyError(f"autotune_bounds.{key}.{side}: {value!r} is not a number")
            clean[side] = float(value)
        out[dest(str(key))] = clean
    return out


def _out_of_bounds(name: str, value: Any, bounds: dict[str, dict[str, float]]) -> str | None:
    spec = bounds.get(name)
    if spec is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if "min" in spec and value < spec["min"]:
        return f"{name}={value:g} is below the minimum {spec['min']:g}"
    if "max" in spec and value > spec["max"]:
        return f"{name}={value:g} is above the maximum {spec['max']:g}"
    return None


def rejection(rec: dict[str, Any], allowed: Iterable[str], bounds: dict[str, dict[str, float]]) -> str | None:
    """Why ``rec`` (a planner recommendation dict) is not allowed, or None when it is."""
    allowed_set = {dest(a) for a in allowed}
    for raw, value in (rec.get("flags") or {}).items():
        name = dest(raw)
        if name in NEVER_AUTOTUNE:
            return f"{flag(name)} cannot be autotuned (it needs a different unit or GPUs)"
        if name not in allowed_set:
            return f"{flag(name)} is not in the allowed flags ({', '.join(sorted(allowed_set)) or 'none'})"
        if (why := _out_of_bounds(name, value, bounds)) is not None:
            return why
    for key in RESULT_KEYS:
        if (why := _out_of_bounds(key, rec.get(key), bounds)) is not None:
            return f"the result {why}"
    return None


def _takes_value(argv: Sequence[str], i: int) -> bool:
    return i + 1 < len(argv) and not argv[i + 1].startswith("--")


def _remove(argv: list[str], name: str) -> list[str]:
    spelled = flag(name)
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == spelled:
            i += 2 if _takes_value(argv, i) else 1
            continue
        if tok.startswith(spelled + "="):
            i += 1
            continue
        out.append(tok)
        i += 1
    return out


def apply_flags(argv: Sequence[str], flags: dict[str, Any]) -> list[str]:
    """``argv`` with ``flags`` applied: a value replaces the flag's value (or is appended), ``True``
    adds a boolean flag, ``False``/``None`` removes the flag. Coupled flags are dropped (see
    :data:`_COUPLED`). Order of the untouched words is kept."""
    out = list(argv)
    for raw, value in flags.items():
        name = dest(raw)
        for other in _COUPLED.get(name, ()):
            if other not in {dest(f) for f in flags}:
                out = _remove(out, other)
        spelled = flag(name)
        if value is None or value is False:
            out = _remove(out, name)
            continue
        if value is True:
            if spelled not in out:
                out.append(spelled)
            continue
        text = format(value, "g") if isinstance(value, float) else str(value)
        for i, tok in enumerate(out):
            if tok == spelled and _takes_value(out, i):
                out[i + 1] = text
                break
            if tok.startswith(spelled + "="):
                out[i] = f"{spelled}={text}"
                break
        else:
            out += [spelled, text]
    return out


def launch_flags(argv: Sequence[str]) -> list[str]:
    """The launch_server flags of a full command line (drops ``python -m sglang.launch_server``)."""
    for i, tok in enumerate(argv):
        if tok.startswith("--"):
            return list(argv[i:])
    return []


@dataclass
class Decision:
    policy: str
    action: str  # "start" | "skip"
    reason: str | None = None  # why skipped / forced / tuned (one line)
    tuned_flags: dict[str, Any] | None = None
    recommendation: dict[str, Any] | None = None
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "action": self.action,
            "reason": self.reason,
            "tuned_flags": self.tuned_flags,
            "recommendation": self.recommendation,
            "rejected": self.rejected,
        }


def describe_failure(plan: dict[str, Any]) -> str:
    failure = plan.get("failure") or {}
    return (
        f"predicted {failure.get('kind', 'failure')}: {failure.get('exception', 'Error')}: "
        f"{failure.get('message', '')} ({plan.get('max_total_num_tokens')} KV tokens, "
        f"{plan.get('max_running_requests')} request slots, accounting {plan.get('accounting')})"
    )


def describe_recommendations(recs: Sequence[dict[str, Any]], limit: int = 3) -> str:
    parts = []
    for rec in list(recs)[:limit]:
        words = " ".join(
            flag(k) if v is True else f"{flag(k)} {v}" for k, v in (rec.get("flags") or {}).items()
        )
        parts.append(
            f"{words} ({rec.get('max_total_num_tokens')} tokens, {rec.get('max_running_requests')} requests)"
        )
    return "; ".join(parts) if parts else "none that fit"


def candidates(
    plan: dict[str, Any], allowed: Iterable[str], bounds: dict[str, dict[str, float]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The recommendations autotune may try, in the planner's order, and the rejected ones with why."""
    ok: list[dict[str, Any]] = []
    rejected: list[dict[str, Any]] = []
    allowed = list(allowed)
    for rec in plan.get("recommendations") or []:
        why = rejection(rec, allowed, bounds)
        if why is None:
            ok.append(rec)
        else:
            rejected.append({"flags": rec.get("flags"), "why": why})
    return ok, rejected


def skip_decision(plan: dict[str, Any], policy: str, extra: str = "") -> Decision:
    reason = (
        describe_failure(plan)
        + "; recommendations: "
        + describe_recommendations(plan.get("recommendations") or [])
    )
    return Decision(policy, "skip", reason + extra)


@dataclass
class Outcome:
    decision: Decision
    plan: dict[str, Any]  # the plan of the command that will run (tuned when autotuned)
    flags: list[str]  # the launch flags that will run
    original: dict[str, Any] | None = None  # the untuned plan when autotune changed something


def decide(
    plan_fn: Callable[[list[str]], dict[str, Any]],
    flags: Sequence[str],
    policy: str,
    allowed: Iterable[str] = DEFAULT_AUTOTUNE_FLAGS,
    bounds: dict[str, Any] | None = None,
) -> Outcome:
    """Plan ``flags`` with ``plan_fn`` (launch flags -> ``Plan.to_dict()``; raises ``ValueError`` on
    bad input) and apply ``policy``. Autotune re-plans each allowed recommendation on the tuned
    command line and takes the first that fits within the bounds."""
    check_policy(policy)
    norm_bounds = normalise_bounds(bounds)
    allowed = list(allowed)
    flags = list(flags)
    original = plan_fn(flags)
    if original.get("fits"):
        return Outcome(Decision(policy, "start"), original, flags)
    if policy == "force":
        return Outcome(
            Decision(policy, "start", "forced despite " + describe_failure(original)), original, flags
        )
    if policy == "skip":
        return Outcome(skip_decision(original, policy), original, flags)
    ok, rejected = candidates(original, allowed, norm_bounds)
    for rec in ok:
        tuned = apply_flags(flags, rec.get("flags") or {})
        try:
            tuned_plan = plan_fn(tuned)
        except ValueError as exc:
            rejected.append({"flags": rec.get("flags"), "why": f"the tuned command cannot be planned: {exc}"})
            continue
        if not tuned_plan.get("fits"):
            rejected.append(
                {"flags": rec.get("flags"), "why": "the tuned command " + describe_failure(tuned_plan)}
            )
            continue
        result_why = next(
            (w for k in RESULT_KEYS if (w := _out_of_bounds(k, tuned_plan.get(k), norm_bounds)) is not None),
            None,
        )
        if result_why is not None:
            rejected.append({"flags": rec.get("flags"), "why": f"the tuned result {result_why}"})
            continue
        reason = (
            f"autotuned: {describe_recommendations([rec])} - {rec.get('why', '')}; was "
            + describe_failure(original)
        )
        return Outcome(
            Decision(policy, "start", reason, dict(rec.get("flags") or {}), rec, rejected),
            tuned_plan,
            tuned,
            original,
        )
    why = (
        "; ".join(f"{describe_recommendations([r])}: {r['why']}" for r in rejected) or "the planner has none"
    )
    decision = skip_decision(original, policy, f"; autotune found no recommendation within bounds ({why})")
    decision.rejected = rejected
    return Outcome(decision, original, flags)


__all__ = [
    "DEFAULT_AUTOTUNE_FLAGS",
    "DEFAULT_POLICY",
    "POLICIES",
    "Decision",
    "Outcome",
    "PolicyError",
    "apply_flags",
    "candidates",
    "check_policy",
    "decide",
    "describe_failure",
    "describe_recommendations",
    "dest",
    "flag",
    "launch_flags",
    "normalise_bounds",
    "rejection",
    "skip_decision",
]
