"""Cases for the pure-torch sgl_kernel CPU ops (scripts/real-sglang/cpu_spec_ops/), run by the real
env's interpreter (torch is not in the project's venv); tests/real/test_cpu_spec_ops.py starts it.

    PYTHONPATH=scripts/real-sglang/cpu_spec_ops  $ROOT/venv/bin/python tests/real/cpu_spec_ops_cases.py
    (with the env's LD_LIBRARY_PATH, from $ROOT/env.sh)

Every op is called the way SGLang calls it: through the wheel's wrappers where there are some
(``sgl_kernel.<name>``, by keyword), on ``torch.ops.sgl_kernel`` for the attention ops, so the import
hook's installation is exercised too. Copies, indices and trees must equal a reference written
independently (vectorised, or from the tree's parent links); attention is held to torch's
scaled_dot_product_attention. Prints one JSON object: test name -> "ok" or the failure.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
import unittest
from pathlib import Path

import sgl_kernel
import sgl_kernel.speculative
import torch
import torch.nn.functional as F

GEN = torch.Generator().manual_seed(20261207)


def randint(high: int, shape: tuple[int, ...], dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=GEN, dtype=dtype)


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=GEN).to(dtype)


def perm(n: int) -> torch.Tensor:
    return torch.randperm(n, generator=GEN)


def sdpa(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> torch.Tensor:
    """q [M, H, D], k/v [N, Hkv, D], mask [M, N] bool -> [M, H, D] (float32), GQA by repeating heads."""
    groups = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(groups, 1)
    v = v.float().repeat_interleave(groups, 1)
    out = F.scaled_dot_product_attention(
        q.float().transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask, scale=scale
    )
    return out.transpose(0, 1)


class Installed(unittest.TestCase):
    def test_installed(self) -> None:
        from sgl_kernel_cpu_ops import OPS

        for name, fn in OPS.items():
            self.assertIs(getattr(torch.ops.sgl_kernel, name), fn, name)
        self.assertIs(sgl_kernel.decode_attention_cpu, OPS["decode_attention_cpu"])


class Check(unittest.TestCase):
    def test_check_passes_on_the_pinned_wheels(self) -> None:
        import sgl_kernel_cpu_ops as ops

        site = Path(sgl_kernel.__file__).parents[1]
        self.assertEqual((ops.check(sgl_kernel), ops.check_attention_calls(site)), (None, None))

    def test_check_names_a_changed_wrapper_in_one_line(self) -> None:
        import sgl_kernel_cpu_ops as ops

        module, params = ops.WRAPPERS["fill_bonus_tokens_cpu"]
        ops.WRAPPERS["fill_bonus_tokens_cpu"] = (module, (*params, "batch_size"))
        try:
            line = ops.check(sgl_kernel)
            self.assertEqual(ops.install(sgl_kernel), [])  # nothing installed on a mismatch
        finally:
            ops.WRAPPERS["fill_bonus_tokens_cpu"] = (module, params)
        self.assertIsNotNone(line)
        self.assertNotIn("\n", line)
        for word in ("fill_bonus_tokens_cpu", "sglang 0.5.23", "sglang-kernel 0.4.10"):
            self.assertIn(word, line)


class KvCache(unittest.TestCase):
    def test_copy_all_layer_kv_cache_cpu(self) -> None:
        bufs = [randn(24, 2, 8, dtype=torch.bfloat16), randn(24, 16), randn(24, 2, 8, dtype=torch.float16)]
        before = [b.clone() for b in bufs]
        src = torch.tensor([3, 4, 5, 9, 0], dtype=torch.int32)
        tgt = torch.tensor([4, 5, 6, 23, 3], dtype=torch.int32)  # overlaps src: gather before scatter
        ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.uint64)
        strides = torch.tensor([b.stride(0) * b.element_size() for b in bufs], dtype=torch.int64)
        sgl_kernel.copy_all_layer_kv_cache_cpu(data_ptrs=ptrs, strides=strides, tgt_loc=tgt, src_loc=src)
        for b, old in zip(bufs, before, strict=True):
            want = old.clone()
            for t, s in zip(tgt.tolist(), src.tolist(), strict=True):
                want[t] = old[s]
            self.assertTrue(torch.equal(b, want))


class Attention(unittest.TestCase):
    H, HKV, D, POOL = 4, 2, 32, 96

    def cache(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        k = randn(self.POOL, self.HKV, self.D, dtype=dtype)
        v = randn(self.POOL, self.HKV, self.D, dtype=dtype)
        req_to_token = perm(self.POOL)[: 4 * 24].view(4, 24).to(torch.int32)
        return k, v, req_to_token

    def check_decode(self, dtype: torch.dtype, atol: float) -> None:
        k_cache, v_cache, req_to_token = self.cache(dtype)
        rpi, seq_lens = torch.tensor([2, 0, 3]), torch.tensor([5, 17, 1])
        q = randn(3, self.H, self.D, dtype=dtype)
        key, value = randn(3, self.HKV, self.D, dtype=dtype), randn(3, self.HKV, self.D, dtype=dtype)
        loc = req_to_token[rpi, seq_lens - 1].long()  # the new token is the last of each sequence
        out = torch.empty_like(q)
        logits = torch.empty(3, self.H, 8, self.D + 1)
        scale = self.D**-0.5
        torch.ops.sgl_kernel.decode_attention_cpu(
            q, k_cache, v_cache, 1.0, 1.0, out, key, value, loc, logits,
            req_to_token, rpi, seq_lens, scale, 0.0, False, 0, None, None,
        )  # fmt: skip
        self.assertTrue(torch.equal(k_cache[loc], key) and torch.equal(v_cache[loc], value))
        for b in range(3):
            rows = req_to_token[rpi[b], : seq_lens[b]].long()
            want = sdpa(q[b : b + 1], k_cache[rows], v_cache[rows], None, scale)
            torch.testing.assert_close(out[b : b + 1].float(), want, atol=atol, rtol=0)

    def test_decode_attention_cpu(self) -> None:
        self.check_decode(torch.float32, 1e-5)

    def test_decode_attention_cpu_bf16(self) -> None:
        self.check_decode(torch.bfloat16, 2e-2)

    def check_extend(self, tree: bool, k_in_buffer: bool) -> None:
        k_buf, v_buf, req_to_token = self.cache(torch.float32)
        rpi = torch.tensor([1, 3])
        ext = torch.tensor([4, 4] if tree else [3, 6], dtype=torch.int32)
        prefix = torch.tensor([7, 0])
        seq_lens = prefix + ext
        starts = torch.tensor([0, int(ext[0])], dtype=torch.int32)
        n = int(ext.sum())
        q = randn(n, self.H, self.D)
        k_new, v_new = randn(n, self.HKV, self.D), randn(n, self.HKV, self.D)
        for b in range(2):  # the backend stores the new K/V before it calls the kernel
            rows = req_to_token[rpi[b], prefix[b] : seq_lens[b]].long()
            k_buf[rows], v_buf[rows] = (
                k_new[starts[b] : starts[b] + ext[b]],
                v_new[starts[b] : starts[b] + ext[b]],
            )
        masks = []
        for e in ext.tolist():  # ancestors-or-self: lower triangle with the diagonal and column 0
            m = torch.rand(e, e, generator=GEN).lt(0.5).tril()
            m |= torch.eye(e, dtype=torch.bool)
            m[:, 0] = True
            masks.append(m)
        tree_mask = torch.cat([m.flatten() for m in masks]) if tree else None
        out = torch.empty_like(q)
        scale = self.D**-0.5
        torch.ops.sgl_kernel.extend_attention_cpu(
            q, None if k_in_buffer else k_new, None if k_in_buffer else v_new, out, k_buf, v_buf, 1.0, 1.0,
            req_to_token, rpi, seq_lens, ext, starts, int(ext.max()), scale, 0.0, False, 0, None, None,
            tree_mask, True,
        )  # fmt: skip
        for b in range(2):
            e, p, s = int(ext[b]), int(prefix[b]), int(starts[b])
            rows = req_to_token[rpi[b], : p + e].long()
            inner = masks[b] if tree else torch.ones(e, e, dtype=torch.bool).tril()
            mask = torch.cat([torch.ones(e, p, dtype=torch.bool), inner], dim=1)
            want = sdpa(q[s : s + e], k_buf[rows], v_buf[rows], mask, scale)
            torch.testing.assert_close(out[s : s + e], want, atol=1e-5, rtol=0)

    def test_extend_attention_cpu_causal(self) -> None:
        self.check_extend(tree=False, k_in_buffer=False)

    def test_extend_attention_cpu_tree_mask(self) -> None:
        self.check_extend(tree=True, k_in_buffer=False)

    def test_extend_attention_cpu_kv_from_buffer(self) -> None:
        self.check_extend(tree=False, k_in_buffer=True)

    def test_extend_attention_cpu_refuses_sinks(self) -> None:
        k_buf, v_buf, req_to_token = self.cache(torch.float32)
        q = randn(1, self.H, self.D)
        with self.assertRaises(NotImplementedError):
            torch.ops.sgl_kernel.extend_attention_cpu(
                q, k_buf[:1], v_buf[:1], q.clone(), k_buf, v_buf, 1.0, 1.0, req_to_token,
                torch.tensor([0]), torch.tensor([1]), torch.tensor([1]), torch.tensor([0]), 1,
                1.0, 0.0, False, 0, None, torch.zeros(self.H), None, True,
            )  # fmt: skip


class CacheLocs(unittest.TestCase):
    def setUp(self) -> None:
        self.pool_len = 32
        self.req_to_token = perm(8 * self.pool_len).view(8, self.pool_len).to(torch.int32)
        self.rpi = torch.tensor([5, 1, 6], dtype=torch.int64)
        self.start = torch.tensor([3, 0, 10], dtype=torch.int32)
        self.end = torch.tensor([7, 2, 10 + 5], dtype=torch.int32)

    def windows(self) -> list[torch.Tensor]:
        return [self.req_to_token[r, s:e] for r, s, e in zip(self.rpi, self.start, self.end, strict=True)]

    def test_assign_extend_cache_locs_cpu(self) -> None:
        out = torch.full((int((self.end - self.start).sum()),), -7, dtype=torch.int64)
        sgl_kernel.assign_extend_cache_locs_cpu(
            req_pool_indices=self.rpi, req_to_token=self.req_to_token, start_offset=self.start,
            end_offset=self.end, out_cache_loc=out, pool_len=self.pool_len,
        )  # fmt: skip
        self.assertEqual(out.tolist(), torch.cat(self.windows()).tolist())

    def test_assign_req_to_token_pool_cpu(self) -> None:
        locs = 1000 + torch.arange(int((self.end - self.start).sum()), dtype=torch.int64)
        want = self.req_to_token.clone()
        at = 0
        for r, s, e in zip(self.rpi.tolist(), self.start.tolist(), self.end.tolist(), strict=True):
            for j in range(s, e):
                want[r, j] = int(locs[at])
                at += 1
        sgl_kernel.assign_req_to_token_pool_cpu(
            req_pool_indices=self.rpi, req_to_token=self.req_to_token, start_offset=self.start,
            end_offset=self.end, out_cache_loc=locs, pool_len=self.pool_len,
        )  # fmt: skip
        self.assertTrue(torch.equal(self.req_to_token, want))

    def test_assign_draft_cache_locs_contiguous_cpu(self) -> None:
        topk, steps = 2, 3
        seq_lens = torch.tensor([4, 0, 20], dtype=torch.int32)
        out = torch.empty(3 * topk * steps, dtype=torch.int64)
        sgl_kernel.assign_draft_cache_locs_contiguous_cpu(
            req_pool_indices=self.rpi, req_to_token=self.req_to_token, seq_lens=seq_lens, out_cache_loc=out,
            pool_len=self.pool_len, topk=topk, num_steps=steps,
        )  # fmt: skip
        want = [
            int(self.req_to_token[r, s + j])
            for r, s in zip(self.rpi, seq_lens, strict=True)
            for j in range(6)
        ]
        self.assertEqual(out.tolist(), want)

    def test_build_draft_decode_metadata_cpu(self) -> None:
        topk, steps = 2, 2
        seq_lens = torch.tensor([4, 1, 9], dtype=torch.int64)
        got = sgl_kernel.build_draft_decode_metadata_cpu(
            req_to_token=self.req_to_token, req_pool_indices=self.rpi, seq_lens=seq_lens, topk=topk,
            num_steps=steps, pool_len=self.pool_len,
        )  # fmt: skip
        self.assertEqual((got.shape, got.dtype), ((3 * topk, self.pool_len), torch.int32))
        for b, (r, s) in enumerate(zip(self.rpi.tolist(), seq_lens.tolist(), strict=True)):
            for k in range(topk):
                row = self.req_to_token[r].tolist()
                want = row[:s] + row[s + k * steps : s + (k + 1) * steps]
                self.assertEqual(got[b * topk + k, : s + steps].tolist(), want)

    def test_fill_bonus_tokens_cpu(self) -> None:
        tokens = randint(1000, (3, 4), torch.int32)
        lens = torch.tensor([1, 4, 2], dtype=torch.int32)
        bonus = torch.zeros(3, dtype=torch.int32)
        sgl_kernel.fill_bonus_tokens_cpu(
            accept_tokens=tokens, accept_lens=lens, bonus_tokens=bonus, accept_stride=4
        )
        self.assertEqual(bonus.tolist(), [int(tokens[i, n - 1]) for i, n in enumerate(lens.tolist())])

    def test_fill_accept_out_cache_loc_cpu(self) -> None:
        accept = torch.tensor([[0, 2, -1], [3, -1, -1], [6, 7, 8]], dtype=torch.int32)
        locs = 500 + perm(9)
        out = torch.full((6,), -9, dtype=torch.int64)
        sgl_kernel.fill_accept_out_cache_loc_cpu(
            accept_index=accept, out_cache_loc=locs, accept_out_cache_loc=out
        )
        self.assertEqual(out.tolist(), [int(locs[i]) for i in accept.flatten().tolist() if i != -1])

    def test_rotate_input_ids_cpu(self) -> None:
        ids = torch.arange(10, dtype=torch.int64)
        starts, lens = torch.tensor([0, 4, 9], dtype=torch.int32), torch.tensor([4, 5, 1])
        new = torch.tensor([100, 101, 102], dtype=torch.int64)
        sgl_kernel.rotate_input_ids_cpu(ids, starts, lens, new)
        self.assertEqual(ids.tolist(), [1, 2, 3, 100, 5, 6, 7, 8, 101, 102])
        ids = torch.arange(6, dtype=torch.int64)
        sgl_kernel.rotate_input_ids_cpu(ids, torch.tensor([0]), torch.tensor([6]), new[:1], torch.tensor([2]))
        self.assertEqual(ids.tolist(), [1, 2, 100, 4, 5, 5])


def eagle_tree(topk: int, depth: int, d: int) -> tuple[list[int], list[int], dict[int, int]]:
    """A random EAGLE draft tree: (parent_list row, selected_index row, token -> parent token or -1).
    Step 0's topk tokens hang off the root; at step s each of step s-1's topk expanded tokens gets
    topk children; selected tokens (d - 1 of them, sorted) are closed under their parents."""
    parent_row = [-1]
    parent_of = {t: -1 for t in range(topk)}
    frontier = list(range(topk))
    for s in range(1, depth):
        base = topk + (s - 1) * topk * topk
        children = []
        for j, p in enumerate(frontier):
            parent_row.append(p)
            for c in range(topk):
                t = base + j * topk + c
                parent_of[t] = p
                children.append(t)
        frontier = [children[i] for i in torch.randperm(len(children), generator=GEN)[:topk].tolist()]
    chosen: set[int] = set()
    order = torch.randperm(len(parent_of), generator=GEN).tolist()
    for t in order:  # add random tokens with their ancestors until d - 1 are chosen
        chain = []
        while t != -1 and t not in chosen:
            chain.append(t)
            t = parent_of[t]
        if len(chosen) + len(chain) <= d - 1:
            chosen.update(chain)
    assert len(chosen) == d - 1, "tree too small for d"
    return parent_row, sorted(chosen), parent_of


class Trees(unittest.TestCase):
    def test_build_tree_kernel_efficient_cpu(self) -> None:
        topk, depth, d = 2, 3, 5
        seq_lens = [7, 3]
        for mode in (1, 0):  # QLEN_ONLY, FULL_MASK
            trees = [eagle_tree(topk, depth, d) for _ in seq_lens]
            parent_list = torch.tensor([t[0] for t in trees])
            selected = torch.tensor([t[1] for t in trees])
            size = 2 * d * d + (0 if mode == 1 else sum(seq_lens) * d)
            mask = torch.ones(size, dtype=torch.bool)
            pos = torch.zeros(2 * d, dtype=torch.int64)
            ri, nxt, sib = (torch.full((2, d), -1, dtype=torch.int64) for _ in range(3))
            sgl_kernel.build_tree_kernel_efficient_cpu(
                parent_list=parent_list, selected_index=selected, verified_seq_len=torch.tensor(seq_lens),
                tree_mask=mask, positions=pos, retrive_index=ri, retrive_next_token=nxt,
                retrive_next_sibling=sib, topk=topk, depth=depth, draft_token_num=d, tree_mask_mode=mode,
            )  # fmt: skip
            at = 0
            for b, (_, sel, parent_of) in enumerate(trees):
                node = {t: i + 1 for i, t in enumerate(sel)}  # draft slot of each selected token; root = 0
                parent = [-1] + [node.get(parent_of[t], 0) for t in sel]
                ancestors = [{0}] + [set() for _ in sel]
                for i in range(1, d):
                    a, p = {i}, parent[i]
                    while p > 0:
                        a.add(p)
                        p = parent[p]
                    ancestors[i] = a | {0}
                width = d if mode == 1 else seq_lens[b] + d
                block = mask[at : at + d * width].view(d, width)
                if mode == 0:
                    self.assertTrue(block[:, : seq_lens[b]].all())  # the prefix columns stay as given
                want_mask = [[j in ancestors[i] for j in range(d)] for i in range(d)]
                self.assertEqual(block[:, width - d :].tolist(), want_mask)
                at += d * width
                self.assertEqual(
                    pos[b * d : (b + 1) * d].tolist(), [seq_lens[b] + len(a) - 1 for a in ancestors]
                )
                self.assertEqual(ri[b].tolist(), list(range(b * d, (b + 1) * d)))
                kids = [[c for c in range(1, d) if parent[c] == i] for i in range(d)]
                self.assertEqual(nxt[b].tolist(), [k[0] if k else -1 for k in kids])
                want_sib = [-1] * d
                for k in kids:
                    for x, y in itertools.pairwise(k):
                        want_sib[x] = y
                self.assertEqual(sib[b].tolist(), want_sib)

    def reconstruct_reference(self, mask: torch.Tensor, seq_lens: torch.Tensor) -> list[list[int]]:
        """Vectorised, from the semantics in sglang's reconstruct_tree.py."""
        bs, d, _ = mask.shape
        idx = torch.arange(d)
        anc = mask & (idx[None, :] < idx[:, None])
        pos = anc.sum(-1) + seq_lens[:, None]
        parent = torch.where(anc.any(-1), (anc * idx).amax(-1), -1)
        child_of = anc.transpose(1, 2) & (idx[None, :] > idx[:, None])  # [b, tid, k]: tid is an ancestor of k
        big = torch.full_like(child_of, d, dtype=torch.int64)
        first = torch.where(child_of, idx.expand(bs, d, d), big).amin(-1)
        nxt = torch.where(first < d, first, -1)
        same = (
            (parent[:, None, :] == parent[:, :, None])
            & (idx[None, :] > idx[:, None])
            & (parent[:, :, None] >= 0)
        )
        firsts = torch.where(same, idx.expand(bs, d, d), big).amin(-1)
        sib = torch.where(firsts < d, firsts, -1)
        ri = torch.arange(bs * d).view(bs, d)
        return [pos.flatten().tolist(), ri.tolist(), nxt.tolist(), sib.tolist()]

    def test_reconstruct_indices_from_tree_mask_cpu(self) -> None:
        bs, d = 3, 6
        masks = []
        for _ in range(bs):  # random trees: node i's parent is a random earlier node
            m = torch.eye(d, dtype=torch.bool)
            for i in range(1, d):
                p = int(torch.randint(0, i, (1,), generator=GEN))
                m[i] |= m[p]
            masks.append(m)
        mask = torch.stack(masks)
        seq_lens = torch.tensor([5, 0, 11])
        pos = torch.zeros(bs * d, dtype=torch.int64)
        ri, nxt, sib = (torch.zeros(bs, d, dtype=torch.int64) for _ in range(3))
        # NGRAM's call: the wheel's wrapper, which sends CPU tensors to the _cpu op
        sgl_kernel.speculative.reconstruct_indices_from_tree_mask(
            mask.flatten(), seq_lens, pos, ri, nxt, sib, bs, d
        )  # fmt: skip
        self.assertEqual(
            [pos.tolist(), ri.tolist(), nxt.tolist(), sib.tolist()],
            self.reconstruct_reference(mask, seq_lens),
        )

    def test_verify_tree_greedy_cpu(self) -> None:
        # tree: 0 -> {1, 2}, 1 -> {3}, 2 -> {4}; sibling order 1 then 2
        nxt = torch.tensor([[1, 3, 4, -1, -1]])
        sib = torch.tensor([[-1, 2, -1, -1, -1]])
        ri = torch.tensor([[0, 1, 2, 3, 4]])
        cand = torch.tensor([[9, 11, 12, 13, 14]])
        target = torch.tensor([[12, 0, 14, 0, 77]])  # root predicts 12 (slot 2), slot 2 predicts 14 (slot 4)
        out = self.verify(cand, ri, nxt, sib, target, steps=3)
        self.assertEqual(out, ([[0, 2, 4]], [2], {0: 12, 2: 14, 4: 77}))

    def test_verify_tree_greedy_cpu_chains(self) -> None:
        for _ in range(20):  # topk 1: a chain; the reference counts the matching prefix
            d = 4
            cand = randint(3, (1, d))
            target = randint(3, (1, d))
            ri = torch.arange(d).view(1, d)
            nxt = torch.tensor([[1, 2, 3, -1]])
            sib = torch.full((1, d), -1)
            n = 0
            while n < d - 1 and int(cand[0, n + 1]) == int(target[0, n]):
                n += 1
            idx, num, written = self.verify(cand, ri, nxt, sib, target, steps=d)
            self.assertEqual((idx[0][: n + 1], num[0]), (list(range(n + 1)), n))
            self.assertEqual(written, {i: int(target[0, i]) for i in range(n + 1)})

    def verify(
        self,
        cand: torch.Tensor,
        ri: torch.Tensor,
        nxt: torch.Tensor,
        sib: torch.Tensor,
        target: torch.Tensor,
        steps: int,
    ) -> tuple[list[list[int]], list[int], dict[int, int]]:
        predicts = torch.full((cand.numel(),), -5, dtype=torch.int32)
        accept = torch.full((cand.shape[0], steps), -1, dtype=torch.int32)
        num = torch.zeros(cand.shape[0], dtype=torch.int32)
        sgl_kernel.verify_tree_greedy_cpu(
            predicts=predicts, accept_index=accept, accept_token_num=num, candidates=cand, retrive_index=ri,
            retrive_next_token=nxt, retrive_next_sibling=sib, target_predict=target,
        )  # fmt: skip
        written = {i: v for i, v in enumerate(predicts.tolist()) if v != -5}
        return [[i for i in row if i != -1] for row in accept.tolist()], num.tolist(), written


def main() -> int:
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    verdict = {t.id().rsplit(".", 1)[1]: "ok" for t in _flatten(suite)}  # run() empties the suite
    result = unittest.TestResult()
    suite.run(result)
    for test, trace in result.failures + result.errors:
        lines = trace.strip().splitlines()
        verdict[test.id().rsplit(".", 1)[1]] = next(
            (x for x in lines if re.match(r"\w+(Error|Exception)\b", x)), lines[-1]
        )
    print(json.dumps(verdict))
    return 0 if result.wasSuccessful() else 1


def _flatten(suite: unittest.TestSuite) -> list[unittest.TestCase]:
    out: list[unittest.TestCase] = []
    for t in suite:
        out.extend(_flatten(t) if isinstance(t, unittest.TestSuite) else [t])
    return out


if __name__ == "__main__":
    sys.exit(main())
