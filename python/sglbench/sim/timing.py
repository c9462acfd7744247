"""How long a simulated forward pass takes (seconds at time scale 1.0).

Decode is memory-bandwidth bound: a step reads the rank's weights once plus the KV cache of every
running request (plus the linear-attention state of hybrid models), at ``DECODE_EFFICIENCY`` of the
GPU's bandwidth. ``DECODE_EFFICIENCY`` is calibrated so a 27B BF16 model (51.05 GiB of weights) at
TP1 on an RTX PRO 6000 Blackwell Server Edition (1597 GB/s) decodes at the published ~26.5 tok/s.
Large batches become compute bound (2 FLOP per parameter per token at half the GPU's BF16 peak).
Speculative verify steps process ``num_draft_tokens`` tokens per request and add the draft model's
forward passes; each step then emits the sampled accept length of tokens per request. So the verify
cost grows with the batch twice over: the verify tokens (batch x draft tokens) reach the compute bound
at a batch ``num_draft_tokens`` times smaller than decoding does, and on a hybrid model every verify
step also writes the linear-attention state of each draft position of each request (SGLang's
speculative intermediate state cache, which a rejected draft rolls back to), batch x draft tokens
states of memory traffic.
"""

from __future__ import annotations

from dataclasses import dataclass

DECODE_EFFICIENCY = 51.05 * (1 << 30) * 26.5 / 1597e9  # ~0.909
COMPUTE_EFFICIENCY = 0.5
TP_COMM_S_PER_LAYER = 20e-6  # all-reduce cost per layer per step when tp > 1
PER_REQUEST_OVERHEAD_S = 50e-6  # sampling/bookkeeping per running request per step


@dataclass(frozen=True)
class TimingModel:
    weights_bytes: float  # per rank
    bandwidth_bps: float  # bytes/s
    flops: float  # effective FLOP/s for compute-bound work
    kv_bytes_per_token: float  # per rank, target + draft
    state_bytes_per_request: float  # linear-attention state per request (hybrid), per rank
    num_layers: int
    tp_size: int
    draft_weights_bytes: float = 0.0
    draft_passes: int = 0  # draft forwards per verify step (0 = no speculation)
    num_draft_tokens: int = 1
    prefill_tokens_per_s: float | None = None

    @property
    def params(self) -> float:
        return self.weights_bytes / 2.0  # ~BF16

    def _mem_time(self, nbytes: float) -> float:
        return nbytes / (self.bandwidth_bps * DECODE_EFFICIENCY)

    def _comm(self) -> float:
        return TP_COMM_S_PER_LAYER * self.num_layers if self.tp_size > 1 else 0.0

    def _target_step(self, batch: int, kv_tokens: int) -> tuple[float, float, int]:
        """The target model's memory and compute time of one decode (or verify) step, and the tokens it
        scores (``batch`` x the draft tokens each request verifies)."""
        draft_tokens = max(1, self.num_draft_tokens) if self.draft_passes else 0
        tokens = batch * max(1, draft_tokens)
        mem = self._mem_time(
            self.weights_bytes
            + kv_tokens * self.kv_bytes_per_token
            + (2 + draft_tokens) * batch * self.state_bytes_per_request  # read, write; draft positions
        )
        return mem, 2.0 * self.params * tokens / self.flops, tokens

    def decode_step(self, batch: int, kv_tokens: int) -> float:
        """One decode (or verify) step for ``batch`` running requests holding ``kv_tokens`` tokens."""
        if batch <= 0:
            return 0.0
        mem, compute, tokens = self._target_step(batch, kv_tokens)
        step = max(mem, compute) + self._comm() + batch * PER_REQUEST_OVERHEAD_S
        if self.draft_passes:
            draft_mem = self._mem_time(self.draft_weights_bytes) + 2e-4
            draft_compute = 2.0 * (self.draft_weights_bytes / 2.0) * tokens / self.flops
            step += self.draft_passes * max(draft_mem, draft_compute)
        return step

    def decode_intensity(self, batch: int, kv_tokens: int) -> float:
        """How compute bound a decode (or verify) step is: its target compute time over the longer of
        compute and memory time (0 = purely memory bound, 1 = compute bound). The power model reads it."""
        if batch <= 0:
            return 0.0
        mem, compute, _tokens = self._target_step(batch, kv_tokens)
        return compute / max(mem, compute)

    def prefill_intensity(self, new_tokens: int) -> float:
        """:meth:`decode_intensity` for a prefill batch (1 once it is compute bound)."""
        if new_tokens <= 0:
            return 0.0
        if self.prefill_tokens_per_s:
            return 1.0
        compute = 2.0 * self.params * new_tokens / self.flops
        return compute / max(compute, self._mem_time(self.weights_bytes))

    def prefill(self, new_tokens: int) -> float:
        """A prefill batch over ``new_tokens`` uncached prompt tokens."""
        if new_tokens <= 0:
            return self._mem_time(self.weights_bytes)
        if self.prefill_tokens_per_s:
            return new_tokens / self.prefill_tokens_per_s
        compute = 2.0 * self.params * new_tokens / self.flops
        return max(compute, self._mem_time(self.weights_bytes)) + self._comm()
