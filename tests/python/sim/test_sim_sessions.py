"""Multi-turn sessions against the stand-in: its radix cache finds each session's history, so cached tokens
rise turn by turn and the turns after the first prefill far fewer tokens.

What the server prefilled is read from its own ``Prefill batch`` log lines (as SGLang logs them), not from
the client's TTFT: on a loaded machine each request's HTTP and scheduling time can hide the difference."""

from __future__ import annotations

import itertools
import re
from collections import Counter

from sim_harness import model

from sglbench.hostlib import loadgen, prompts

# A fixed prefill speed (simulated tokens/s): the stand-in's prefill time is its new tokens over it.
PREFILL_TOKENS_PER_S = "250"
TIME_SCALE = "0.01"
PREFILL = re.compile(r"Prefill batch, #new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+),")
FLUSHED = "Cache flushed successfully!"


def _run(url: str, api: str) -> loadgen.PointResult:
    spec = loadgen.BenchSpec(
        url=url,
        api=api,
        prompts=prompts.resolve_prompt_source("multi-turn:4x4:1200:10", seed=0),
        points=[loadgen.LoadPoint(concurrency=1)],
        sampling=loadgen.SamplingSpec(max_new_tokens=8, ignore_eos=True),
        num_prompts=16,
        repeats=1,
        warmup=1,
    )
    point = loadgen.run_campaign(spec).points[0]
    assert (point.summary["n_ok"], point.summary["n_err"]) == (16, 0)
    return point


def _measured_prefills(log: str) -> list[tuple[int, int, int]]:
    """(#new-seq, #new-token, #cached-token) of the prefill batches after the log's last cache flush (the
    flush between a point's warm-up and its measured requests)."""
    tail = log.rsplit(FLUSHED, 1)[1]
    return [(int(m[1]), int(m[2]), int(m[3])) for m in PREFILL.finditer(tail)]


def test_cached_tokens_rise_and_prefill_falls_across_turns(start_sim) -> None:
    sim = start_sim(
        ["--model-path", model("qwen3-8b"), "--enable-cache-report"],
        SGLBENCH_SIM_TIME_SCALE=TIME_SCALE,
        SGLBENCH_SIM_PREFILL_TOKENS_PER_S=PREFILL_TOKENS_PER_S,
    )
    for api in ("native", "openai-chat"):
        point = _run(sim.url, api)
        turns = point.summary["turns"]
        assert [t["turn"] for t in turns] == [0, 1, 2, 3]
        cached = [t["cached_tokens_mean"] for t in turns]
        prompt = [t["prompt_tokens_mean"] for t in turns]
        assert cached[0] == 0  # a fresh session finds nothing (the cache was flushed after the warm-up)
        assert all(b > a for a, b in itertools.pairwise(cached)), (api, cached)
        assert all(b > a for a, b in itertools.pairwise(prompt)), (api, prompt)
        assert all(t["cached_fraction"] > 0.8 for t in turns[1:]), (api, turns)
        # at concurrency 1 the server prefilled each request alone, exactly what it did not find cached
        rows = [r for r in point.records if not r.warmup]
        new = {r.idx: r.prompt_tokens - r.cached_tokens for r in rows}
        batches = _measured_prefills(sim.log())
        assert Counter(batches) == Counter((1, new[r.idx], r.cached_tokens) for r in rows), (api, batches)
        # turn 0 prefills ~1200 words; a later turn only its answer and question
        first = min(new[r.idx] for r in rows if r.turn == 0)
        assert all(new[r.idx] < first / 2 for r in rows if r.turn), (api, new)
