"""SGLang's memory-accounting variants: what the capacity planner does differently per SGLang era.

Standard library only: shipped to the GPU host inside ``module_utils/sglbench_hostlib/`` beside
:mod:`capacity`, which runs the planning stages; wherever SGLang's startup accounting
differs between eras, a stage asks the plan's :class:`AccountingVariant` (docs/capacity.md, "Accounting
variants"):

- ``A`` (:class:`VariantA`): builds before 2026-05-27 (0.5.10.x and the May-2026 main/forks);
- ``B`` (:class:`VariantB`): June-2026 main (V3), the Mamba joint solve;
- ``C`` (:class:`VariantC`): V4 (0.5.16+), B plus a padding slot and the draft in the static pool.

A future SGLang memory rework is one new subclass, registered in :data:`VARIANTS` (oldest first) with
the first version that has it (``since``) and the source text that identifies it (``source_markers``).
The failure kinds and :class:`Failure` live here because the variants word SGLang's errors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from . import geometry

GiB = 1 << 30

# --- failure kinds -------------------------------------------------------------------------------
ZERO_REQUESTS = "zero_requests"
NOT_ENOUGH_MEMORY = "not_enough_memory"
POOL_SMALLER_THAN_CONTEXT = "pool_smaller_than_context"
BAD_CONFIG = "bad_config"
CONTEXT_TOO_LONG = "context_too_long"


@dataclass
class Failure:
    kind: str
    message: str  # SGLang's own error text for this variant (what the server would print)
    exception: str = "RuntimeError"
    explanation: str = ""


@dataclass(frozen=True)
class MambaInputs:
    """What the Mamba-state / KV split of one launch starts from (hybrid linear-attention models)."""

    rest_bytes: float  # the KV + Mamba budget, bytes
    per_req_bytes: int  # one Mamba state slot (conv + SSM state over the linear layers of a rank)
    ratio: int  # slots each running request holds (scheduler strategy, radix cache)
    full_memory_ratio: float  # --mamba-full-memory-ratio
    explicit_slots: int | None  # --max-mamba-cache-size
    max_running_requests: int | None  # as asked, else the speculative default, else None
    attn_dp: int  # attention data-parallel ranks (the request count is divided across them)
    disable_radix: bool
    speculative: bool
    draft_tokens: int  # intermediate states reserved per request (0 without speculative decoding)

    @property
    def requests_per_rank(self) -> int | None:
        if self.max_running_requests is None:
            return None
        return self.max_running_requests // self.attn_dp

    def fixed_slots(self) -> int | None:
        """The slot count the flags fix (--max-mamba-cache-size, or one per request without radix
        cache), else None: the variant solves for it."""
        if self.explicit_slots is not None:
            return int(self.explicit_slots) // self.attn_dp
        if self.disable_radix and self.max_running_requests is not None:
            return self.max_running_requests // self.attn_dp
        return None


@dataclass(frozen=True)
class MambaSplit:
    """The Mamba state pool a variant carves out of the budget, and what is left for the KV cache."""

    slots: int
    spec_reserved_gib: float  # the speculative intermediate-state reservation
    mamba_budget_gib: float  # the Mamba state pool (slots, plus the variant's padding slot)
    kv_budget_bytes: float  # left for the KV cache
    failure: Failure | None = None


class AccountingVariant:
    """One era of SGLang's startup memory accounting; the planner's stages call these methods.

    Class attributes: ``name`` (``--accounting`` value), ``since`` (first SGLang version with it),
    ``source_markers`` (all present in the installed ``srt`` source -> this variant),
    ``draft_in_static_pool`` (draft weights and draft KV are counted against --mem-fraction-static
    rather than loaded later from the slack), ``default_dflash_cell_scaling`` (fold the DFLASH draft
    KV into the target's per-token cell unless told otherwise), ``recommend_mamba_share`` (a larger
    --mamba-full-memory-ratio is worth recommending), ``mamba_pad`` (Mamba slots allocated beyond the
    solved count).
    """

    name: ClassVar[str]
    since: ClassVar[tuple[int, int, int]]
    source_markers: ClassVar[tuple[str, ...]]
    draft_in_static_pool: ClassVar[bool] = False
    default_dflash_cell_scaling: ClassVar[bool] = True
    recommend_mamba_share: ClassVar[bool] = True
    mamba_pad: ClassVar[int] = 0

    def static_draft_weights_gib(self, draft_weights_gib: float) -> float:
        """Draft weights taken out of the budget before the static pool is sized."""
        return draft_weights_gib if self.draft_in_static_pool else 0.0

    def dflash_cell(
        self, target_cell: float, draft_cell: int, target_layers: int, draft_layers: int
    ) -> float:
        """Per-token cell with a DFLASH-like draft's KV folded in: the target cell scaled by
        ``(T + draft_layers) / T``."""
        return float(geometry.ceil_div(int(target_cell) * (target_layers + draft_layers), target_layers))

    def layer_ratio_cell(self, target_cell: float, target_layers: int, draft_layers: int) -> float | None:
        """Per-token cell with an EAGLE-family draft's KV folded in by layer ratio; None: not folded."""
        return None

    def mamba_split(self, m: MambaInputs) -> MambaSplit:
        raise NotImplementedError

    def kv_budget_failure(
        self, kv_budget_gib: float, post_gib: float, pre_gib: float, mfs: float
    ) -> Failure | None:
        """The failure SGLang raises when nothing is left for the KV cache (before it counts tokens)."""
        return None

    def running_requests(self, requested_per_rank: int, tokens: int, estimated: int) -> int:
        """``max_running_requests`` when asked for: capped by SGLang's token-based estimate."""
        return min(requested_per_rank, estimated)

    def zero_requests_failure(self, slots: int, ratio: int) -> Failure:
        return Failure(
            ZERO_REQUESTS,
            "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
            f"max_mamba_cache_size={slots}, mamba_ratio={ratio}, resulting max_num_reqs=0. "
            "Try: (1) reduce --max-running-requests, (2) increase --mem-fraction-static, "
            "(3) reduce --speculative-num-draft-tokens, or (4) use GPUs with more memory.",
            "RuntimeError",
            f"{slots} Mamba slot(s) // {ratio} slots per request = 0",
        )


class VariantA(AccountingVariant):
    """Builds before 2026-05-27: the intermediate reservation uses the *requested*
    --max-running-requests, the slot count comes from --mamba-full-memory-ratio, zero request slots end
    in an ``AssertionError``; the DFLASH draft KV is not folded into the target cell (observed)."""

    name = "A"
    since = (0, 0, 0)
    source_markers = ("max_running_request is zero",)
    default_dflash_cell_scaling = False
    recommend_mamba_share = False

    def mamba_split(self, m: MambaInputs) -> MambaSplit:
        rest_bytes = m.rest_bytes
        P = m.per_req_bytes
        spec_reserved = 0.0
        if m.speculative:
            spec_reserved = P * (m.requests_per_rank or 0) * m.draft_tokens / GiB
            rest_bytes -= P * (m.requests_per_rank or 0) * m.draft_tokens
        K = m.fixed_slots()
        if K is None:
            mfr = m.full_memory_ratio
            K = int((rest_bytes * mfr / (1 + mfr)) // P) if rest_bytes > 0 else 0
        rest_bytes -= K * P
        return MambaSplit(K, spec_reserved, K * P / GiB, rest_bytes)

    def zero_requests_failure(self, slots: int, ratio: int) -> Failure:
        return Failure(
            ZERO_REQUESTS,
            "max_running_request is zero",
            "AssertionError",
            f"the Mamba state pool has {slots} slot(s) and each running request needs {ratio}; "
            f"{slots} // {ratio} = 0 request slots (TpModelWorker assertion, after the pools are allocated)",
        )


class VariantB(AccountingVariant):
    """June-2026 main (V3): Mamba slots and the speculative reservation solved jointly, capped by the
    Mamba share; ``RuntimeError`` guards; DFLASH cell scaled by ``(T + draft_layers) / T``."""

    name = "B"
    since = (0, 5, 12)
    source_markers = ("state cache is too small",)

    def mamba_split(self, m: MambaInputs) -> MambaSplit:
        P, pad = m.per_req_bytes, self.mamba_pad
        raw, spec_cap = self._slots(m)
        K = max(raw, 0)
        rest_bytes = m.rest_bytes
        spec_reserved = 0.0
        if m.speculative and spec_cap is not None:
            spec_reserved = P * (spec_cap + pad) * m.draft_tokens / GiB
            rest_bytes -= P * (spec_cap + pad) * m.draft_tokens
        failure = None
        if raw <= 0:
            failure = Failure(
                NOT_ENOUGH_MEMORY, self.mamba_failure_text(raw, rest_bytes / GiB, P), "RuntimeError"
            )
        rest_bytes -= (K + pad) * P
        return MambaSplit(K, spec_reserved, (K + pad) * P / GiB, rest_bytes, failure)

    def mamba_failure_text(self, slots: int, rest_gib: float, per_req_bytes: int) -> str:
        """SGLang's RuntimeError when the solved slot count is not positive (it prints the raw count)."""
        return (
            "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
            f"max_mamba_cache_size={slots}. Try: (1) reduce --max-running-requests, (2) increase "
            "--mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or (4) use GPUs "
            "with more memory."
        )

    def _slots(self, m: MambaInputs) -> tuple[int, int | None]:
        """(Mamba slots as solved, possibly <= 0; request count the speculative reservation is sized for,
        None without spec). The reservation is sized from the solved count before it is clamped at zero
        (SGLang's order)."""
        P, pad, ratio, Dm = m.per_req_bytes, self.mamba_pad, m.ratio, m.draft_tokens
        mrr_dp = m.requests_per_rank
        fixed = m.fixed_slots()
        if fixed is not None:
            K = fixed
            if not m.speculative:
                return K, None
            if m.explicit_slots is None:  # one slot per request without radix cache
                return K, K
            return K, min(mrr_dp if mrr_dp is not None else K // ratio, K // ratio)
        budget = m.rest_bytes * m.full_memory_ratio / (1 + m.full_memory_ratio)
        if not m.speculative:
            return int((budget - pad * P) // P), None
        K = int((budget - pad * P * (1 + Dm)) // (P * (1 + Dm / ratio)))
        return K, min(mrr_dp if mrr_dp is not None else K // ratio, K // ratio)


class VariantC(VariantB):
    """V4 (0.5.16+): like B plus a padding slot; draft weights and draft KV counted against
    --mem-fraction-static; DFLASH cell = target cell + exact draft cell, EAGLE-family drafts folded by
    layer ratio; the request count capped by half the tokens, not by the estimate."""

    name = "C"
    since = (0, 5, 16)
    source_markers = ("state cache is too small", "KVCacheConfigurator", "_handle_max_mamba_cache")
    draft_in_static_pool = True
    mamba_pad = 1

    def dflash_cell(
        self, target_cell: float, draft_cell: int, target_layers: int, draft_layers: int
    ) -> float:
        return target_cell + draft_cell

    def layer_ratio_cell(self, target_cell: float, target_layers: int, draft_layers: int) -> float | None:
        return float(int(target_cell * (1 + draft_layers / target_layers)))

    def mamba_failure_text(self, slots: int, rest_gib: float, per_req_bytes: int) -> str:
        """kv_cache_configurator._handle_max_mamba_cache (0.5.17, 0.5.23): with the budget and slot size."""
        return (
            "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
            f"max_mamba_cache_size={slots} (total_rest_memory={rest_gib:.2f} GB, "
            f"mamba_cache_per_req={per_req_bytes / (1 << 20):.2f} MB). Try: (1) reduce "
            "--max-running-requests, (2) increase --mem-fraction-static, (3) reduce "
            "--speculative-num-draft-tokens, or (4) use GPUs with more memory."
        )

    def kv_budget_failure(
        self, kv_budget_gib: float, post_gib: float, pre_gib: float, mfs: float
    ) -> Failure | None:
        if kv_budget_gib > 0:
            return None
        # mem_cache/kv_cache_configurator.py (0.5.23) _profile_available_bytes: the minimum viable
        # fraction and the suggestion (rounded up to 0.001), as SGLang words the ValueError
        need = 1 - post_gib / pre_gib
        suggested = math.ceil(need * 1000) / 1000
        return Failure(
            NOT_ENOUGH_MEMORY,
            f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={mfs:g}. "
            f"Raise --mem-fraction-static above {suggested:.3f} "
            f"(minimum viable = 1 - available/pre = {need:.4f}). "
            "If using speculative decoding, draft weights are now counted.",
            "ValueError",
        )

    def running_requests(self, requested_per_rank: int, tokens: int, estimated: int) -> int:
        return min(requested_per_rank, tokens // 2)


# oldest first: a version maps to the newest variant whose ``since`` it reaches, source text to the
# newest variant whose markers it all contains; the newest is the default
VARIANTS: dict[str, AccountingVariant] = {v.name: v for v in (VariantA(), VariantB(), VariantC())}
DEFAULT = list(VARIANTS)[-1]


def variant(name: str) -> AccountingVariant:
    """The variant named ``name`` (one of :data:`VARIANTS`; resolve user input with
    ``capacity.resolve_accounting`` first)."""
    return VARIANTS[name]


def for_version(version: tuple[int, ...]) -> AccountingVariant:
    """The variant of an SGLang version (``(0, 5, 12)``; missing parts count as 0)."""
    v = (*version, 0, 0, 0)[:3]
    return [x for x in VARIANTS.values() if x.since <= v][-1]


def from_source(blob: str) -> AccountingVariant | None:
    """The variant whose markers all occur in the installed SGLang's source text; None: no marker."""
    found = [x for x in VARIANTS.values() if all(marker in blob for marker in x.source_markers)]
    return found[-1] if found else None


__all__ = [
    "BAD_CONFIG",
    "CONTEXT_TOO_LONG",
    "DEFAULT",
    "NOT_ENOUGH_MEMORY",
    "POOL_SMALLER_THAN_CONTEXT",
    "VARIANTS",
    "ZERO_REQUESTS",
    "AccountingVariant",
    "Failure",
    "MambaInputs",
    "MambaSplit",
    "VariantA",
    "VariantB",
    "VariantC",
    "for_version",
    "from_source",
    "variant",
]
