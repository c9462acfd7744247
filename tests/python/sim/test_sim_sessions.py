"""Multi-turn sessions against the stand-in: its radix cache finds each session's history, so cached tokens
rise turn by turn and the turns after the first wait for far less prefill."""

from __future__ import annotations

import itertools

from sim_harness import model

from sglbench.hostlib import loadgen, prompts

# Prefill slow enough (simulated tokens/s, at a time scale of 1/100) that a whole system prompt costs
# ~60 ms of real time while a turn's new tokens cost ~2 ms: on a loaded machine each request's own HTTP and
# scheduling time (~20 ms measured under make test) must not hide the difference.
PREFILL_TOKENS_PER_S = "250"
TIME_SCALE = "0.01"


def _run(url: str, api: str) -> list[dict]:
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
    summary = loadgen.run_campaign(spec).points[0].summary
    assert (summary["n_ok"], summary["n_err"]) == (16, 0)
    return summary["turns"]


def test_cached_tokens_rise_and_ttft_falls_across_turns(start_sim) -> None:
    sim = start_sim(
        ["--model-path", model("qwen3-8b"), "--enable-cache-report"],
        SGLBENCH_SIM_TIME_SCALE=TIME_SCALE,
        SGLBENCH_SIM_PREFILL_TOKENS_PER_S=PREFILL_TOKENS_PER_S,
    )
    for api in ("native", "openai-chat"):
        turns = _run(sim.url, api)
        assert [t["turn"] for t in turns] == [0, 1, 2, 3]
        cached = [t["cached_tokens_mean"] for t in turns]
        prompt = [t["prompt_tokens_mean"] for t in turns]
        assert cached[0] == 0  # a fresh session finds nothing (the cache was flushed after the warm-up)
        assert all(b > a for a, b in itertools.pairwise(cached)), (api, cached)
        assert all(b > a for a, b in itertools.pairwise(prompt)), (api, prompt)
        assert all(t["cached_fraction"] > 0.8 for t in turns[1:]), (api, turns)
        ttft = [t["ttft_ms"]["p50"] for t in turns]
        # Turn 0 prefills ~1200 words; a later turn only its answer and question.
        assert all(t < ttft[0] / 2 for t in ttft[1:]), (api, ttft)
