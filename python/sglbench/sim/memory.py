"""The ONE place the stand-in turns a launch config into SGLang's memory numbers.

Everything the stand-in logs about memory (weights, Mamba state, KV pools, memory pool end, CUDA
graphs, the max_total_num_tokens summary) and whether/how startup fails comes from
:func:`plan_memory`, which adapts the capacity planner (``sglbench.hostlib.capacity``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from sglbench.hostlib import capacity
from sglbench.hostlib.gpus import context_overhead_gib as context_overhead_gib  # the planner's constant

GIB = float(1 << 30)

# Where startup dies for each failure, i.e. after which log lines the exception is printed:
#   config: ServerArgs/model-config validation, before any worker starts
#   load:   during "Load weight" (CUDA OOM)
#   pool:   after "Load weight end", while sizing the pools (before they are allocated)
#   resolve: after the pools are logged, resolving max_running_requests (V3/V4 RuntimeError)
#   worker: TpModelWorker assertion, after "Memory pool end" and the CUDA graph capture (V1)
_CONFIG_KINDS = ("context_too_long", "bad_config")


def failure_stage(kind: str, exception: str) -> str:
    if kind in _CONFIG_KINDS:
        return "config"
    if kind == "cuda_oom":
        return "load"
    if exception == "AssertionError":
        return "worker"
    if kind == "zero_requests":
        return "resolve"
    return "pool"


@dataclass(frozen=True)
class MemoryPlan:
    """Numbers for the startup log and server_info (GiB unless named otherwise)."""

    accounting: str
    fits: bool
    failure_kind: str | None
    failure_message: str | None  # the exception line, e.g. "AssertionError: max_running_request is zero"
    failure_stage: str | None  # "load" | "pool" | "worker": after which log lines startup dies
    model_class: str
    kv_dtype: str
    mem_fraction_static: float
    chunked_prefill_size: int
    max_prefill_tokens: int
    cuda_graph_max_bs: int
    context_len: int
    page_size: int
    max_total_num_tokens: int
    max_running_requests: int
    mamba_slots: int | None
    pre_gib: float
    weights_gib: float
    draft_weights_gib: float
    k_size_gib: float
    v_size_gib: float
    draft_k_size_gib: float
    draft_v_size_gib: float
    mamba_conv_gib: float
    mamba_ssm_gib: float
    spec_intermediate_ssm_gib: float
    spec_intermediate_conv_gib: float
    cuda_graph_gib: float  # target + draft graphs
    available_gpu_mem_gib: float  # the summary line's available_gpu_mem
    num_draft_tokens: int
    mamba_per_req_bytes: int
    raw: dict[str, Any]

    @property
    def avail_after_weights_gib(self) -> float:
        return self.pre_gib - self.weights_gib

    @property
    def mamba_gib(self) -> float:
        return (
            self.mamba_conv_gib
            + self.mamba_ssm_gib
            + self.spec_intermediate_ssm_gib
            + self.spec_intermediate_conv_gib
        )

    @property
    def pool_end_avail_gib(self) -> float:
        """Free memory after the target pools (draft weights too in accounting C, loaded earlier)."""
        return _num(
            self.raw,
            "pool_end_avail_gib",
            self.avail_after_weights_gib - self.mamba_gib - self.k_size_gib - self.v_size_gib,
        )

    @property
    def kv_bytes_per_token(self) -> float:
        """Target + draft KV bytes per token (for the decode timing model)."""
        if self.max_total_num_tokens <= 0:
            return 0.0
        total = self.k_size_gib + self.v_size_gib + self.draft_k_size_gib + self.draft_v_size_gib
        return total * GIB / self.max_total_num_tokens


def accounting_for(version: str | None, accounting: str | None) -> str:
    """The variant to emulate: SGLBENCH_SIM_ACCOUNTING, else the planner's mapping of the version.

    The version is the impersonated release (``sglang.__version__`` on a sim host), so the planner
    there, which maps the same version the same way, and the stand-in agree.
    """
    if accounting:
        return capacity.resolve_accounting(accounting)
    return capacity.accounting_for_version(version or "0.0.0")


def _num(d: dict[str, Any], key: str, default: float = 0.0) -> float:
    value = d.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def from_plan_dict(d: dict[str, Any], accounting: str) -> MemoryPlan:
    """Adapt ``capacity.plan(...).to_dict()`` to :class:`MemoryPlan`."""
    failure = d.get("failure") if isinstance(d.get("failure"), dict) else None
    kind = message = stage = None
    # exception "none": SGLang starts anyway (e.g. a pool smaller than the context length).
    if failure is not None and str(failure.get("exception", "RuntimeError")).lower() != "none":
        kind = str(failure.get("kind"))
        exception = str(failure.get("exception") or "RuntimeError")
        message = f"{exception}: {failure.get('message', kind)}"
        stage = failure_stage(kind, exception)
    mfs = _num(d, "mem_fraction_static", 0.88)
    acc = str(d.get("accounting") or accounting)
    mamba = d.get("mamba_slots")
    return MemoryPlan(
        accounting=acc,
        fits=kind is None,
        failure_kind=kind,
        failure_message=message,
        failure_stage=stage,
        model_class=str(d.get("model_class") or "UnknownForCausalLM"),
        kv_dtype=str(d.get("kv_dtype") or "torch.bfloat16"),
        mem_fraction_static=mfs,
        chunked_prefill_size=int(_num(d, "chunked_prefill_size", 8192)),
        max_prefill_tokens=int(_num(d, "max_prefill_tokens", 16384)),
        cuda_graph_max_bs=int(_num(d, "cuda_graph_max_bs", 256)),
        context_len=int(_num(d, "context_len", 4096)),
        page_size=int(_num(d, "page_size", 1)) or 1,
        max_total_num_tokens=max(0, int(_num(d, "max_total_num_tokens"))),
        max_running_requests=max(0, int(_num(d, "max_running_requests"))),
        mamba_slots=int(mamba) if isinstance(mamba, (int, float)) else None,
        pre_gib=_num(d, "pre_gib"),
        weights_gib=_num(d, "weights_gib"),
        draft_weights_gib=_num(d, "draft_weights_gib"),
        k_size_gib=_num(d, "k_size_gib"),
        v_size_gib=_num(d, "v_size_gib"),
        draft_k_size_gib=_num(d, "draft_k_size_gib"),
        draft_v_size_gib=_num(d, "draft_v_size_gib"),
        mamba_conv_gib=_num(d, "mamba_conv_gib"),
        mamba_ssm_gib=_num(d, "mamba_ssm_gib"),
        spec_intermediate_ssm_gib=_num(d, "spec_intermediate_ssm_gib"),
        spec_intermediate_conv_gib=_num(d, "spec_intermediate_conv_gib"),
        cuda_graph_gib=_num(d, "cuda_graph_gib", 0.0),
        available_gpu_mem_gib=_num(d, "available_gpu_mem_gib"),
        num_draft_tokens=int(_num(d, "num_draft_tokens", 0)),
        mamba_per_req_bytes=int(_num(d, "mamba_per_req_bytes", 0)),
        raw=d,
    )


def plan_memory(
    args: argparse.Namespace,
    model_config: dict[str, Any],
    draft_config: dict[str, Any] | None,
    *,
    gpu_mem_gib: float,
    free_gib: float | None,
    weights_gib: float | None,
    draft_weights_gib: float | None,
    accounting: str | None,
    model_dir: str | None,
    draft_model_dir: str | None = None,
) -> MemoryPlan:
    """Plan SGLang's memory for this launch; raises ``ValueError`` (message names the field) on bad input."""
    plan = capacity.plan(
        args,
        model_config,
        draft_config,
        gpu_mem_gib,
        free_gib=free_gib,
        weights_gib=weights_gib,
        draft_weights_gib=draft_weights_gib,
        accounting=accounting,
        model_dir=model_dir,
        draft_model_dir=draft_model_dir,
        recommend=False,
    )
    d = plan.to_dict()
    return from_plan_dict(d, str(d.get("accounting") or accounting or "A"))
