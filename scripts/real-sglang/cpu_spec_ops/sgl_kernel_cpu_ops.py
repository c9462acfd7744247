"""Pure-torch versions of the sgl_kernel CPU ops that SGLang's speculative decoding calls on the CPU.

PyPI's ``sglang-kernel`` is the CUDA build: its Python wrappers for the CPU ops exist
(``sgl_kernel/speculative.py``, ``sgl_kernel/kvcacheio.py``) but the ``torch.ops.sgl_kernel.<name>_cpu``
ops they call do not. ``install()`` puts the functions below on ``torch.ops.sgl_kernel`` (where the
wrappers look) and on the ``sgl_kernel`` module (where SGLang looks for names without a wrapper,
e.g. ``decode_attention_cpu``), only for names that have no real op, and only when the installed
versions and wrapper signatures are the ones this file was written against (``check()``).

Semantics follow upstream ``sgl-kernel/csrc/cpu/`` (``kvcache.cpp``, ``spec.cpp``, ``extend.cpp``,
``decode.cpp``), called the way SGLang 0.5.23 calls them (``srt/layers/attention/intel_amx_backend.py``,
``kernels/ops/speculative/``, ``kernels/ops/kvcache/cache_move.py``). What the attention ops do not
cover (fp8 KV, sliding window, attention sinks, cross attention) raises instead of computing
something else.

    python sgl_kernel_cpu_ops.py --check   # exit 0 and "ok: ..." or exit 1 and ONE mismatch line
"""

from __future__ import annotations

import ast
import ctypes
import importlib.metadata
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

SGLANG_VERSION = "0.5.23"
SGLANG_KERNEL_VERSION = "0.4.10"

# Parameter names of the wheel's Python wrappers (sglang-kernel 0.4.10) that call the missing ops;
# SGLang calls some of them by keyword. None: the op has no wrapper (SGLang calls torch.ops directly).
WRAPPERS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "copy_all_layer_kv_cache_cpu": ("kvcacheio", ("data_ptrs", "strides", "tgt_loc", "src_loc")),
    "decode_attention_cpu": ("", None),
    "extend_attention_cpu": ("", None),
    "build_draft_decode_metadata_cpu": (
        "speculative",
        ("req_to_token", "req_pool_indices", "seq_lens", "topk", "num_steps", "pool_len"),
    ),
    "assign_draft_cache_locs_contiguous_cpu": (
        "speculative",
        ("req_pool_indices", "req_to_token", "seq_lens", "out_cache_loc", "pool_len", "topk", "num_steps"),
    ),
    "assign_extend_cache_locs_cpu": (
        "speculative",
        ("req_pool_indices", "req_to_token", "start_offset", "end_offset", "out_cache_loc", "pool_len"),
    ),
    "assign_req_to_token_pool_cpu": (
        "speculative",
        ("req_pool_indices", "req_to_token", "start_offset", "end_offset", "out_cache_loc", "pool_len"),
    ),
    "fill_accept_out_cache_loc_cpu": (
        "speculative",
        ("accept_index", "out_cache_loc", "accept_out_cache_loc"),
    ),
    "fill_bonus_tokens_cpu": (
        "speculative",
        ("accept_tokens", "accept_lens", "bonus_tokens", "accept_stride"),
    ),
    "verify_tree_greedy_cpu": (
        "speculative",
        (
            "predicts",
            "accept_index",
            "accept_token_num",
            "candidates",
            "retrive_index",
            "retrive_next_token",
            "retrive_next_sibling",
            "target_predict",
        ),
    ),
    "build_tree_kernel_efficient_cpu": (
        "speculative",
        (
            "parent_list",
            "selected_index",
            "verified_seq_len",
            "tree_mask",
            "positions",
            "retrive_index",
            "retrive_next_token",
            "retrive_next_sibling",
            "topk",
            "depth",
            "draft_token_num",
            "tree_mask_mode",
        ),
    ),
    # Called on CPU tensors by the wrapper sgl_kernel.speculative.reconstruct_indices_from_tree_mask.
    "reconstruct_indices_from_tree_mask_cpu": (
        "speculative",
        (
            "tree_mask",
            "verified_seq_len",
            "positions",
            "retrive_index",
            "retrive_next_token",
            "retrive_next_sibling",
            "batch_size",
            "draft_token_num",
        ),
    ),
    "rotate_input_ids_cpu": (
        "speculative",
        ("input_ids", "extend_start_loc", "extend_seq_lens", "topk_index", "select_index"),
    ),
}
# The wrapper whose signature stands for reconstruct_indices_from_tree_mask_cpu (it has none itself).
WRAPPER_NAME = {"reconstruct_indices_from_tree_mask_cpu": "reconstruct_indices_from_tree_mask"}
# Positional arguments SGLang 0.5.23 passes to the attention ops (intel_amx_backend.py).
ATTENTION_CALLS = {"decode_attention_fwd": 19, "extend_attention_fwd": 22}


# --- KV cache ---------------------------------------------------------------------------------------


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor, src_loc: torch.Tensor
) -> None:
    """For each buffer b (base address data_ptrs[b], strides[b] bytes per row): row tgt_loc[i] =
    row src_loc[i], all sources read before any target is written (kvcache.cpp)."""
    if data_ptrs.numel() == 0 or tgt_loc.numel() == 0:
        return
    tgt, src = tgt_loc.long(), src_loc.long()
    rows = int(max(tgt.max(), src.max())) + 1
    for ptr, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        raw = (ctypes.c_uint8 * (rows * stride)).from_address(ptr)
        buf = torch.frombuffer(raw, dtype=torch.uint8).view(rows, stride)
        buf[tgt] = buf[src]  # the gather makes a copy first


# --- attention --------------------------------------------------------------------------------------


def _refuse_unsupported(
    k_buffer: torch.Tensor,
    key_scale: float,
    value_scale: float,
    is_cross_attn: bool,
    sliding_window_size: int,
    encoder_lens: torch.Tensor | None,
    sinks: torch.Tensor | None,
) -> None:
    why = []
    if k_buffer.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        why.append(f"KV dtype {k_buffer.dtype}")
    if key_scale != 1.0 or value_scale != 1.0:
        why.append("scaled KV")
    if is_cross_attn or encoder_lens is not None:
        why.append("cross attention")
    if sliding_window_size > 0:
        why.append("sliding window")
    if sinks is not None:
        why.append("attention sinks")
    if why:
        raise NotImplementedError(f"pure-torch sgl_kernel attention does not support {', '.join(why)}")


def _attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    sm_scale: float,
    logit_cap: float,
    allowed: torch.Tensor | None,
) -> torch.Tensor:
    """q [M, H, D], k [N, Hkv, D], v [N, Hkv, Dv], allowed [M, N] bool -> [M, H, Dv] in float32."""
    groups = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(groups, dim=1)
    vf = v.float().repeat_interleave(groups, dim=1)
    scores = torch.einsum("mhd,nhd->hmn", q.float(), kf) * sm_scale
    if logit_cap > 0:
        scores = logit_cap * torch.tanh(scores / logit_cap)
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.einsum("hmn,nhd->mhd", torch.softmax(scores, dim=-1), vf)


def decode_attention_cpu(
    query: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    key_scale: float,
    value_scale: float,
    output: torch.Tensor,
    key: torch.Tensor | None,
    value: torch.Tensor | None,
    loc: torch.Tensor,
    attn_logits: torch.Tensor,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
    logit_cap: float,
    is_cross_attn: bool,
    sliding_window_size: int,
    encoder_lens: torch.Tensor | None,
    sinks: torch.Tensor | None,
) -> None:
    """One query token per sequence: store key/value at loc (when given), then attend over the
    sequence's seq_lens[b] cached tokens req_to_token[req_pool_indices[b], :seq_lens[b]] (decode.cpp).
    attn_logits is the real kernel's scratch space; it is not used here."""
    _refuse_unsupported(
        k_cache, key_scale, value_scale, is_cross_attn, sliding_window_size, encoder_lens, sinks
    )
    if key is not None and value is not None:
        k_cache[loc.long()] = key.reshape(-1, *k_cache.shape[1:]).to(k_cache.dtype)
        v_cache[loc.long()] = value.reshape(-1, *v_cache.shape[1:]).to(v_cache.dtype)
    for b in range(query.shape[0]):
        rows = req_to_token[int(req_pool_indices[b]), : int(seq_lens[b])].long()
        out = _attend(query[b : b + 1], k_cache[rows], v_cache[rows], sm_scale, logit_cap, None)
        output[b] = out[0].to(output.dtype)


def extend_attention_cpu(
    q_extend: torch.Tensor,
    k_extend: torch.Tensor | None,
    v_extend: torch.Tensor | None,
    o_extend: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    key_scale: float,
    value_scale: float,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    extend_seq_lens: torch.Tensor,
    extend_start_loc: torch.Tensor,
    max_len_extend: int | None,
    sm_scale: float,
    logit_cap: float,
    is_cross_attn: bool,
    sliding_window_size: int,
    encoder_lens: torch.Tensor | None,
    sinks: torch.Tensor | None,
    tree_mask: torch.Tensor | None,
    is_causal: bool,
) -> None:
    """Sequence b's extend_seq_lens[b] queries (rows from extend_start_loc[b]) attend to its whole
    prefix (seq_lens[b] - extend_seq_lens[b] cached tokens, read through req_to_token) and, among the
    new tokens (k_extend/v_extend, or the buffer when they are None), to those the mask allows:
    causal, or the verify tree mask (QLEN_ONLY layout: an [E, E] bool block per sequence, one after
    another) when given, or all when not causal (extend.cpp)."""
    _refuse_unsupported(
        k_buffer, key_scale, value_scale, is_cross_attn, sliding_window_size, encoder_lens, sinks
    )
    mask_at = 0
    for b in range(seq_lens.shape[0]):
        n_ext, start = int(extend_seq_lens[b]), int(extend_start_loc[b])
        seq_len = int(seq_lens[b])
        n_pre = seq_len - n_ext
        if n_pre < 0:
            raise ValueError(f"extend_attention_cpu: sequence {b} has prefix length {n_pre} < 0")
        row = req_to_token[int(req_pool_indices[b]), :seq_len].long()
        if k_extend is not None and v_extend is not None:
            k_new, v_new = k_extend[start : start + n_ext], v_extend[start : start + n_ext]
        else:
            k_new, v_new = k_buffer[row[n_pre:]], v_buffer[row[n_pre:]]
        keys = torch.cat([k_buffer[row[:n_pre]].to(k_new.dtype), k_new])
        values = torch.cat([v_buffer[row[:n_pre]].to(v_new.dtype), v_new])
        allowed = torch.ones(n_ext, seq_len, dtype=torch.bool)
        if tree_mask is not None:
            allowed[:, n_pre:] = tree_mask[mask_at : mask_at + n_ext * n_ext].view(n_ext, n_ext)
            mask_at += n_ext * n_ext
        elif is_causal:
            allowed[:, n_pre:] = torch.ones(n_ext, n_ext, dtype=torch.bool).tril()
        out = _attend(q_extend[start : start + n_ext], keys, values, sm_scale, logit_cap, allowed)
        o_extend[start : start + n_ext] = out.to(o_extend.dtype)


# --- speculative bookkeeping (spec.cpp) -------------------------------------------------------------


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """req_to_token[req_pool_indices[i], start_offset[i]:end_offset[i]] = the next
    end_offset[i] - start_offset[i] entries of out_cache_loc."""
    at = 0
    for rpi, lo, hi in zip(
        req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True
    ):
        req_to_token[rpi, lo:hi] = out_cache_loc[at : at + hi - lo].to(req_to_token.dtype)
        at += hi - lo


def assign_extend_cache_locs_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """out_cache_loc = req_to_token[req_pool_indices[i], start_offset[i]:end_offset[i]], concatenated."""
    at = 0
    for rpi, lo, hi in zip(
        req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True
    ):
        out_cache_loc[at : at + hi - lo] = req_to_token[rpi, lo:hi]
        at += hi - lo


def assign_draft_cache_locs_contiguous_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    seq_lens: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
    topk: int,
    num_steps: int,
) -> None:
    """out_cache_loc[i*topk*num_steps:][:topk*num_steps] = req_to_token[req_pool_indices[i],
    seq_lens[i]:][:topk*num_steps]."""
    width = topk * num_steps
    if out_cache_loc.numel() != req_pool_indices.numel() * width:
        raise ValueError("assign_draft_cache_locs_contiguous_cpu: out_cache_loc has the wrong size")
    for i, (rpi, sl) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist(), strict=True)):
        out_cache_loc[i * width : (i + 1) * width] = req_to_token[rpi, sl : sl + width]


def build_draft_decode_metadata_cpu(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
    num_steps: int,
    pool_len: int,
) -> torch.Tensor:
    """Row b*topk+k: request b's first seq_lens[b] slots, then candidate k's num_steps draft slots
    (which start at seq_lens[b] + k*num_steps); the rest of the row is undefined (zeros here)."""
    out = torch.zeros(req_pool_indices.numel() * topk, pool_len, dtype=req_to_token.dtype)
    for b, (rpi, sl) in enumerate(zip(req_pool_indices.tolist(), seq_lens.tolist(), strict=True)):
        for k in range(topk):
            out[b * topk + k, :sl] = req_to_token[rpi, :sl]
            draft = sl + k * num_steps
            out[b * topk + k, sl : sl + num_steps] = req_to_token[rpi, draft : draft + num_steps]
    return out


def fill_bonus_tokens_cpu(
    accept_tokens: torch.Tensor, accept_lens: torch.Tensor, bonus_tokens: torch.Tensor, accept_stride: int
) -> None:
    """bonus_tokens[i] = the last accepted token of request i (flat accept_tokens, rows of accept_stride)."""
    flat = accept_tokens.reshape(-1)
    idx = torch.arange(accept_lens.numel()) * accept_stride + accept_lens.long() - 1
    bonus_tokens.copy_(flat[idx].to(bonus_tokens.dtype))


def fill_accept_out_cache_loc_cpu(
    accept_index: torch.Tensor, out_cache_loc: torch.Tensor, accept_out_cache_loc: torch.Tensor
) -> None:
    """accept_out_cache_loc[:n] = out_cache_loc at the accept_index entries that are not -1, in order."""
    kept = accept_index.reshape(-1).long()
    kept = kept[kept > -1]
    accept_out_cache_loc[: kept.numel()] = out_cache_loc[kept]


def verify_tree_greedy_cpu(
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
) -> None:
    """Per request, walk the draft tree from the root: at each depth take the first child (in
    sibling order) whose draft token equals the target's argmax at the last accepted node, until none
    does or num_spec_step - 1 drafts are accepted. Writes the accepted flat indices, their count
    (bonus excluded) and the target tokens at the accepted nodes; other entries stay as given."""
    steps = accept_index.shape[1]
    cand, ri = candidates.tolist(), retrive_index.tolist()
    nxt, sib = retrive_next_token.tolist(), retrive_next_sibling.tolist()
    target = target_predict.reshape(-1).tolist()
    for b in range(candidates.shape[0]):
        last = ri[b][0]
        accept_index[b, 0] = last
        correct, cur = 0, 0
        for _ in range(1, steps):
            cur = nxt[b][cur]
            while cur != -1:
                if cand[b][cur] == target[last]:
                    predicts[last] = target[last]
                    correct += 1
                    accept_index[b, correct] = ri[b][cur]
                    last = ri[b][cur]
                    break
                cur = sib[b][cur]
            if cur == -1:
                break
        accept_token_num[b] = correct
        predicts[last] = target[last]


def _find(seq: list[int], value: int, stop: int) -> int:
    """Index of value in seq[:stop], else stop (the C++ loop's end value)."""
    for i in range(min(stop, len(seq))):
        if seq[i] == value:
            return i
    return stop


def build_tree_kernel_efficient_cpu(
    parent_list: torch.Tensor,
    selected_index: torch.Tensor,
    verified_seq_len: torch.Tensor,
    tree_mask: torch.Tensor,
    positions: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    topk: int,
    depth: int,
    draft_token_num: int,
    tree_mask_mode: int,
) -> None:
    """From EAGLE's top-k draft tree (parent_list, selected_index): the verify mask (each draft token
    sees the root and its ancestors; mode 1 QLEN_ONLY, mode 0 FULL_MASK with the prefix columns left
    as given), positions (seq_len + depth) and the retrieval links (first child, next sibling, both
    pre-filled with -1 by the caller). Mode 2 (bit-packed) is refused as upstream does."""
    if tree_mask_mode == 2:
        raise NotImplementedError(
            "build_tree_kernel_efficient_cpu: QLEN_ONLY_BITPACKING is not supported on CPU"
        )
    d = draft_token_num
    parents, selected = parent_list.tolist(), selected_index.tolist()
    seq_lens = verified_seq_len.tolist()
    nxt, sib = retrive_next_token.view(-1, d), retrive_next_sibling.view(-1, d)
    mask_at = 0
    for b, seq_len in enumerate(seq_lens):
        off, sel, par = b * d, selected[b], parents[b]
        positions[off] = seq_len
        retrive_index.view(-1, d)[b] = torch.arange(off, off + d)
        for i in range(d - 1, 0, -1):
            parent_tb = sel[i - 1] // topk
            parent_pos = 0 if parent_tb == 0 else _find(sel, par[parent_tb], d) + 1
            if parent_pos >= d:  # the parent is not among the selected tokens: skipped, as upstream
                continue
            if int(nxt[b, parent_pos]) != -1:
                sib[b, i] = nxt[b, parent_pos]
            nxt[b, parent_pos] = i
        row_len = d if tree_mask_mode == 1 else seq_len + d
        first_col = 0 if tree_mask_mode == 1 else seq_len
        for tid in range(d):
            row = mask_at + row_len * tid + first_col
            tree_mask[row : row + d] = False
            tree_mask[row] = True
            if tid == 0:
                continue
            depth_of, cur = 0, tid - 1
            while True:
                depth_of += 1
                tree_mask[row + cur + 1] = True
                parent_tb = sel[cur] // topk
                if parent_tb == 0:
                    break
                cur = _find(sel, par[parent_tb], d)
            positions[off + tid] = depth_of + seq_len
        mask_at += d * row_len


def reconstruct_indices_from_tree_mask_cpu(
    tree_mask: torch.Tensor,
    verified_seq_len: torch.Tensor,
    positions: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    batch_size: int,
    draft_token_num: int,
) -> None:
    """NGRAM's tree links from a QLEN_ONLY mask ([bs, d, d], mask[i, j]: j is an ancestor of i or i):
    position = seq_len + number of strict ancestors, parent = the last strict ancestor, first child =
    the first later node with this node as ancestor, next sibling = the first later node whose last
    ancestor is this node's parent."""
    d = draft_token_num
    masks = tree_mask.view(batch_size, d, d).tolist()
    seq_lens = verified_seq_len.tolist()
    out_pos, out_ri = positions.view(-1), retrive_index.view(-1)
    out_nxt, out_sib = retrive_next_token.view(-1), retrive_next_sibling.view(-1)
    for b in range(batch_size):
        m = masks[b]
        for tid in range(d):
            ancestors = [j for j in range(tid) if m[tid][j]]
            parent = ancestors[-1] if ancestors else -1
            flat = b * d + tid
            out_ri[flat] = flat
            out_pos[flat] = len(ancestors) + seq_lens[b]
            out_nxt[flat] = next((i for i in range(tid + 1, d) if m[i][tid]), -1)
            sibling = -1
            if parent != -1:
                for i in range(tid + 1, d):
                    if m[i][parent] and not any(m[i][parent + 1 : i]):
                        sibling = i
                        break
            out_sib[flat] = sibling


def rotate_input_ids_cpu(
    input_ids: torch.Tensor,
    extend_start_loc: torch.Tensor,
    extend_seq_lens: torch.Tensor,
    topk_index: torch.Tensor,
    select_index: torch.Tensor | None = None,
) -> None:
    """Shift each request's extend segment left by one and write its new token at the segment's end
    (or at select_index[i])."""
    for i, (start, n) in enumerate(zip(extend_start_loc.tolist(), extend_seq_lens.tolist(), strict=True)):
        if n > 1:
            input_ids[start : start + n - 1] = input_ids[start + 1 : start + n].clone()
        if n > 0:
            at = int(select_index[i]) if select_index is not None else start + n - 1
            input_ids[at] = topk_index[i]


OPS: dict[str, Callable[..., Any]] = {
    name: globals()[name]
    for name in WRAPPERS  # every name of WRAPPERS has a function above
}


# --- checks and installation ------------------------------------------------------------------------


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _versions() -> str:
    return f"sglang {_version('sglang')}, sglang-kernel {_version('sglang-kernel')}"


def _has_real_op(name: str) -> bool:
    try:
        getattr(torch.ops.sgl_kernel, name)
    except (AttributeError, RuntimeError):
        return False
    return getattr(torch.ops.sgl_kernel, name) not in OPS.values()


def check(sgl_kernel: ModuleType) -> str | None:
    """None when the installed wheels are the pinned ones, every op here is still missing and every
    wrapper has the parameters we serve; else ONE line naming the op (or package) and the versions."""
    pinned = f"pinned sglang {SGLANG_VERSION}, sglang-kernel {SGLANG_KERNEL_VERSION}"
    if _version("sglang") != SGLANG_VERSION or _version("sglang-kernel") != SGLANG_KERNEL_VERSION:
        return f"sgl_kernel CPU ops: installed {_versions()}, the pure-torch ops are {pinned}"
    for name, (module, params) in WRAPPERS.items():
        if _has_real_op(name):
            return f"sgl_kernel CPU ops: {name} has a real op in {_versions()} ({pinned})"
        if params is None:
            continue
        wrapper = getattr(getattr(sgl_kernel, module, None), WRAPPER_NAME.get(name, name), None)
        if wrapper is None:
            return f"sgl_kernel CPU ops: sgl_kernel.{module} has no wrapper for {name} ({_versions()})"
        got = tuple(inspect.signature(wrapper).parameters)
        if got != params:
            return f"sgl_kernel CPU ops: {name} wrapper takes {got}, expected {params} ({_versions()})"
    return None


def check_attention_calls(site_packages: Path) -> str | None:
    """None when SGLang's intel_amx backend passes the attention ops the arguments served here."""
    src = site_packages / "sglang/srt/layers/attention/intel_amx_backend.py"
    if not src.is_file():
        return f"sgl_kernel CPU ops: no {src} ({_versions()})"
    counts: dict[str, set[int]] = {}
    for node in ast.walk(ast.parse(src.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ATTENTION_CALLS
        ):
            counts.setdefault(node.func.attr, set()).add(len(node.args))
    for attr, want in ATTENTION_CALLS.items():
        if counts.get(attr) != {want}:
            return (
                f"sgl_kernel CPU ops: intel_amx_backend calls {attr} with {sorted(counts.get(attr, ()))} "
                f"arguments, expected {want} ({_versions()})"
            )
    return None


def install(sgl_kernel: ModuleType) -> list[str]:
    """Put the ops on torch.ops.sgl_kernel and sgl_kernel for names without a real op; returns them.
    Installs nothing (and says so in one line on stderr) when check() finds a mismatch."""
    problem = check(sgl_kernel)
    if problem is not None:
        print(f"{problem}; speculative decoding on the CPU is off", file=sys.stderr)
        return []
    installed = []
    for name, fn in OPS.items():
        setattr(torch.ops.sgl_kernel, name, fn)
        if not hasattr(sgl_kernel, name):
            setattr(sgl_kernel, name, fn)
        installed.append(name)
    return installed


def main(argv: list[str]) -> int:
    if argv[1:] != ["--check"]:
        print("usage: sgl_kernel_cpu_ops.py --check", file=sys.stderr)
        return 2
    import sgl_kernel

    problem = check(sgl_kernel) or check_attention_calls(Path(inspect.getfile(sgl_kernel)).parents[1])
    if problem is not None:
        print(problem)
        return 1
    print(f"ok: {len(OPS)} pure-torch sgl_kernel CPU ops for {_versions()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
