"""Multi-turn sessions against the stand-in: its radix cache finds each session's history, so cached tokens
rise turn by turn and the turns after the first wait for far less prefill (on the stand-in's own clock: its
prefill lines and its timing model, whatever a loaded machine does to the client's TTFT)."""

from __future__ import annotations

import itertools
import re

from sim_harness import model

from sglbench.hostlib import loadgen, prompts
from sglbench.sim import truth

# Prefill slow (simulated tokens/s) so a whole system prompt costs far more than a turn's new tokens.
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


PREFILL_LINE = re.compile(r"Prefill batch, #new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+)")


def test_cached_tokens_rise_and_prefill_falls_across_turns(start_sim) -> None:
    args = ["--model-path", model("qwen3-8b"), "--enable-cache-report"]
    sim = start_sim(
        args, SGLBENCH_SIM_TIME_SCALE=TIME_SCALE, SGLBENCH_SIM_PREFILL_TOKENS_PER_S=PREFILL_TOKENS_PER_S
    )
    timing = truth.server_model(
        args, {k: v for k, v in sim.env.items() if k.startswith("SGLBENCH_SIM_")}
    ).timing
    for api in ("native", "openai-chat"):
        logged = len(sim.log())
        turns = _run(sim.url, api)
        assert [t["turn"] for t in turns] == [0, 1, 2, 3]
        cached = [t["cached_tokens_mean"] for t in turns]
        prompt = [t["prompt_tokens_mean"] for t in turns]
        assert cached[0] == 0  # a fresh session finds nothing (the cache was flushed after the warm-up)
        assert all(b > a for a, b in itertools.pairwise(cached)), (api, cached)
        assert all(b > a for a, b in itertools.pairwise(prompt)), (api, prompt)
        assert all(t["cached_fraction"] > 0.8 for t in turns[1:]), (api, turns)
        # The stand-in's prefills, one request each at concurrency 1 (the warm-up's first turn among them):
        # a first turn prefills its ~1200 words, a later turn only its answer and question, in less than
        # half the modelled time.
        prefills = [tuple(map(int, m.groups())) for m in PREFILL_LINE.finditer(sim.log()[logged:])]
        assert {seqs for seqs, _, _ in prefills} == {1}, prefills
        cold = [new for _, new, hit in prefills if hit == 0 and new > 1]  # not a one-token request
        warm = [new for _, new, hit in prefills if hit > 0]
        assert len(warm) == 12 and len(cold) == 5, (api, prefills)
        longest_warm = max(timing.prefill(n) for n in warm)
        assert longest_warm < min(timing.prefill(n) for n in cold) / 2, (api, prefills)
